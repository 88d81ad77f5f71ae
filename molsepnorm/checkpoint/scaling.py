"""Per-target standardization of regression targets.

The model is trained on ``(y - mean) / std``; every prediction and every reported
figure is mapped back with :meth:`TargetScaler.inverse_transform`, so metrics are always
in the data set's own units.  Statistics ignore missing targets (NaN).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch


@dataclass(frozen=True)
class TargetScaler:
    """``y -> (y - mean) / std`` per target column.

    Attributes:
        mean: one value per target.
        std: one value per target; a constant (or single-valued) column gets 1.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    @classmethod
    def fit(cls, y: np.ndarray | torch.Tensor) -> "TargetScaler":
        """Statistics of ``y`` (``[num_molecules, num_targets]``), NaN entries ignored."""
        y = np.asarray(y.detach().cpu() if isinstance(y, torch.Tensor) else y, dtype=np.float64)
        if y.ndim == 1:
            y = y[:, None]
        mean = np.zeros(y.shape[1])
        std = np.ones(y.shape[1])
        for t in range(y.shape[1]):
            col = y[:, t][np.isfinite(y[:, t])]
            if col.size:
                mean[t] = col.mean()
                s = col.std()
                std[t] = s if s > 1e-12 else 1.0
        return cls(tuple(float(m) for m in mean), tuple(float(s) for s in std))

    @classmethod
    def identity(cls, num_targets: int) -> "TargetScaler":
        """A scaler that changes nothing."""
        return cls((0.0,) * num_targets, (1.0,) * num_targets)

    @property
    def num_targets(self) -> int:
        return len(self.mean)

    def _stats(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = torch.tensor(self.mean, dtype=like.dtype, device=like.device)
        std = torch.tensor(self.std, dtype=like.dtype, device=like.device)
        return mean, std

    def transform(self, y: torch.Tensor) -> torch.Tensor:
        """Scale targets ``[B, T]`` (NaN stays NaN)."""
        mean, std = self._stats(y)
        return (y - mean) / std

    def inverse_transform(self, y: torch.Tensor) -> torch.Tensor:
        """Map model outputs ``[B, T]`` back to the original units."""
        mean, std = self._stats(y)
        return y * std + mean

    def to_dict(self) -> dict[str, list[float]]:
        """Plain lists, safe for a weights-only checkpoint."""
        return {"mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Sequence[float]] | None, num_targets: int | None = None) -> "TargetScaler":
        """Inverse of :meth:`to_dict`; ``None`` gives the identity (needs ``num_targets``)."""
        if raw is None:
            if num_targets is None:
                raise ValueError("an identity scaler needs num_targets")
            return cls.identity(num_targets)
        return cls(tuple(float(m) for m in raw["mean"]), tuple(float(s) for s in raw["std"]))

    def __repr__(self) -> str:  # short, for logs
        fmt = lambda xs: "[" + ", ".join(f"{x:.4g}" for x in xs) + "]"  # noqa: E731
        return f"TargetScaler(mean={fmt(self.mean)}, std={fmt(self.std)})"

