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

from typing import Callable, Optional

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
    buckets = atom_buckets(batch, bits, radius, properties)  # outside: batch_memo does not nest
    return batch_memo(batch, ("substructure counts", bits, radius, properties),
                      lambda: _bucket_counts(buckets, batch.node_mask, bits))


def atom_buckets(batch, bits: int, radius: int, properties: bool = False) -> Tensor:
    """(B, N, K) long: the buckets of each atom's identifiers, its radius-0 one (its
    environment: the whole feature row) first; hashed once per batch, for the counts and for
    every member of an ensemble (:func:`~molsepnorm.nn.memo.batch_memo`)."""
    return batch_memo(batch, ("atom buckets", bits, radius, properties), lambda: torch.stack(
        [ident for _, ident in _identifiers(batch, radius, properties)], -1) % bits)


def substructure_count_groups(batch, bits: int, radius: int, properties: bool = False) -> dict[str, Tensor]:
    """The counts of :func:`substructure_counts` by group of identifiers, (B, bits) each:
    ``"radius 0"`` .. ``"radius R"`` and, with ``properties``, ``"properties"``. Counts add
    up, so the counts of radius 0..r with or without properties are sums of these."""
    groups: dict[str, list[Tensor]] = {}
    for group, ident in _identifiers(batch, radius, properties):
        groups.setdefault(group, []).append(ident)
    return {group: _bucket_counts(torch.stack(idents, -1) % bits, batch.node_mask, bits)
            for group, idents in groups.items()}


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


def _bucket_counts(buckets: Tensor, mask: Tensor, bits: int) -> Tensor:
    """(B, bits): how many of the real atoms' identifiers, by their (B, N, K) buckets, fall in each bucket."""
    B = mask.size(0)
    counts = torch.zeros(B, bits, device=mask.device, dtype=torch.float32)  # not the default dtype
    weight = mask.unsqueeze(-1).expand_as(buckets).float()
    counts.scatter_add_(1, buckets.reshape(B, -1), weight.reshape(B, -1))
    return counts


