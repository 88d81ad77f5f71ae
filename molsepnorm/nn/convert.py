"""Turn an existing transformer's LayerNorms into SepNorms (Chen et al., NeurIPS 2023).

``convert_to_sepnorm(model)`` replaces, in place, the ``nn.LayerNorm``s of a ViT- or
BERT-style encoder that normalize its token sequence by :class:`~molsepnorm.nn.norm.SepNorm`s
whose token norm *is* the original LayerNorm (same module, so weight, bias, eps and any
optimizer reference are kept) and whose [CLS] norm is new (a BatchNorm1d by default).

How it decides (:func:`plan_sepnorm`):

1. **Is there a [CLS]?** Read from the model (:func:`~molsepnorm.nn.token_layout.read_token_layout`):
   timm's ``cls_token`` / ``num_prefix_tokens`` / ``global_pool``, Hugging Face's
   ``config.model_type``. A model without one (timm GAP or register-only models, GPT-2,
   CLIP's text tower, ...) is refused with the reason; one whose head reads something
   else than the [CLS] is converted with a warning.
2. **Which norms see the token sequence?** A dry run of the model on an example input
   (built for timm and Hugging Face models, or ``example_input=``) records what each
   LayerNorm receives. Only norms fed ``(B, L, D)`` (or ``(L, B, D)``) with the model's
   sequence length are converted; norms of pooled features ``(B, D)``, of attention
   heads ``(B, H, L, d)`` (``qk_norm``) or of another sequence (a MAP head's latent
   query) are kept. A decoder's norms (``nn.TransformerDecoder``) are always kept.
3. **No degenerate slot.** Where the [CLS] input of a norm is the same for every example
   of the dry run (the first slot, before any attention mixes tokens: BERT's
   ``embeddings.LayerNorm``, ViT's first ``norm1``), a BatchNorm would see zero variance,
   drop the [CLS] content in training and divide by ~sqrt(eps) in eval. That slot's [CLS]
   gets a LayerNorm of its own instead (``constant_cls_norm``). The [CLS] BatchNorm's eps
   is at least 1e-5.

Without a dry run (a plain module and no ``example_input``) every LayerNorm over one
feature dim is converted, as the caller asked; the layout of a norm owned by torch's
transformer layers is read from ``batch_first``, elsewhere ``default_layout`` is used.

Other things to know:

* **Special tokens.** ``special_tokens="cls"`` (default) gives the [CLS] its own norm and
  treats other prefix tokens (DeiT's distillation token, registers) as tokens;
  ``"separate"`` gives each prefix token a norm of its own.
* **Padding.** For Hugging Face text models the model's ``attention_mask`` reaches every
  SepNorm (forward pre-hooks on the model and its base model), and each row's [CLS] is
  its first real token, so left padding works.
* **Fast paths.** A converted norm inside an ``nn.TransformerEncoderLayer`` gets a no-op
  forward pre-hook, which keeps torch off its fused kernel (which would bypass the
  module); an ``nn.TransformerEncoder`` holding a SepNorm gets ``use_nested_tensor = False``.
* **Saving.** The decisions are a plan (:class:`SepNormPlan`, plain data). For a Hugging
  Face model it is stored in ``model.config.sepnorm``, so
  :func:`~molsepnorm.nn.hf.load_sepnorm_pretrained` rebuilds the converted model from a
  ``save_pretrained`` folder; any model can be converted again with ``plan=``.
* **Pretrained weights.** A LayerNorm's ``weight``/``bias`` load into the SepNorm that
  replaced it (``load_state_dict`` of an unconverted checkpoint works); the [CLS]
  BatchNorm's statistics are then fresh: call
  :func:`~molsepnorm.nn.calibrate.recalibrate_cls_norms` on a few batches. So are they right
  after a conversion: an eval-mode forward before any training, recalibration or loaded
  statistics warns (once per line that called the model).
"""
from __future__ import annotations

