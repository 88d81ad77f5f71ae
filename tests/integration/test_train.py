"""Training end to end on real data: the run directory, self-describing checkpoints, evaluation."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from molsepnorm.checkpoint import Checkpoint
from molsepnorm.inference import evaluate_checkpoint
from molsepnorm.train.api import train
from molsepnorm.train.blend import format_weights
from molsepnorm.train.config import load_experiment_config

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
RUN_FILES = {"config.yaml", "split.json", "metrics.jsonl", "metrics.csv", "train.log", "best.pt", "last.pt",
             "results.json"}


def tiny(dataset, **train_overrides):
    overrides = {"data.dataset": str(dataset), "train.progress": False, "train.threads": 1}
    overrides.update({f"train.{k}": v for k, v in train_overrides.items()})
    return load_experiment_config(TINY, overrides)


def test_regression_run_writes_a_complete_run_directory(tmp_path, write_tpsa_csv):
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "run"
    result = train(tiny(csv, epochs=2), out=run, console=False)

    assert RUN_FILES <= {p.name for p in run.iterdir()}
    assert not list(run.glob("*.tmp"))
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    assert {"train_loss", "val_mae", "val_rmse", "val_r2", "lr", "graphs_per_second"} <= set(rows[0])
    assert result.history == rows

    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["model"]["vocab"] == "ogb" and config["model"]["num_tasks"] == 1  # resolved
    assert config["data"]["dataset"] == str(csv)
    split = json.loads((run / "split.json").read_text())
    assert split["sizes"] == {"train": 240, "val": 30, "test": 30}
    log = (run / "train.log").read_text()
    assert "epoch 2" in log and "test" in log  # the summary table is in the log

    results = json.loads((run / "results.json").read_text())
    assert results["test"] == pytest.approx(result.test)
    assert results["best_epoch"] == result.best_epoch
    # best.pt is the best epoch's Graphormer, blended with the group-contribution model where that helped
    graphormer = result.companion["scores"]["graphormer"]["val"]["mae"]
    assert graphormer == pytest.approx(rows[result.best_epoch - 1]["val_mae"], rel=1e-5)
    assert result.val["mae"] <= graphormer
    assert result.monitor == "mae" and result.companion["kind"] == "group-contribution"


def test_best_checkpoint_describes_itself_and_rebuilds_the_model(tmp_path, write_tpsa_csv):
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "run"
    result = train(tiny(csv, epochs=2), out=run, console=False)

    raw = torch.load(run / "best.pt", map_location="cpu", weights_only=True)  # plain data only
    assert {"format", "format_version", "package_version", "model", "featurizer", "task", "target_scaling",
            "data", "config", "metrics", "epoch", "step"} <= set(raw)
    assert raw["task"] == {"type": "regression", "target_names": ["tpsa"], "metric": "mae", "higher_is_better": False}
    assert raw["featurizer"]["vocab"] == "ogb" and raw["featurizer"]["multi_hop_max_dist"] == 3
    assert raw["target_scaling"]["std"][0] > 5  # standardized for training
    assert raw["metrics"]["test"] == pytest.approx(result.test)
    assert "training_state" not in raw
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert (raw["epoch"], raw["step"]) == (result.best_epoch, rows[result.best_epoch - 1]["step"])  # not the last

    last = Checkpoint.load(run / "last.pt")
    assert {"optimizer", "scheduler", "rng", "progress"} <= set(last.training_state)
    assert last.training_state["progress"]["step"] == result.steps

    # evaluate: same data set, same split, same numbers, in original units
    report = evaluate_checkpoint(run / "best.pt", split="test")
    assert report["metrics"] == pytest.approx(result.test, rel=1e-4)  # evaluate: the process's threads
    assert report["num_molecules"] == 30
    model = Checkpoint.load(run / "best.pt").build_model()
    assert sum(p.numel() for p in model.parameters()) > 0


def test_binary_classification_reports_auc_and_log_loss_and_averages_its_best_epochs(tmp_path, write_tpsa_csv):
    csv = write_tpsa_csv(tmp_path / "polar300.csv", binary=True)
    run = tmp_path / "run"
    result = train(tiny(csv, epochs=6, patience="off"), out=run, console=False)
    assert set(result.test) == {"rocauc", "prauc", "logloss"}
    assert 0.0 <= result.test["rocauc"] <= 1.0
    ckpt = Checkpoint.load(run / "best.pt")
    assert ckpt.task.type == "binary" and ckpt.target_scaling is None
    assert ckpt.config["train"]["loss"] == "auto" and ckpt.config["train"]["average_best"] == "auto"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"val_rocauc", "val_prauc", "val_logloss", "best_val_rocauc"} <= set(rows[0])
    aucs = [row["val_rocauc"] for row in rows]
    best_five = sorted(range(1, 7), key=lambda e: (-aucs[e - 1], e))[:5]  # ties: the earlier epoch first
    assert result.averaged_epochs == sorted(best_five) == ckpt.metrics["averaged_epochs"]
    assert json.loads((run / "results.json").read_text())["monitor"] == "rocauc"
    # an average that validates below the best epoch alone says so, with the way to keep that epoch: a
    # warning where the run is too short for the average to leave its first epochs out (6 < 2 x 5)
    averaged = result.companion["scores"]["graphormer"]["val"]["rocauc"]  # epochs are ranked on the Graphormer
    below = averaged < rows[-1]["best_val_rocauc"]
    log = (run / "train.log").read_text()
    assert ("WARNING best.pt, the average of epochs" in log and "the average takes in weak early ones" in log) == below


def test_a_classification_run_blends_a_fitted_fingerprint_companion_into_best_pt(tmp_path, write_tpsa_csv):
    csv = write_tpsa_csv(tmp_path / "polar300.csv", binary=True)
    run = tmp_path / "run"
    result = train(tiny(csv, epochs=2), out=run, console=False)
    results = json.loads((run / "results.json").read_text())
    companion = results["companion"]
    assert companion["fitted"] == {"polar": True} and companion["molecules"] == 240
    assert (companion["weight"], companion["weights"], companion["counts"]) == ("auto", {"polar": 0.5}, "log")
    assert set(companion["scores"]) == {"graphormer", "fingerprint"}
    assert result.companion == companion == Checkpoint.load(run / "best.pt").metrics["companion"]
    ckpt = Checkpoint.load(run / "best.pt")
    assert ckpt.model_config["companion_bits"] == 2048 and ckpt.state_dict["companion.weight"].tolist() == [0.5]
    # the blend is what evaluate and predict run; the Graphormer alone scores differently
    assert evaluate_checkpoint(run / "best.pt", split="test")["metrics"] == pytest.approx(result.test, rel=1e-4)
    assert evaluate_checkpoint(run / "best.pt", split="val")["metrics"] == pytest.approx(result.val, rel=1e-4)
    assert companion["scores"]["graphormer"]["test"]["logloss"] != pytest.approx(result.test["logloss"])
    assert "fingerprint companion (radius 2) fitted on 240 training molecules" in (run / "train.log").read_text()

    # fine-tuning from it drops the fitted companion and fits its own
    again = train(tiny(csv, epochs=1, init=str(run / "best.pt")), out=tmp_path / "again", console=False)
    assert again.companion["fitted"] == {"polar": True}


def test_companion_none_runs_have_no_companion(tmp_path, write_tpsa_csv):
    for task, csv in (("binary", write_tpsa_csv(tmp_path / "polar300.csv", binary=True)),
                      ("regression", write_tpsa_csv(tmp_path / "tpsa300.csv"))):
        result = train(tiny(csv, epochs=1, companion="none"), out=tmp_path / task, console=False)
        assert result.companion is None and "companion" not in json.loads((result.run_dir / "results.json").read_text())
        ckpt = Checkpoint.load(result.run_dir / "best.pt")
        assert ckpt.model_config["companion_bits"] == 0 and not any(k.startswith("companion.") for k in ckpt.state_dict)


def test_a_regression_run_chooses_its_group_contribution_blend_on_validation(tmp_path, write_tpsa_csv):
    from molsepnorm.inference.evaluate import evaluate_checkpoint
    from molsepnorm.train.blend import BLEND_WEIGHTS, MIN_VALIDATION_GAIN
    from molsepnorm.train.companion import GROUP_BITS, feature_name

    run = tmp_path / "reg"
    result = train(tiny(write_tpsa_csv(tmp_path / "tpsa300.csv"), epochs=1), out=run, console=False)
    companion = result.companion
    assert companion == json.loads((run / "results.json").read_text())["companion"]
    # TPSA prices each atom by itself: validation keeps a radius-0 model, and best.pt is rebuilt with it
    assert (companion["weight"], companion["counts"], companion["radius"]) == ("auto", "raw", 0)
    chosen_features = feature_name(0, companion["properties"])
    assert companion["features"][chosen_features] == min(companion["features"].values())
    assert companion["fitted"] == {"tpsa": True} and companion["molecules"] == 240
    scores = {float(w): mae for w, mae in companion["validation"]["tpsa"].items()}
    assert sorted(scores) == list(BLEND_WEIGHTS)
    best = min(scores, key=scores.get)
    # one epoch of a tiny Graphormer: TPSA's group contributions beat it by far on validation
    assert best > 0 and scores[best] < (1 - MIN_VALIDATION_GAIN) * scores[0.0]
    # a second weight for the molecules with an environment the training split lacks, if it pays
    pair = companion["coverage"].get("tpsa")  # none when every validation molecule is covered
    assert pair is None or (0 < pair["novel_molecules"] < 30 and pair["score"] <= scores[best])
    split = pair is not None and pair["score"] < (1 - MIN_VALIDATION_GAIN) * scores[best]
    chosen = tuple(pair["pair"]) if split else (best, best)
    assert (companion["weights"]["tpsa"], companion["weights_novel"]["tpsa"]) == chosen
    assert result.val["mae"] == pytest.approx(pair["score"] if split else scores[best], rel=1e-5)
    assert companion["scores"]["graphormer"]["val"]["mae"] == pytest.approx(scores[0.0], rel=1e-5)
    ckpt = Checkpoint.load(run / "best.pt")
    assert ckpt.model_config["companion_counts"] == "raw" and ckpt.metrics["companion"]["weights"] == {"tpsa": chosen[0]}
    assert (ckpt.model_config["companion_radius"], ckpt.model_config["companion_properties"]) == \
        (0, companion["properties"])
    assert 0 < ckpt.state_dict["companion.seen"].sum() < GROUP_BITS  # the training split's buckets
    assert evaluate_checkpoint(run / "best.pt", split="test")["metrics"] == pytest.approx(result.test, rel=1e-4)
    assert f"best.pt blends them with weight {format_weights(companion['weights'], companion['weights_novel'])} on " \
           "the companion" in (run / "train.log").read_text()
    assert "group-contribution companion (radius 0" in (run / "train.log").read_text()  # not "fingerprint"


def test_add_companion_blends_a_model_trained_without_one(tmp_path, write_tpsa_csv):
    from molsepnorm.errors import MolsepnormError
    from molsepnorm.train import add_companion

    csv = write_tpsa_csv(tmp_path / "polar300.csv", binary=True)
    plain = train(tiny(csv, epochs=2, companion="none"), out=tmp_path / "plain", console=False)
    fit = add_companion(tmp_path / "plain" / "best.pt", tmp_path / "blend.pt", weight=0.5)
    assert fit.fitted == {"polar": True} and fit.molecules == 240  # the run's own training split
    assert fit.scores["graphormer"]["test"] == pytest.approx(plain.test)  # the model as it was
    blended = Checkpoint.load(tmp_path / "blend.pt")
    assert blended.model_config["companion_bits"] == 2048 and blended.metrics["companion"]["weight"] == 0.5
    assert evaluate_checkpoint(tmp_path / "blend.pt", split="test")["metrics"] == pytest.approx(blended.metrics["test"])
    assert blended.metrics["test"] != pytest.approx(plain.test)
    with pytest.raises(MolsepnormError, match="write the blended model to another file"):
        add_companion(tmp_path / "plain" / "best.pt", tmp_path / "plain" / "best.pt")


def test_add_companion_on_regression_chooses_radius_and_weights_on_validation(tmp_path, write_tpsa_csv):
    from molsepnorm.train import add_companion

    # a run that picked its epoch by validation RMSE: the blend weights are chosen on RMSE too
    train(tiny(write_tpsa_csv(tmp_path / "tpsa300.csv"), epochs=1, companion="none", monitor="rmse"),
          out=tmp_path / "plain", console=False)
    fit = add_companion(tmp_path / "plain" / "best.pt", tmp_path / "blend.pt")
    assert fit.radius == 0 and len(fit.features) == 4 and fit.weights["tpsa"] > 0
    assert fit.validation["tpsa"]["0"] == pytest.approx(fit.scores["graphormer"]["val"]["rmse"], rel=1e-5)
    assert fit.validation["tpsa"]["1"] == pytest.approx(fit.scores["fingerprint"]["val"]["rmse"], rel=1e-5)
    blended = Checkpoint.load(tmp_path / "blend.pt")  # rebuilt with the features the blend was chosen with
    assert (blended.model_config["companion_radius"], blended.model_config["companion_properties"]) == \
        (0, fit.properties)
    assert evaluate_checkpoint(tmp_path / "blend.pt", split="test")["metrics"] == pytest.approx(blended.metrics["test"])
    # unseen atoms are priced as training prices them: considered, and the rule chosen is the one saved
    assert fit.novel["chosen"] == "none" or Checkpoint.load(tmp_path / "blend.pt").build_model().companion.novel_space
    assert "validation_molecules" in fit.novel


def test_average_best_writes_the_evaluated_average_of_the_best_epochs(tmp_path, write_tpsa_csv):
    from molsepnorm.inference.evaluate import evaluate_checkpoint

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "run"
    # ranked by the Graphormer's own validation metric (the blend's ranks them by default)
    result = train(tiny(csv, epochs=4, patience="off", average_best=3, monitor_blend=False), out=run, console=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    maes = [row["val_mae"] for row in rows]
    assert result.averaged_epochs == sorted(sorted(range(1, 5), key=lambda e: maes[e - 1])[:3])
    assert result.best_epoch == 1 + maes.index(min(maes))
    ckpt = Checkpoint.load(run / "best.pt")
    assert ckpt.metrics["averaged_epochs"] == result.averaged_epochs
    assert json.loads((run / "results.json").read_text())["averaged_epochs"] == result.averaged_epochs
    assert result.val["mae"] not in maes  # the average's own validation score, not an epoch's
    # training ran on train.threads (1), evaluate on the process's threads: float sums in another order
    assert evaluate_checkpoint(run / "best.pt", split="val")["metrics"] == pytest.approx(result.val, rel=1e-4)
    assert evaluate_checkpoint(run / "best.pt", split="test")["metrics"] == pytest.approx(result.test, rel=1e-4)


def test_best_pt_records_the_step_of_its_epoch(tmp_path, write_tpsa_csv):
    """A learning rate too high for the last epochs makes an earlier epoch the best: best.pt
    says that epoch and the step it ended at, not the run's last step."""
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "run"
    result = train(tiny(csv, epochs=4, patience="off", monitor_blend=False, lr=0.2), out=run, console=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert result.best_epoch < 4  # else this test shows nothing
    ckpt = Checkpoint.load(run / "best.pt")
    assert (ckpt.epoch, ckpt.step) == (result.best_epoch, rows[result.best_epoch - 1]["step"])


def test_a_run_leaves_torchs_thread_count_as_it_found_it(tmp_path, write_tpsa_csv):
    """train.threads is process-wide: a notebook that trains on one thread gets its threads back."""
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    before = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(2)
        from molsepnorm.train import loop

        real = loop.Trainer._train_epoch

        def spy(self):
            seen.append(torch.get_num_threads())
            return real(self)

        loop.Trainer._train_epoch = spy
        try:
            train(tiny(csv, epochs=1), out=tmp_path / "run", console=False)  # train.threads: 1
        finally:
            loop.Trainer._train_epoch = real
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _draws() -> tuple:
    import random

    return torch.rand(3, dtype=torch.float32).tolist(), np.random.rand(3).tolist(), random.random()


def _seed_all(seed: int) -> None:
    import random

    torch.manual_seed(seed), np.random.seed(seed), random.seed(seed)


def test_a_run_and_a_loaded_model_leave_the_callers_random_state_and_default_dtype(tmp_path, write_tpsa_csv):
    """A notebook's random draws after train() or Predictor.load() are the ones it would have
    drawn without them, and a float64 default dtype neither leaks into the model nor stays changed."""
    from molsepnorm import Predictor

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    _seed_all(123)
    expected = _draws()
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1"]
    try:
        _seed_all(123)
        torch.set_default_dtype(torch.float64)
        train(tiny(csv, epochs=1), out=tmp_path / "run", console=False)  # seeds with train.seed 0
        model = Predictor.load(tmp_path / "run" / "best.pt")  # builds random weights before loading them
        assert _draws() == expected
        assert torch.get_default_dtype() == torch.float64
        assert all(p.dtype == torch.float32 for p in Checkpoint.load(tmp_path / "run" / "best.pt").build_model()
                   .parameters())
        under_float64 = model.predict(smiles)
    finally:
        torch.set_default_dtype(torch.float32)
    assert under_float64["error"].isna().all()
    np.testing.assert_array_equal(under_float64["tpsa"], model.predict(smiles)["tpsa"])



def test_unseen_atoms_are_priced_as_validation_chooses_and_best_pt_keeps_the_choice(tmp_path):
    """nci-tpsa with 10 % of its labels: 22 validation molecules hold an atom environment none
    of the 399 training molecules has. Every pricing rule is scored on validation, the chosen
    one (or none) is what best.pt predicts with, and evaluating best.pt gives the run's figures."""
    from molsepnorm.train.novel_atoms import DEFAULT_RULE, pick_rule

    config = load_experiment_config(TINY, {"data.dataset": "nci-tpsa", "data.train_fraction": 0.1,
                                           "train.epochs": 2, "train.threads": 1, "train.progress": False})
    result = train(config, out=tmp_path / "run", console=False)
    novel = result.companion["novel"]
    assert novel["validation_molecules"] == 22
    rules = novel["validation"]
    assert {"none", "input embeddings, k=1", "final atom states, k=5"} <= set(rules)
    assert result.val["mae"] == pytest.approx(rules[novel["chosen"]], rel=1e-6)  # best.pt's pricing
    if novel["chosen"] != "none":
        assert rules[novel["chosen"]] <= 0.98 * rules["none"]  # adopted only for 2 % or more
    if novel["chosen"] not in ("none", DEFAULT_RULE):  # another rule than the default: 10 % better than it
        kept = DEFAULT_RULE if rules[DEFAULT_RULE] <= 0.98 * rules["none"] else "none"
        assert rules[novel["chosen"]] <= 0.9 * rules[kept]
    assert novel["chosen"] == pick_rule(rules, "mae")
    best = Checkpoint.load(tmp_path / "run" / "best.pt").build_model()
    assert best.companion.novel_space == {"none": 0, "input": 1, "final": 2}[novel["chosen"].split()[0]]
    report = evaluate_checkpoint(tmp_path / "run" / "best.pt", split="test")
    assert report["metrics"]["mae"] == pytest.approx(result.test["mae"], rel=1e-4)
    assert "unseen atoms (22 validation molecules" in (tmp_path / "run" / "train.log").read_text()

def test_refuses_to_overwrite_a_run(tmp_path, write_tpsa_csv):
    from molsepnorm.checkpoint.run_dir import RunDirError

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "run"
    train(tiny(csv, epochs=1), out=run, console=False)
    with pytest.raises(RunDirError, match="--resume"):
        train(tiny(csv, epochs=1), out=run, console=False)


def test_zinc_subset_short_run_reports_test_mae(tmp_path, data_root, assert_data_root_untouched):
    config = tiny("zinc-subset", max_steps=3, batch_size=16)
    config.data.data_root = str(data_root)
    run = tmp_path / "zinc"
    result = train(config, out=run, console=False)
    assert result.steps == 3 and result.stopped == "max_steps"
    assert np.isfinite(result.test["mae"]) and result.test["mae"] > 0
    report = evaluate_checkpoint(run / "best.pt", split="test")
    assert report["dataset"] == "zinc-subset" and report["num_molecules"] == 1000
    assert report["metrics"]["mae"] == pytest.approx(result.test["mae"])
    assert Checkpoint.load(run / "best.pt").featurizer.vocab == "zinc"


def test_the_blend_with_the_companion_picks_the_epoch_of_a_regression_run(tmp_path, write_tpsa_csv):
    """train.monitor_blend (the default): the companion is fitted before the first epoch, every
    epoch's row holds the blend's validation metrics and weights, and best.pt is the epoch with
    the best blend (of equal blends, the better Graphormer), carrying that epoch's weights.
    With --no-monitor-blend the Graphormer's own metric picks it, as before."""
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "blend"
    result = train(tiny(csv, epochs=5, patience="off"), out=run, console=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all({"val_blend_mae", "val_blend_rmse", "blend_weight"} <= set(row) for row in rows)
    best = min(rows, key=lambda r: (r["val_blend_mae"], r["val_mae"]))
    assert result.best_epoch == best["epoch"]
    assert result.val["mae"] == pytest.approx(best["val_blend_mae"], rel=1e-5)
    assert [row["best_val_mae"] for row in rows] == [min(r["val_blend_mae"] for r in rows[:i + 1])
                                                     for i in range(len(rows))]
    companion = result.companion
    assert format_weights(companion["weights"], companion["weights_novel"]) == best["blend_weight"]
    assert companion["scores"]["graphormer"]["val"]["mae"] == pytest.approx(best["val_mae"], rel=1e-5)
    state = Checkpoint.load(run / "best.pt").state_dict
    assert state["companion.weight"].tolist() == [companion["weights"]["tpsa"]]
    assert "best.pt and early stopping follow the validation mae of its blend" in (run / "train.log").read_text()

    own = train(tiny(csv, epochs=5, patience="off", monitor_blend=False), out=tmp_path / "own", console=False)
    own_rows = [json.loads(line) for line in (tmp_path / "own" / "metrics.jsonl").read_text().splitlines()]
    assert not any("val_blend_mae" in row for row in own_rows)
    assert [row["val_mae"] for row in own_rows] == pytest.approx([row["val_mae"] for row in rows])  # same training
    assert own.best_epoch == min(own_rows, key=lambda r: r["val_mae"])["epoch"]


def test_average_best_on_the_blend_ranks_equal_blends_by_the_graphormer(tmp_path, write_tpsa_csv):
    """On TPSA a tiny Graphormer gets weight 0 in every epoch's blend, so the blends tie: the
    epochs averaged are those whose Graphormer alone validates best, not the first ones."""
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "run"
    result = train(tiny(csv, epochs=5, patience="off", average_best=2), out=run, console=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len({row["val_blend_mae"] for row in rows}) == 1  # the linear model alone in every epoch's blend
    ranked = sorted(rows, key=lambda r: (r["val_blend_mae"], r["val_mae"], r["epoch"]))
    assert result.averaged_epochs == sorted(r["epoch"] for r in ranked[:2]) != [1, 2]
