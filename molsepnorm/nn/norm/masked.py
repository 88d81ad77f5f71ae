"""Token normalizations with a padding mask: batch, batch renorm, layer, RMS and none, by name.

Every module here is called as ``forward(x, mask=None)`` with ``x`` ``(..., D)`` and
``mask`` of shape ``x.shape[:-1]``, True for real tokens (the conventions of
:mod:`molsepnorm.nn.norm`); :func:`create_norm` builds one from its kind.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from molsepnorm._stacklevel import outside_package_stacklevel

NORM_KINDS = ("batch", "batchrenorm", "layer", "rms", "none")
BATCH_KINDS = ("batch", "batchrenorm")  # the kinds with batch statistics
SINGLE_SAMPLE_POLICIES = ("running", "raise")


def _check_mask(x: Tensor, mask: Optional[Tensor], owner: str) -> None:
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{owner}: mask must be a boolean tensor, True for real tokens, got dtype {mask.dtype}"
        )
    if tuple(mask.shape) != tuple(x.shape[:-1]):
        raise ValueError(
            f"{owner}: mask of shape {tuple(mask.shape)} does not match input {tuple(x.shape)}; "
            f"expected {tuple(x.shape[:-1])} (True for real tokens)"
        )


def in_backward_recompute() -> bool:
    """True while autograd runs a backward pass.

    Gradient checkpointing (``torch.utils.checkpoint``, reentrant or not, and the
    Hugging Face / timm wrappers around it) re-runs a block's forward inside backward,
    in training mode: a batch norm there would update its running statistics a second
    time for the same optimisation step (pytorch/pytorch#96136). Batch norms here check
    this and normalize with the batch statistics without updating anything.
    ``torch._C._current_graph_task_id`` is what torch's own ``ModuleTracker`` reads; on a
    torch without it this returns False (statistics then update twice, as plain torch).
    """
    task_id = getattr(torch._C, "_current_graph_task_id", None)
    return task_id is not None and task_id() != -1


def _zero_padding(y: Tensor, mask: Optional[Tensor]) -> Tensor:
    # A multiply is several times faster than torch.where on CPU; padding must be finite.
    return y if mask is None else y * mask.unsqueeze(-1).to(y.dtype)


class MaskedNorm(nn.Module):
    """Base class: one torch normalization module plus a padding mask.

    ``forward(x, mask=None)``: ``x`` ``(..., D)``, ``mask`` ``x.shape[:-1]`` boolean, True
    for real tokens; output like ``x`` with zeros at padded tokens. Subclasses set
    ``kind`` (a name accepted by :func:`create_norm`) and ``per_token`` (True when each
    token is normalized on its own, so padding cannot affect real tokens).
    """

    kind: str = ""
    per_token: bool = True
    inner_name: Optional[str] = None  # attribute holding the wrapped torch module

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    @property
    def inner(self) -> Optional[nn.Module]:
        """The wrapped torch module (``nn.BatchNorm1d``, ``nn.LayerNorm``, ...), or None."""
        return getattr(self, self.inner_name) if self.inner_name else None

    @classmethod
    def wrap(cls, module: nn.Module, dim: int) -> "MaskedNorm":
        """Wrap an existing torch module (its parameters are shared, not copied)."""
        if cls.inner_name is None:
            raise TypeError(f"{cls.__name__} wraps no torch module")
        obj = cls.__new__(cls)
        MaskedNorm.__init__(obj, dim)
        setattr(obj, cls.inner_name, module)
        return obj

    def reset_parameters(self) -> None:
        """Reset the affine parameters (and running statistics) of the wrapped module."""
        inner = self.inner
        if inner is not None and hasattr(inner, "reset_parameters"):
            inner.reset_parameters()

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:  # pragma: no cover
        raise NotImplementedError


class MaskedLayerNorm(MaskedNorm):
    r"""LayerNorm of each token, ``(..., D) -> (..., D)``; padded tokens set to zero.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta

    with mean and (biased) variance over the ``D`` features of one token.
    """

    kind = "layer"
    inner_name = "ln"

    def __init__(
        self,
        dim: int,
        eps: float = 1e-5,
        affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
    ):
        super().__init__(dim)
        self.ln = nn.LayerNorm(dim, eps=eps, elementwise_affine=affine, bias=bias, device=device, dtype=dtype)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        _check_mask(x, mask, type(self).__name__)
        return _zero_padding(self.ln(x), mask)


class MaskedRMSNorm(MaskedNorm):
    r"""RMSNorm of each token, ``(..., D) -> (..., D)``; padded tokens set to zero.

    .. math:: y = \frac{x}{\sqrt{\mathrm{E}[x^2] + \epsilon}} \gamma

    ``eps`` defaults to 1e-5 like the other kinds (``nn.RMSNorm``'s own default is the
    machine epsilon).
    """

    kind = "rms"
    inner_name = "rms"

    def __init__(
        self,
        dim: int,
        eps: Optional[float] = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
    ):
        super().__init__(dim)
        self.rms = nn.RMSNorm(dim, eps=eps, elementwise_affine=affine, device=device, dtype=dtype)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        _check_mask(x, mask, type(self).__name__)
        return _zero_padding(self.rms(x), mask)


class MaskedIdentity(MaskedNorm):
    """No normalization (kind ``"none"``): returns ``x`` with padded tokens set to zero.

    Accepts and ignores ``eps``/``affine`` so that every kind takes the same arguments.
    """

    kind = "none"

    def __init__(
        self,
        dim: int,
        eps: Optional[float] = None,
        affine: bool = True,
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
    ):
        super().__init__(dim)

    def extra_repr(self) -> str:
        return str(self.dim)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        _check_mask(x, mask, type(self).__name__)
        return _zero_padding(x, mask)


class MaskedBatchNorm(MaskedNorm):
    r"""BatchNorm over the real tokens of a batch, ``(..., D) -> (..., D)``.

    .. math:: y = \frac{x - \mu_\mathcal{B}}{\sqrt{\sigma^2_\mathcal{B} + \epsilon}} \gamma + \beta

    where :math:`\mathcal{B}` is the set of real tokens (all leading positions where
    ``mask`` is True): the input is reduced to those ``(N, D)`` vectors, passed through
    ``nn.BatchNorm1d`` (batch statistics and running-statistics update exactly as torch
    does: biased variance to normalize, unbiased variance and ``momentum`` for
    ``running_var``), and scattered back; padded outputs are zeros.

    A single sample in training mode has no variance. ``nn.BatchNorm1d`` raises there;
    here ``single_sample="running"`` (default) normalizes that one vector with the running
    statistics instead (gradients still flow, running statistics are not updated) and
    warns, so that a small last batch does not stop an epoch; ``single_sample="raise"``
    raises a ``ValueError``. With zero real tokens the output is all zeros.

    After ``nn.SyncBatchNorm.convert_sync_batchnorm`` the child ``bn`` is a
    ``SyncBatchNorm`` and is always called (every rank must take part in the reduction,
    whatever its local number of tokens).

    Under gradient checkpointing the forward that backward re-runs normalizes with the
    batch statistics again but leaves the running statistics alone
    (:func:`in_backward_recompute`): they move once per optimisation step.
    """

    kind = "batch"
    per_token = False
    inner_name = "bn"

    def __init__(
        self,
        dim: int,
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        single_sample: str = "running",
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
    ):
        super().__init__(dim)
        if single_sample not in SINGLE_SAMPLE_POLICIES:
            raise ValueError(f"single_sample must be one of {SINGLE_SAMPLE_POLICIES}, got {single_sample!r}")
        self.single_sample = single_sample
        self.bn = nn.BatchNorm1d(
            dim, eps=eps, momentum=momentum, affine=affine, track_running_stats=track_running_stats,
            device=device, dtype=dtype,
        )

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        if x.dim() < 2:
            raise ValueError(f"{type(self).__name__} expects (..., D) input with at least 2 dims, got {tuple(x.shape)}")
        _check_mask(x, mask, type(self).__name__)
        if mask is None:
            return self._normalize(x.reshape(-1, x.shape[-1])).reshape(x.shape)
        out = x.new_zeros(x.shape)
        out[mask] = self._normalize(x[mask])  # (N_real, D) in, scattered back
        return out

    def _normalize(self, v: Tensor) -> Tensor:
        """Batch-normalize ``v`` of shape ``(N, D)``."""
        bn = self.bn
        if isinstance(bn, nn.SyncBatchNorm):
            if not (self.training and bn.running_mean is not None and in_backward_recompute()):
                return bn(v)
            momentum, tracked = bn.momentum, bn.num_batches_tracked.clone()
            try:  # every rank recomputes too, so the reduction still pairs up; no second update
                bn.momentum = 0.0
                return bn(v)
            finally:
                bn.momentum = momentum
                bn.num_batches_tracked.copy_(tracked)
        n = v.shape[0]
        if n == 0:
            return v
        # bn's own mode decides what bn(v) does (recalibration trains bn inside an eval-mode model)
        uses_batch_stats = bn.training or bn.running_mean is None
        if n == 1 and uses_batch_stats:
            if self.single_sample == "raise" or bn.running_mean is None:
                raise ValueError(
                    f"{type(self).__name__}: batch statistics need more than 1 sample per feature, got 1 "
                    f"{'(training mode)' if bn.training else '(no running statistics)'}. Use batches of "
                    "at least 2 real samples (e.g. DataLoader(drop_last=True)), or "
                    "single_sample='running' to normalize a lone sample with the running statistics."
                )
            warnings.warn(
                f"{type(self).__name__}: 1 sample in training mode; normalizing it with the running "
                "statistics (not updated). Use DataLoader(drop_last=True) to avoid batches of one.",
                stacklevel=outside_package_stacklevel(skip_torch=True),
            )
            return F.batch_norm(v, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)
        if self.training and bn.running_mean is not None and in_backward_recompute():
            # the same op as the forward being repeated (checkpointing compares what it saves),
            # with momentum 0: the running statistics stay as the forward left them
            return F.batch_norm(v, bn.running_mean, bn.running_var, bn.weight, bn.bias, True, 0.0, bn.eps)
        return bn(v)


class MaskedBatchRenorm(MaskedBatchNorm):
    r"""Batch Renormalization (Ioffe, "Batch Renormalization: Towards Reducing Minibatch
    Dependence in Batch-Normalized Models", NeurIPS 2017) over the real tokens of a batch.

    In training, after ``warmup`` batches of plain batch norm:

    .. math::
        \hat x = \frac{x - \mu_\mathcal{B}}{\sigma_\mathcal{B}} r + d, \quad
        r = \mathrm{clip}_{[1/r_{max}, r_{max}]}\Big(\frac{\sigma_\mathcal{B}}{\sigma}\Big), \quad
        d = \mathrm{clip}_{[-d_{max}, d_{max}]}\Big(\frac{\mu_\mathcal{B} - \mu}{\sigma}\Big)

    with :math:`\mu, \sigma` the running statistics and no gradient through ``r`` and
    ``d``: within the clip range a sample is normalized by the running statistics, as in
    eval mode, while gradients still see the batch. For batches that are not drawn i.i.d.
    -- size-bucketed batches of molecules, whose graph tokens share their size -- plain
    batch norm removes what the batch has in common in training but not in eval. Eval
    mode is ``nn.BatchNorm1d``'s (running statistics). Shapes and masking as
    :class:`MaskedBatchNorm`.
    """

    kind = "batchrenorm"

    def __init__(self, dim: int, *args: Any, r_max: float = 3.0, d_max: float = 5.0, warmup: int = 100,
                 **kw: Any):
        super().__init__(dim, *args, **kw)
        self.r_max, self.d_max, self.warmup = r_max, d_max, warmup

    def _normalize(self, v: Tensor) -> Tensor:
        bn = self.bn
        recompute = self.training and in_backward_recompute()
        tracked = int(bn.num_batches_tracked) - (1 if recompute else 0)  # as when the forward ran
        if (not self.training or isinstance(bn, nn.SyncBatchNorm) or bn.running_mean is None or v.shape[0] < 2
                or tracked < self.warmup):
            return super()._normalize(v)
        mean = v.mean(0)  # (D,)
        var = v.var(0, unbiased=False)
        std = (var + bn.eps).sqrt()
        n = v.shape[0]
        with torch.no_grad():
            running_mean, running_var = bn.running_mean, bn.running_var
            momentum = bn.momentum if bn.momentum is not None else 1 / float(tracked + 1)
            if recompute and momentum < 1:
                # checkpointing re-runs this forward after it updated the statistics: no second
                # update, and r, d from the statistics before that update (solved back from it)
                running_mean = (running_mean - momentum * mean) / (1 - momentum)
                running_var = (running_var - momentum * var * n / (n - 1)) / (1 - momentum)
            running_std = (running_var + bn.eps).sqrt()
            r = (std / running_std).clamp(1 / self.r_max, self.r_max)
            d = ((mean - running_mean) / running_std).clamp(-self.d_max, self.d_max)
            if not recompute:
                bn.running_mean.lerp_(mean, momentum)
                bn.running_var.lerp_(var * n / (n - 1), momentum)
                bn.num_batches_tracked.add_(1)
        return self._affine((v - mean) / std * r + d)

    def _affine(self, out: Tensor) -> Tensor:
        bn = self.bn
        return out if bn.weight is None else out * bn.weight + bn.bias


_KINDS: dict[str, type[MaskedNorm]] = {
    "batch": MaskedBatchNorm,
    "batchrenorm": MaskedBatchRenorm,
    "layer": MaskedLayerNorm,
    "rms": MaskedRMSNorm,
    "none": MaskedIdentity,
}


def create_norm(kind: str, dim: int, **kw: Any) -> MaskedNorm:
    """Create a token normalization by name; every kind is called as ``forward(x, mask=None)``.

    Args:
        kind: ``"batch"`` (:class:`MaskedBatchNorm`, statistics over the real tokens of the
            batch), ``"layer"`` (:class:`MaskedLayerNorm`), ``"rms"``
            (:class:`MaskedRMSNorm`) or ``"none"`` (:class:`MaskedIdentity`).
        dim: the feature size ``D``.
        **kw: passed to the class: every kind takes ``eps``, ``affine``, ``device``,
            ``dtype``; ``"batch"`` also ``momentum``, ``track_running_stats``,
            ``single_sample``; ``"layer"`` also ``bias``. Others raise ``TypeError``.

    Input ``(..., D)`` such as ``(B, L, D)`` or ``(N, D)``; ``mask`` of shape
    ``x.shape[:-1]``, True for real tokens; padded outputs are zeros.
    """
    try:
        cls = _KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown norm kind {kind!r}; expected one of {NORM_KINDS}") from None
    return cls(dim, **kw)


def _norm_kwargs(kind: str, eps: float, momentum: Optional[float], affine: bool, single_sample: str,
                 device: Any, dtype: Optional[torch.dtype]) -> dict[str, Any]:
    kw: dict[str, Any] = dict(eps=eps, affine=affine, device=device, dtype=dtype)
    if kind in BATCH_KINDS:
        kw.update(momentum=momentum, single_sample=single_sample)
    return kw

