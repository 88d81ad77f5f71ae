"""Shared fixtures.

The real data sets come from ``MOLSEPNORM_DATA`` (CI sets it to ``../shared/data``), else
from ``../shared/data`` beside the checkout.  When ``MOLSEPNORM_DATA`` is set, missing data
is an error, never a skip, so CI cannot pass by skipping.  Processed caches go to
``MOLSEPNORM_CACHE`` (default here: ``<repo>/.test-cache``), shared by xdist workers
through file locks.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("MOLSEPNORM_CACHE", str(REPO / ".test-cache"))
os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb's background PyPI version check

try:  # keep two xdist workers from oversubscribing two cores
    import torch

    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a module's tests, restored after: with tiny models and
    batches one thread is as fast, and immune to a busy machine's other jobs.  A folder's
    conftest makes it autouse (tests/unit/nn, tests/unit/pretrain)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _write_tpsa_csv(path: Path, n: int = 300, binary: bool = False) -> Path:
    """Write the first ``n`` molecules of RDKit's ``NCI/first_5k.tpsa.csv`` to ``path`` as
    ``smiles,tpsa``; ``binary``: ``smiles,polar`` with polar = TPSA > 40 (0 / 1)."""
    from molsepnorm.data.nci import read_tpsa_file, tpsa_file

    table, _ = read_tpsa_file(tpsa_file())
    table = table.iloc[:n].copy()
    if binary:
        table["polar"] = (table.pop("tpsa").astype(float) > 40).astype(int)
    table.to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def write_tpsa_csv():
    """``write_tpsa_csv(path, n=300, binary=False) -> path``: a small real training CSV."""
    return _write_tpsa_csv


@pytest.fixture
def interrupt_training(monkeypatch):
    """``with interrupt_training(step): train(...)``: inside the block the trainer raises
    ``KeyboardInterrupt`` (a simulated kill) when it is about to take optimizer step
    ``step + 1``, and the block must end so; after it, training runs as usual."""
    from molsepnorm.train import loop

    real = loop.Trainer._train_step

    @contextlib.contextmanager
    def interrupting(step: int):
        def interrupted(self, batch, index):
            if self.state.step == step:
                raise KeyboardInterrupt("simulated kill")
            return real(self, batch, index)

        monkeypatch.setattr(loop.Trainer, "_train_step", interrupted)
        try:
            with pytest.raises(KeyboardInterrupt):
                yield
        finally:
            monkeypatch.setattr(loop.Trainer, "_train_step", real)

    return interrupting


def _sigkill_when(command: list[str], ready: Callable[[], bool], timeout: float = 240, poll: float = 0.01) -> int:
    """Start ``command``, SIGKILL it as soon as ``ready()`` is true (or after ``timeout``
    seconds); fail, with its stderr, if it ends before.  Its exit status (``-SIGKILL``)."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if ready():
                break
            time.sleep(poll)
        assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    return proc.returncode


def _sigterm_when(command: list[str], ready: Callable[[], bool], timeout: float = 240,
                  poll: float = 0.01) -> tuple[int, str]:
    """Start ``command``, send it SIGTERM (a batch system's time limit) as soon as ``ready()``
    is true; fail if it ends before.  ``(exit status, stderr)`` once it has stopped."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline and not ready():
            time.sleep(poll)
        assert proc.poll() is None, "the run ended before it could be stopped: " + proc.stderr.read()[-2000:]
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stderr


@pytest.fixture(scope="session")
def sigterm_when():
    """``sigterm_when(command, ready, timeout=240, poll=0.01) -> (exit status, stderr)``: stop
    a run (a subprocess) with SIGTERM the moment ``ready()`` says so."""
    return _sigterm_when


@pytest.fixture(scope="session")
def sigkill_when():
    """``sigkill_when(command, ready, timeout=240, poll=0.01) -> exit status``: interrupt a
    run (a subprocess) the moment ``ready()`` says so, as a crash or an OOM kill would."""
    return _sigkill_when


def _find_data_root() -> Path | None:
    env = os.environ.get("MOLSEPNORM_DATA")
    if env:
        return Path(env).resolve()
    guess = REPO.parent / "shared" / "data"
    return guess.resolve() if guess.is_dir() else None


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The folder holding the real data sets (read-only)."""
    root = _find_data_root()
    if root is None:
        pytest.skip("real data sets not found: set MOLSEPNORM_DATA or put shared/data beside the checkout")
    if not root.is_dir():
        pytest.fail(f"MOLSEPNORM_DATA={root} does not exist")
    return root


def _snapshot(root: Path) -> dict[str, tuple[int, float]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime) for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="session")
def data_root_snapshot(data_root: Path):
    """A listing (path, size, mtime) of the data root taken before any test used it."""
    return _snapshot(data_root)


@pytest.fixture
def assert_data_root_untouched(data_root: Path, data_root_snapshot):
    """Use in a test that loads data: fails if anything under the data root changed."""
    yield
    assert _snapshot(data_root) == data_root_snapshot, "a test wrote into the read-only data root"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def bundled_predictor():
    """The bundled TPSA model (tpsa-nci-small): its predictions can be checked against RDKit's TPSA."""
    from molsepnorm.predict import Predictor

    return Predictor.load("tpsa-nci-small")
