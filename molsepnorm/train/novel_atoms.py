"""Unseen atoms priced by the training environments they resemble: the pool, and the rule
validation chooses.

The regression companion (a linear model on raw atom-environment counts) is a sum of
per-atom contributions; an atom whose environment (its radius-0 identifier: the whole
feature row) no training molecule has is priced by its property counts alone, and on
nci-tpsa with 10 % of the labels those atoms make half the error. After training, the
model's own embeddings of the training atoms give every training environment a
unit-length mean embedding and a mean contribution (:func:`environment_pools`); an unseen
atom then takes the mean contribution of its ``k`` nearest environments
(:meth:`~molsepnorm.nn.fingerprint.FingerprintCompanion.set_novel_pricing`). Which space
(the input embeddings or the final atom states) and ``k``, or no pricing, is chosen on the
validation split (:func:`choose_novel_pricing`), the nearest environment in the input
embeddings unless another rule is clearly better (:func:`pick_rule`): the measurements are
in docs/pretraining.md, "An unseen environment priced by the environments it resembles" and
"Which rule: the simplest unless another is clearly better".
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Optional, Sequence

import torch
from torch import Tensor, nn

from molsepnorm.data.collate import GraphCollator
from molsepnorm.metric_names import HIGHER_IS_BETTER

#: the spaces an unseen atom's neighbours are found in (``novel_rule[0]``), and what the log calls them
SPACE_NAMES = {1: "input embeddings", 2: "final atom states"}
NEIGHBOURS = (1, 3, 5)  # k tried on validation
MIN_GAIN = 0.02  # relative validation gain a pricing must bring, as a blend weight must (train.blend)
#: the rule kept where it gains MIN_GAIN: the nearest environment in the input embeddings
DEFAULT_RULE = "input embeddings, k=1"
#: the relative validation gain on DEFAULT_RULE (or on no pricing) another rule must bring: with
#: 10-30 validation molecules holding an unseen atom, the best of every rule overfits them
#: (docs/pretraining.md, "Which rule: the simplest unless another is clearly better")
SWITCH_GAIN = 0.10
#: validation molecules with an unseen atom needed before any pricing is tried: with fewer, a
#: molecule or two would choose the rule for every test molecule
MIN_MOLECULES = 10


def _batches(model: nn.Module, graphs: Sequence[Any], batch_size: int) -> Any:
    """Padded batches of ``graphs`` in order, on the model's device (no DataLoader: it would
    draw its seed from the global generator)."""
    device = next(model.parameters()).device
    collate = GraphCollator(model.config.multi_hop_max_dist)
    for start in range(0, len(graphs), batch_size):
        yield collate([graphs[i] for i in range(start, min(start + batch_size, len(graphs)))]).to(device)


@torch.inference_mode()
def has_unseen_atoms(model: nn.Module, graphs: Sequence[Any], batch_size: int = 256) -> int:
    """How many of ``graphs`` hold an atom whose environment the companion never saw."""
    return sum(int(model.companion.atom_contributions(b)[1].any(1).sum()) for b in _batches(model, graphs, batch_size))


@torch.inference_mode()
def environment_pools(model: nn.Module, graphs: Sequence[Any],
                      batch_size: int = 256) -> tuple[dict[int, tuple[Tensor, Tensor]], Tensor]:
    """``(pools, known)``: per space of :data:`SPACE_NAMES`, ``(pool, values)``, one row per
    environment of the training ``graphs``: the unit-length mean of its atoms' unit-length
    embeddings (U, D) and their mean contribution to the companion's output (U, T); and
    ``known`` (bits,) bool, the radius-0 buckets of those environments."""
    companion = model.companion
    was_training = model.training
    model.eval()
    try:
        embedded: dict[int, Optional[Tensor]] = {space: None for space in SPACE_NAMES}
        values: Optional[Tensor] = None
        counts: Optional[Tensor] = None
        for batch in _batches(model, graphs, batch_size):
            contributions, _ = companion.atom_contributions(batch)  # (B, N, T)
            env = companion.atom_buckets(batch)[..., 0][batch.node_mask]  # (n,)
            if values is None:
                values = contributions.new_zeros(companion.bits, contributions.size(-1))
                counts = contributions.new_zeros(companion.bits)
            values.index_add_(0, env, contributions[batch.node_mask])
            counts.index_add_(0, env, torch.ones_like(env, dtype=counts.dtype))
            h = model.encode(batch)
            for space in SPACE_NAMES:
                atoms = nn.functional.normalize(model.atom_embeddings(batch, space, h)[batch.node_mask], dim=-1)
                if embedded[space] is None:
                    embedded[space] = atoms.new_zeros(companion.bits, atoms.size(-1))
                embedded[space].index_add_(0, env, atoms)
    finally:
        model.train(was_training)
    assert values is not None and counts is not None, "no training molecule"
    seen = counts > 0
    return {space: (nn.functional.normalize(sums[seen], dim=-1), values[seen] / counts[seen].unsqueeze(-1))
            for space, sums in embedded.items() if sums is not None}, seen


def _gain(metric: str, value: float, base: float) -> float:
    """How much better ``value`` is than ``base``, relative to ``base`` (negative: worse)."""
    if base == 0:
        return 0.0
    return (value - base) / abs(base) * (1 if HIGHER_IS_BETTER[metric] else -1)


def price_unseen_atoms(model: nn.Module, fit: Any, task: str, target_names: Sequence[str], train: Sequence[Any],
                       val: Sequence[Any], monitor: str, validation: Callable[[], float],
                       batch_size: int = 256) -> Optional[dict[str, Any]]:
    """What a training run (and ``add_companion``) does once its companion is fitted: for a
    regression companion on raw counts that the blend uses, :func:`choose_novel_pricing`,
    recorded in ``fit`` (a :class:`~molsepnorm.train.companion.CompanionFit`: ``novel``, and
    ``weights_novel`` as the choice left them). Returns the record, or None where not tried."""
    companion = model.companion
    if task != "regression" or companion.counts != "raw" or not companion.fitted:
        return None
    fit.novel = choose_novel_pricing(model, train, val, monitor, validation, batch_size)
    fit.weights_novel = {name: float(companion.weight_novel[t]) for t, name in enumerate(target_names)}
    return fit.novel


def describe(record: dict[str, Any], monitor: str) -> str:
    """The log's words on a :func:`choose_novel_pricing` record."""
    tried = record["validation"]
    if not tried:
        return f"left as they are: fewer than {MIN_MOLECULES} such molecules, too few to choose a pricing on"
    base = tried["none"]
    if record["chosen"] == "none":
        best = min(tried.items(), key=lambda kv: kv[1] * (-1 if HIGHER_IS_BETTER[monitor] else 1))
        return (f"left as they are: on validation {monitor} ({base:.4f}) {DEFAULT_RULE} did not gain "
                f"{MIN_GAIN:.0%} nor another rule {SWITCH_GAIN:.0%} (best tried {best[0]}: {best[1]:.4f})")
    return (f"priced by their nearest training environments ({record['chosen']}): validation {monitor} "
            f"{base:.4f} -> {tried[record['chosen']]:.4f}")


