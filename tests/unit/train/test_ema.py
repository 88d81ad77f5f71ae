"""WeightEMA: the moving average it promises, its warm-up, and how training uses it."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from molsepnorm.train.ema import WeightEMA


def test_average_follows_the_warmed_up_decay_for_parameters_and_buffers():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    ema = WeightEMA(model, decay=0.9)
    expected = {k: v.detach().clone().float() for k, v in model.state_dict().items()}
    for t in range(30):
        with torch.no_grad():
            model.train()(torch.randn(8, 3))  # moves the BatchNorm's running statistics
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update(model)
        current = model.state_dict()
        if t == 0:  # the first update copies
            expected = {k: v.detach().clone().float() for k, v in current.items()}
        else:
            d = min(0.9, (1 + t) / (10 + t))
            expected = {k: d * expected[k] + (1 - d) * current[k].float() for k in current}
    averaged = ema.module.state_dict()
    for key, value in expected.items():
        if key.endswith("num_batches_tracked"):
            assert averaged[key] == model.state_dict()[key]  # integers are copied, not averaged
        else:
            torch.testing.assert_close(averaged[key], value, rtol=1e-5, atol=1e-6)
    assert ema.updates == 30
    assert not torch.equal(averaged["0.weight"], model.state_dict()["0.weight"])


def test_state_round_trip_resumes_the_same_average():
    model = nn.Linear(2, 2)
    ema = WeightEMA(model, decay=0.99)
    for _ in range(3):
        ema.update(model)
    again = WeightEMA(nn.Linear(2, 2), decay=0.99)
    again.load_state_dict(ema.state_dict())
    assert again.updates == 3
    assert torch.equal(again.module.weight, ema.module.weight)


@pytest.mark.parametrize("decay", [0.0, 1.0, 1.5])
def test_decay_outside_the_open_interval_is_refused(decay):
    with pytest.raises(ValueError, match="decay"):
        WeightEMA(nn.Linear(1, 1), decay)


def test_training_evaluates_and_saves_the_average(tmp_path, tpsa_csv, tiny_config):
    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.data import load_dataset
    from molsepnorm.inference import evaluate_checkpoint
    from molsepnorm.train.loop import Trainer

    config = tiny_config(tpsa_csv, epochs=2, ema_decay=0.95, batch_size=64)
    splits = load_dataset(config.data.dataset, **config.data.options)
    trainer = Trainer(config, splits, run_dir=tmp_path / "run")
    trainer.run_dir.create()
    result = trainer.fit()
    best = Checkpoint.load(tmp_path / "run" / "best.pt")
    last = Checkpoint.load(tmp_path / "run" / "last.pt")
    raw = last.state_dict
    averaged = last.training_state["ema"]
    # best.pt holds averaged weights, not the raw ones, and its test metrics are theirs
    assert any(not torch.equal(raw[k], averaged["module." + k]) for k in raw if raw[k].is_floating_point())
    assert best.metrics["test"] == result.test
    if result.best_epoch == result.epochs:
        assert all(torch.equal(best.state_dict[k], averaged["module." + k]) for k in best.state_dict)
    # the checkpoint rebuilds the model it was scored with (its companion's radius is chosen at the end)
    # (rel 1e-4: training ran on train.threads, this process's evaluation on its own thread count)
    assert evaluate_checkpoint(tmp_path / "run" / "best.pt", split="test")["metrics"] == pytest.approx(result.test,
                                                                                                       rel=1e-4)
