"""Trainer internals on real data: masked losses, NaN guard, best-model guard, output units."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from molsepnorm.errors import MolsepnormError
from molsepnorm.train.loop import Trainer
from molsepnorm.train.step import NonFiniteLossError, batch_loss, resolve_loss


def _splits(config):
    from molsepnorm.data import load_dataset

    return load_dataset(config.data.dataset, **config.data.options)


def _poison_forward(trainer, bad_calls, value=float("nan")):
    """Make the model's output ``value`` on the given (1-based) forward calls in training mode."""
    forward = trainer.model.forward
    calls = {"n": 0}

    def poisoned(batch):
        out = forward(batch)
        if not trainer.model.training:
            return out
        calls["n"] += 1
        return out * value if calls["n"] in bad_calls else out

    trainer.model.forward = poisoned


def test_losses_ignore_missing_targets():
    out = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    target = torch.tensor([[0.0, float("nan")], [1.0, 1.0]])
    assert batch_loss("l1", out, target).item() == pytest.approx((1 + 2 + 3) / 3)
    assert batch_loss("mse", out, target).item() == pytest.approx((1 + 4 + 9) / 3)
    empty = batch_loss("bce", out, torch.full((2, 2), float("nan")))
    empty.backward()
    assert empty.item() == 0.0 and out.grad is not None  # every output still in the graph


def test_loss_must_fit_the_task():
    assert resolve_loss("auto", "regression") == "l1" and resolve_loss("auto", "binary") == "bce"
    with pytest.raises(MolsepnormError, match="bce"):
        resolve_loss("l1", "binary")
    with pytest.raises(MolsepnormError):
        resolve_loss("bce", "regression")


def test_nan_loss_stops_with_step_and_batch(tpsa_csv, tiny_config):
    config = tiny_config(tpsa_csv, batch_size=32, epochs=1)
    trainer = Trainer(config, _splits(config))
    _poison_forward(trainer, {3})
    with pytest.raises(NonFiniteLossError, match=r"epoch 1, step 3, batch 2") as info:
        trainer.fit()
    assert "molecules" in str(info.value)
    assert trainer.state.step == 2  # the bad step was not applied


def test_infinite_gradient_with_a_finite_loss_stops_before_the_weights_change(tpsa_csv, tiny_config):
    config = tiny_config(tpsa_csv, batch_size=32, epochs=1)
    trainer = Trainer(config, _splits(config))
    forward = trainer.model.forward
    calls = {"n": 0}

    class InfiniteGradient(torch.autograd.Function):
        """Identity forward; the gradient flowing back is multiplied by inf."""

        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * float("inf")

    def huge_gradient(batch):
        out = forward(batch)
        if not trainer.model.training:  # a validation pass (the companion's runs one before the first step)
            return out
        calls["n"] += 1
        return InfiniteGradient.apply(out) if calls["n"] == 2 else out

    trainer.model.forward = huge_gradient
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(NonFiniteLossError, match=r"gradient norm is (nan|inf).*epoch 1, step 2, batch 1"):
        trainer.fit()
    assert trainer.state.step == 1
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())  # step 1 did apply


def test_skip_mode_skips_non_finite_batches_and_finishes(tpsa_csv, tiny_config, tmp_path, caplog):
    from molsepnorm.checkpoint.run_dir import RunDir

    # 240 training molecules in batches of 32: 8 batches per epoch; the 3rd and 10th are poisoned
    config = tiny_config(tpsa_csv, batch_size=32, epochs=2, on_nonfinite="skip")
    rd = RunDir(tmp_path / "run")
    rd.create()
    trainer = Trainer(config, _splits(config), run_dir=rd)
    _poison_forward(trainer, {3, 10}, float("inf"))
    with caplog.at_level("WARNING", logger="molsepnorm"):
        result = trainer.fit()
    assert result.epochs == 2 and result.steps == 2 * 8 - 2
    assert [row["skipped_batches"] for row in rd.read_metrics()] == [1, 1]
    skipped = [r.getMessage() for r in caplog.records if "skipped a batch" in r.getMessage()]
    assert len(skipped) == 2 and "epoch 1, step 3, batch 2" in skipped[0] and "epoch 2, step 9, batch 1" in skipped[1]
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert np.isfinite(result.val["mae"]) and np.isfinite(result.test["mae"])


