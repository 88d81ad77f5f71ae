"""Graphormer for graph-level molecular property prediction, with every normalization slot
pluggable: SepNorm or ShareNorm.

* Graphormer: Ying et al., "Do Transformers Really Perform Bad for Graph
  Representation?", NeurIPS 2021 (public code: microsoft/Graphormer).
* SepNorm: Chen et al., "On Separate Normalization in Self-supervised Transformers",
  NeurIPS 2023.  The virtual graph token is the [CLS] token at position 0; SepNorm
  normalizes it with its own norm (BatchNorm by default) and the atoms with another
  (LayerNorm by default).

Read top to bottom: :class:`GraphormerConfig`, :class:`GraphormerLayer`, :class:`Graphormer`.
Shapes: B graphs, N atoms (padded), L = N + 1 tokens (graph token first), D hidden,
H heads, K = ``multi_hop_max_dist``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from molsepnorm.nn.attention import ATTENTION_IMPLS, BiasedSelfAttention
from molsepnorm.nn.dropout import dropout
from molsepnorm.nn.encoders import AtomEncoder, DegreeEncoder, GraphAttentionBias, hop_entries
from molsepnorm.nn.fingerprint import BLENDS, COUNTS, FingerprintCompanion
from molsepnorm.nn.memo import batch_memo
from molsepnorm.nn.norm import NORM_KINDS, SepNorm, ShareNorm

if TYPE_CHECKING:  # the model reads a batch; it need not import the data package
    from molsepnorm.data.collate import GraphBatch

__all__ = ["GraphormerConfig", "GraphormerLayer", "Graphormer"]

NORMS = ("sep", "share")
READOUTS = ("cls", "cls+sum", "cls+mean")
# "cls+sum" divides the summed atom states by this: a drug-like molecule has about 25
# heavy atoms, so the sum starts at the scale of the mean (and of the graph token) and
# grows in proportion to the molecule.
SUM_READOUT_SCALE = 1 / 25


@dataclass
class GraphormerConfig:
    """Every hyper-parameter of :class:`Graphormer`; a checkpoint stores :meth:`to_dict`.

    The defaults are molsepnorm's CPU model, chosen by ablation against chemprop on 2
    cores (docs/accuracy.md): Graphormer-slim's width (hidden 80, FFN 80, 8 heads) at 4
    layers, no dropout, SepNorm with a LayerNorm for the graph token, and a head that
    reads the graph token and the sum of the atom states. Graphormer-slim as published
    (12 layers, dropout 0.1, the graph token's BatchNorm): ``configs/zinc-slim.yaml``.
    """

    # --- inputs -------------------------------------------------------------------
    vocab: str = "zinc"  # "zinc": 1 atom column (28 types), bond types 1..3; "ogb": 9 atom / 3 bond columns
    atom_dims: Optional[list[int]] = None  # cardinality per atom column; None = molsepnorm.chem.vocab_sizes(vocab)
    bond_dims: Optional[list[int]] = None  # cardinality per bond column; None = likewise
    # --- structural encodings -------------------------------------------------------
    num_degree: int = 64  # degree embeddings; higher degrees share the last one
    num_spatial: int = 64  # SPD buckets: distances clipped to num_spatial - 2, last bucket = unreachable
    multi_hop_max_dist: int = 5  # K: hops of the edge encoding; collate with the same K
    # --- transformer ----------------------------------------------------------------
    num_layers: int = 4
    hidden_dim: int = 80
    ffn_dim: int = 80
    num_heads: int = 8
    dropout: float = 0.0  # input embeddings and the output of each residual branch
    attention_dropout: float = 0.0  # attention probabilities
    activation_dropout: float = 0.0  # after the FFN's GELU
    # True: pre-LN layers + final norm (the paper); False: input norm + post-LN layers (fairseq's default)
    pre_ln: bool = True
    attention: str = "math"  # "math" (faster on CPU, see docs/benchmarks.md) or "sdpa"
    # --- normalization: the module used in every norm slot -----------------------------
    norm: str = "sep"  # "sep": SepNorm(cls_norm, token_norm); "share": ShareNorm(token_norm) for all tokens
    # graph-token norm of SepNorm: "layer" | "batch" (the paper) | "batchrenorm" | "rms" | "none".
    # "batch" trained worse here, even with Batch Renormalization (docs/accuracy.md).
    cls_norm: str = "layer"
    token_norm: str = "layer"  # atom-token norm (and ShareNorm's only norm): same kinds
    # SepNorm's graph-token norm in the first slot the graph token enters (layer 0's attention
    # norm with pre-LN, the input norm with post-LN). The graph token is the same learned
    # vector for every molecule there, so a batch norm would see no variance but dropout's
    # (DESIGN 8). None: cls_norm, as every other slot.
    first_cls_norm: Optional[str] = "layer"
    # --- head -----------------------------------------------------------------------
    # what the linear head reads: "cls", the graph token (the paper); "cls+sum" / "cls+mean",
    # the graph token concatenated with the sum (x SUM_READOUT_SCALE) / mean of the atom
    # states -- a property that is a sum over atoms is linear in the sum
    readout: str = "cls+sum"
    num_tasks: int = 1  # outputs (logits for classification); the loss belongs to training
    # --- fingerprint companion (molsepnorm.nn.fingerprint) ----------------------------
    # a linear model on hashed circular-substructure counts, fitted by training and blended
    # with the head's output; 0 buckets: none. Training sets these from train.companion.
    companion_bits: int = 0
    companion_radius: int = 2
    companion_blend: str = "probability"  # "probability" (binary targets) | "value" (regression)
    companion_counts: str = "log"  # what its linear model reads: "log" (log(1 + count)) | "raw" (the counts)
    companion_properties: bool = False  # its counts also hold each atom's feature values one by one

    def __post_init__(self) -> None:
        from molsepnorm.chem import VOCABS, vocab_sizes

        if self.vocab not in VOCABS:
            raise ValueError(f"vocab must be one of {VOCABS}, got {self.vocab!r}")
        if self.atom_dims is None or self.bond_dims is None:
            sizes = vocab_sizes(self.vocab)
            self.atom_dims = list(sizes["atom"]) if self.atom_dims is None else self.atom_dims
            self.bond_dims = list(sizes["bond"]) if self.bond_dims is None else self.bond_dims
        self.atom_dims = [int(d) for d in self.atom_dims]
        self.bond_dims = [int(d) for d in self.bond_dims]
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.readout not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {self.readout!r}")
        for name in ("cls_norm", "token_norm", "first_cls_norm"):
            if name == "first_cls_norm" and self.first_cls_norm is None:
                continue
            if getattr(self, name) not in NORM_KINDS:
                raise ValueError(f"{name} must be one of {NORM_KINDS}, got {getattr(self, name)!r}")
        if self.attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention must be one of {ATTENTION_IMPLS}, got {self.attention!r}")
        if self.hidden_dim % self.num_heads != 0:
            raise ValueError(f"hidden_dim {self.hidden_dim} is not divisible by num_heads {self.num_heads}")
        for name in ("num_layers", "hidden_dim", "ffn_dim", "num_heads", "num_degree", "multi_hop_max_dist",
                     "num_tasks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_spatial < 3:
            raise ValueError(f"num_spatial must be >= 3, got {self.num_spatial}")
        if self.companion_bits < 0 or self.companion_radius < 0:
            raise ValueError(f"companion_bits and companion_radius must be >= 0, got {self.companion_bits} and "
                             f"{self.companion_radius}")
        if self.companion_blend not in BLENDS:
            raise ValueError(f"companion_blend must be one of {BLENDS}, got {self.companion_blend!r}")
        if self.companion_counts not in COUNTS:
            raise ValueError(f"companion_counts must be one of {COUNTS}, got {self.companion_counts!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (vocabulary sizes resolved) that :meth:`from_dict` turns back into this config."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GraphormerConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown Graphormer config keys {unknown}; known keys: {sorted(known)}")
        return cls(**d)

    @classmethod
    def from_yaml(cls, path: Union[str, Path]) -> "GraphormerConfig":
        """Read the top-level ``model:`` mapping of a YAML file (other sections are ignored)."""
        from molsepnorm._yaml import safe_load

        with open(path, encoding="utf-8") as fh:
            doc = safe_load(fh) or {}
        if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
            raise ValueError(f"{path}: expected a top-level 'model:' mapping of GraphormerConfig fields")
        return cls.from_dict(doc["model"])


def make_norm(cfg: GraphormerConfig, first: bool = False) -> nn.Module:
    """The module of one normalization slot, called as ``norm(x (B, L, D), mask (B, L))``.

    ``first``: the first slot the graph token enters, where SepNorm uses ``first_cls_norm``.
    """
    if cfg.norm == "sep":
        cls_norm = cfg.first_cls_norm if first and cfg.first_cls_norm is not None else cfg.cls_norm
        return SepNorm(cfg.hidden_dim, cls_norm=cls_norm, token_norm=cfg.token_norm, cls_index=0)
    return ShareNorm(cfg.hidden_dim, norm=cfg.token_norm)


class GraphormerLayer(nn.Module):
    """One transformer layer, pre-LN (the paper) or post-LN:

    pre-LN:  x = x + Drop(Attn(Norm1(x), bias));  x = x + Drop(FFN(Norm2(x)))
    post-LN: x = Norm1(x + Drop(Attn(x, bias)));  x = Norm2(x + Drop(FFN(x)))
    """

    def __init__(self, cfg: GraphormerConfig, first: bool = False):
        super().__init__()
        self.pre_ln = cfg.pre_ln
        self.dropout = cfg.dropout
        self.activation_dropout = cfg.activation_dropout
        self.attn_norm = make_norm(cfg, first=first and cfg.pre_ln)
        self.attn = BiasedSelfAttention(cfg.hidden_dim, cfg.num_heads, cfg.attention_dropout, cfg.attention)
        self.ffn_norm = make_norm(cfg)
        self.fc1 = nn.Linear(cfg.hidden_dim, cfg.ffn_dim)
        self.fc2 = nn.Linear(cfg.ffn_dim, cfg.hidden_dim)

    def reset_parameters(self) -> None:
        self.attn_norm.reset_parameters()
        self.attn.reset_parameters()
        self.ffn_norm.reset_parameters()
        for linear in (self.fc1, self.fc2):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)

    def _ffn(self, x: Tensor) -> Tensor:
        x = dropout(F.gelu(self.fc1(x)), self.activation_dropout, self.training)
        return self.fc2(x)

    def _drop(self, x: Tensor) -> Tensor:
        return dropout(x, self.dropout, self.training)

    def forward(self, x: Tensor, bias: Tensor, mask: Tensor) -> Tensor:
        """x (B, L, D), bias (B, H, L, L), mask (B, L) bool (True = real token) -> (B, L, D)."""
        if self.pre_ln:
            x = x + self._drop(self.attn(self.attn_norm(x, mask), bias))
            x = x + self._drop(self._ffn(self.ffn_norm(x, mask)))
        else:
            x = self.attn_norm(x + self._drop(self.attn(x, bias)), mask)
            x = self.ffn_norm(x + self._drop(self._ffn(x)), mask)
        return x


class Graphormer(nn.Module):
    """Graph-level Graphormer: a :class:`~molsepnorm.data.collate.GraphBatch` -> (B, num_tasks).

    Tokens are ``[graph token, atom_1 .. atom_N]``; atom tokens are atom + degree
    embeddings.  The attention bias (B, H, N+1, N+1) -- spatial and multi-hop edge
    encodings, virtual distances of the graph token, ``-inf`` on padded keys -- is built
    once per batch and shared by all layers.  Norm slots: two per layer plus the final
    norm (pre-LN) or the input norm (post-LN), each a SepNorm or a ShareNorm that is
    given the padding mask.  The prediction is a linear head on the graph token after
    the final norm (``readout="cls"``), or on the graph token concatenated with the sum or
    mean of the atom states (``"cls+sum"`` / ``"cls+mean"``).  With ``companion_bits`` the
    head's output is blended with a fitted fingerprint model
    (:class:`~molsepnorm.nn.fingerprint.FingerprintCompanion`, coefficients kept as buffers).
    """

    def __init__(self, config: GraphormerConfig):
        super().__init__()
        self.config = config
        D = config.hidden_dim
        self.atom_encoder = AtomEncoder(config.atom_dims, D)
        self.degree_encoder = DegreeEncoder(config.num_degree, D)
        self.graph_token = nn.Parameter(torch.empty(D))
        self.attn_bias = GraphAttentionBias(
            config.bond_dims, config.num_heads, config.num_spatial, config.multi_hop_max_dist
        )
        # pre-LN ends with a final norm; post-LN (as fairseq's Graphormer) starts with one
        self.input_norm = None if config.pre_ln else make_norm(config, first=True)
        self.layers = nn.ModuleList(GraphormerLayer(config, first=i == 0) for i in range(config.num_layers))
        self.final_norm = make_norm(config) if config.pre_ln else None
        self.head = nn.Linear(D if config.readout == "cls" else 2 * D, config.num_tasks)
        self.companion = None
        if config.companion_bits:
            self.companion = FingerprintCompanion(config.companion_bits, config.companion_radius, config.num_tasks,
                                                  config.companion_blend, config.companion_counts,
                                                  config.companion_properties)
        self.reset_parameters()
        self.float()  # float32 whatever torch's default dtype (bf16 comes from autocast, not from the weights)

    def reset_parameters(self) -> None:
        """Reference initialization: N(0, 0.02) weights, zero biases, fresh norms."""
        self.atom_encoder.reset_parameters()
        self.degree_encoder.reset_parameters()
        nn.init.normal_(self.graph_token, std=0.02)
        self.attn_bias.reset_parameters()
        for layer in self.layers:
            layer.reset_parameters()
        for norm in (self.input_norm, self.final_norm):
            if norm is not None:
                norm.reset_parameters()
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        if self.companion is not None:
            self.companion.reset_parameters()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def encode(self, batch: GraphBatch, atom_features: Optional[Tensor] = None) -> Tensor:
        """All token states after the last layer (and the final norm): (B, N+1, D); padding is zero.

        ``atom_features`` (B, N, D), if given, stands in for the atom-feature embedding
        ``atom_encoder(batch.x)`` (the degree encoding is still added): masked-atom
        pretraining (Hu et al., ICLR 2020) puts a learned mask vector at masked atoms this way.
        """
        K = self.config.multi_hop_max_dist
        if batch.edge_path.size(-1) < K:
            raise ValueError(
                f"batch was collated with multi_hop_max_dist={batch.edge_path.size(-1)} but the model "
                f"uses {K}: collate with GraphCollator({K})"
            )
        B, N = batch.node_mask.shape
        mask = torch.cat([batch.node_mask.new_ones(B, 1), batch.node_mask], 1)  # (B, N+1)
        # which (pair, hop) entries are real depends on the batch alone: an ensemble finds them once
        entries = batch_memo(batch, ("hop entries", K),
                             lambda: hop_entries(batch.edge_path[..., :K], batch.edge_attr.size(0)))
        bias = self.attn_bias(batch.spd, batch.edge_attr, batch.edge_path, batch.node_mask, entries)  # (B, H, N+1, N+1)

        if atom_features is None:
            atom_features = self.atom_encoder(batch.x)  # (B, N, D)
        atoms = atom_features + self.degree_encoder(batch.degree)  # (B, N, D)
        atoms = atoms * batch.node_mask.unsqueeze(-1)  # padding starts at zero
        h = torch.cat([self.graph_token.view(1, 1, -1).expand(B, 1, -1), atoms], 1)  # (B, N+1, D)
        if self.input_norm is not None:
            h = self.input_norm(h, mask)
        h = dropout(h, self.config.dropout, self.training)
        for layer in self.layers:
            h = layer(h, bias, mask)
        if self.final_norm is not None:
            h = self.final_norm(h, mask)
        return h

    def readout(self, h: Tensor, batch: GraphBatch) -> Tensor:
        """The head's input from the token states h (B, N+1, D): (B, D) or (B, 2D)."""
        g = h[:, 0]  # (B, D) graph token
        if self.config.readout == "cls":
            return g
        pooled = (h[:, 1:] * batch.node_mask.unsqueeze(-1)).sum(1)  # (B, D), padding left out
        if self.config.readout == "cls+sum":
            pooled = pooled * SUM_READOUT_SCALE
        else:
            pooled = pooled / batch.node_mask.sum(1, keepdim=True).clamp(min=1)
        return torch.cat([g, pooled], -1)

    def embed(self, batch: GraphBatch) -> Tensor:
        """The graph-token embedding after the last norm: (B, D)."""
        return self.encode(batch)[:, 0]

    def forward(self, batch: GraphBatch) -> Tensor:
        """(B, num_tasks) outputs (logits for classification), blended with the fingerprint
        companion's once it is fitted (the graph-token embedding: :meth:`embed`).

        The head and the blend run in float32 with autocast off, so the outputs are float32
        under bf16 autocast too (docs/benchmarks.md, "Again on one H200 (2026-11-27, session 42):
        the regression blend in bf16")."""
        h = self.encode(batch)  # (B, N+1, D)
        features = self.readout(h, batch)
        # bf16 keeps 8 bits of a regression value: too few for a value the companion predicts closely
        with torch.autocast(device_type=features.device.type, enabled=False):
            out = self.head(features.float())  # (B, T)
            if self.companion is None:
                return out
            space = self.companion.novel_space
            return self.companion(out, batch, (lambda: self.atom_embeddings(batch, space, h)) if space else None)

    def atom_embeddings(self, batch: GraphBatch, space: int, h: Optional[Tensor] = None) -> Tensor:
        """(B, N, D) float32, zero at padding: the atoms' input embeddings (``space`` 1: atom
        features and degree, as :meth:`encode` starts) or their final states (2; ``h`` from
        :meth:`encode` if at hand), in which the companion prices unseen atoms
        (:class:`~molsepnorm.nn.fingerprint.FingerprintCompanion`)."""
        if space == 1:
            atoms = self.atom_encoder(batch.x) + self.degree_encoder(batch.degree)
        elif space == 2:
            atoms = (self.encode(batch) if h is None else h)[:, 1:]
        else:
            raise ValueError(f"space must be 1 (input embeddings) or 2 (final states), got {space}")
        return atoms.float() * batch.node_mask.unsqueeze(-1)
