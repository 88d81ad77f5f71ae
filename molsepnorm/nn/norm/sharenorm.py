"""ShareNorm: one norm for every token, the baseline of Chen et al. (NeurIPS 2023)."""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor, nn

from molsepnorm.nn.norm.masked import _norm_kwargs, create_norm


class ShareNorm(nn.Module):
    """One norm for every token, the baseline of Chen et al. (2023) (kind ``"layer"``
    is a plain transformer's LayerNorm).

    Input ``(B, L, D)`` or ``(N, D)``; ``mask`` of shape ``x.shape[:-1]``, True for real
    tokens; padded outputs are zeros and a batch-kind norm computes its statistics on the
    real tokens only.
    """

    def __init__(
        self,
        dim: int,
        norm: str = "layer",
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        *,
        affine: bool = True,
        single_sample: str = "running",
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
    ):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.norm = create_norm(norm, dim, **_norm_kwargs(norm, eps, momentum, affine, single_sample, device, dtype))

    def reset_parameters(self) -> None:
        """Reset the norm (affine parameters, and running statistics of the batch kind)."""
        self.norm.reset_parameters()

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        """Normalize ``x`` ``(..., D)`` with one norm; ``mask`` ``x.shape[:-1]``."""
        return self.norm(x, mask)
