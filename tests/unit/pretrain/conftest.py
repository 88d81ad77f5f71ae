"""Fixtures of the pretrain unit tests."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models and batches: one thread is as fast, and immune to a busy machine's other jobs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
