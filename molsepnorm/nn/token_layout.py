"""Where a transformer keeps its [CLS] token: read from timm and Hugging Face models.

SepNorm (Chen et al., NeurIPS 2023) needs a [CLS] token at a known position of every
sequence. :func:`read_token_layout` finds it from what the model says about itself, so
that :func:`~molsepnorm.nn.convert.convert_to_sepnorm` can refuse a model that has none
instead of putting a BatchNorm on a patch or a word:

* **timm** vision transformers (``VisionTransformer``, DeiT, Eva, ...): ``cls_token``
  (None without a class token), ``num_prefix_tokens`` (class token, distillation token,
  registers, in that order) and ``global_pool`` (what the head reads).
* **Hugging Face** models: ``config.model_type``, looked up in the tables below; a type
  not listed is refused unless the caller names the position.
* Anything else (``nn.TransformerEncoder``, a user's module): the caller's ``cls_index``
  (default 0) is trusted.

:func:`example_input` builds a small input for the dry run that decides which norms see
the token sequence.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from torch import nn

__all__ = ["TokenLayout", "read_token_layout", "example_input", "call_model", "HF_CLS_FIRST", "HF_NO_CLS"]

# Hugging Face model types whose sequence starts with a [CLS] (<s>, class embedding);
# value: how many special tokens lead the sequence (a config attribute adds to it).
HF_CLS_FIRST: dict[str, int] = {
    "bert": 1, "roberta": 1, "xlm-roberta": 1, "xlm-roberta-xl": 1, "camembert": 1, "distilbert": 1,
    "electra": 1, "ernie": 1, "mpnet": 1, "albert": 1, "deberta": 1, "deberta-v2": 1, "megatron-bert": 1,
    "data2vec-text": 1, "esm": 1,
    "vit": 1, "deit": 2, "dinov2": 1, "dinov2_with_registers": 1, "clip_vision_model": 1, "beit": 1,
    "data2vec-vision": 1, "vit_mae": 1, "vit_msn": 1,
}
_HF_REGISTERS = {"dinov2_with_registers": "num_register_tokens"}
_HF_VISION = {"vit", "deit", "dinov2", "dinov2_with_registers", "clip_vision_model", "beit", "data2vec-vision",
              "vit_mae", "vit_msn"}
# Types known to have no [CLS] first, and what they read instead.
HF_NO_CLS: dict[str, str] = {
    "gpt2": "a causal decoder: no [CLS]; a sequence is read at its last token",
    "gpt_neo": "a causal decoder: no [CLS]", "gptj": "a causal decoder: no [CLS]",
    "llama": "a causal decoder: no [CLS]", "mistral": "a causal decoder: no [CLS]",
    "opt": "a causal decoder: no [CLS]", "bloom": "a causal decoder: no [CLS]",
    "clip_text_model": "no [CLS]: the text embedding is read at the end-of-text token",
    "siglip_text_model": "no [CLS]: the text embedding is read at the last token",
    "siglip_vision_model": "no [CLS]: patches are pooled by attention (MAP head)",
    "clip": "a text and a vision tower: convert the vision tower alone (a CLIPVisionModel)",
    "t5": "an encoder-decoder without a [CLS]", "bart": "an encoder-decoder without a [CLS]",
    "swin": "no [CLS]: patches are average-pooled", "convnext": "a convolutional network",
}


@dataclass
class TokenLayout:
    """Where the special tokens of a model's sequences are.

    Attributes:
        source: ``"timm"``, ``"transformers:<model_type>"``, ``"torch"`` or ``"module"``.
        cls_index: position of the [CLS] token, or None when the model has none.
        prefix_tokens: special tokens leading the sequence, the [CLS] included
            (DeiT: 2; ViT with 4 registers: 5).
        reason: why there is no [CLS] (when ``cls_index`` is None).
        warnings: things to tell the user although conversion goes on (the head does
            not read the [CLS], ...).
        mask_argument: the forward argument holding the padding mask (Hugging Face
            text models: ``"attention_mask"``), passed on to every SepNorm.
    """

    source: str
    cls_index: Optional[int]
    prefix_tokens: int = 1
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    mask_argument: Optional[str] = None


def _is_hf(model: nn.Module) -> bool:
    return any(c.__name__ == "PreTrainedModel" for c in type(model).__mro__) and hasattr(model, "config")


def _is_timm_vit(model: nn.Module) -> bool:
    return hasattr(model, "num_prefix_tokens") and hasattr(model, "cls_token") and hasattr(model, "patch_embed")


def read_token_layout(model: nn.Module, cls_index: Optional[int] = None) -> TokenLayout:
    """Where ``model``'s [CLS] is, from its own attributes (timm) or config (Hugging Face).

    Args:
        model: the transformer.
        cls_index: the caller's position of the [CLS]; required for a Hugging Face type
            not in :data:`HF_CLS_FIRST` (it is then trusted), and the position used for
            any other module (default 0).

    Returns:
        a :class:`TokenLayout`; ``cls_index`` None means the model has no [CLS] and must
        not be converted.
    """
    if _is_timm_vit(model):
        name = type(model).__name__
        prefix = int(model.num_prefix_tokens)
        pool = getattr(model, "global_pool", None)
        if model.cls_token is None:
            what = f"{prefix} register token(s) and then patches" if prefix else "patches"
            return TokenLayout("timm", None, prefix, reason=(
                f"timm {name} has no class token (cls_token is None, global_pool={pool!r}): its sequence holds "
                f"{what}, so position 0 is no [CLS]"))
        layout = TokenLayout("timm", 0, prefix)
        if pool != "token":
            layout.warnings.append(
                f"timm {name} has a class token but its head reads global_pool={pool!r}, not the [CLS]: SepNorm "
                "normalizes a token the prediction does not use")
        return layout
    if _is_hf(model):
        cfg = model.config
        mtype = getattr(cfg, "model_type", None) or "?"
        source = f"transformers:{mtype}"
        if mtype in HF_NO_CLS:
            return TokenLayout(source, None, 0, reason=f"Hugging Face model type {mtype!r}: {HF_NO_CLS[mtype]}")
        if mtype in HF_CLS_FIRST:
            prefix = HF_CLS_FIRST[mtype] + int(getattr(cfg, _HF_REGISTERS.get(mtype, ""), 0) or 0)
            layout = TokenLayout(source, 0, prefix, mask_argument=None if mtype in _HF_VISION else "attention_mask")
            if getattr(cfg, "use_mean_pooling", False):  # BEiT, data2vec-vision
                layout.warnings.append(f"Hugging Face {mtype!r} with use_mean_pooling=True: its head reads the mean "
                                       "of the patches, not the [CLS]; SepNorm normalizes a token the prediction "
                                       "does not use")
            return layout
        if cls_index is None:
            return TokenLayout(source, None, 0, reason=(
                f"Hugging Face model type {mtype!r} is not one whose [CLS] position molsepnorm knows; if its "
                "sequences do start with a [CLS], pass cls_index=0 (or its position)"))
        layout = TokenLayout(source, cls_index, 1, mask_argument=_hf_padding_mask_argument(model))
        layout.warnings.append(f"Hugging Face model type {mtype!r}: [CLS] position {cls_index} taken from the caller")
        return layout
    torch_layers = (nn.TransformerEncoder, nn.TransformerEncoderLayer, nn.TransformerDecoder,
                    nn.TransformerDecoderLayer, nn.Transformer)
    source = "torch" if isinstance(model, torch_layers) else "module"
    return TokenLayout(source, 0 if cls_index is None else cls_index, 1)


def _hf_padding_mask_argument(model: nn.Module) -> Optional[str]:
    """``"attention_mask"`` when a Hugging Face model of a type molsepnorm does not know reads
    token ids and a padding mask (a text model), else None (images have no padding)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    return "attention_mask" if "attention_mask" in params and "pixel_values" not in params else None