def test_skip_mode_stops_after_too_many_non_finite_batches_in_a_row(tpsa_csv, tiny_config):
    config = tiny_config(tpsa_csv, batch_size=32, epochs=1, on_nonfinite="skip", max_skipped_batches=2)
    trainer = Trainer(config, _splits(config))
    _poison_forward(trainer, {2, 4, 5, 6})  # 2 alone is skipped; 4, 5 skipped; the third in a row stops
    with pytest.raises(NonFiniteLossError, match=r"3 non-finite batches in a row.*max_skipped_batches = 2"):
        trainer.fit()
    assert trainer.state.step == 2 and trainer.state.skipped_batches == 3


def test_a_nan_model_is_never_written_as_best(tpsa_csv, tiny_config, tmp_path):
    from molsepnorm.checkpoint.run_dir import RunDir

    config = tiny_config(tpsa_csv, epochs=3)
    rd = RunDir(tmp_path / "run")
    rd.create()
    trainer = Trainer(config, _splits(config), run_dir=rd)
    trainer._train_epoch()
    trainer._end_epoch()
    good = rd.best.read_bytes()
    with torch.no_grad():
        next(trainer.model.parameters()).fill_(float("nan"))
    trainer._end_epoch()
    assert rd.best.read_bytes() == good
    assert trainer.state.best_epoch == 1 and trainer.state.bad_epochs == 1
    assert rd.read_metrics()[-1]["val_mae"] is None


def test_predictions_are_in_original_units(tpsa_csv, tiny_config):
    config = tiny_config(tpsa_csv, max_steps=2)
    splits = _splits(config)
    trainer = Trainer(config, splits)
    assert trainer.scaler is not None and trainer.scaler.std[0] > 5  # TPSA spans tens of Å²
    y_true, y_pred = trainer.predict(splits.val)
    raw = np.concatenate([d.y.numpy().reshape(1, -1) for d in splits.val])
    np.testing.assert_array_equal(y_true, raw)
    model = trainer.model.eval()
    batch = trainer.collate([splits.val[i] for i in range(len(splits.val))])
    with torch.no_grad():
        expected = trainer.scaler.inverse_transform(model(batch)).numpy()
    np.testing.assert_allclose(y_pred, expected, rtol=1e-4, atol=1e-3)
    metrics = trainer.evaluate("val")
    assert metrics["mae"] == pytest.approx(np.abs(y_pred - raw).mean())


def test_max_steps_bounds_training_and_schedule(tpsa_csv, tiny_config):
    config = tiny_config(tpsa_csv, max_steps=6, batch_size=64)  # 240 molecules: 4 steps per epoch
    config.train.epochs = None  # only the step budget
    trainer = Trainer(config, _splits(config))
    assert (trainer.max_epochs, trainer.total_steps) == (2, 6)
    result = trainer.fit()
    assert result.steps == 6 and result.epochs == 2 and result.stopped == "max_steps"
    assert trainer.scheduler.get_last_lr()[0] == pytest.approx(config.train.end_lr)


def test_epochs_and_max_steps_end_at_whichever_comes_first(tpsa_csv, tiny_config):
    config = tiny_config(tpsa_csv, epochs=3, max_steps=5, batch_size=64)
    trainer = Trainer(config, _splits(config))
    assert (trainer.max_epochs, trainer.total_steps) == (3, 5)
    config = tiny_config(tpsa_csv, epochs=1, max_steps=100, batch_size=64)
    assert Trainer(config, _splits(config)).total_steps == 4


def test_early_stopping_ends_patience_epochs_after_the_best(tpsa_csv, tiny_config):
    # a learning rate far too high for a tiny model: the validation MAE cannot improve
    # for 12 epochs in a row, so a patience of 1 must end the run early
    config = tiny_config(tpsa_csv, epochs=12, lr=5e-2, patience=1, batch_size=64, monitor_blend=False)
    result = Trainer(config, _splits(config)).fit()
    assert result.stopped == "early_stopping"
    assert result.epochs == result.best_epoch + 1 < 12


def test_early_stopping_follows_the_blend_and_best_pt_keeps_the_better_graphormer_of_equal_blends(
        tpsa_csv, tiny_config, tmp_path):
    """train.monitor_blend: on TPSA the group-contribution model outdoes a tiny Graphormer, so the
    blend's validation MAE (the linear model's, weight 1) stops improving from the start and a
    patience of 2 ends the run 2 epochs after its last improvement; an epoch whose blend ties
    with the best but whose Graphormer is better becomes best.pt, without resetting the patience."""
    config = tiny_config(tpsa_csv, epochs=12, patience=2, batch_size=64)
    result = Trainer(config, _splits(config), run_dir=tmp_path / "run").fit()
    rows = result.history
    blend = [row["val_blend_mae"] for row in rows]
    improved = [e for e in range(1, len(rows) + 1) if all(blend[e - 1] < b for b in blend[:e - 1])]
    assert result.stopped == "early_stopping" and result.epochs == improved[-1] + 2 < 12
    best_blend = min(blend)
    tied = [row for row in rows if row["val_blend_mae"] == best_blend]
    assert result.best_epoch == min(tied, key=lambda row: (row["val_mae"], row["epoch"]))["epoch"]


