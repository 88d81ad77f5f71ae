"""Hugging Face round trips of a SepNorm-converted model.

``save_pretrained`` of a converted model writes its SepNorm tensors and, in
``config.json``, the conversion plan (``"sepnorm"``, set by
:func:`~molsepnorm.nn.convert.convert_to_sepnorm`). Hugging Face's own
``from_pretrained`` knows nothing of SepNorm: it would build the unconverted model and
drop the SepNorm tensors with only a log message. :func:`load_sepnorm_pretrained`
rebuilds the converted model instead::

    model = convert_to_sepnorm(AutoModel.from_pretrained("bert-base-uncased"))
    ...                                     # train
    model.save_pretrained("my-sepnorm-bert")
    model = load_sepnorm_pretrained("my-sepnorm-bert")      # converted, same outputs

transformers is imported only when this is called; it is not a dependency of molsepnorm.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, Union

import torch
from torch import nn

from molsepnorm.nn.convert import SepNormPlan, convert_to_sepnorm

__all__ = ["load_sepnorm_pretrained", "read_saved_state_dict"]


def read_saved_state_dict(folder: Union[str, os.PathLike]) -> dict[str, torch.Tensor]:
    """The tensors of a ``save_pretrained`` folder (one or several safetensors files, or
    ``pytorch_model.bin``)."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    single = folder / "model.safetensors"
    if index.exists() or single.exists():
        from safetensors.torch import load_file

        files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else [single.name]
        state: dict[str, torch.Tensor] = {}
        for name in files:
            state.update(load_file(str(folder / name)))
        return state
    binary = folder / "pytorch_model.bin"
    if binary.exists():
        return torch.load(binary, map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{folder}: no model.safetensors(.index.json) or pytorch_model.bin")


def load_sepnorm_pretrained(
    folder: Union[str, os.PathLike],
    model_class: Optional[Any] = None,
    **config_overrides: Any,
) -> nn.Module:
    """Rebuild a SepNorm-converted Hugging Face model saved with ``save_pretrained``.

    As transformers' ``from_pretrained`` does for an unconverted model, ``model_class``
    may differ from the class saved: an encoder saved with one head (``BertForMaskedLM``
    after pretraining) or without one (``BertModel``) loads into another
    (``BertForSequenceClassification``) or into its base model. The encoder's tensors
    must all be there; the new head's are left as initialized and the old head's are
    dropped, each with a warning naming them.

    Args:
        folder: the ``save_pretrained`` folder (a local path).
        model_class: the transformers class to build (``BertModel``,
            ``AutoModelForSequenceClassification``, ...); default: the class named in the
            config's ``architectures``, else ``AutoModel``.
        **config_overrides: set on the config before the model is built.

    Returns:
        the converted model with the saved tensors, in eval mode.

    Raises:
        ValueError: the folder holds an unconverted model (no ``sepnorm`` in its
            config), or its tensors do not fit the rebuilt model (the keys are named).
    """
    import warnings

    import transformers

    folder = Path(folder)
    config = transformers.AutoConfig.from_pretrained(str(folder), **config_overrides)
    raw_plan = getattr(config, "sepnorm", None)
    if not raw_plan:
        raise ValueError(f"{folder}: its config.json has no 'sepnorm' plan: it was saved unconverted. Load it with "
                         "transformers' from_pretrained and convert it with molsepnorm.nn.convert_to_sepnorm.")
    saved_plan = SepNormPlan.from_dict(dict(raw_plan))
    saved_class = (getattr(config, "architectures", None) or [None])[0]
    if model_class is None:
        model_class = (getattr(transformers, saved_class, None) if saved_class else None) or transformers.AutoModel
    config.sepnorm = None  # the plan below, named from this model's root, replaces it
    model = model_class.from_config(config) if hasattr(model_class, "from_config") else model_class(config)
    prefix = getattr(model, "base_model_prefix", "") or ""
    base = getattr(model, prefix, None) if prefix else None
    has_head = isinstance(base, nn.Module) and base is not model

    state = read_saved_state_dict(folder)
    saved_with_prefix = bool(prefix) and any(k.startswith(prefix + ".") for k in state)
    dropped: list[str] = []
    if has_head and state and not saved_with_prefix:  # a base model saved alone, loaded under a head
        state = {f"{prefix}.{k}": v for k, v in state.items()}
    elif not has_head and saved_with_prefix:  # saved with a head, loaded as the base model
        dropped = [k for k in state if not k.startswith(prefix + ".")]
        state = {k[len(prefix) + 1:]: v for k, v in state.items() if k.startswith(prefix + ".")}

    plan = _rooted_plan(saved_plan, model, prefix, has_head)
    convert_to_sepnorm(model, plan=plan, verbose=False)
    result = model.load_state_dict(state, strict=False)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded_ptrs = {t.data_ptr() for k, t in model.state_dict().items() if k in state}
    missing = [k for k in result.missing_keys if not (k in params and params[k].data_ptr() in loaded_ptrs)]
    unexpected = list(result.unexpected_keys)
    if type(model).__name__ != saved_class:  # another class: a new head (and pooler), the saved head unused
        in_base = (lambda k: k.startswith(prefix + ".")) if has_head else (lambda k: True)
        new = [k for k in missing if not _in_sepnorm(k)]
        unused = dropped + [k for k in unexpected if not (_in_sepnorm(k) and in_base(k))]
        missing = [k for k in missing if _in_sepnorm(k)]  # a SepNorm's tensors are the plan's: they must fit
        unexpected = [k for k in unexpected if k not in unused]
        if new:
            warnings.warn(f"{folder}: not in the saved {saved_class}, so newly initialized in "
                          f"{type(model).__name__} (train them): {_listed(new)}", stacklevel=2)
        if unused:
            warnings.warn(f"{folder}: tensors of the saved {saved_class} that {type(model).__name__} has no place "
                          f"for (its head): {_listed(unused)}", stacklevel=2)
    if missing or unexpected:
        raise ValueError(f"{folder}: the saved tensors do not fit {type(model).__name__} converted by its plan: "
                         f"missing {_listed(missing)}, unexpected {_listed(unexpected)}")
    return model.eval()


def _in_sepnorm(key: str) -> bool:
    return any(part in key for part in (".cls_norm.", ".token_norm.", ".special_norms."))


def _listed(keys: list[str], most: int = 8) -> str:
    return f"{keys[:most]}{' ...' if len(keys) > most else ''}"


def _rooted_plan(plan: SepNormPlan, model: nn.Module, prefix: str, has_head: bool) -> SepNormPlan:
    """``plan``'s slots named from ``model``'s root.

    A saved plan names its slots from the module that was converted: a head model's root
    (``bert.embeddings.LayerNorm``, ``cls.predictions.transform.LayerNorm``) or its base
    model (``embeddings.LayerNorm``). Slots of a head that ``model`` does not have are left
    out, as are their reasons to be kept."""
    whole = bool(prefix) and any(n.startswith(prefix + ".") for n in plan.slots)
    names = {n for n, _ in model.named_modules(remove_duplicate=False)}

    def rooted(name: str) -> Optional[str]:
        if whole:  # named from a head model's root
            in_base = name.startswith(prefix + ".")
            if has_head:
                return name
            return name[len(prefix) + 1:] if in_base else None
        return f"{prefix}.{name}" if has_head else name  # named from the base model

    slots = {}
    for name, opts in plan.slots.items():
        target = rooted(name)
        if target is None:  # a slot of the saved head, loaded as the base model
            continue
        if not has_head or target.startswith(prefix + ".") or target in names:
            slots[target] = opts  # the encoder's always (absent: an error); a head's where this head has it
    kept = {rooted(n): why for n, why in plan.kept.items() if rooted(n) in names}
    return SepNormPlan(cls_index=plan.cls_index, special_tokens=plan.special_tokens, cls_from_mask=plan.cls_from_mask,
                       slots=slots, kept=kept, source=plan.source, mask_argument=plan.mask_argument)
