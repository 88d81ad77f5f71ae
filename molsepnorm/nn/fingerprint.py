"""A fingerprint companion: a linear model on hashed circular substructure counts, blended
with the Graphormer's prediction.

The substructures are those of a Morgan / ECFP count fingerprint (Rogers & Hahn, J. Chem.
Inf. Model. 2010): every atom's identifier at radius 0 is a hash of its feature columns;
at radius r it is a hash of its radius r-1 identifier and the multiset of its neighbours'
radius r-1 identifiers, each paired with the bond's feature columns. Every identifier of
radius 0..R of every atom is counted in one of ``bits`` buckets (``id mod bits``), and the
model reads ``log(1 + count)`` (``counts="log"``) or the counts themselves (``"raw"``). On raw
counts of radius 0..1 the linear model is a group-contribution model: the property as a sum
of the contributions of every atom's environment, as Crippen's logP (Wildman & Crippen, J.
Chem. Inf. Comput. Sci. 1999) and Ertl's TPSA are defined. The hash is computed here, in
integer tensor operations on the padded batch the Graphormer reads (its atom and bond
feature columns), so every data source and ``predict`` have it without a second featurizer.

The linear model is fitted once, after the Graphormer has trained, on the training split
(:mod:`molsepnorm.train.companion`): logistic regression for binary targets, ridge
regression (the group-contribution model) for regression targets. The blend averages the
two models' probabilities (binary) or standardized values (regression) with weight ``w`` on
the fingerprint model, an ensemble of two models with different inductive biases: the
substructure counts that a random forest or chemprop's bond messages read directly
(docs/accuracy.md, "A fingerprint companion" and "A group-contribution companion for
regression").
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

# all hash arithmetic stays below 2^62: values are reduced modulo a prime below 2^31 before
# every multiplication by a constant below 2^31
_MOD = 2_147_483_647  # 2^31 - 1
_MUL_A = 1_103_515_245
_MUL_B = 2_147_483_629
_ATOM_SALT = 31
_BOND_SALT = 37
_NEIGHBOUR_SALT = 1_000_003
_RADIUS_SALT = 999_983

BLENDS = ("probability", "value")
COUNTS = ("log", "raw")  # what the linear model reads: log(1 + count) or the counts


def _mix(t: Tensor) -> Tensor:
    """A nonlinear scramble of int64 values into [0, 2^31 - 1)."""
    t = (t % _MOD) * _MUL_A % _MOD
    t = t ^ (t >> 15)
    t = t * _MUL_B % _MOD
    return t ^ (t >> 13)


def _fold(columns: Tensor, salt: int) -> Tensor:
    """Hash the last dimension's integer columns (..., F) into one identifier (...)."""
    h = torch.zeros(columns.shape[:-1], dtype=torch.long, device=columns.device)
    for c in range(columns.size(-1)):
        h = _mix(h * salt + columns[..., c] + 1)
    return h


def substructure_counts(batch, bits: int, radius: int) -> Tensor:
    """Hashed circular-substructure counts of a padded batch: (B, bits) float.

    Args:
        batch: a :class:`~molsepnorm.data.collate.GraphBatch` (``x`` (B, N, F), ``node_mask``
            (B, N), ``spd`` (B, N, N), ``edge_path`` (B, N, N, K), ``edge_attr`` (E, F_e)).
        bits: number of buckets.
        radius: largest radius R; identifiers of radius 0..R are counted.
    """
    mask = batch.node_mask  # (B, N)
    B, N = mask.shape
    ident = _fold(batch.x.long(), _ATOM_SALT)  # (B, N)
    adjacent = batch.spd == 1  # (B, N, N): a bond u - v
    bond = torch.zeros(B, N, N, dtype=torch.long, device=mask.device)
    if radius > 0 and adjacent.any():
        edge = batch.edge_path[..., 0]  # (B, N, N): the edge u -> v where adjacent
        bond[adjacent] = _fold(batch.edge_attr.long()[edge[adjacent]], _BOND_SALT)
    idents = [ident]
    for r in range(1, radius + 1):
        message = _mix(ident.unsqueeze(1) * _NEIGHBOUR_SALT + bond)  # (B, N, N): what atom v tells atom u
        neighbours = (message * adjacent).sum(-1) % _MOD  # (B, N): a multiset hash, order-free
        ident = _mix(_mix(ident * _RADIUS_SALT + r) + neighbours)
        idents.append(ident)
    buckets = torch.stack(idents, -1) % bits  # (B, N, R+1)
    counts = torch.zeros(B, bits, device=mask.device)
    weight = mask.unsqueeze(-1).expand_as(buckets).float()
    counts.scatter_add_(1, buckets.reshape(B, -1), weight.reshape(B, -1))
    return counts


class FingerprintCompanion(nn.Module):
    """A linear model on ``log(1 + substructure counts)`` and its blend weight.

    Its coefficients are buffers, not parameters: gradient training never touches them;
    :func:`molsepnorm.train.companion.fit_companion` sets them after training. Until then
    ``weight`` (the blend weight) is 0 and the blend returns the Graphormer's output unchanged.

    Args:
        bits: buckets of the hashed counts.
        radius: largest substructure radius.
        num_tasks: T, outputs.
        blend: ``"probability"`` (binary targets: outputs are logits, the probabilities are
            averaged and turned back into a logit) or ``"value"`` (regression: the outputs are averaged).
        counts: ``"log"``: the model reads ``log(1 + count)``; ``"raw"``: the counts (additive
            in the molecule's substructures).
    """

    def __init__(self, bits: int, radius: int, num_tasks: int, blend: str, counts: str = "log") -> None:
        super().__init__()
        if blend not in BLENDS:
            raise ValueError(f"blend must be one of {BLENDS}, got {blend!r}")
        if counts not in COUNTS:
            raise ValueError(f"counts must be one of {COUNTS}, got {counts!r}")
        self.bits, self.radius, self.blend, self.counts = bits, radius, blend, counts
        self.register_buffer("coef", torch.zeros(bits, num_tasks))  # (bits, T)
        self.register_buffer("intercept", torch.zeros(num_tasks))  # (T,)
        self.register_buffer("weight", torch.zeros(num_tasks))  # (T,) blend weight on the companion

    def reset_parameters(self) -> None:
        """Unfitted: zero coefficients and blend weight."""
        for buffer in (self.coef, self.intercept, self.weight):
            buffer.zero_()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        # weights written without a companion (by a run begun before it existed, or kept epochs
        # of a run) load as an unfitted one; a partial set is still an error
        if not any(prefix + name in state_dict for name in ("coef", "intercept", "weight")):
            self.reset_parameters()
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    @property
    def fitted(self) -> bool:
        return bool((self.weight != 0).any())

    def features(self, batch) -> Tensor:
        """(B, bits): ``log(1 + counts)`` or the counts (``self.counts``)."""
        counts = substructure_counts(batch, self.bits, self.radius)
        return torch.log1p(counts) if self.counts == "log" else counts

    def predict(self, batch) -> Tensor:
        """(B, T): the companion's own outputs (logits or standardized values)."""
        return self.features(batch) @ self.coef + self.intercept

    def forward(self, outputs: Tensor, batch) -> Tensor:
        """Blend the Graphormer's (B, T) ``outputs`` with the companion's; unchanged while unfitted."""
        if not self.fitted:
            return outputs
        w = self.weight.to(outputs.dtype)
        own = self.predict(batch).to(outputs.dtype)
        if self.blend == "value":
            return (1 - w) * outputs + w * own
        p = (1 - w) * torch.sigmoid(outputs) + w * torch.sigmoid(own)
        return torch.logit(p, eps=1e-7)
