"""Fixtures of the nn tests."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    """Every test here on one torch thread (tests/conftest.py)."""
