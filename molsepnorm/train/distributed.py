"""Multi-process training with PyTorch DDP: environment detection, process groups, rank 0.

Launch with ``torchrun --nproc_per_node=N -m molsepnorm train ...`` (or ``molsepnorm
train --nproc N``, which runs torchrun for you).  torchrun sets ``RANK``, ``WORLD_SIZE``
and ``LOCAL_RANK``; :func:`setup` then joins the process group: gloo on CPU, NCCL on
CUDA (one GPU per process, ``cuda:LOCAL_RANK``).  Only rank 0 writes files and logs.

The graph token's BatchNorm becomes ``SyncBatchNorm`` on CUDA only
(:func:`maybe_sync_batchnorm`): DDP cannot run SyncBatchNorm on CPU, so CPU ranks keep
per-rank batch statistics.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
from torch import nn

from molsepnorm.errors import MolsepnormError
from molsepnorm.inference.device import resolve_device  # noqa: F401  (re-used by setup)


@dataclass(frozen=True)
class DistEnv:
    """Where this process stands: rank, world size and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on rank 0, the only process that writes files and logs."""
        return self.rank == 0


def env_world() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from torchrun's environment, ``(0, 1, 0)`` without it."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    return rank, world, local


def setup(requested_device: str = "auto", timeout_minutes: float = 30.0) -> DistEnv:
    """Pick this process's device and, under torchrun, join the process group.

    Returns:
        The :class:`DistEnv`; single-process when ``WORLD_SIZE`` is unset or 1.
    """
    rank, world, local = env_world()
    device = resolve_device(requested_device, local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs: dict[str, Any] = {"backend": backend, "timeout": datetime.timedelta(minutes=timeout_minutes)}
        if device.type == "cuda":
            kwargs["device_id"] = device
        dist.init_process_group(**kwargs)
    return DistEnv(rank=rank, world_size=world, local_rank=local, device=device)


def teardown() -> None:
    """Leave the process group, if any."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def maybe_sync_batchnorm(model: nn.Module, env: DistEnv) -> nn.Module:
    """SyncBatchNorm for every BatchNorm on multi-GPU runs; unchanged otherwise (CPU cannot)."""
    if env.is_distributed and env.device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)
    return model


def wrap_ddp(model: nn.Module, env: DistEnv) -> nn.Module:
    """``DistributedDataParallel`` around ``model`` when distributed, else ``model`` itself."""
    if not env.is_distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [env.device.index] if env.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside a DDP wrapper (or the model itself)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def barrier(env: DistEnv) -> None:
    """Wait for every rank (no-op in a single process)."""
    if env.is_distributed:
        dist.barrier()


def all_gather_objects(obj: Any, env: DistEnv) -> list[Any]:
    """``[obj of rank 0, obj of rank 1, ...]`` on every rank (``[obj]`` in a single process)."""
    if not env.is_distributed:
        return [obj]
    out: list[Any] = [None] * env.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, env: DistEnv, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank."""
    if not env.is_distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def on_main(env: DistEnv, action: Callable[[], Any], what: Optional[str] = None) -> Any:
    """Run ``action()`` on rank 0 only; if it raises, raise on every rank, so that no rank
    is left waiting at a later collective.

    Rank 0 re-raises its own exception; the other ranks raise :class:`MolsepnormError` with
    its message (``"rank 0 could not <what>: <message>"`` when ``what`` is given).  Every
    rank must call it (it broadcasts).

    Returns:
        ``action()``'s result on rank 0, None on the others.
    """
    result, error = None, None
    if env.is_main:
        try:
            result = action()
        except Exception as exc:
            error = exc
    failure = None if error is None else (str(error) if what is None else f"rank 0 could not {what}: {error}")
    message = broadcast_object(failure, env)
    if error is not None:
        raise error
    if message is not None:
        raise MolsepnormError(message)
    return result


def all_reduce_sum(values: list[float], env: DistEnv) -> list[float]:
    """Element-wise sum of ``values`` over ranks (float64, on CPU for gloo, GPU for NCCL)."""
    if not env.is_distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=env.device)
    dist.all_reduce(t)
    return t.tolist()


def any_rank(flag: bool, env: DistEnv) -> bool:
    """True on every rank when ``flag`` is True on at least one."""
    if not env.is_distributed:
        return flag
    return all_reduce_sum([1.0 if flag else 0.0], env)[0] > 0


def spawn_command(nproc: int, argv: list[str], python: Optional[str] = None,
                  module: str = "molsepnorm.cli.train") -> list[str]:
    """The torchrun command running ``python -m <module> <argv>`` (``molsepnorm train``, or
    ``molsepnorm.cli.pretrain``) on ``nproc`` local processes."""
    import sys

    return [python or sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", module, *argv]
