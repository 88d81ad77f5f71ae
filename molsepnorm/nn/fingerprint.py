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

The linear model is fitted once on the training split, after the Graphormer has trained or,
for regression, before its first epoch (:mod:`molsepnorm.train.companion`): logistic
regression for binary targets, ridge regression (the group-contribution model) for
regression targets. The blend averages the
two models' probabilities (binary) or standardized values (regression) with weight ``w`` on
the fingerprint model, an ensemble of two models with different inductive biases: the
substructure counts that a random forest or chemprop's bond messages read directly
(docs/accuracy.md, "A fingerprint companion" and "A group-contribution companion for
regression").

A linear model knows only the substructures it was fitted on: a bucket that no training
molecule has gets no coefficient. So the blend may weigh the two models differently for a
molecule with such a *novel* substructure (``weight_novel``) than for one whose every
substructure occurs in the training split (``weight``): on an additive property the
group-contribution model is near exact on the latter and no better than the Graphormer on
the former (docs/accuracy.md, "Blend weights by coverage").

With ``properties`` the counts also hold every atom's feature values one at a time (its
element, degree, charge, hydrogens, aromaticity, ... each in a bucket of its own): an atom
whose whole radius-0 type no training molecule has still gets the contributions of its
properties, as the Graphormer's embedding of an atom is the sum of its columns' embeddings
(docs/accuracy.md, "Atom properties in the group-contribution model").
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from molsepnorm.nn.memo import batch_memo

# all hash arithmetic stays below 2^62: values are reduced modulo a prime below 2^31 before
# every multiplication by a constant below 2^31
_MOD = 2_147_483_647  # 2^31 - 1
_MUL_A = 1_103_515_245
_MUL_B = 2_147_483_629
_ATOM_SALT = 31
_BOND_SALT = 37
_NEIGHBOUR_SALT = 1_000_003
_RADIUS_SALT = 999_983
_PROPERTY_SALT = 41

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


def substructure_counts(batch, bits: int, radius: int, properties: bool = False) -> Tensor:
    """Hashed circular-substructure counts of a padded batch: (B, bits) float.

    Args:
        batch: a :class:`~molsepnorm.data.collate.GraphBatch` (``x`` (B, N, F), ``node_mask``
            (B, N), ``spd`` (B, N, N), ``edge_path`` (B, N, N, K), ``edge_attr`` (E, F_e)).
        bits: number of buckets.
        radius: largest radius R; identifiers of radius 0..R are counted.
        properties: also count each atom's F feature values one by one (column and value).

    The counts depend on the batch alone: the members of an ensemble hash a batch once
    (:func:`molsepnorm.nn.memo.batch_memo`).
    """
    return batch_memo(batch, ("substructure counts", bits, radius, properties), lambda: _bucket_counts(
        [ident for _, ident in _identifiers(batch, radius, properties)], batch.node_mask, bits))


def substructure_count_groups(batch, bits: int, radius: int, properties: bool = False) -> dict[str, Tensor]:
    """The counts of :func:`substructure_counts` by group of identifiers, (B, bits) each:
    ``"radius 0"`` .. ``"radius R"`` and, with ``properties``, ``"properties"``. Counts add
    up, so the counts of radius 0..r with or without properties are sums of these."""
    groups: dict[str, list[Tensor]] = {}
    for group, ident in _identifiers(batch, radius, properties):
        groups.setdefault(group, []).append(ident)
    return {group: _bucket_counts(idents, batch.node_mask, bits) for group, idents in groups.items()}


def _identifiers(batch, radius: int, properties: bool) -> list[tuple[str, Tensor]]:
    """Every atom's identifiers, (B, N) each, with the name of their group."""
    mask = batch.node_mask  # (B, N)
    B, N = mask.shape
    ident = _fold(batch.x.long(), _ATOM_SALT)  # (B, N)
    adjacent = batch.spd == 1  # (B, N, N): a bond u - v
    bond = torch.zeros(B, N, N, dtype=torch.long, device=mask.device)
    if radius > 0 and adjacent.any():
        edge = batch.edge_path[..., 0]  # (B, N, N): the edge u -> v where adjacent
        bond[adjacent] = _fold(batch.edge_attr.long()[edge[adjacent]], _BOND_SALT)
    idents = [("radius 0", ident)]
    for r in range(1, radius + 1):
        message = _mix(ident.unsqueeze(1) * _NEIGHBOUR_SALT + bond)  # (B, N, N): what atom v tells atom u
        neighbours = (message * adjacent).sum(-1) % _MOD  # (B, N): a multiset hash, order-free
        ident = _mix(_mix(ident * _RADIUS_SALT + r) + neighbours)
        idents.append((f"radius {r}", ident))
    if properties:
        columns = torch.arange(batch.x.size(-1), device=mask.device) + 1  # (F,)
        values = _mix(_mix(columns * _PROPERTY_SALT) + batch.x.long() + 1)  # (B, N, F)
        idents.extend(("properties", value) for value in values.unbind(-1))
    return idents


def _bucket_counts(idents: list[Tensor], mask: Tensor, bits: int) -> Tensor:
    """(B, bits): how many of the real atoms' identifiers (K of (B, N)) fall in each bucket."""
    B = mask.size(0)
    buckets = torch.stack(idents, -1) % bits  # (B, N, K)
    counts = torch.zeros(B, bits, device=mask.device, dtype=torch.float32)  # not the default dtype
    weight = mask.unsqueeze(-1).expand_as(buckets).float()
    counts.scatter_add_(1, buckets.reshape(B, -1), weight.reshape(B, -1))
    return counts


