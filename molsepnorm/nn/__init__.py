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

# Graphormer (Ying et al., NeurIPS 2021) with pluggable norm slots
from molsepnorm.nn.attention import BiasedSelfAttention
from molsepnorm.nn.encoders import AtomEncoder, DegreeEncoder, EdgePathEncoder, GraphAttentionBias, SpatialEncoder
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig, GraphormerLayer

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
    # Graphormer (Ying et al., NeurIPS 2021)
    "Graphormer",
    "GraphormerConfig",
    "GraphormerLayer",
    "BiasedSelfAttention",
    "AtomEncoder",
    "DegreeEncoder",
    "SpatialEncoder",
    "EdgePathEncoder",
    "GraphAttentionBias",
]
