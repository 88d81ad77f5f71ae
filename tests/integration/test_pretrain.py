"""Pretraining end to end on real molecules: CLI and API, every objective, learning, exact resume."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from molsepnorm.checkpoint import Checkpoint, CheckpointError
from molsepnorm.pretrain import PRETRAINED, load_pretrain_config, pretrain
from molsepnorm.pretrain import resume as resume_pretraining
from molsepnorm.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
TIMING = {"seconds", "steps_per_second", "graphs_per_second"}
RUN_FILES = {"config.yaml", "metrics.jsonl", "metrics.csv", "train.log", "last.pt", "encoder.pt", "results.json"}


def config(**overrides):
    """The tiny model on RDKit's NCI molecules, one thread, no progress bar."""
    values = {"corpus.corpus": "nci", "corpus.limit": 1000, "corpus.chunk_size": 500, "pretrain.threads": 1,
              "pretrain.progress": False, "pretrain.log_every": 10, "pretrain.max_steps": 60}
    values.update(overrides)
    return load_pretrain_config(TINY, values)


def rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_cli_pretrain_writes_a_run_directory_and_an_encoder_checkpoint(tmp_path, monkeypatch):
    from molsepnorm.cli.main import cli

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "pre"
    result = CliRunner().invoke(cli, [
        "pretrain", "--corpus", "nci", "--limit", "600", "--chunk-size", "300", "--config", str(TINY),
        "--max-steps", "30", "--log-every", "10", "--checkpoint-every", "10", "--threads", "1", "--no-progress",
        "--out", str(run)])
    assert result.exit_code == 0, result.output
    assert "30 steps (max_steps)" in result.output and "encoder.pt" in result.output
    assert RUN_FILES <= {p.name for p in run.iterdir()} and not list(run.glob("*.tmp"))
    history = rows(run)
    assert [r["step"] for r in history] == [10, 20, 30]
    # the default objective: masked atoms scored on every atom, the visible ones reconstructed,
    # and the functional-group counts from the readout
    assert {"loss", "masked_loss", "masked_acc", "visible_loss", "visible_acc", "motif_loss", "lr", "pass",
            "molecules", "invalid"} <= set(history[0]) and "contrastive_loss" not in history[0]
    # every part the objective reports is logged, those outside the usual list too
    assert history[0]["masked_atoms"] >= history[0]["molecules"] / 10  # per step: at least one per molecule
    assert history[-1]["motif_loss"] < history[0]["motif_loss"]
    assert history[-1]["loss"] < history[0]["loss"]

    encoder = Checkpoint.load(run / "encoder.pt")  # the one checkpoint loader
    assert encoder.task.type == PRETRAINED and encoder.task.target_names == ()
    assert encoder.training_state is None and encoder.step == 30
    assert encoder.featurizer.vocab == "ogb" and encoder.model_config["hidden_dim"] == 32
    assert encoder.data.name == "nci"
    last = Checkpoint.load(run / "last.pt")
    assert last.training_state["progress"]["step"] == 30
    for key, value in encoder.state_dict.items():
        assert torch.equal(value, last.state_dict[key])
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 30 and results["stopped"] == "max_steps" and results["invalid"] == 0

    from molsepnorm.errors import MolsepnormError
    from molsepnorm.predict import Predictor

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "no applicability data" note: an encoder has no training split
        predictor = Predictor.load(run / "encoder.pt")
    embeddings = predictor.embed(["CCO", "c1ccccc1O"])  # a pretrained encoder embeds ...
    assert embeddings.shape == (2, 32) and np.isfinite(embeddings).all()
    with pytest.raises(MolsepnormError, match=r"encoder\.pt: a pretrained encoder has no trained head"):
        predictor.predict(["CCO"])  # ... but predicts nothing

    def untouched():
        raise AssertionError("a record was read")
        yield  # a generator, as a file's reader is

    with pytest.raises(MolsepnormError, match="no trained head"):  # refused at the call, before any record
        predictor.predict_records(untouched())


