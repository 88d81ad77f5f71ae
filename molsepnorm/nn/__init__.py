"""Neural-network building blocks of molsepnorm."""
from molsepnorm.nn.calibrate import recalibrate_cls_norms
from molsepnorm.nn.convert import SepNormPlan, convert_to_sepnorm, find_convertible_norms, plan_sepnorm
from molsepnorm.nn.hf import load_sepnorm_pretrained
from molsepnorm.nn.token_layout import TokenLayout, read_token_layout
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
    "plan_sepnorm",
    "SepNormPlan",
    "recalibrate_cls_norms",
    "load_sepnorm_pretrained",
    "read_token_layout",
    "TokenLayout",
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