#: ``novel_rule[0]``: 0 off, 1 the input embeddings, 2 the final atom states
NOVEL_SPACES = (0, 1, 2)


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

    Unseen atoms (raw counts only, :meth:`set_novel_pricing`): a linear model on raw counts
    is a sum of per-atom contributions, and an atom whose environment (its radius-0
    identifier) no training molecule has is priced by its other identifiers alone (its
    property counts, where they are read; else next to nothing). With a
    pricing set, its contribution is replaced by the mean contribution of the ``k`` training
    environments nearest to it in the Graphormer's atom space (cosine similarity of the
    input embeddings, ``space`` 1, or of the final atom states, 2), docs/pretraining.md
    ("An unseen environment priced by the environments it resembles"). Buffers:
    ``novel_pool`` (U, D), the unit-length mean embedding of each training environment;
    ``novel_values`` (U, T), its mean contribution; ``novel_known`` (bits,), the radius-0
    buckets of the pool; ``novel_rule`` ``[space, k]`` (0: off, the others empty).

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
        self.register_buffer("novel_pool", torch.zeros(0, 0))  # (U, D) training environments, unit length
        self.register_buffer("novel_values", torch.zeros(0, num_tasks))  # (U, T) their mean contributions
        self.register_buffer("novel_known", torch.zeros(0, dtype=torch.bool))  # (bits,) radius-0 buckets of the pool
        self.register_buffer("novel_rule", torch.zeros(2, dtype=torch.long))  # [space, k]; space 0: off
        self.novel_space, self.novel_k = 0, 0  # novel_rule as Python ints: forward reads them without a sync

    def reset_parameters(self) -> None:
        """Unfitted: zero coefficients and blend weights, every bucket counted as seen."""
        for buffer in (self.coef, self.intercept, self.weight, self.weight_novel):
            buffer.zero_()
        self.seen.fill_(1.0)
        self.set_novel_pricing(0, 0)

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
        if prefix + "novel_rule" not in state_dict:  # written before unseen atoms were priced: off
            state_dict[prefix + "novel_rule"] = torch.zeros_like(self.novel_rule)
            state_dict[prefix + "novel_pool"] = self.novel_pool.new_zeros(0, 0)
            state_dict[prefix + "novel_values"] = self.novel_values.new_zeros(0, self.coef.size(1))
        if prefix + "novel_known" not in state_dict:
            state_dict[prefix + "novel_known"] = self.novel_known.new_zeros(0)
        for name in ("novel_pool", "novel_values", "novel_known"):  # sized by the pricing it holds
            if prefix + name in state_dict:
                self._buffers[name] = self._buffers[name].new_zeros(state_dict[prefix + name].shape)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        self.novel_space, self.novel_k = (int(v) for v in self.novel_rule.tolist())

    def set_weights(self, weight: float | Tensor, novel: float | Tensor | None = None) -> None:
        """Set ``weight`` and ``weight_novel`` (default: the same) to a number or a (T,) tensor."""
        self.weight.copy_(torch.as_tensor(weight, dtype=self.weight.dtype).expand_as(self.weight))
        novel = weight if novel is None else novel
        self.weight_novel.copy_(torch.as_tensor(novel, dtype=self.weight.dtype).expand_as(self.weight_novel))

    def set_novel_pricing(self, space: int, k: int, pool: Optional[Tensor] = None, values: Optional[Tensor] = None,
                          known: Optional[Tensor] = None) -> None:
        """Price unseen atoms by their ``k`` nearest training environments in ``space`` (1:
        input embeddings, 2: final atom states; 0: off, and the pool emptied): ``pool`` (U, D)
        unit-length, ``values`` (U, T), ``known`` (bits,) bool, the radius-0 buckets they are."""
        if space not in NOVEL_SPACES:
            raise ValueError(f"space must be one of {NOVEL_SPACES}, got {space}")
        if not space:
            pool, values, known = self.coef.new_zeros(0, 0), self.coef.new_zeros(0, self.coef.size(1)), \
                torch.zeros(0, dtype=torch.bool)
        elif (self.counts != "raw" or pool is None or values is None or known is None
              or not 0 < k <= pool.size(0) or known.shape != (self.bits,)):
            raise ValueError("pricing unseen atoms needs raw counts, a pool, its values, the (bits,) mask of its "
                             "environments and 0 < k <= its size")
        device = self.coef.device
        self._buffers["novel_pool"] = pool.detach().to(device, torch.float32).clone()
        self._buffers["novel_values"] = values.detach().to(device, torch.float32).clone()
        self._buffers["novel_known"] = known.detach().to(device, torch.bool).clone()
        self.novel_rule.copy_(torch.tensor([space, k if space else 0]))
        self.novel_space, self.novel_k = space, (k if space else 0)

    def atom_buckets(self, batch) -> Tensor:
        """(B, N, K) long: :func:`atom_buckets` of this companion's identifiers."""
        return atom_buckets(batch, self.bits, self.radius, self.properties)

    def _novel_atoms(self, buckets: Tensor, mask: Tensor) -> Tensor:
        """(B, N) bool: the real atoms whose radius-0 bucket (``buckets[..., 0]``) no training
        molecule has (with a pricing set, the buckets of its pool; else any identifier's,
        ``seen``: a bucket shared by chance with another kind of identifier hides an unseen
        atom there)."""
        known = self.novel_known if self.novel_known.numel() else self.seen != 0
        return ~known[buckets[..., 0]] & mask

    def atom_contributions(self, batch) -> tuple[Tensor, Tensor]:
        """``(contributions, novel)``: each atom's share of :meth:`predict` (B, N, T), the sum
        over its identifiers of their coefficients (raw counts: the model is their sum), and
        (B, N) bool, the unseen atoms (:meth:`_novel_atoms`)."""
        buckets = self.atom_buckets(batch)  # (B, N, K), radius 0 first
        with torch.autocast(device_type=buckets.device.type, enabled=False):
            contributions = self.coef.float()[buckets].sum(2) * batch.node_mask.unsqueeze(-1)  # (B, N, T)
        return contributions, self._novel_atoms(buckets, batch.node_mask)

    def _novel_correction(self, batch, atoms: Callable[[], Tensor]) -> Tensor:
        """(B, T): for each molecule, the neighbours' contributions of its unseen atoms less their
        own; ``atoms()`` (B, N, D) and the contributions are computed only for a batch with one."""
        buckets = self.atom_buckets(batch)  # (B, N, K), radius 0 first
        novel = self._novel_atoms(buckets, batch.node_mask)  # (B, N)
        out = self.coef.new_zeros(buckets.size(0), self.coef.size(1), dtype=torch.float32)  # (B, T)
        if not bool(novel.any()):
            return out
        embedded = atoms()
        with torch.autocast(device_type=embedded.device.type, enabled=False):
            own = self.coef.float()[buckets[novel]].sum(1)  # (n, T)
            queries = nn.functional.normalize(embedded[novel].float(), dim=-1)  # (n, D)
            nearest = (queries @ self.novel_pool.T).topk(self.novel_k, dim=-1).indices  # (n, k)
            change = self.novel_values[nearest].mean(1) - own  # (n, T)
        molecule = novel.nonzero()[:, 0]  # (n,)
        return out.index_add_(0, molecule, change)

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

    def forward(self, outputs: Tensor, batch, atoms: Optional[Callable[[], Tensor]] = None) -> Tensor:
        """Blend the Graphormer's (B, T) ``outputs`` with the companion's; unchanged while unfitted.
        ``atoms()`` (B, N, D): the atom embeddings of :attr:`novel_space`, where unseen atoms are
        priced (called only for a batch that holds one)."""
        if not self.fitted:
            return outputs
        counts = substructure_counts(batch, self.bits, self.radius, self.properties)  # (B, bits)
        own = self._own(counts)
        if self.novel_space and atoms is not None:
            own = own + self._novel_correction(batch, atoms)
        own = own.to(outputs.dtype)
        w = torch.where(self.covered(counts).unsqueeze(-1), self.weight, self.weight_novel).to(outputs.dtype)  # (B, T)
        if self.blend == "value":
            return (1 - w) * outputs + w * own
        p = (1 - w) * torch.sigmoid(outputs) + w * torch.sigmoid(own)
        return torch.logit(p, eps=1e-7)