@pytest.mark.parametrize("objective,augment", [
    ("masked", ["mask"]), ("contrastive", ["mask", "drop_nodes"]), ("contrastive", ["dropout"]), ("both", ["mask"])])
def test_each_objective_lowers_its_loss(tmp_path, objective, augment):
    torch.manual_seed(7)
    expected = torch.rand(2)
    torch.manual_seed(7)
    result = pretrain(config(**{"pretrain.objective": objective, "pretrain.augment": augment,
                                "pretrain.lr": 0.002}), out=tmp_path / "run", console=False)
    assert torch.equal(torch.rand(2), expected)  # the caller's random state, as a notebook left it
    first, last = result.history[0], result.history[-1]
    assert result.steps == 60 and len(result.history) == 6
    assert last["loss"] < first["loss"]
    assert ("masked_loss" in last) == (objective != "contrastive")
    assert ("contrastive_loss" in last) == (objective != "masked")
    if objective != "masked":
        assert last["contrastive_loss"] < first["contrastive_loss"]
        assert last["contrastive_acc"] > 2 / 64  # a batch holds up to 64 molecules: chance is 1/B


def test_masked_atoms_are_predicted_better_than_by_the_atom_frequencies(tmp_path):
    """After 200 steps the masked-atom loss is below the entropy of the atom types (what the
    best guess without looking at the molecule scores) and the accuracy above the share of
    the most frequent type (carbon)."""
    from molsepnorm.chem import featurize_graph
    from molsepnorm.pretrain.config import CorpusConfig
    from molsepnorm.pretrain.corpus import open_corpus

    counts: dict[int, int] = {}
    for record in open_corpus(CorpusConfig(corpus="nci")).records(3000):
        try:
            graph = featurize_graph(record.smiles, "ogb")
        except Exception:  # noqa: BLE001 - the stream leaves these out too
            continue
        for t in graph.x[:, 0].tolist():
            counts[t] = counts.get(t, 0) + 1
    p = np.array(list(counts.values()), dtype=float) / sum(counts.values())
    entropy, majority = float(-(p * np.log(p)).sum()), float(p.max())

    result = pretrain(config(**{
        "corpus.limit": 3000, "corpus.chunk_size": 1000, "pretrain.objective": "masked", "pretrain.max_steps": 200,
        "pretrain.log_every": 50, "pretrain.lr": 0.003, "pretrain.batch_size": 32, "pretrain.batching": "random",
        "model.dropout": 0.0,
        "model.attention_dropout": 0.0, "model.activation_dropout": 0.0}), out=tmp_path / "run", console=False)
    last = result.history[-1]  # steps 151-200
    assert last["masked_loss"] < entropy - 0.05, (last, entropy)
    assert last["masked_acc"] > majority, (last, majority)


def _interrupt_at(monkeypatch, step: int):
    from molsepnorm.pretrain import loop

    real = loop.PretrainStep.__call__

    def interrupted(self, batch):
        if self.scheduler.last_epoch == step:  # optimizer steps taken so far
            raise KeyboardInterrupt("simulated kill")
        return real(self, batch)

    monkeypatch.setattr(loop.PretrainStep, "__call__", interrupted)
    return real