import collections
import fnmatch
import functools
import inspect
import logging
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Literal, Optional, Union, overload

import torch
from torch import Tensor, nn

from molsepnorm.nn.norm import LAYOUTS, NORM_KINDS, MaskedNorm, SepNorm
from molsepnorm.nn.token_layout import TokenLayout, call_model, example_input as build_example_input, read_token_layout

__all__ = ["convert_to_sepnorm", "find_convertible_norms", "plan_sepnorm", "SepNormPlan", "SPECIAL_TOKENS"]

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("cls", "separate")
PLAN_FORMAT = 1

_TORCH_LAYERS = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)
_TORCH_STACKS = (nn.TransformerEncoder, nn.TransformerDecoder)


@dataclass
class SepNormPlan:
    """What :func:`convert_to_sepnorm` replaces and how; plain data (JSON-safe via :meth:`to_dict`).

    Attributes:
        cls_index: position of the [CLS] token.
        special_tokens: special tokens from ``cls_index`` on with a norm of their own.
        cls_from_mask: each row's [CLS] is its first real token (from the padding mask).
        slots: qualified LayerNorm name -> ``{"layout": "BLD"|"LBD", "cls_norm": kind}``.
        kept: qualified LayerNorm name -> why it stays a LayerNorm.
        source: where the token layout was read (``timm``, ``transformers:bert``, ...).
        mask_argument: the forward argument whose padding mask reaches the SepNorms.
    """

    cls_index: int = 0
    special_tokens: int = 1
    cls_from_mask: bool = False
    slots: dict[str, dict[str, str]] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    source: str = "module"
    mask_argument: Optional[str] = None

    @property
    def names(self) -> list[str]:
        """The LayerNorms that become SepNorms, in module order."""
        return list(self.slots)

    def to_dict(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "SepNormPlan":
        if raw.get("format") != PLAN_FORMAT:
            raise ValueError(f"SepNorm plan format {raw.get('format')!r} is not {PLAN_FORMAT}")
        fields = {k: v for k, v in raw.items() if k != "format"}
        return cls(**fields)


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
        if isinstance(modules[_split(name)[0]], (MaskedNorm, SepNorm)):
            continue
        found.append((name, module))
    return found


def _torch_layout(parent: nn.Module, child: str) -> Optional[str]:
    """The layout of a norm owned by torch's transformer modules, read from ``batch_first``."""
    if isinstance(parent, _TORCH_LAYERS):
        return "BLD" if parent.self_attn.batch_first else "LBD"
    if isinstance(parent, _TORCH_STACKS) and child == "norm" and len(parent.layers) > 0:
        first = parent.layers[0]
        if hasattr(first, "self_attn"):
            return "BLD" if first.self_attn.batch_first else "LBD"
    return None


def _in_decoder(parent: nn.Module, child: str) -> bool:
    return isinstance(parent, nn.TransformerDecoderLayer) or (isinstance(parent, nn.TransformerDecoder)
                                                              and child == "norm")


@dataclass
class _Seen:
    """What one LayerNorm received in the dry run (one entry per call)."""

    shapes: list[tuple[int, ...]] = field(default_factory=list)
    constant: list[dict[str, bool]] = field(default_factory=list)  # layout -> [CLS] rows identical


def _rows_identical(v: Tensor) -> bool:
    """``v`` (B, D): are all rows the same vector, bit for bit?

    A [CLS] that no attention has reached yet is computed by the same operations from the
    same parameters in every row, so its rows are equal exactly.  A tolerance would also
    take the slots after a residual branch that starts near zero (LayerScale at 1e-6:
    rows differing by ~3e-7 of their size) for constant ones, and leave such a model
    without a single [CLS] BatchNorm."""
    if v.shape[0] < 2:
        return False
    return bool((v == v[:1]).all())


def _dry_run(model: nn.Module, modules: dict[int, nn.LayerNorm], example: Any, cls_index: int) -> dict[int, _Seen]:
    """Run ``model`` once in eval mode without grad; record each norm's inputs."""
    seen: dict[int, _Seen] = collections.defaultdict(_Seen)

    def record(module: nn.Module, args: tuple) -> None:
        x = args[0] if args else None
        if not isinstance(x, Tensor):
            return
        entry = seen[id(module)]
        entry.shapes.append(tuple(x.shape))
        const = {}
        if x.dim() == 3:
            for layout, seq_dim in (("BLD", 1), ("LBD", 0)):
                L = x.shape[seq_dim]
                c = cls_index + L if cls_index < 0 else cls_index
                const[layout] = 0 <= c < L and _rows_identical(x.select(seq_dim, c))  # (B, D)
        entry.constant.append(const)

    handles = [m.register_forward_pre_hook(record) for m in modules.values()]
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        with torch.no_grad():
            call_model(model, example)
    except Exception as exc:
        raise RuntimeError(f"convert_to_sepnorm: the dry run of the model on its example input failed "
                           f"({type(exc).__name__}: {exc}); pass a working example_input=") from exc
    finally:
        for h in handles:
            h.remove()
        for m, mode in modes.items():
            m.training = mode
    return seen


def _batch_size_of(example: Any) -> Optional[int]:
    if isinstance(example, Tensor):
        return example.shape[0] if example.dim() else None
    values = example.values() if isinstance(example, Mapping) else example if isinstance(example, (tuple, list)) else ()
    for v in values:
        if isinstance(v, Tensor) and v.dim():
            return v.shape[0]
    return None


def _to_model(example: Any, model: nn.Module) -> Any:
    """The example on the model's device, floating tensors in its dtype."""
    ref = next(model.parameters(), None)
    if ref is None:
        return example

    def move(v: Any) -> Any:
        if isinstance(v, Tensor):
            return v.to(ref.device, ref.dtype) if v.is_floating_point() else v.to(ref.device)
        return v

    if isinstance(example, Mapping):  # a dict, a tokenizer's BatchEncoding
        return {k: move(v) for k, v in example.items()}
    if isinstance(example, (tuple, list)):
        return type(example)(move(v) for v in example)
    return move(example)


def _special_count(special_tokens: Union[str, int], layout: TokenLayout) -> int:
    if isinstance(special_tokens, int) and not isinstance(special_tokens, bool):
        if special_tokens < 1:
            raise ValueError(f"special_tokens must be >= 1, got {special_tokens}")
        return special_tokens
    if special_tokens == "cls":
        return 1
    if special_tokens == "separate":
        return max(1, layout.prefix_tokens)
    raise ValueError(f"special_tokens must be one of {SPECIAL_TOKENS} or a count, got {special_tokens!r}")


def plan_sepnorm(
    model: nn.Module,
    cls_index: Optional[int] = None,
    cls_norm: str = "batch",
    *,
    exclude: Iterable[str] = (),
    default_layout: str = "BLD",
    example_input: Any = None,
    batch_size: Optional[int] = None,
    special_tokens: Union[str, int] = "cls",
    constant_cls_norm: Optional[str] = "layer",
) -> SepNormPlan:
    """Decide which LayerNorms of ``model`` become SepNorms, and how; changes nothing.

    Arguments as :func:`convert_to_sepnorm`. Raises ``ValueError`` for a model without a
    [CLS] token. The plan's ``kept`` says why each other LayerNorm stays.
    """
    if default_layout not in LAYOUTS:
        raise ValueError(f"default_layout must be one of {LAYOUTS}, got {default_layout!r}")
    for arg, kind in (("cls_norm", cls_norm), ("constant_cls_norm", constant_cls_norm)):
        if kind is not None and kind not in NORM_KINDS:
            raise ValueError(f"{arg} must be one of {NORM_KINDS}, got {kind!r}")
    layout = read_token_layout(model, cls_index)
    if layout.cls_index is None:
        raise ValueError(f"convert_to_sepnorm: refused: {layout.reason}. SepNorm normalizes a [CLS] token "
                         "separately from the other tokens; a model without one has nothing to separate.")
    for message in layout.warnings:
        warnings.warn(f"convert_to_sepnorm: {message}", stacklevel=3)
    c = layout.cls_index
    plan = SepNormPlan(cls_index=c, special_tokens=_special_count(special_tokens, layout), source=layout.source,
                       mask_argument=layout.mask_argument,
                       cls_from_mask=layout.mask_argument is not None and c == 0)  # left padding moves a first [CLS]

    patterns = list(exclude)
    unused = set(patterns)
    modules = dict(model.named_modules(remove_duplicate=False))
    candidates = []
    for name, ln in _candidates(model):
        pattern = _excluded(name, patterns)
        parent, child = modules[_split(name)[0]], _split(name)[1]
        if pattern is not None:
            unused.discard(pattern)
            plan.kept[name] = f"excluded by {pattern!r}"
        elif len(ln.normalized_shape) != 1:
            plan.kept[name] = f"normalized_shape {tuple(ln.normalized_shape)} is not (D,)"
        elif _in_decoder(parent, child):
            plan.kept[name] = "a decoder norm: a decoder's sequence has no [CLS]"
        else:
            candidates.append((name, ln, _torch_layout(parent, child)))
    for pattern in sorted(unused):
        warnings.warn(f"convert_to_sepnorm: exclude pattern {pattern!r} matched no LayerNorm", stacklevel=3)

    example = example_input if example_input is not None else build_example_input(model)
    if example is None:  # no dry run: convert what the caller pointed at, as asked
        lbd_stack = any(_torch_layout(m, "norm") == "LBD" for m in model.modules() if isinstance(m, _TORCH_STACKS))
        outside = [name for name, _, fixed in candidates if fixed is None]
        if lbd_stack and outside and default_layout == "BLD":
            warnings.warn(
                f"convert_to_sepnorm: {outside} sit outside torch's transformer layers, whose layout here is "
                "(L, B, D); they are taken as (B, L, D) (default_layout). Pass example_input= (a dry run finds "
                "each norm's layout) or default_layout='LBD'.", stacklevel=3)
        for name, ln, fixed in candidates:
            plan.slots[name] = {"layout": fixed or default_layout, "cls_norm": cls_norm}
        return plan

    example = _to_model(example, model)
    B = batch_size or _batch_size_of(example)
    if not B or B < 2:
        raise ValueError("convert_to_sepnorm: the example input needs a batch of at least 2 (batch_size=), "
                         "to tell the batch axis and a batch-constant [CLS] apart")
    unique = {id(ln): ln for _, ln, _ in candidates}
    seen = _dry_run(model, unique, example, c)
    sequence: dict[str, tuple[str, int, bool]] = {}
    for name, ln, fixed in candidates:
        entry = seen.get(id(ln))
        if entry is None or not entry.shapes:
            plan.kept[name] = "not called by the example forward"
            continue
        bad = next((s for s in entry.shapes if len(s) != 3), None)
        if bad is not None:
            plan.kept[name] = f"sees {bad}, not a token sequence (B, L, D)"
            continue
        if fixed is None and any(s[0] == s[1] == B for s in entry.shapes):
            raise ValueError(f"convert_to_sepnorm: {name} sees {entry.shapes[0]}: both leading axes have the batch "
                             f"size {B}, so (B, L, D) and (L, B, D) cannot be told apart. Pass an example_input "
                             "whose sequence length differs from its batch size.")
        layouts = set()
        for s in entry.shapes:
            layouts.add(fixed or ("BLD" if s[0] == B else "LBD" if s[1] == B else "?"))
        if len(layouts) != 1 or "?" in layouts:
            plan.kept[name] = f"no batch axis of size {B} in {entry.shapes}"
            continue
        lay = layouts.pop()
        if len(entry.shapes) > 1 and cls_norm in ("batch", "batchrenorm"):
            plan.kept[name] = (f"called {len(entry.shapes)} times per forward (shared across depths, as in ALBERT): "
                               "one [CLS] BatchNorm would mix the statistics of every depth")
            continue
        lengths = {s[1] if lay == "BLD" else s[0] for s in entry.shapes}
        if len(lengths) != 1:
            plan.kept[name] = f"sequences of several lengths {sorted(lengths)}"
            continue
        sequence[name] = (lay, lengths.pop(), all(k.get(lay, False) for k in entry.constant))
    if sequence:
        main_length = collections.Counter(L for _, L, _ in sequence.values()).most_common(1)[0][0]
        for name, (lay, L, constant) in sequence.items():
            if L != main_length:
                plan.kept[name] = f"sees {L} token(s), not the model's sequence of {main_length}"
                continue
            kind = constant_cls_norm if constant and constant_cls_norm is not None else cls_norm
            if constant and constant_cls_norm is None and cls_norm in ("batch", "batchrenorm"):
                warnings.warn(f"convert_to_sepnorm: {name}: its [CLS] input is the same for every example "
                              "(before any attention); a BatchNorm there sees no variance (constant_cls_norm=None "
                              "keeps it anyway)", stacklevel=3)
            plan.slots[name] = {"layout": lay, "cls_norm": kind}
    return plan


def find_convertible_norms(model: nn.Module, exclude: Iterable[str] = (), **kw: Any) -> list[str]:
    """Qualified names of the LayerNorms ``convert_to_sepnorm(model, exclude=..., **kw)`` would replace.

    A dry run: the model is not changed (the same decisions as :func:`plan_sepnorm`).
    """
    return plan_sepnorm(model, exclude=exclude, **kw).names


def _set_context_mask(argument: str, module: nn.Module, args: tuple, kwargs: dict) -> None:
    """Forward pre-hook: hand ``module``'s padding-mask argument to each of its SepNorms.

    Module-level (with ``functools.partial``) so that a deep copy (an EMA teacher, a
    replica) sets the masks of its own SepNorms, and a pickled model keeps its hook.
    """
    mask = kwargs.get(argument)
    if mask is None and args:
        try:
            mask = inspect.signature(module.forward).bind_partial(*args, **kwargs).arguments.get(argument)
        except TypeError:
            mask = None
    real = mask != 0 if isinstance(mask, Tensor) and mask.dim() == 2 else None  # HF: 1 real, 0 padding
    for sep in module.modules():
        if isinstance(sep, SepNorm):
            sep.context_mask = real


def _clear_context_mask_without_grad(module: nn.Module, args: tuple, output: Any) -> None:
    """Forward hook: after a forward without autograd, no recomputation will need the mask."""
    if not torch.is_grad_enabled():
        for sep in module.modules():
            if isinstance(sep, SepNorm):
                sep.context_mask = None


def _attach_mask_hook(model: nn.Module, argument: str) -> None:
    """Pass ``model``'s padding mask argument to each of its SepNorms on every forward.

    The hooks sit on the model and on a Hugging Face model's base model (``model.bert``),
    which takes the same ``attention_mask``: a call to the base model alone sets its own
    mask rather than reuse the last call's.  With autograd the mask stays set until the
    next forward, so that gradient checkpointing's recomputation in backward sees the
    mask of the forward it repeats (two forwards of one model before one backward, with
    checkpointing and different padding, would recompute the first with the second's
    mask); without it (inference) it is cleared when the forward ends.
    """
    base = getattr(model, "base_model", None)
    for target in (model, base) if isinstance(base, nn.Module) and base is not model else (model,):
        for hooks in (target._forward_pre_hooks, target._forward_hooks):
            for handle_id, hook in list(hooks.items()):
                if (hook is _clear_context_mask_without_grad
                        or isinstance(hook, functools.partial) and hook.func is _set_context_mask):
                    del hooks[handle_id]
                    target._forward_pre_hooks_with_kwargs.pop(handle_id, None)
        target.register_forward_pre_hook(functools.partial(_set_context_mask, argument), with_kwargs=True)
        target.register_forward_hook(_clear_context_mask_without_grad)


def _merged(earlier: Optional[dict], plan: SepNormPlan) -> SepNormPlan:
    """``plan`` with the slots of an earlier conversion of the same model (``config.sepnorm``)
    kept: a model converted in two steps is rebuilt whole by ``load_sepnorm_pretrained``."""
    if not earlier:
        return plan
    before = SepNormPlan.from_dict(earlier)
    slots = {**before.slots, **plan.slots}
    kept = {name: why for name, why in {**before.kept, **plan.kept}.items() if name not in slots}
    return SepNormPlan(**{**asdict(plan), "slots": slots, "kept": kept})


def _apply(model: nn.Module, plan: SepNormPlan, copy_affine: bool, log: Any) -> list[str]:
    modules = dict(model.named_modules(remove_duplicate=False))
    replaced: dict[int, SepNorm] = {}  # id(LayerNorm) -> its SepNorm, for modules registered twice
    ref = next(model.parameters(), None)
    device, dtype = (None, None) if ref is None else (ref.device, ref.dtype)
    names = []
    for name, opts in plan.slots.items():
        ln = modules.get(name)
        if not isinstance(ln, nn.LayerNorm):
            raise ValueError(f"convert_to_sepnorm: the plan names {name!r}, which is not an nn.LayerNorm of this "
                             f"model ({type(ln).__name__ if ln is not None else 'absent'})")
        parent_name, child = _split(name)
        parent = modules[parent_name]
        sep = replaced.get(id(ln))
        if sep is None:
            sep = SepNorm.from_layer_norm(ln, plan.cls_index, opts["cls_norm"], layout=opts["layout"],
                                          copy_affine=copy_affine, special_tokens=plan.special_tokens,
                                          cls_from_mask=plan.cls_from_mask)
            if next(ln.parameters(), None) is None and device is not None:  # no affine: nothing told device, dtype
                sep.to(device=device, dtype=dtype)
            sep.module_name = name
            replaced[id(ln)] = sep
        if isinstance(parent, _TORCH_LAYERS) and not sep._forward_pre_hooks:
            sep.register_forward_pre_hook(_keep_transformer_slow_path)
        setattr(parent, child, sep)
        names.append(name)
        log("convert_to_sepnorm: %s: LayerNorm(%d, eps=%g) -> SepNorm(cls=%s, cls_index=%d, layout=%s)",
            name, sep.dim, ln.eps, opts["cls_norm"], plan.cls_index, sep.layout)
    for module in model.modules():
        if isinstance(module, nn.TransformerEncoder) and any(isinstance(m, SepNorm) for m in module.modules()):
            module.use_nested_tensor = False
    return names


@overload
def convert_to_sepnorm(model: nn.Module, cls_index: Optional[int] = ..., cls_norm: str = ..., verbose: bool = ...,
                       *, return_names: Literal[False] = ..., **kw: Any) -> nn.Module: ...


@overload
def convert_to_sepnorm(model: nn.Module, cls_index: Optional[int] = ..., cls_norm: str = ..., verbose: bool = ...,
                       *, return_names: Literal[True], **kw: Any) -> tuple[nn.Module, list[str]]: ...


def convert_to_sepnorm(
    model: nn.Module,
    cls_index: Optional[int] = None,
    cls_norm: str = "batch",
    verbose: bool = True,
    *,
    exclude: Iterable[str] = (),
    default_layout: str = "BLD",
    copy_affine: bool = True,
    return_names: bool = False,
    example_input: Any = None,
    batch_size: Optional[int] = None,
    special_tokens: Union[str, int] = "cls",
    constant_cls_norm: Optional[str] = "layer",
    plan: Union[SepNormPlan, dict, None] = None,
) -> Union[nn.Module, tuple[nn.Module, list[str]]]:
    """Replace the sequence LayerNorms of ``model`` by :class:`SepNorm` s, in place.

    Each SepNorm normalizes the [CLS] token with a new ``cls_norm`` (``"batch"``:
    BatchNorm1d over the batch, Chen et al. 2023, eq. 3) and the other tokens with the
    original LayerNorm module itself. What is converted is decided as described in the
    module docstring (:func:`plan_sepnorm`).

    Args:
        model: the transformer; changed in place. (If ``model`` itself is an
            ``nn.LayerNorm``, the new SepNorm is returned instead.)
        cls_index: position of the [CLS] token; None: read from the model (timm, Hugging
            Face), else 0. Required for a Hugging Face type molsepnorm does not know.
        cls_norm: kind of the new [CLS] norms (see :func:`~molsepnorm.nn.norm.create_norm`).
        verbose: log each replaced and kept module at INFO level (logger
            ``molsepnorm.nn.convert``).
        exclude: qualified module names or ``fnmatch`` patterns (``"head.*"``) of
            LayerNorms to keep. A pattern that matches nothing triggers a warning.
        default_layout: ``"BLD"`` or ``"LBD"``, for norms outside torch's transformer
            modules when there is no dry run.
        copy_affine: start the [CLS] norms' scale/shift as copies of the LayerNorm's.
        return_names: also return the list of replaced qualified names.
        example_input: an input of ``model`` (a tensor, a tuple of positional arguments
            or a dict of keyword arguments) with a batch of at least 2, for the dry run;
            built by molsepnorm for timm and Hugging Face models.
        batch_size: the example's batch size, when its first tensor's first dimension is
            not it (an ``(L, B, D)`` input).
        special_tokens: ``"cls"`` (the [CLS] alone has its own norm; other prefix tokens
            are tokens), ``"separate"`` (each prefix token its own norm: DeiT's
            distillation token, registers), or a count.
        constant_cls_norm: kind of the [CLS] norm in slots whose [CLS] input the dry run
            finds the same for every example; None keeps ``cls_norm`` there (a warning).
        plan: a :class:`SepNormPlan` (or its dict) from an earlier conversion: replaces
            exactly its slots, without reading the model or a dry run.

    Returns:
        ``model``, or ``(model, names)`` with ``return_names=True``. If nothing was
        replaced, a warning says so (e.g. on a second call, which is a no-op).

    Raises:
        ValueError: the model has no [CLS] token (the reason is in the message).
    """
    log = logger.info if verbose else logger.debug
    if isinstance(model, nn.LayerNorm):
        sep = SepNorm.from_layer_norm(model, cls_index or 0, cls_norm, layout=default_layout,
                                      copy_affine=copy_affine)
        log("convert_to_sepnorm: replaced the root LayerNorm")
        return (sep, [""]) if return_names else sep

    if plan is None:
        plan = plan_sepnorm(model, cls_index, cls_norm, exclude=exclude, default_layout=default_layout,
                            example_input=example_input, batch_size=batch_size, special_tokens=special_tokens,
                            constant_cls_norm=constant_cls_norm)
    elif isinstance(plan, dict):
        plan = SepNormPlan.from_dict(plan)
    for name, why in plan.kept.items():
        log("convert_to_sepnorm: kept %s (%s)", name, why)
    names = _apply(model, plan, copy_affine, log)
    if plan.mask_argument and names:
        _attach_mask_hook(model, plan.mask_argument)
    config = getattr(model, "config", None)
    if names and config is not None and plan.source.startswith("transformers"):
        config.sepnorm = _merged(getattr(config, "sepnorm", None), plan).to_dict()  # saved by save_pretrained
    if not names:
        warnings.warn("convert_to_sepnorm: no nn.LayerNorm was replaced", stacklevel=2)
    else:
        log("convert_to_sepnorm: replaced %d LayerNorm(s) with SepNorm", len(names))
    return (model, names) if return_names else model