def choose_novel_pricing(model: nn.Module, train: Sequence[Any], val: Sequence[Any], monitor: str,
                         validation: Callable[[], float], batch_size: int = 256) -> dict[str, Any]:
    """Set, in the model's companion, the pricing of unseen atoms that ``validation()`` (the
    model's validation ``monitor``) prefers by :func:`pick_rule`, among each space of
    :data:`SPACE_NAMES` with each ``k`` of :data:`NEIGHBOURS`, with the weight on the
    companion of a molecule with an unseen bucket (``weight_novel``) as it was and, where
    different, as for the others. Not tried (and left off) when fewer than
    :data:`MIN_MOLECULES` validation molecules hold an unseen atom.

    Returns:
        ``{"validation_molecules": n, "validation": {rule: value}, "chosen": rule}`` (plain
        data for ``results.json``, the same for a run resumed as for one that was not: no
        wall time), rule ``"none"`` or ``"<space>, k=<k>[, weight as covered]"``.
    """
    companion = model.companion
    companion.set_novel_pricing(0, 0)
    unseen = has_unseen_atoms(model, val, batch_size)
    record: dict[str, Any] = {"validation_molecules": unseen, "validation": {}, "chosen": "none"}
    if unseen >= MIN_MOLECULES:
        weight, novel = companion.weight.clone(), companion.weight_novel.clone()
        try:
            _choose(companion, model, train, monitor, validation, batch_size, record, weight, novel)
        except BaseException:
            companion.set_weights(weight, novel)
            companion.set_novel_pricing(0, 0)
            raise
    return record


