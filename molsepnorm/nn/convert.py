"""Turn an existing transformer's LayerNorms into SepNorms (Chen et al., NeurIPS 2023).

``convert_to_sepnorm(model)`` replaces, in place, every ``nn.LayerNorm`` of a ViT- or
BERT-style encoder (``nn.TransformerEncoder`` / ``nn.TransformerEncoderLayer`` included)
by a :class:`~molsepnorm.nn.norm.SepNorm` whose token norm *is* the original LayerNorm
(same module, so weight, bias, eps and any optimizer reference are kept) and whose [CLS]
norm is new (a BatchNorm1d by default).

Things to know:

* **Layout.** Torch's transformer layers call ``self.norm1(x)`` with one argument, on
  ``(L, B, D)`` when ``batch_first=False``. The layout of a norm owned by an
  ``nn.TransformerEncoderLayer``/``DecoderLayer`` (or the final ``norm`` of an
  ``nn.TransformerEncoder``/``Decoder``) is read from ``self_attn.batch_first``;
  elsewhere ``default_layout`` (``"BLD"``) is used.
* **Fast paths.** In eval mode without grad, ``nn.TransformerEncoderLayer`` may run a
  fused kernel that reads ``norm1.weight``/``eps`` and computes a plain LayerNorm,
  bypassing the module. A converted norm inside such a layer gets a no-op forward
  pre-hook, which makes torch take the ordinary path, and every ``nn.TransformerEncoder``
  holding a SepNorm gets ``use_nested_tensor = False`` (its nested-tensor path would
  hand the norms a nested tensor).
* **Non-sequence norms.** A LayerNorm applied to pooled ``(B, D)`` features has no [CLS]
  token: list it in ``exclude`` (names or ``fnmatch`` patterns). If one is converted by
  mistake, its SepNorm raises a ``ValueError`` naming it on the first 2-D input.
* A model rebuilt from code must be converted again before ``load_state_dict``.
"""
from __future__ import annotations

import fnmatch
import logging
import warnings
from typing import Iterable, Literal, Optional, Union, overload

from torch import nn

from molsepnorm.nn.norm import LAYOUTS, MaskedNorm, SepNorm

__all__ = ["convert_to_sepnorm", "find_convertible_norms"]

logger = logging.getLogger(__name__)

_TORCH_LAYERS = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)
_TORCH_STACKS = (nn.TransformerEncoder, nn.TransformerDecoder)


def _keep_transformer_slow_path(module: nn.Module, args: tuple) -> None:
    """No-op forward pre-hook: its presence disables nn.TransformerEncoderLayer's fused fast path."""
    return None


def _split(name: str) -> tuple[str, str]:
    parent, _, child = name.rpartition(".")
    return parent, child


def _excluded(name: str, patterns: list[str]) -> Optional[str]:
    return next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)


def _candidates(model: nn.Module) -> list[tuple[str, nn.LayerNorm]]:
    """(qualified name, module) of every LayerNorm not already inside a molsepnorm norm.

    A module registered under several names appears once per name.
    """
    modules = dict(model.named_modules(remove_duplicate=False))
    found = []
    for name, module in model.named_modules(remove_duplicate=False):
        if not isinstance(module, nn.LayerNorm) or not name:
            continue
        if isinstance(modules[_split(name)[0]], MaskedNorm):
            continue
        found.append((name, module))
    return found


def find_convertible_norms(model: nn.Module, exclude: Iterable[str] = ()) -> list[str]:
    """Qualified names of the LayerNorms ``convert_to_sepnorm(model, exclude=...)`` would replace.

    A dry run: the model is not changed.
    """
    patterns = list(exclude)
    return [name for name, ln in _candidates(model)
            if _excluded(name, patterns) is None and len(ln.normalized_shape) == 1]


def _detect_layout(parent: nn.Module, child: str, default: str) -> str:
    if isinstance(parent, _TORCH_LAYERS):
        return "BLD" if parent.self_attn.batch_first else "LBD"
    if isinstance(parent, _TORCH_STACKS) and child == "norm" and len(parent.layers) > 0:
        first = parent.layers[0]
        if hasattr(first, "self_attn"):
            return "BLD" if first.self_attn.batch_first else "LBD"
    return default


@overload
def convert_to_sepnorm(model: nn.Module, cls_index: int = ..., cls_norm: str = ..., verbose: bool = ..., *,
                       exclude: Iterable[str] = ..., default_layout: str = ..., copy_affine: bool = ...,
                       return_names: Literal[False] = ...) -> nn.Module: ...


