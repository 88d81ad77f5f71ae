"""Device choice: names, CUDA absent, one GPU per process under torchrun, and how many
members of an ensemble run at once on a CPU."""
from __future__ import annotations

import pytest
import torch

from molsepnorm.errors import MolsepnormError
from molsepnorm.inference import device as device_module
from molsepnorm.inference.device import resolve_device, resolve_member_threads, usable_cpus


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


def test_auto_member_threads_use_the_cpus_only_beside_single_threaded_torch(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(device_module, "usable_cpus", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert resolve_member_threads("auto", 3, cpu) == 2  # two members at a time, the third after
    assert resolve_member_threads("auto", 1, cpu) == 1  # one model runs in the calling thread
    monkeypatch.setattr(device_module, "usable_cpus", lambda: 16)
    assert resolve_member_threads("auto", 3, cpu) == 3  # never more threads than members
    assert resolve_member_threads("auto", 3, torch.device("cuda", 0)) == 1  # one stream: nothing to gain
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)  # torch's default on 8 cores with 16 hardware threads
    assert resolve_member_threads("auto", 3, cpu) == 1  # not a second team of 8 beside the first
    monkeypatch.setattr(device_module, "usable_cpus", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert resolve_member_threads("auto", 3, cpu) == 1


def test_a_number_of_member_threads_is_capped_at_the_members_and_nonsense_refused():
    cpu = torch.device("cpu")
    assert resolve_member_threads(2, 3, cpu) == 2 and resolve_member_threads(5, 3, cpu) == 3
    for bad in (0, -1, "two", 1.5, True, None):
        with pytest.raises(ValueError, match="member_threads must be 'auto' or a number >= 1"):
            resolve_member_threads(bad, 3, cpu)


def test_usable_cpus_is_at_least_one():
    assert usable_cpus() >= 1
