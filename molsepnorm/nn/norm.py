"""Normalization layers for transformers with a [CLS] token: SepNorm and ShareNorm.

Reference: Chen et al., "On Separate Normalization in Self-supervised Transformers",
NeurIPS 2023 (https://arxiv.org/abs/2309.12931).

Every module here is called as ``forward(x, mask=None)``:

* ``x`` is a sequence ``(B, L, D)`` (or, for the token norms of :func:`create_norm`, any
  ``(..., D)``, e.g. flat tokens ``(N, D)``);
* ``mask`` is an optional **boolean mask that is True for real tokens** and False for
  padding, of shape ``x.shape[:-1]`` (``(B, L)`` for a sequence). This is the convention
  of PyTorch Geometric's ``to_dense_batch``; PyTorch's ``src_key_padding_mask`` is the
  opposite (True = padding): pass ``~src_key_padding_mask``.
* Padded positions never enter any statistics (batch statistics, running statistics)
  and come out as exact zeros. They may hold any finite values.

The wrapped torch modules (``nn.BatchNorm1d``, ``nn.LayerNorm``, ``nn.RMSNorm``) are kept
as children named ``bn``, ``ln`` and ``rms``, so state dicts read like torch's own
(``cls_norm.bn.running_mean``, ``token_norm.ln.weight``) and
``nn.SyncBatchNorm.convert_sync_batchnorm`` finds and converts the batch norms.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "NORM_KINDS",
    "LAYOUTS",
    "MaskedNorm",
    "MaskedBatchNorm",
    "MaskedLayerNorm",
    "MaskedRMSNorm",
    "MaskedIdentity",
    "create_norm",
    "SepNorm",
    "ShareNorm",
    "in_backward_recompute",
    "MIN_BATCH_EPS",
]

NORM_KINDS = ("batch", "batchrenorm", "layer", "rms", "none")
LAYOUTS = ("BLD", "LBD")
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
        uses_batch_stats = self.training or bn.running_mean is None
        if n == 1 and uses_batch_stats:
            if self.single_sample == "raise" or bn.running_mean is None:
                raise ValueError(
                    f"{type(self).__name__}: batch statistics need more than 1 sample per feature, got 1 "
                    f"{'(training mode)' if self.training else '(no running statistics)'}. Use batches of "
                    "at least 2 real samples (e.g. DataLoader(drop_last=True)), or "
                    "single_sample='running' to normalize a lone sample with the running statistics."
                )
            warnings.warn(
                f"{type(self).__name__}: 1 sample in training mode; normalizing it with the running "
                "statistics (not updated). Use DataLoader(drop_last=True) to avoid batches of one.",
                stacklevel=3,
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
    if kind in ("batch", "batchrenorm"):
        kw.update(momentum=momentum, single_sample=single_sample)
    return kw


BATCH_KINDS = ("batch", "batchrenorm")
MIN_BATCH_EPS = 1e-5  # nn.BatchNorm1d's default; the floor of a converted [CLS] BatchNorm's eps


class SepNorm(nn.Module):
    r"""Separate normalization of the [CLS] token and the other tokens (Chen et al., 2023).

    For a sequence :math:`x \in \mathbb{R}^{B \times L \times D}` whose token ``cls_index``
    is the [CLS] token (eq. 3 of the paper, with ``cls_norm="batch"``,
    ``token_norm="layer"``):

    .. math::
        y_{b,c} = \frac{x_{b,c} - \mu_c}{\sqrt{\sigma_c^2 + \epsilon}} \gamma_c + \beta_c,
        \quad \mu_c, \sigma^2_c \text{ over the } B \text{ [CLS] vectors (BatchNorm1d)}

        y_{b,i} = \frac{x_{b,i} - \mathrm{E}_d[x_{b,i}]}{\sqrt{\mathrm{Var}_d[x_{b,i}] + \epsilon}}
        \gamma + \beta, \quad i \ne c \text{ (LayerNorm per token)}

    The [CLS] vectors ``(B, D)`` go through ``cls_norm`` and all other tokens through
    ``token_norm``; both are any kind of :func:`create_norm`. In eval mode a batch norm
    uses its running statistics, so an output never depends on its batch-mates.

    Args:
        dim: feature size ``D``.
        cls_norm: kind of the [CLS] norm (default ``"batch"``).
        token_norm: kind of the norm of the other tokens (default ``"layer"``).
        cls_index: position of the [CLS] token along ``L`` (negative counts from the end).
        eps, momentum: as in ``nn.BatchNorm1d`` / ``nn.LayerNorm`` (momentum: batch kinds).
        layout: ``"BLD"`` for ``(B, L, D)`` input, ``"LBD"`` for ``(L, B, D)`` (torch
            transformers with ``batch_first=False``). The mask is ``(B, L)`` in both.
        affine: learnable scale/shift in both norms.
        single_sample: what a batch norm does with one sample in training mode, see
            :class:`MaskedBatchNorm` (``"running"`` or ``"raise"``).
        special_tokens: how many special tokens, from ``cls_index`` on, get a norm of
            their own (each a ``cls_norm`` kind: ``cls_norm`` for the [CLS], then
            ``special_norms[0]``, ...), e.g. 2 for DeiT's [CLS] and distillation tokens.
            Default 1: only the [CLS]; other prefix tokens (registers) are tokens.
        cls_from_mask: with a mask, the [CLS] of each row is its first real token
            (left-padded text: a short row starts with padding), the special tokens the
            ones after it; without a mask, ``cls_index``.

    Shapes: ``x`` ``(B, L, D)`` (or ``(L, B, D)``), ``mask`` ``(B, L)`` boolean, True for
    real tokens, optional; output like ``x``, with exact zeros at padded tokens. A padded
    token enters no statistics. A row whose [CLS] position is masked is left out of the
    [CLS] statistics; a mask that is False at the [CLS] position of every row is rejected
    (it is almost surely a PyTorch key-padding mask, True = padding: pass ``~mask``).
    A 2-D input raises a ``ValueError`` naming the module (``module_name``, set by
    :func:`~molsepnorm.nn.convert.convert_to_sepnorm`).

    Without a ``mask`` argument, a mask set by :func:`~molsepnorm.nn.convert.convert_to_sepnorm`
    from the model's own ``attention_mask`` (``context_mask``, used when its shape is
    ``(B, L)``) applies. Loading the state dict of the LayerNorm this SepNorm replaced
    (``weight``, ``bias``) fills the token norm and the [CLS] norm's affine; a batch
    [CLS] norm then keeps its fresh statistics (mean 0, variance 1) and a warning says so:
    re-estimate them with :func:`~molsepnorm.nn.calibrate.recalibrate_cls_norms`.
    """

    def __init__(
        self,
        dim: int,
        cls_norm: str = "batch",
        token_norm: str = "layer",
        cls_index: int = 0,
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        *,
        layout: str = "BLD",
        affine: bool = True,
        single_sample: str = "running",
        special_tokens: int = 1,
        cls_from_mask: bool = False,
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
    ):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if special_tokens < 1:
            raise ValueError(f"special_tokens must be >= 1 (the [CLS] itself), got {special_tokens}")
        self.dim = dim
        self.cls_index = cls_index
        self.eps = eps  # read by nn.TransformerEncoderLayer's fast-path checks
        self.layout = layout
        self.cls_from_mask = cls_from_mask
        self.module_name: Optional[str] = None
        self.context_mask: Optional[Tensor] = None
        kw = _norm_kwargs(cls_norm, eps, momentum, affine, single_sample, device, dtype)
        self.cls_norm = create_norm(cls_norm, dim, **kw)
        self.special_norms = nn.ModuleList([create_norm(cls_norm, dim, **kw) for _ in range(special_tokens - 1)])
        self.token_norm = create_norm(
            token_norm, dim, **_norm_kwargs(token_norm, eps, momentum, affine, single_sample, device, dtype)
        )
        self.register_load_state_dict_pre_hook(_load_layer_norm_keys)

    @classmethod
    def from_layer_norm(
        cls,
        ln: nn.LayerNorm,
        cls_index: int = 0,
        cls_norm: str = "batch",
        *,
        layout: str = "BLD",
        copy_affine: bool = True,
        momentum: Optional[float] = 0.1,
        single_sample: str = "running",
        special_tokens: int = 1,
        cls_from_mask: bool = False,
    ) -> "SepNorm":
        """A SepNorm whose token norm *is* ``ln`` (same module, parameters and eps).

        The [CLS] norm is new, with ``ln``'s device and dtype and its eps (at least
        ``MIN_BATCH_EPS`` = 1e-5 for a batch kind: Hugging Face's 1e-12 would divide by
        ~1e-6 wherever a [CLS] feature barely varies); with ``copy_affine`` its scale/shift
        start as copies of ``ln``'s (so a trained model keeps its learned affine on the
        [CLS] path; for a fresh ``ln`` they are 1 and 0 anyway).
        """
        if len(ln.normalized_shape) != 1:
            raise ValueError(f"only LayerNorms over one feature dim can be converted, got {ln.normalized_shape}")
        dim = ln.normalized_shape[0]
        ref = next(ln.parameters(), None)
        eps = max(ln.eps, MIN_BATCH_EPS) if cls_norm in BATCH_KINDS else ln.eps
        sep = cls(
            dim, cls_norm=cls_norm, token_norm="layer", cls_index=cls_index, eps=eps, momentum=momentum,
            layout=layout, affine=ln.elementwise_affine, single_sample=single_sample,
            special_tokens=special_tokens, cls_from_mask=cls_from_mask,
            device=None if ref is None else ref.device, dtype=None if ref is None else ref.dtype,
        )
        sep.eps = ln.eps
        sep.token_norm = MaskedLayerNorm.wrap(ln, dim)
        if copy_affine:
            with torch.no_grad():
                for norm in sep.separate_norms():
                    for pname in ("weight", "bias"):
                        src, dst = getattr(ln, pname, None), getattr(norm.inner, pname, None)
                        if src is not None and dst is not None:
                            dst.copy_(src)
        return sep

    @property
    def special_tokens(self) -> int:
        """Special tokens with a norm of their own: the [CLS] and ``special_norms``."""
        return 1 + len(self.special_norms)

    def separate_norms(self) -> list[MaskedNorm]:
        """The norms of the special tokens, in order: ``[cls_norm, *special_norms]``."""
        return [self.cls_norm, *self.special_norms]

    def reset_parameters(self) -> None:
        """Reset both norms (affine parameters, and running statistics of batch kinds)."""
        for norm in self.separate_norms():
            norm.reset_parameters()
        self.token_norm.reset_parameters()

    def extra_repr(self) -> str:
        extra = f", special_tokens={self.special_tokens}" if self.special_tokens > 1 else ""
        extra += ", cls_from_mask=True" if self.cls_from_mask else ""
        return f"{self.dim}, cls_index={self.cls_index}, layout={self.layout!r}{extra}"

    def _label(self) -> str:
        return f"SepNorm {self.module_name!r}" if self.module_name else "SepNorm"

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        """Normalize ``x`` ``(B, L, D)`` (``(L, B, D)`` if ``layout="LBD"``); ``mask`` ``(B, L)``."""
        if x.dim() != 3:
            hint = f"exclude={[self.module_name]!r}" if self.module_name else "exclude=[<its name>]"
            raise ValueError(
                f"{self._label()} expects a token sequence of shape ({', '.join(self.layout)}) with the [CLS] "
                f"token at position {self.cls_index}, got shape {tuple(x.shape)}. A norm applied to pooled "
                f"features is not a SepNorm slot: keep it a LayerNorm with convert_to_sepnorm(model, {hint})."
            )
        seq_dim = 1 if self.layout == "BLD" else 0
        B, L = x.shape[1 - seq_dim], x.shape[seq_dim]
        if mask is None and self.context_mask is not None and tuple(self.context_mask.shape) == (B, L):
            mask = self.context_mask
        c = self.cls_index + L if self.cls_index < 0 else self.cls_index
        S = self.special_tokens
        if not (0 <= c and c + S <= L):
            raise IndexError(f"{self._label()}: cls_index {self.cls_index} (and {S - 1} more special token(s)) "
                             f"out of range for sequence length {L}")
        if mask is not None:
            if mask.dtype != torch.bool or tuple(mask.shape) != (B, L):
                raise ValueError(
                    f"{self._label()}: mask must be a boolean (B, L) = {(B, L)} tensor, True for real tokens; "
                    f"got {mask.dtype} {tuple(mask.shape)}"
                )
            if self.cls_from_mask:
                return self._forward_cls_from_mask(x, mask, seq_dim)
            cls_real = int(mask[:, c].sum())  # one reduction: none real is an error, all real skips a scatter
            if cls_real == 0:
                raise ValueError(
                    f"{self._label()}: mask is False at the [CLS] position for every sequence. The mask is True "
                    "for real tokens; a PyTorch key_padding_mask (True = padding) must be inverted: ~mask."
                )
        mask_x = None if mask is None else (mask if seq_dim == 1 else mask.t())  # like x.shape[:-1]

        if self.token_norm.per_token:
            token_mask = mask_x  # the special outputs are replaced below
        else:  # keep the special tokens out of the token statistics
            token_mask = x.new_ones(x.shape[:-1], dtype=torch.bool) if mask_x is None else mask_x.clone()
            token_mask.narrow(seq_dim, c, S).fill_(False)
        out = self.token_norm(x, token_mask)
        for k, norm in enumerate(self.separate_norms()):
            all_real = mask is None or (cls_real == B if k == 0 else bool(mask[:, c + k].all()))
            special_mask = None if all_real else mask[:, c + k]
            # written over the token norm's output at c + k: one copy forward and backward,
            # where splitting the tokens around it and concatenating costs two
            out = torch.select_scatter(out, norm(x.select(seq_dim, c + k), special_mask), seq_dim, c + k)  # (B, D) in
        return out

    def _forward_cls_from_mask(self, x: Tensor, mask: Tensor, seq_dim: int) -> Tensor:
        """The [CLS] of row b is its first real token (then the other special tokens)."""
        xb = x if seq_dim == 1 else x.transpose(0, 1)  # (B, L, D) view
        B, L = mask.shape
        if not bool(mask.any()):
            raise ValueError(f"{self._label()}: the mask has no real token (True = real token; a PyTorch "
                             "key_padding_mask must be inverted: ~mask)")
        rows = torch.arange(B, device=x.device)
        first = mask.to(torch.int8).argmax(1)  # (B,) first True; 0 for an all-padding row
        beyond = [first + k >= L for k in range(self.special_tokens)]  # a row shorter than the special tokens
        positions = [(first + k).clamp(max=L - 1) for k in range(self.special_tokens)]
        real = [mask[rows, pos] & ~out for pos, out in zip(positions, beyond)]  # (B,) each
        if self.token_norm.per_token:
            token_mask = mask
        else:
            token_mask = mask.clone()
            for pos in positions:
                token_mask[rows, pos] = False
        out = self.token_norm(xb, token_mask).clone()  # (B, L, D), zeros at padding
        for norm, pos, ok, past in zip(self.separate_norms(), positions, real, beyond):
            y = norm(xb[rows, pos], None if bool(ok.all()) else ok)  # (B, D); rows not real -> 0
            keep = ~past  # a clamped position belongs to a token written before
            out[rows[keep], pos[keep]] = y[keep]
        return out if seq_dim == 1 else out.transpose(0, 1)


def _load_layer_norm_keys(module: SepNorm, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                          missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
    """load_state_dict pre-hook: the replaced LayerNorm's ``weight``/``bias`` fill a SepNorm.

    They become the token norm's (its ``ln``) and, where absent, the special norms'
    affine; a batch special norm whose statistics are absent keeps its own (fresh ones
    after a conversion) and a warning says to re-estimate them.
    """
    found = {k: state_dict.pop(prefix + k) for k in ("weight", "bias") if prefix + k in state_dict}
    if not found:
        return
    token_inner = module.token_norm.inner_name
    fresh = False
    for k, value in found.items():
        if token_inner:
            state_dict.setdefault(f"{prefix}token_norm.{token_inner}.{k}", value)
    for i, norm in enumerate(module.separate_norms()):
        inner = norm.inner
        if inner is None:
            continue
        key = f"{prefix}cls_norm.{norm.inner_name}." if i == 0 else f"{prefix}special_norms.{i - 1}.{norm.inner_name}."
        for k, value in found.items():
            if getattr(inner, k, None) is not None and key + k not in state_dict:
                state_dict[key + k] = value.clone()
        for name, buf in inner.named_buffers(recurse=False):
            if key + name not in state_dict:
                state_dict[key + name] = buf.detach().clone()
                fresh = True
    if fresh:
        warnings.warn(
            f"{module._label()}: loaded from a LayerNorm's weights; its [CLS] norm's running statistics are "
            "not in that state dict and stay as they were (fresh: mean 0, variance 1). Re-estimate them on a "
            "few batches with molsepnorm.nn.recalibrate_cls_norms(model, batches) before evaluating.",
            stacklevel=2,
        )


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