def call_model(model: nn.Module, inputs: Any) -> Any:
    """``model(**inputs)`` for a mapping (a dict, a tokenizer's ``BatchEncoding``),
    ``model(*inputs)`` for a tuple or list, else ``model(inputs)``."""
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def example_input(model: nn.Module, batch_size: int = 3) -> Optional[dict[str, Any] | torch.Tensor]:
    """A small input for ``model``'s forward, or None when it cannot be told.

    timm: random images of the model's size; Hugging Face vision: ``pixel_values`` from
    the config; Hugging Face text: ``input_ids`` that all start with the same [CLS] id
    (as a tokenizer writes them) plus an all-ones ``attention_mask``. The rows' [CLS]
    inputs are therefore identical before the first attention, as in real data, which
    is what the dry run looks for.
    """
    g = torch.Generator().manual_seed(0)
    if _is_timm_vit(model):
        pe = model.patch_embed
        size = tuple(pe.img_size) if getattr(pe, "img_size", None) is not None else (224, 224)
        cfg_size = (getattr(model, "pretrained_cfg", None) or {}).get("input_size")
        if cfg_size:
            chans = int(cfg_size[0])
        elif type(pe).__name__ == "PatchEmbed" and hasattr(pe, "proj"):  # a hybrid's proj reads backbone features
            chans = pe.proj.in_channels
        else:
            chans = 3
        return torch.randn(batch_size, chans, *size, generator=g)
    if _is_hf(model):
        cfg = model.config
        mtype = getattr(cfg, "model_type", "")
        if mtype in _HF_VISION:
            size = cfg.image_size if isinstance(cfg.image_size, int) else cfg.image_size[0]
            return {"pixel_values": torch.randn(batch_size, getattr(cfg, "num_channels", 3), size, size,
                                                generator=g)}
        vocab = int(getattr(cfg, "vocab_size", 0) or 0)
        if vocab < 8:
            return None
        special = {getattr(cfg, k, None) for k in ("pad_token_id", "bos_token_id", "eos_token_id", "mask_token_id",
                                                   "cls_token_id", "sep_token_id", "unk_token_id")} - {None}
        ordinary = [i for i in range(min(vocab, 64)) if i not in special]
        length = 9
        ids = torch.tensor(ordinary)[torch.randint(len(ordinary), (batch_size, length), generator=g)]
        bos = getattr(cfg, "bos_token_id", None)
        ids[:, 0] = ordinary[0] if bos is None else bos
        return {"input_ids": ids, "attention_mask": torch.ones(batch_size, length, dtype=torch.long)}
    return None
