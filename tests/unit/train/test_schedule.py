"""Warm-up then linear decay."""
from __future__ import annotations

import pytest
import torch

from molsepnorm.train.schedule import make_scheduler, resolve_warmup, warmup_linear_decay


def test_shape_of_the_schedule():
    f = warmup_linear_decay(peak_lr=1e-3, end_lr=1e-9, warmup_steps=10, total_steps=110)
    values = [f(s) for s in range(120)]
    assert values[0] == pytest.approx(0.1)
    assert values[9] == pytest.approx(1.0)  # peak at the end of warm-up
    assert all(a <= b for a, b in zip(values[:10], values[1:10]))  # increasing warm-up
    assert all(a >= b for a, b in zip(values[10:], values[11:]))  # then decreasing
    assert values[60] == pytest.approx(0.5, abs=1e-6)  # half-way down
    assert values[110] == pytest.approx(1e-6) and values[119] == pytest.approx(1e-6)  # end_lr / peak


def test_scheduler_drives_the_optimizer_and_its_state_is_plain():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=2e-4)
    sched = make_scheduler(opt, 2e-4, 1e-9, warmup_steps=4, total_steps=8)
    lrs = []
    for _ in range(8):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[3] == pytest.approx(2e-4)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-9)
    state = sched.state_dict()
    assert state["lr_lambdas"] == [None]  # nothing but plain data in a checkpoint


def test_resolve_warmup():
    assert resolve_warmup(None, 0.1, 400) == 40
    assert resolve_warmup(40_000, 0.1, 1_000) == 1_000
    assert resolve_warmup(0, 0.5, 10) == 0