@overload
def convert_to_sepnorm(model: nn.Module, cls_index: int = ..., cls_norm: str = ..., verbose: bool = ..., *,
                       exclude: Iterable[str] = ..., default_layout: str = ..., copy_affine: bool = ...,
                       return_names: Literal[True]) -> tuple[nn.Module, list[str]]: ...


def convert_to_sepnorm(
    model: nn.Module,
    cls_index: int = 0,
    cls_norm: str = "batch",
    verbose: bool = True,
    *,
    exclude: Iterable[str] = (),
    default_layout: str = "BLD",
    copy_affine: bool = True,
    return_names: bool = False,
) -> Union[nn.Module, tuple[nn.Module, list[str]]]:
    """Replace every ``nn.LayerNorm`` of ``model`` by a :class:`SepNorm`, in place.

    Each SepNorm normalizes the [CLS] token (position ``cls_index`` of ``(B, L, D)``)
    with a new ``cls_norm`` (``"batch"``: BatchNorm1d over the batch, Chen et al. 2023,
    eq. 3) and the other tokens with the original LayerNorm module itself.

    Args:
        model: the transformer; changed in place. (If ``model`` itself is an
            ``nn.LayerNorm``, the new SepNorm is returned instead.)
        cls_index: position of the [CLS] token in the sequence.
        cls_norm: kind of the new [CLS] norm (see :func:`~molsepnorm.nn.norm.create_norm`).
        verbose: log each replaced and skipped module at INFO level (logger
            ``molsepnorm.nn.convert``).
        exclude: qualified module names or ``fnmatch`` patterns (``"head.*"``) of
            LayerNorms to keep, e.g. norms of pooled ``(B, D)`` features. A pattern that
            matches nothing triggers a warning.
        default_layout: ``"BLD"`` or ``"LBD"``, for norms outside torch's transformer
            modules (whose layout is detected from ``batch_first``).
        copy_affine: start the [CLS] norm's scale/shift as copies of the LayerNorm's.
        return_names: also return the list of replaced qualified names.

    Returns:
        ``model``, or ``(model, names)`` with ``return_names=True``. LayerNorms over more
        than one dimension are skipped with a warning; if nothing was replaced, a warning
        says so (e.g. on a second call, which is a no-op).
    """
    if default_layout not in LAYOUTS:
        raise ValueError(f"default_layout must be one of {LAYOUTS}, got {default_layout!r}")
    patterns = list(exclude)
    unused = set(patterns)
    log = logger.info if verbose else logger.debug

    if isinstance(model, nn.LayerNorm):
        sep = SepNorm.from_layer_norm(model, cls_index, cls_norm, layout=default_layout, copy_affine=copy_affine)
        log("convert_to_sepnorm: replaced the root LayerNorm")
        return (sep, [""]) if return_names else sep

    modules = dict(model.named_modules(remove_duplicate=False))
    replaced: dict[int, SepNorm] = {}  # id(LayerNorm) -> its SepNorm, for modules registered twice
    names: list[str] = []
    for name, ln in _candidates(model):
        pattern = _excluded(name, patterns)
        if pattern is not None:
            unused.discard(pattern)
            log("convert_to_sepnorm: kept %s (excluded by %r)", name, pattern)
            continue
        if len(ln.normalized_shape) != 1:
            warnings.warn(f"convert_to_sepnorm: kept {name}: normalized_shape {tuple(ln.normalized_shape)} is not (D,)")
            continue
        parent_name, child = _split(name)
        parent = modules[parent_name]
        sep = replaced.get(id(ln))
        if sep is None:
            layout = _detect_layout(parent, child, default_layout)
            sep = SepNorm.from_layer_norm(ln, cls_index, cls_norm, layout=layout, copy_affine=copy_affine)
            sep.module_name = name
            replaced[id(ln)] = sep
        if isinstance(parent, _TORCH_LAYERS) and not sep._forward_pre_hooks:
            sep.register_forward_pre_hook(_keep_transformer_slow_path)
        setattr(parent, child, sep)
        names.append(name)
        log("convert_to_sepnorm: %s: LayerNorm(%d, eps=%g) -> SepNorm(cls=%s, cls_index=%d, layout=%s)",
            name, sep.dim, ln.eps, cls_norm, cls_index, sep.layout)

    for module in model.modules():
        if isinstance(module, nn.TransformerEncoder) and any(isinstance(m, SepNorm) for m in module.modules()):
            module.use_nested_tensor = False

    for pattern in sorted(unused):
        warnings.warn(f"convert_to_sepnorm: exclude pattern {pattern!r} matched no LayerNorm")
    if not names:
        warnings.warn("convert_to_sepnorm: no nn.LayerNorm was replaced")
    else:
        log("convert_to_sepnorm: replaced %d LayerNorm(s) with SepNorm", len(names))
    return (model, names) if return_names else model
