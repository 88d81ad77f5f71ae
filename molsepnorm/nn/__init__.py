"""Neural-network building blocks of molsepnorm."""
from molsepnorm.nn.convert import convert_to_sepnorm, find_convertible_norms
from molsepnorm.nn.norm import (
    MaskedBatchNorm,
    MaskedIdentity,
    MaskedLayerNorm,
    MaskedNorm,
    MaskedRMSNorm,
    SepNorm,
    ShareNorm,
    create_norm,
)

__all__ = [
    # normalization layers (Chen et al., NeurIPS 2023)
    "create_norm",
    "SepNorm",
    "ShareNorm",
    "MaskedNorm",
    "MaskedBatchNorm",
    "MaskedLayerNorm",
    "MaskedRMSNorm",
    "MaskedIdentity",
    "convert_to_sepnorm",
    "find_convertible_norms",
]
