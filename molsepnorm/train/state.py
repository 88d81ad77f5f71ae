"""Training progress and everything an exact resume needs, as plain data for ``last.pt``.

Exact resume (CPU, fixed seed): ``last.pt`` holds the model, the optimizer, the scheduler,
the RNG states of python / numpy / torch (every rank's), the :class:`Progress` (step,
epoch, batches already done in it, best-so-far, early-stopping counter, running sums of
the epoch's training loss) and the best weights so far.  Batches depend only on ``(seed,
epoch)`` and the DataLoaders draw their worker seeds from their own generators, so nothing
else consumes the global RNG: a resumed run takes the very same steps as an
uninterrupted one.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional

import numpy as np
import torch
from torch import Tensor


@dataclass
class Progress:
    """Mutable training progress; all of it goes into ``last.pt``."""

    step: int = 0
    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # batches of epoch ``epoch`` (0-based) already done
    best_value: Optional[float] = None
    best_epoch: Optional[int] = None
    best_step: Optional[int] = None  # the step at the end of best_epoch (None in last.pt files before it)
    best_val: dict[str, float] = field(default_factory=dict)
    # train.monitor_blend: the Graphormer's own monitored value at best_epoch (it breaks the blend's ties)
    best_model_value: Optional[float] = None
    bad_epochs: int = 0  # epochs without improvement (early stopping)
    loss_sum: float = 0.0  # sum over this epoch's batches of loss * graphs
    loss_graphs: int = 0
    skipped_batches: int = 0  # non-finite batches skipped this epoch (train.on_nonfinite = "skip")
    skipped_in_a_row: int = 0
    epoch_graphs: int = 0  # graphs trained on in this process's share of the epoch (for graphs/s)
    epoch_seconds: float = 0.0  # seconds of this epoch's training part

    @property
    def started(self) -> bool:
        return (self.step, self.epoch, self.batch_in_epoch) != (0, 0, 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Progress":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in known})


def training_state(optimizer: torch.optim.Optimizer, scheduler: Any, progress: Progress, rng_per_rank: list[Any],
                   best_model: Optional[dict[str, Tensor]]) -> dict[str, Any]:
    """The ``training_state`` entry of ``last.pt``.

    ``best_model`` (the best weights so far) makes last.pt alone restore everything, even
    when best.pt is newer (a kill between writing best.pt and last.pt).
    """
    return {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": rng_per_rank,
        "world_size": len(rng_per_rank),
        "progress": progress.to_dict(),
        "best_model": best_model,
    }


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def seed_rank(seed: int, rank: int) -> None:
    """Under DDP, after the identical initial weights: each process its own torch stream
    (different dropout masks), the same on every run."""
    torch.manual_seed(seed + 1_000_003 * rank)


def reseed_after_resize(seed: int, step: int, rank: int) -> None:
    """A run resumed on another number of processes than wrote its checkpoint: the saved
    streams do not map onto the new processes, so each is seeded from the seed, the step and
    its rank (the run goes on, but not as an uninterrupted one would)."""
    seed_everything(seed + 7919 * (step + 1) + rank)


def capture_rng_state() -> dict[str, Any]:
    """Python, numpy, torch (and CUDA) RNG states, as tensors, ints and tuples only."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    random.setstate(_as_tuple(state["python"]))
    np_state = state["numpy"]
    np.random.set_state((
        np_state["kind"],
        np_state["keys"].numpy().astype(np.uint32),
        int(np_state["pos"]),
        int(np_state["has_gauss"]),
        float(np_state["cached_gaussian"]),
    ))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
        else:  # another machine: restore what maps, the rest keeps its seed
            for i, s in enumerate(cuda[: torch.cuda.device_count()]):
                torch.cuda.set_rng_state(s, i)


def _as_tuple(value: Any) -> Any:
    """Lists back to tuples, recursively (``random.setstate`` wants tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuple(v) for v in value)
    return value