def test_auto_early_stopping_waits_for_the_second_half_of_the_schedule(tpsa_csv, tiny_config):
    # a learning rate too high for the tiny model: its best validation epoch comes early.  An
    # explicit patience of 10 stops 10 epochs after it; "auto" (also 10 epochs for a 24-epoch
    # run) counts from the midpoint at the earliest, so it may stop at epoch 12 + 10 and no sooner
    explicit = Trainer(c := tiny_config(tpsa_csv, epochs=24, lr=0.3, patience=10, batch_size=64, monitor_blend=False),
                       _splits(c)).fit()
    assert explicit.stopped == "early_stopping" and explicit.epochs == explicit.best_epoch + 10 < 22
    auto = Trainer(c := tiny_config(tpsa_csv, epochs=24, lr=0.3, patience="auto", batch_size=64, monitor_blend=False),
                   _splits(c)).fit()
    assert auto.best_epoch == explicit.best_epoch  # the same run up to there
    assert auto.stopped == "early_stopping" and auto.epochs == 22


def test_last_checkpoint_carries_the_best_weights(tpsa_csv, tiny_config, tmp_path):
    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.checkpoint.run_dir import RunDir

    config = tiny_config(tpsa_csv, epochs=2)
    config.train.checkpoint_every_seconds = 0  # last.pt at every epoch's end
    rd = RunDir(tmp_path / "run")
    rd.create()
    trainer = Trainer(config, _splits(config), run_dir=rd)
    trainer._train_epoch()
    trainer._end_epoch()
    best = Checkpoint.load(rd.best).state_dict
    kept = Checkpoint.load(rd.last).training_state["best_model"]
    assert kept.keys() == best.keys() and all(torch.equal(kept[k], best[k]) for k in best)

    again = Trainer(config, _splits(config), run_dir=rd)
    again.load_training_state(Checkpoint.load(rd.last))
    assert again.state.best_epoch == 1 and again._best_state is not None


def test_the_callers_config_is_not_changed(tpsa_csv, tiny_config):
    config = tiny_config(tpsa_csv, epochs=1)
    before = config.to_dict()
    trainer = Trainer(config, _splits(config))
    assert config.to_dict() == before  # the model section was not completed in place
    assert trainer.config.model["vocab"] == "ogb" and trainer.config.model["num_tasks"] == 1
    assert trainer.config.model["atom_dims"] and "atom_dims" not in config.model


def test_auto_batch_size_and_lr_are_resolved_from_the_training_set(tpsa_csv, write_tpsa_csv, tiny_config, tmp_path):
    import math

    config = tiny_config(write_tpsa_csv(tmp_path / "tpsa700.csv", n=700), epochs=1, batch_size="auto", lr="auto")
    trainer = Trainer(config, splits := _splits(config))
    assert 500 <= len(splits.train) < 2000 and splits.task == "regression"
    assert (trainer.tc.batch_size, trainer.tc.lr) == (64, pytest.approx(1e-3))  # a small regression set
    assert trainer.steps_per_epoch == math.ceil(len(splits.train) / 64)  # random batches of 64
    assert trainer.optimizer.param_groups[0]["initial_lr"] == pytest.approx(1e-3)
    assert config.train.batch_size == "auto"  # the caller's config is not changed
    tiny = Trainer(c := tiny_config(tpsa_csv, epochs=1, batch_size="auto", lr="auto"), tiny_splits := _splits(c))
    assert len(tiny_splits.train) < 500 and (tiny.tc.batch_size, tiny.tc.lr) == (32, pytest.approx(1e-3))
    given = Trainer(c := tiny_config(tpsa_csv, epochs=1, batch_size=64, lr="auto"), _splits(c))
    assert (given.tc.batch_size, given.tc.lr) == (64, pytest.approx(1e-3))


def test_training_reads_no_private_pyg_attribute():
    """The trainer reads data sets through their public API (molsepnorm.data.columns)."""
    import inspect

    from molsepnorm.data import columns
    from molsepnorm.train import loop

    for module in (loop, columns):
        assert "._data" not in inspect.getsource(module)
