"""SepNorm: the [CLS] token (and any other special token) normalized apart from the others.

Chen et al., "On Separate Normalization in Self-supervised Transformers", NeurIPS 2023
(https://arxiv.org/abs/2309.12931), eq. 3.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
from torch import Tensor, nn

from molsepnorm._stacklevel import outside_package_stacklevel
from molsepnorm.nn.norm.masked import (
    BATCH_KINDS, MaskedBatchNorm, MaskedLayerNorm, MaskedNorm, _norm_kwargs, create_norm,
)

LAYOUTS = ("BLD", "LBD")
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
    ``token_norm``; both are any kind of :func:`~molsepnorm.nn.norm.masked.create_norm`. In eval mode a batch norm
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
            :class:`~molsepnorm.nn.norm.masked.MaskedBatchNorm` (``"running"`` or ``"raise"``).
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
    re-estimate them with :func:`~molsepnorm.nn.calibrate.recalibrate_cls_norms`. A
    SepNorm made by that conversion whose first forward is in eval mode, with statistics
    neither trained, recalibrated nor loaded, warns likewise (once).
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
        # set by from_layer_norm (a conversion): the special batch norms' statistics describe nothing yet
        self.fresh_statistics = False
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
        [CLS] path; for a fresh ``ln`` they are 1 and 0 anyway). A LayerNorm without bias
        (``bias=False``) still gives a [CLS] norm a bias, starting at 0: ``nn.BatchNorm1d``
        has no bias-free form.
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
        sep.fresh_statistics = True  # its special batch norms are new: warns at an eval forward before any estimate
        return sep

    def __getstate__(self) -> dict:
        # the last forward's padding mask (kept for checkpointing's recomputation) is not state:
        # a pickled or copied model must not carry a batch's tensor
        return {**super().__getstate__(), "context_mask": None}

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

    def batch_norms(self) -> list[nn.modules.batchnorm._BatchNorm]:
        """The torch BatchNorms of the special tokens that keep running statistics."""
        return [n.bn for n in self.separate_norms() if isinstance(n, MaskedBatchNorm) and n.bn.track_running_stats]

    def _check_fresh_statistics(self) -> None:
        """On the first forward after a conversion: warn if it normalizes with fresh statistics.

        A forward whose batch norm trains (training, or :func:`recalibrate_cls_norms`)
        estimates them; an eval-mode one uses mean 0 and variance 1, which for a pretrained
        model's [CLS] are far from its real statistics (docs/sepnorm-vision.md).
        """
        self.fresh_statistics = False
        norms = self.batch_norms()
        if norms and not any(bn.training for bn in norms):
            warnings.warn(
                "convert_to_sepnorm: evaluating a converted model whose [CLS] BatchNorms have fresh running "
                "statistics (mean 0, variance 1), neither trained nor estimated: its [CLS] outputs are not the "
                "model's. Call molsepnorm.nn.recalibrate_cls_norms(model, batches) on a few batches first "
                "(or train, or load a state dict that holds them).",
                stacklevel=outside_package_stacklevel(outermost_module=True),  # once per model call
            )

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        """Normalize ``x`` ``(B, L, D)`` (``(L, B, D)`` if ``layout="LBD"``); ``mask`` ``(B, L)``."""
        if x.dim() != 3:
            hint = (f" A norm applied to pooled features is not a SepNorm slot: keep it a LayerNorm with "
                    f"convert_to_sepnorm(model, exclude={[self.module_name]!r})." if self.module_name and x.dim() == 2
                    else "")  # a converted norm meeting (B, D): the conversion's mistake; else the caller's input
            raise ValueError(
                f"{self._label()} expects a token sequence of shape ({', '.join(self.layout)}) with the [CLS] "
                f"token at position {self.cls_index}, got shape {tuple(x.shape)}.{hint}"
            )
        if getattr(self, "fresh_statistics", False):  # modules pickled before it existed lack it
            self._check_fresh_statistics()
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
    converted = any(k.startswith(prefix + part) for k in state_dict
                    for part in ("token_norm.", "cls_norm.", "special_norms."))
    if any(k.startswith(prefix) and k.endswith(".num_batches_tracked") and int(v) > 0 for k, v in state_dict.items()):
        module.fresh_statistics = False  # estimated statistics loaded (a save made before any estimate has none)
    # a LayerNorm without affine (elementwise_affine=False) saved nothing: its absence is its state dict
    if converted or not (found or next(module.token_norm.parameters(), None) is None):
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
        for name, param in inner.named_parameters(recurse=False):
            if key + name not in state_dict:  # the LayerNorm's own, or (bias=False) the [CLS] norm's current one
                source = found.get(name)
                state_dict[key + name] = (param if source is None else source).detach().clone()
        for name, buf in inner.named_buffers(recurse=False):
            if key + name not in state_dict:
                state_dict[key + name] = buf.detach().clone()
                fresh = fresh or name == "running_var"
    if fresh:
        module.fresh_statistics = False  # this warning says it; the first eval forward need not
        warnings.warn(
            f"{module._label()}: loaded from a LayerNorm's weights; its [CLS] norm's running statistics are "
            "not in that state dict and stay as they were (fresh: mean 0, variance 1). Re-estimate them on a "
            "few batches with molsepnorm.nn.recalibrate_cls_norms(model, batches) before evaluating.",
            stacklevel=outside_package_stacklevel(skip_torch=True),
        )


