"""Where a model runs: the device names every verb accepts, and the process settings for
long inference on a CPU."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

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


def inference_process_settings(threads: Optional[int] = None) -> None:
    """Process-wide settings for streaming many molecules through a model on a CPU.

    Sets torch's intra-op threads (None: leave as is) and switches oneDNN (mkldnn) off:
    oneDNN caches a kernel per input shape, batches of molecules come in ever new shapes,
    so over a large file the cache grows (docs/benchmarks.md, "Prediction") for no speed
    gain on this model's small matrices.  Both are global to the process, so the library
    never calls this by itself: the CLI calls it once per command, and a notebook or
    service that owns its process may call it once before predicting.
    """
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    torch.backends.mkldnn.enabled = False