class FingerprintCompanion(nn.Module):
    """A linear model on substructure counts (``log(1 + count)`` or the raw counts, ``counts``) and its blend weights.

    Its coefficients are buffers, not parameters: gradient training never touches them;
    :func:`molsepnorm.train.companion.fit_companion` sets them (after training, or for
    regression before its first epoch). While the blend weights are 0 (until training has
    chosen them) the blend returns the Graphormer's output unchanged.

    Buffers: ``coef`` (bits, T) and ``intercept`` (T,) of the linear model; ``seen`` (bits,),
    1 for a bucket that occurs in the training split; ``weight`` (T,), the blend weight on
    the companion for a molecule whose every bucket is seen, and ``weight_novel`` (T,) for
    one with a bucket that is not.

    Args:
        bits: buckets of the hashed counts.
        radius: largest substructure radius.
        num_tasks: T, outputs.
        blend: ``"probability"`` (binary targets: outputs are logits, the probabilities are
            averaged and turned back into a logit) or ``"value"`` (regression: the outputs are averaged).
        counts: ``"log"``: the model reads ``log(1 + count)``; ``"raw"``: the counts (additive
            in the molecule's substructures).
        properties: the counts also hold each atom's feature values one by one.
    """

    def __init__(self, bits: int, radius: int, num_tasks: int, blend: str, counts: str = "log",
                 properties: bool = False) -> None:
        super().__init__()
        if blend not in BLENDS:
            raise ValueError(f"blend must be one of {BLENDS}, got {blend!r}")
        if counts not in COUNTS:
            raise ValueError(f"counts must be one of {COUNTS}, got {counts!r}")
        self.bits, self.radius, self.blend, self.counts, self.properties = bits, radius, blend, counts, properties
        self.register_buffer("coef", torch.zeros(bits, num_tasks))  # (bits, T)
        self.register_buffer("intercept", torch.zeros(num_tasks))  # (T,)
        self.register_buffer("seen", torch.ones(bits))  # (bits,) 1: the bucket occurs in the training split
        self.register_buffer("weight", torch.zeros(num_tasks))  # (T,) blend weight on the companion
        self.register_buffer("weight_novel", torch.zeros(num_tasks))  # (T,) the same, for a molecule with an unseen bucket

    def reset_parameters(self) -> None:
        """Unfitted: zero coefficients and blend weights, every bucket counted as seen."""
        for buffer in (self.coef, self.intercept, self.weight, self.weight_novel):
            buffer.zero_()
        self.seen.fill_(1.0)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        # weights written without a companion (by a run begun before it existed, or kept epochs
        # of a run) load as an unfitted one; a partial set is still an error
        if not any(prefix + name in state_dict for name in ("coef", "intercept", "weight")):
            self.reset_parameters()
            return
        # a companion written before coverage existed: every bucket seen, one weight for all
        if prefix + "seen" not in state_dict and prefix + "weight_novel" not in state_dict:
            state_dict[prefix + "seen"] = torch.ones_like(self.seen)
            if prefix + "weight" in state_dict:
                state_dict[prefix + "weight_novel"] = state_dict[prefix + "weight"].clone()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def set_weights(self, weight: float | Tensor, novel: float | Tensor | None = None) -> None:
        """Set ``weight`` and ``weight_novel`` (default: the same) to a number or a (T,) tensor."""
        self.weight.copy_(torch.as_tensor(weight, dtype=self.weight.dtype).expand_as(self.weight))
        novel = weight if novel is None else novel
        self.weight_novel.copy_(torch.as_tensor(novel, dtype=self.weight.dtype).expand_as(self.weight_novel))

    @property
    def fitted(self) -> bool:
        return bool((self.weight != 0).any() or (self.weight_novel != 0).any())

    def predict(self, batch) -> Tensor:
        """(B, T): the companion's own outputs (logits or standardized values)."""
        return self._own(substructure_counts(batch, self.bits, self.radius, self.properties))

    def _own(self, counts: Tensor) -> Tensor:
        """(B, T) from (B, bits) counts: the linear model on ``log(1 + counts)`` or the counts,
        in float32 with autocast off (``forward`` is called so by the Graphormer; this guards
        :meth:`predict`, called on its own)."""
        features = torch.log1p(counts) if self.counts == "log" else counts
        with torch.autocast(device_type=counts.device.type, enabled=False):
            return features.float() @ self.coef.float() + self.intercept.float()

    def covered(self, counts: Tensor) -> Tensor:
        """(B,) bool: every bucket of the (B, bits) ``counts`` is seen in the training split."""
        return ((counts > 0) & (self.seen == 0)).sum(-1) == 0

    def forward(self, outputs: Tensor, batch) -> Tensor:
        """Blend the Graphormer's (B, T) ``outputs`` with the companion's; unchanged while unfitted."""
        if not self.fitted:
            return outputs
        counts = substructure_counts(batch, self.bits, self.radius, self.properties)  # (B, bits)
        own = self._own(counts).to(outputs.dtype)
        w = torch.where(self.covered(counts).unsqueeze(-1), self.weight, self.weight_novel).to(outputs.dtype)  # (B, T)
        if self.blend == "value":
            return (1 - w) * outputs + w * own
        p = (1 - w) * torch.sigmoid(outputs) + w * torch.sigmoid(own)
        return torch.logit(p, eps=1e-7)
