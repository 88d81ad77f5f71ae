"""``on_main``: rank 0 acts, a failure there raises on every rank."""
from __future__ import annotations

import os
import socket

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from molsepnorm.train.distributed import DistEnv, on_main


def test_single_process_runs_the_action_and_reraises_its_error():
    env = DistEnv()
    assert on_main(env, lambda: 42) == 42
    with pytest.raises(KeyError, match="missing"):
        on_main(env, lambda: {}["missing"], what="load the data")


def _rank(rank: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    env = DistEnv(rank=rank, world_size=2)
    try:
        ran = on_main(env, lambda: f"ran on {rank}")

        def fail() -> None:
            raise FileExistsError("runs/x holds a run")

        try:
            on_main(env, fail, what="create the run directory")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            queue.put((rank, ran, type(exc).__name__, str(exc)))
    finally:
        dist.destroy_process_group()


def test_a_failure_on_rank_0_raises_on_every_rank():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")  # fork: a test module is not importable by name under --import-mode=importlib
    queue = ctx.Queue()
    mp.start_processes(_rank, args=(port, queue), nprocs=2, start_method="fork")
    got = sorted(queue.get(timeout=30) for _ in range(2))
    assert got == [(0, "ran on 0", "FileExistsError", "runs/x holds a run"),
                   (1, None, "MolsepnormError", "rank 0 could not create the run directory: runs/x holds a run")]