@pytest.mark.parametrize("objective,extra", [
    ("both", {}), ("masked", {}),
    ("masked", {"pretrain.motif_environments": 32, "pretrain.motif_scale": "linear"}),  # a wider motif head
    ("masked", {"pretrain.descriptor_weight": 1.0}),  # the descriptors' scale travels in last.pt
])
def test_resume_after_an_interruption_matches_an_uninterrupted_run(tmp_path, monkeypatch, objective, extra):
    """Killed at step 27 (last.pt at step 20, in the middle of a chunk, metrics rows at 10 and 20),
    resumed: the same metrics rows, the same final weights, bit for bit."""
    overrides = {"pretrain.objective": objective, "pretrain.max_steps": 40, "pretrain.checkpoint_every_steps": 5,
                 "corpus.limit": 700, "corpus.chunk_size": 250, **extra}
    full = pretrain(config(**overrides), out=tmp_path / "full", console=False)
    assert full.history[-1]["pass"] >= 2  # the run crosses passes

    real = _interrupt_at(monkeypatch, 27)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(**overrides), out=tmp_path / "cut", console=False)
    state = Checkpoint.load(tmp_path / "cut" / "last.pt").training_state["progress"]
    assert state["step"] == 25 and state["position"]["batches"] > 0
    monkeypatch.setattr(__import__("molsepnorm.pretrain.loop", fromlist=["x"]).PretrainStep, "__call__", real)

    resumed = resume_pretraining(tmp_path / "cut", console=False)
    assert resumed.steps == 40
    assert rows(tmp_path / "cut") == rows(tmp_path / "full")
    a, b = Checkpoint.load(tmp_path / "full" / "encoder.pt"), Checkpoint.load(tmp_path / "cut" / "encoder.pt")
    for key, value in a.state_dict.items():
        assert torch.equal(value, b.state_dict[key]), key
    assert "resumed" in (tmp_path / "cut" / "train.log").read_text()


def test_a_file_corpus_named_relatively_resumes_from_another_folder(tmp_path, monkeypatch):
    """config.yaml keeps ``corpus.smi`` as given; a resume from another folder reads it where
    pretraining recorded it, to the same weights as an uninterrupted run."""
    from rdkit import RDConfig

    (tmp_path / "start").mkdir()
    (tmp_path / "elsewhere").mkdir()
    nci = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"
    from rdkit import Chem

    smiles = [Chem.MolToSmiles(m) for m in Chem.SDMolSupplier(str(nci)) if m is not None][:150]
    (tmp_path / "start" / "corpus.smi").write_text("".join(f"{s} m{i}\n" for i, s in enumerate(smiles)))
    monkeypatch.chdir(tmp_path / "start")
    overrides = {"corpus.corpus": "corpus.smi", "corpus.limit": None, "corpus.chunk_size": 50,
                 "pretrain.max_steps": 12, "pretrain.checkpoint_every_steps": 4}
    pretrain(config(**overrides), out=tmp_path / "full", console=False)
    real = _interrupt_at(monkeypatch, 7)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(**overrides), out=tmp_path / "cut", console=False)
    monkeypatch.setattr(__import__("molsepnorm.pretrain.loop", fromlist=["x"]).PretrainStep, "__call__", real)
    monkeypatch.chdir(tmp_path / "elsewhere")
    resume_pretraining(tmp_path / "cut", console=False)
    a, b = Checkpoint.load(tmp_path / "full" / "encoder.pt"), Checkpoint.load(tmp_path / "cut" / "encoder.pt")
    assert all(torch.equal(value, b.state_dict[key]) for key, value in a.state_dict.items())
    log = (tmp_path / "cut" / "train.log").read_text()
    assert f"corpus.smi is not found from this folder: reading {tmp_path / 'start' / 'corpus.smi'}" in log


def test_corpus_cache_mb_keeps_the_corpus_across_passes_or_reads_it_every_pass(tmp_path, monkeypatch):
    """``corpus.cache_mb`` is the stream's budget (0: every pass featurizes the file again); a
    run that keeps its corpus ends as one that reads it every pass, bit for bit."""
    from molsepnorm.pretrain import loop
    from molsepnorm.pretrain.stream import GRAPH_CACHE_BYTES, TARGET_CACHE_BYTES

    streams = []
    real = loop.CorpusStream

    def recorded(*args, **kwargs):
        streams.append(real(*args, **kwargs))
        return streams[-1]

    monkeypatch.setattr(loop, "CorpusStream", recorded)
    overrides = {"pretrain.max_steps": 30, "corpus.limit": 300, "corpus.chunk_size": 100}
    kept = pretrain(config(**overrides), out=tmp_path / "kept", console=False)
    pretrain(config(**overrides, **{"corpus.cache_mb": 0}), out=tmp_path / "read", console=False)
    assert kept.history[-1]["pass"] >= 3  # the run crosses passes
    # the config's default budget is the stream's own default (two spellings of one default)
    assert (streams[0].graph_cache_bytes, streams[0].target_cache_bytes) == (GRAPH_CACHE_BYTES, TARGET_CACHE_BYTES)
    assert streams[0]._all_cached
    assert streams[1].graph_cache_bytes == 0 and streams[1].target_cache_bytes == 0 and not streams[1]._all_cached
    assert rows(tmp_path / "kept") == rows(tmp_path / "read")
    a, b = Checkpoint.load(tmp_path / "kept" / "encoder.pt"), Checkpoint.load(tmp_path / "read" / "encoder.pt")
    assert all(torch.equal(value, b.state_dict[key]) for key, value in a.state_dict.items())
    for bad in (-1, True, 1.5):
        with pytest.raises(ConfigError, match="corpus.cache_mb must be a whole number"):
            config(**{"corpus.cache_mb": bad})


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "molsepnorm.cli.pretrain", *args]