def pick_rule(tried: dict[str, float], monitor: str) -> str:
    """The rule :func:`choose_novel_pricing` keeps, from the validation ``monitor`` of every
    rule tried (``{"none": ..., name: ...}``): :data:`DEFAULT_RULE` where it gains
    :data:`MIN_GAIN` on no pricing, else none; another rule only where it gains
    :data:`SWITCH_GAIN` on that, and :data:`MIN_GAIN` on no pricing."""
    base = tried["none"]
    kept = DEFAULT_RULE if DEFAULT_RULE in tried and _gain(monitor, tried[DEFAULT_RULE], base) >= MIN_GAIN else "none"
    others = [name for name in tried if name not in ("none", DEFAULT_RULE)]
    if others:
        best = max(others, key=lambda name: _gain(monitor, tried[name], tried[kept]))
        if _gain(monitor, tried[best], tried[kept]) >= SWITCH_GAIN and _gain(monitor, tried[best], base) >= MIN_GAIN:
            return best
    return kept


def candidate_rules(pools: dict[int, tuple[Tensor, Tensor]], weight: Tensor,
                    novel: Tensor) -> Iterator[tuple[str, int, int, Tensor]]:
    """``(name, space, k, weight_novel)`` of every rule :func:`choose_novel_pricing` tries on
    :func:`environment_pools`' ``pools``: each space with each ``k`` the pool can serve, with
    the blend's weight on a molecule with an unseen bucket as it was (``novel``) and, where
    it differs, as for the others (``weight``: ``", weight as covered"``)."""
    for space, (pool, _) in pools.items():
        for k in NEIGHBOURS:
            if k > pool.size(0):
                continue
            for novel_weight in ([novel] if torch.equal(novel, weight) else [novel, weight]):
                yield (f"{SPACE_NAMES[space]}, k={k}" + ("" if novel_weight is novel else ", weight as covered"),
                       space, k, novel_weight)


def _choose(companion: Any, model: nn.Module, train: Sequence[Any], monitor: str, validation: Callable[[], float],
            batch_size: int, record: dict[str, Any], weight: Tensor, novel: Tensor) -> None:
    record["validation"]["none"] = validation()
    rules: dict[str, tuple[int, int, Tensor]] = {}
    pools, known = environment_pools(model, train, batch_size)
    for name, space, k, novel_weight in candidate_rules(pools, weight, novel):
        companion.set_novel_pricing(space, k, *pools[space], known)
        companion.set_weights(weight, novel_weight)
        record["validation"][name] = validation()
        rules[name] = (space, k, novel_weight)
    companion.set_weights(weight, novel)
    companion.set_novel_pricing(0, 0)
    chosen = pick_rule(record["validation"], monitor)
    if chosen != "none":
        space, k, novel_weight = rules[chosen]
        companion.set_novel_pricing(space, k, *pools[space], known)
        companion.set_weights(weight, novel_weight)
        record["chosen"] = chosen
