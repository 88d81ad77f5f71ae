"""Where a model runs: the device names every verb accepts."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str, local_rank: int = 0) -> "torch.device":
    """``"cpu"``, ``"cuda"`` (this process's GPU) or ``"auto"`` (CUDA when available)."""
    import torch

    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda":
        if not torch.cuda.is_available():
            from molsepnorm.errors import MolsepnormError

            raise MolsepnormError("--device cuda was requested but PyTorch sees no CUDA GPU; use --device cpu")
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    if requested != "cpu":
        raise ValueError(f"unknown device {requested!r}; expected cpu, cuda or auto")
    return torch.device("cpu")