def _resume_and_compare(run: Path, full: Path) -> None:
    """``pretrain --resume run`` in a fresh process, then the same rows and last loss as ``full``."""
    resumed = subprocess.run(_cli(["--resume", str(run), "--no-progress"]), capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert rows(run) == rows(full)
    assert json.loads((run / "results.json").read_text())["last"]["loss"] == \
        json.loads((full / "results.json").read_text())["last"]["loss"]


def test_sigkill_then_resume_from_the_command_line(tmp_path, sigkill_when):
    """A ``molsepnorm pretrain`` process killed with SIGKILL, resumed with ``--resume``, ends as
    the same run made by another process without interruption.  Every run is a fresh process:
    an in-process run would inherit process-wide settings of earlier tests in this worker
    (the predict CLI switches oneDNN off), whose kernels round differently."""
    args = ["--corpus", "nci", "--limit", "500", "--chunk-size", "200", "--config", str(TINY), "--max-steps", "60",
            "--log-every", "10", "--checkpoint-every", "4", "--threads", "1", "--no-progress"]
    full = subprocess.run(_cli([*args, "--out", str(tmp_path / "full")]), capture_output=True, text=True, timeout=300)
    assert full.returncode == 0, full.stderr[-3000:]

    run = tmp_path / "killed"
    def past_step_12() -> bool:
        try:
            return Checkpoint.load(run / "last.pt").training_state["progress"]["step"] >= 12
        except CheckpointError:
            return False

    sigkill_when(_cli([*args, "--out", str(run)]), past_step_12, poll=0.02)
    assert not (run / "encoder.pt").exists()
    assert Checkpoint.load(run / "last.pt").training_state["progress"]["step"] < 60

    _resume_and_compare(run, tmp_path / "full")


def test_sigterm_writes_last_pt_at_the_step_it_stops_and_the_run_resumes_exactly(tmp_path, sigterm_when):
    """SIGTERM from the command line (here through ``python -m molsepnorm.cli.pretrain``, what
    torchrun runs): the step in progress ends, last.pt is written there rather than at the last
    multiple of --checkpoint-every, the status is 143, and --resume ends as an uninterrupted run."""
    args = ["--corpus", "nci", "--limit", "500", "--chunk-size", "200", "--config", str(TINY), "--max-steps", "60",
            "--log-every", "10", "--checkpoint-every", "1000", "--threads", "1", "--no-progress"]
    full = subprocess.run(_cli([*args, "--out", str(tmp_path / "full")]), capture_output=True, text=True, timeout=300)
    assert full.returncode == 0, full.stderr[-3000:]
    run = tmp_path / "stopped"
    metrics = run / "metrics.jsonl"
    status, stderr = sigterm_when(_cli([*args, "--out", str(run)]),
                                  lambda: metrics.exists() and bool(metrics.read_text().strip()))
    assert status == 143 and "finishing this step" in stderr and "Traceback" not in stderr, stderr[-2000:]
    step = Checkpoint.load(run / "last.pt").training_state["progress"]["step"]
    assert 10 <= step < 60 and not (run / "encoder.pt").exists()  # not step 0, the last multiple of 1000
    _resume_and_compare(run, tmp_path / "full")


def test_file_corpora_and_invalid_molecules(tmp_path, monkeypatch):
    """A CSV with a bad SMILES (named in the log with its line, counted), an SDF, a .smi; each
    encoder is then analyzed on its own corpus from another folder (the corpus named relative
    to the first), the CSV's text and number columns read as what they are, not targets."""
    from rdkit import RDConfig

    from molsepnorm.analysis import analyze_checkpoints
    from molsepnorm.data.nci import read_tpsa_file, tpsa_file

    table, _ = read_tpsa_file(tpsa_file())
    table = table.iloc[:200].copy()
    table.loc[3, "smiles"] = "C1CC"
    table.insert(0, "name", [f"NSC{i}" for i in range(len(table))])  # text: not a number, not a target
    table.to_csv(tmp_path / "mols.csv", index=False)
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "csv"
    result = pretrain(config(**{"corpus.corpus": "mols.csv", "pretrain.max_steps": 8,
                                "pretrain.log_every": 4, "pretrain.objective": "masked"}), out=run, console=False)
    assert result.invalid == 1 and result.history[-1]["invalid"] == 1
    log = (run / "train.log").read_text()
    assert "mols.csv, line 5 (record 4): 'C1CC'" in log and "unclosed ring" in log.lower()

    sdf = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"
    assert pretrain(config(**{"corpus.corpus": str(sdf), "pretrain.max_steps": 4}), out=tmp_path / "sdf",
                    console=False).steps == 4
    (tmp_path / "mols.smi").write_text("".join(f"{s} m{i}\n" for i, s in enumerate(table["smiles"][:100])))
    assert pretrain(config(**{"corpus.corpus": "mols.smi", "pretrain.max_steps": 4,
                              "pretrain.objective": "contrastive"}), out=tmp_path / "smi", console=False).steps == 4

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (elsewhere / "mols.csv").write_text("smiles\nCCO\n")  # namesakes here are not the corpora
    (elsewhere / "mols.smi").write_text("CCO\n")
    for name, molecules in (("csv", 199), ("sdf", 200), ("smi", 99)):  # the bad SMILES is in both
        for options in (None, {"split": "scaffold"}):  # an option given keeps the corpus's columns and skipping
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                encoder = tmp_path / name / "encoder.pt"  # one model alone, or in a list
                analysis = analyze_checkpoints(encoder if options is None else [encoder], split="all",
                                               progress=False, options=options)
            (metrics,) = analysis.metrics.values()
            assert metrics["num_embeddings"] == molecules, (name, options)  # the bad row left out; no namesake
            assert analysis.info["dataset"] == (f"mols.{name}" if name != "sdf" else "first_200.props.sdf")
            if name == "csv":
                assert any("row 5 (id 'NSC3'): 'C1CC'" in str(w.message) for w in caught)


def test_checks_of_what_the_objectives_need(tmp_path):
    """InfoNCE needs two molecules a batch and two views that differ; the paper's batch norm
    with size-bucketed batches is named; a time budget that ends the run before the learning
    rate has decayed over max_steps says so."""
    with pytest.raises(ConfigError, match="batch_size 1 with objective contrastive"):
        config(**{"pretrain.objective": "contrastive", "pretrain.batch_size": 1})
    plain = {"model.dropout": 0.0, "model.attention_dropout": 0.0, "model.activation_dropout": 0.0}
    with pytest.raises(ConfigError, match="only 'dropout' and the model has no dropout"):
        pretrain(config(**plain, **{"pretrain.objective": "contrastive", "pretrain.augment": ["dropout"]}),
                 out=tmp_path / "same-views", console=False)
    result = pretrain(config(**{"model.cls_norm": "batch", "pretrain.objective": "contrastive",
                                "pretrain.augment": ["mask"], "pretrain.max_steps": 400, "pretrain.time_budget": 0.01}),
                      out=tmp_path / "bn", console=False)
    log = (tmp_path / "bn" / "train.log").read_text()
    assert "a batch norm (model cls_norm) with size-bucketed batches" in log
    assert "the model's dropout (dropout 0.1" in log  # tiny.yaml's: it makes the views differ too
    assert result.stopped == "time_budget" and "the time budget ended the run at step" in log
    from molsepnorm.pretrain.config import PretrainOptions

    options = PretrainOptions(objective="contrastive", mask_targets="type", motif_weight=0, motif_environments=16,
                              max_steps=5)  # set, and not read by this objective
    assert options.unused_options() == ["mask_targets", "motif_environments"]
    assert PretrainOptions(objective="both", masked_weight=2.0, max_steps=5).unused_options() == []


def test_moses_corpus_with_a_time_budget(tmp_path, data_root):
    """The first MOSES molecules, stopped by the time budget (warm-up, then a constant rate)."""
    result = pretrain(config(**{"corpus.corpus": "moses", "corpus.data_root": str(data_root), "corpus.limit": 2000,
                                "pretrain.max_steps": None, "pretrain.time_budget": 0.05,
                                "pretrain.warmup_steps": 5}), out=tmp_path / "moses", console=False)
    assert result.stopped == "time_budget" and result.steps > 5
    assert 3.0 <= result.seconds < 3.0 + 5.0
    assert result.history[-1]["lr"] == pytest.approx(5e-4)  # after warm-up: the peak rate


def test_cli_refuses_other_settings_on_resume_and_unknown_corpora(tmp_path):
    from molsepnorm.cli.main import cli

    runner = CliRunner()
    result = runner.invoke(cli, ["pretrain", "--resume", str(tmp_path), "--lr", "0.1"])
    assert result.exit_code == 2 and "--lr" in result.output
    result = runner.invoke(cli, ["pretrain", "--resume", str(tmp_path / "none")])
    assert result.exit_code == 1 and "does not exist" in result.output
    result = runner.invoke(cli, ["pretrain", "--corpus", "zinc-clean", "--max-steps", "5", "--out",
                                 str(tmp_path / "x")])
    assert result.exit_code == 1 and "no corpus of that name" in result.output
    result = runner.invoke(cli, ["pretrain", "--corpus", "nci", "--out", str(tmp_path / "y")])
    assert result.exit_code == 1 and "max_steps or time_budget" in result.output


def test_two_cpu_processes_pretrain_with_rank0_io(tmp_path):
    """``--nproc 2``: torchrun, gloo; each process reads its own chunks; one writer."""
    run = tmp_path / "ddp"
    done = subprocess.run(_cli(["--nproc", "2", "--corpus", "nci", "--limit", "1000", "--chunk-size", "250",
                                "--config", str(TINY), "--max-steps", "20", "--log-every", "10", "--threads", "1",
                                "--no-progress", "--out", str(run)]), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "--nproc_per_node=2" in done.stderr and done.stdout.count("20 steps (max_steps)") == 1
    assert (run / "train.log").read_text().count("step 10  loss") == 1
    assert [r["step"] for r in rows(run)] == [10, 20]
    state = Checkpoint.load(run / "last.pt").training_state
    assert state["world_size"] == 2
    blocks = [p["position"]["block"] for p in state["rank_progress"]]
    assert blocks[0] % 2 == 0 and blocks[1] % 2 == 1  # process r reads chunks r, r + 2, ...
    assert rows(run)[-1]["molecules"] == sum(p["molecules"] for p in state["rank_progress"])


def _poison_losses(monkeypatch, bad_calls: set[int]) -> None:
    """Make the pretext loss NaN on the given (1-based) calls of the training step."""
    from molsepnorm.pretrain import loop

    real = loop.PretrainStep.compute_loss
    calls = {"n": 0}

    def poisoned(self, batch):
        calls["n"] += 1
        loss = real(self, batch)
        return loss * float("nan") if calls["n"] in bad_calls else loss

    monkeypatch.setattr(loop.PretrainStep, "compute_loss", poisoned)


def test_a_non_finite_batch_stops_pretraining_naming_it_or_is_skipped_with_on_nonfinite_skip(tmp_path, monkeypatch):
    from molsepnorm.train.step import NonFiniteLossError

    _poison_losses(monkeypatch, {4})
    with pytest.raises(NonFiniteLossError, match=r"training loss is nan at step 4, pass 1, batch .*--on-nonfinite skip"):
        pretrain(config(**{"pretrain.max_steps": 20}), out=tmp_path / "stop", console=False)

    _poison_losses(monkeypatch, {4, 13})
    result = pretrain(config(**{"pretrain.max_steps": 20, "pretrain.on_nonfinite": "skip"}),
                      out=tmp_path / "skip", console=False)
    assert result.steps == 20  # 22 batches drawn, 2 of them skipped
    assert [(r["step"], r["skipped_batches"]) for r in rows(tmp_path / "skip")] == [(10, 1), (20, 2)]
    skipped = [line for line in (tmp_path / "skip" / "train.log").read_text().splitlines() if "skipped a batch" in line]
    assert len(skipped) == 2 and "at step 4," in skipped[0] and "at step 12," in skipped[1]
    encoder = Checkpoint.load(tmp_path / "skip" / "encoder.pt")
    assert all(torch.isfinite(v).all() for v in encoder.state_dict.values() if v.is_floating_point())

    _poison_losses(monkeypatch, {3, 4, 5})
    with pytest.raises(NonFiniteLossError, match=r"3 non-finite batches in a row.*max_skipped_batches = 2"):
        pretrain(config(**{"pretrain.max_steps": 20, "pretrain.on_nonfinite": "skip",
                           "pretrain.max_skipped_batches": 2}), out=tmp_path / "many", console=False)


def test_descriptor_scale_comes_from_the_corpus_molecules_as_featurized_and_a_resume_checks_the_list(
        tmp_path, monkeypatch):
    """The reference sample is the corpus's first records as the stream featurizes them (an
    unreadable one left out), SDF records included; a resume under another RDKit descriptor
    list is refused with the reason."""
    from rdkit import RDConfig

    from molsepnorm.chem.descriptors import descriptor_values
    from molsepnorm.errors import MolsepnormError
    from molsepnorm.predict.featurizing import featurize_records
    from molsepnorm.pretrain.corpus import open_corpus

    smiles = ["CCO", "C1CC", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "CCN(CC)CC", "OC(=O)c1ccccc1"] * 5
    (tmp_path / "mols.smi").write_text("".join(f"{s} m{i}\n" for i, s in enumerate(smiles)))
    sdf = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"  # explicit hydrogens in some records
    for name, corpus in (("smi", tmp_path / "mols.smi"), ("sdf", sdf)):
        overrides = {"corpus.corpus": str(corpus), "corpus.limit": 30, "pretrain.max_steps": 3,
                     "pretrain.checkpoint_every_steps": 1, "pretrain.objective": "masked",
                     "pretrain.descriptor_weight": 1.0}
        pretrain(config(**overrides), out=tmp_path / name, console=False)
        last = Checkpoint.load(tmp_path / name / "last.pt").training_state
        cfg = config(**overrides)
        records = list(open_corpus(cfg.corpus).records(30))
        graphs = [f.graph for f in featurize_records(records, cfg.vocab) if f.graph is not None]
        assert len(graphs) == (25 if name == "smi" else 30)
        expected = np.stack([descriptor_values(g.smiles) for g in graphs])
        center = last["pretext_heads"]["descriptor_center"].numpy()
        np.testing.assert_allclose(center, np.nan_to_num(np.nanmean(expected, 0)), rtol=1e-5, atol=1e-6)
        assert last["descriptors"] and "descriptor_loss" in rows(tmp_path / name)[-1]

    import molsepnorm.pretrain.loop as loop

    monkeypatch.setattr(loop, "descriptor_names", lambda: last["descriptors"][1:])
    with pytest.raises(MolsepnormError, match="RDKit descriptors.*position 1"):
        resume_pretraining(tmp_path / "sdf", console=False)
