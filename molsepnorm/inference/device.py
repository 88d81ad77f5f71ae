"""Where a model runs: the device names every verb accepts, the CPUs a process may use,
and the process settings for long inference on a CPU."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str, local_rank: int = 0) -> "torch.device":
    """``"cpu"``, ``"cuda"`` (this process's GPU) or ``"auto"`` (CUDA when available).

    Args:
        requested: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        local_rank: this process's index on its machine (torchrun's ``LOCAL_RANK``): on
            CUDA each process takes the GPU of that index, one GPU per process.

    Raises:
        MolsepnormError: CUDA asked for but absent, or more processes on this machine
            than GPUs (NCCL cannot share one GPU between the ranks of a process group).
    """
    import torch

    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda":
        from molsepnorm.errors import MolsepnormError

        if not torch.cuda.is_available():
            raise MolsepnormError("--device cuda was requested but PyTorch sees no CUDA GPU; use --device cpu")
        count = torch.cuda.device_count()
        if local_rank >= count:
            raise MolsepnormError(
                f"process {local_rank} on this machine needs a GPU of its own, but PyTorch sees {count}: "
                f"run at most {count} process(es) per machine with --device cuda (--nproc {count})")
        return torch.device("cuda", local_rank)
    if requested != "cpu":
        raise ValueError(f"unknown device {requested!r}; expected cpu, cuda or auto")
    return torch.device("cpu")


def inference_process_settings(threads: Optional[int] = None) -> None:
    """Process-wide settings for streaming many molecules through a model on a CPU.

    Sets torch's intra-op threads (None: leave as is) and switches oneDNN (mkldnn) off:
    oneDNN caches a kernel per input shape, batches of molecules come in ever new shapes,
    so over a large file the cache grows (docs/benchmarks.md, "Figures behind design
    choices in the code") for no speed gain on this model's small matrices.  Both are
    global to the process, so the library never calls this by itself: the CLI calls it
    once per command, and a notebook or service that owns its process may call it once
    before predicting.
    """
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    torch.backends.mkldnn.enabled = False


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def resolve_member_threads(requested: Union[int, str], members: int, device: "torch.device") -> int:
    """How many models of an ensemble run a batch at the same time, each in its own thread:
    at most ``members``, a number as given, or for ``"auto"`` one per usable CPU
    (:func:`usable_cpus`) when torch runs one intra-op thread (as ``predict`` and ``embed``
    set it: :func:`inference_process_settings`), else one: torch's own threads already
    share each operation among the CPUs, and a second team of them beside the first would
    only make both wait (on a machine with two hardware threads per core, torch's default
    is one thread per core).  One on a GPU, where the members' kernels queue on one stream
    anyway.

    Raises:
        ValueError: neither ``"auto"`` nor a number >= 1.
    """
    import torch

    if requested == "auto":
        if torch.device(device).type != "cpu" or torch.get_num_threads() > 1:
            return 1
        requested = usable_cpus()
    elif isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise ValueError(f"member_threads must be 'auto' or a number >= 1, got {requested!r}")
    return min(requested, members)
