"""Device choice: names, CUDA absent, and one GPU per process under torchrun."""
from __future__ import annotations

import pytest
import torch

from molsepnorm.errors import MolsepnormError
from molsepnorm.inference.device import resolve_device


def test_cpu_auto_and_unknown_names(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(MolsepnormError, match="no CUDA GPU; use --device cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        resolve_device("tpu")


def test_each_process_takes_its_own_gpu_and_never_shares_one(monkeypatch):
    # two GPUs seen: ranks 0 and 1 take cuda:0 and cuda:1; a third process on the machine is refused,
    # not sent to cuda:0 beside rank 0 (NCCL fails on two ranks of one GPU)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda", 0) == torch.device("cuda", 0)
    assert resolve_device("auto", 1) == torch.device("cuda", 1)
    with pytest.raises(MolsepnormError, match=r"process 2 on this machine needs a GPU of its own, but PyTorch sees 2"):
        resolve_device("cuda", 2)
