"""Self-describing checkpoints: written atomically, read back with weights-only loading.

A checkpoint is one plain ``dict`` of tensors and primitives (no pickled classes), so
``torch.load(path, map_location="cpu", weights_only=True)`` reads it on any machine and a
checkpoint file can never run code.  It holds everything needed to rebuild the model and
its input pipeline from the one file:

============================  ==========================================================
key                           content
============================  ==========================================================
``format``                    ``"molsepnorm-checkpoint"``
``format_version``            :data:`FORMAT_VERSION` (checked on load)
``package_version``           molsepnorm version that wrote it
``kind``                      ``"best"`` or ``"last"``
``created``                   ISO-8601 time of writing (UTC)
``model``                     ``{"config": GraphormerConfig.to_dict(), "state_dict": ...}``
``featurizer``                ``{"vocab", "featurizer_version", "encoding_version",
                              "multi_hop_max_dist"}``
``task``                      ``{"type": "regression" | "binary", "target_names",
                              "metric", "higher_is_better"}``
``target_scaling``            ``{"mean": [...], "std": [...]}`` or None (not scaled)
``data``                      ``{"dataset", "options", "source", "sizes"}``
``config``                    the resolved experiment config (model / train / data)
``metrics``                   ``{"val": {...}}`` (+ ``"test"`` once the run has ended)
``epoch``, ``step``           position in training when written (epochs completed)
``training_state``            ``last`` only: optimizer, scheduler, RNG states, best-so-far,
                              early-stopping counter, batches done in the current epoch
============================  ==========================================================
"""
from __future__ import annotations

import datetime as _dt
import os
import pickle
import random
from pathlib import Path
from typing import Any, Mapping, Optional, Union

import numpy as np
import torch

from molsepnorm.errors import MolsepnormError
from molsepnorm.version import __version__

PathLike = Union[str, os.PathLike]

FORMAT = "molsepnorm-checkpoint"
FORMAT_VERSION = 1


class CheckpointError(MolsepnormError, ValueError):
    """A checkpoint file is missing, truncated, of another format or version, or unsafe."""


def save_checkpoint(payload: Mapping[str, Any], path: PathLike) -> Path:
    """Write ``payload`` (plus format fields) to ``path`` atomically.

    The bytes go to ``<path>.tmp``, are flushed and fsynced, then renamed over ``path``
    (``os.replace`` is atomic on POSIX and Windows): a run killed at any moment leaves
    either the previous file or the new one, never a torn one.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dict(payload)
    data["format"] = FORMAT
    data["format_version"] = FORMAT_VERSION
    data.setdefault("package_version", __version__)
    data.setdefault("created", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        torch.save(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def load_checkpoint(path: PathLike) -> dict[str, Any]:
    """Read a checkpoint onto the CPU with weights-only unpickling and check its format.

    Raises:
        CheckpointError: the file is missing, truncated or corrupt, holds objects other
            than tensors and primitives, or is not a molsepnorm checkpoint of a version
            this package reads.  The message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    with open(path, "rb") as handle:
        head = handle.read(2)
    if not head.startswith((b"PK", b"\x80")):  # torch.save writes a zip archive; legacy files are pickles
        raise CheckpointError(f"{path}: not a checkpoint: torch.save writes a zip archive, and this file is "
                              "neither a zip archive nor a pickle (a text or other data file?)")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights_only" in str(exc) or "Weights only" in str(exc):
            raise CheckpointError(
                f"{path}: refused to load: the file holds Python objects other than tensors and plain "
                "data, which could run code when unpickled. Only load checkpoints you trust, and "
                "never with weights_only=False."
            ) from None
        raise CheckpointError(f"{path}: not a readable checkpoint (corrupt or truncated): {exc}") from None
    except (RuntimeError, EOFError, OSError, ValueError, AttributeError, TypeError) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt file?): {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a molsepnorm checkpoint (no 'format': {FORMAT!r} field)")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version!r}, but molsepnorm {__version__} reads version "
            f"{FORMAT_VERSION}; it was written by molsepnorm {data.get('package_version', '?')}"
        )
    for key in ("model", "task", "featurizer"):
        if key not in data:
            raise CheckpointError(f"{path}: checkpoint has no {key!r} entry")
    return data


def model_from_checkpoint(checkpoint: Union[PathLike, Mapping[str, Any]]) -> torch.nn.Module:
    """Rebuild the Graphormer of a checkpoint (a path or a loaded dict), in eval mode on CPU."""
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

    ckpt = load_checkpoint(checkpoint) if isinstance(checkpoint, (str, os.PathLike)) else checkpoint
    config = GraphormerConfig.from_dict(dict(ckpt["model"]["config"]))
    model = Graphormer(config)
    model.load_state_dict(ckpt["model"]["state_dict"])
    return model.eval()


def target_scaler_from_checkpoint(checkpoint: Mapping[str, Any]):
    """The :class:`~molsepnorm.train.scaling.TargetScaler` of a checkpoint, or None."""
    from molsepnorm.train.scaling import TargetScaler

    raw = checkpoint.get("target_scaling")
    return None if raw is None else TargetScaler.from_dict(raw)


# --- random number generator states as plain data -----------------------------------------


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


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def checkpoint_summary(checkpoint: Mapping[str, Any], path: Optional[PathLike] = None) -> str:
    """A few human-readable lines describing a checkpoint."""
    task = checkpoint["task"]
    model = checkpoint["model"]["config"]
    data = checkpoint.get("data", {})
    lines = [
        f"checkpoint {path}" if path else "checkpoint",
        f"  {checkpoint.get('kind', '?')} after epoch {checkpoint.get('epoch')} (step {checkpoint.get('step')}), "
        f"molsepnorm {checkpoint.get('package_version')}",
        f"  data {data.get('dataset')}: {task['type']}, targets {', '.join(task['target_names'])}",
        f"  model norm={model.get('norm')} layers={model.get('num_layers')} hidden={model.get('hidden_dim')} "
        f"vocab={model.get('vocab')}",
    ]
    return "\n".join(lines)
