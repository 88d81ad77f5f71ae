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
    import transformers

    folder = Path(folder)
    config = transformers.AutoConfig.from_pretrained(str(folder), **config_overrides)
    raw_plan = getattr(config, "sepnorm", None)
    if not raw_plan:
        raise ValueError(f"{folder}: its config.json has no 'sepnorm' plan: it was saved unconverted. Load it with "
                         "transformers' from_pretrained and convert it with molsepnorm.nn.convert_to_sepnorm.")
    plan = SepNormPlan.from_dict(dict(raw_plan))
    if model_class is None:
        names = getattr(config, "architectures", None) or []
        model_class = getattr(transformers, names[0], None) if names else None
        model_class = model_class or transformers.AutoModel
    if hasattr(model_class, "from_config"):
        model = model_class.from_config(config)
    else:
        model = model_class(config)
    target = model
    prefix = getattr(model, "base_model_prefix", "")
    names = dict(model.named_modules())
    if plan.slots and not all(n in names for n in plan.slots) and prefix and hasattr(model, prefix):
        target = getattr(model, prefix)  # converted as model.<prefix> (e.g. model.bert), saved whole
    convert_to_sepnorm(target, plan=plan, verbose=False)
    state = read_saved_state_dict(folder)
    result = model.load_state_dict(state, strict=False)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded_ptrs = {t.data_ptr() for k, t in model.state_dict().items() if k in state}
    missing = [k for k in result.missing_keys if not (k in params and params[k].data_ptr() in loaded_ptrs)]
    if missing or result.unexpected_keys:
        raise ValueError(f"{folder}: the saved tensors do not fit {type(model).__name__} converted by its plan: "
                         f"missing {missing[:8]}{' ...' if len(missing) > 8 else ''}, unexpected "
                         f"{result.unexpected_keys[:8]}{' ...' if len(result.unexpected_keys) > 8 else ''}")
    return model.eval()
