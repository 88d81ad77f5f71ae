"""Choosing the blend of a Graphormer and its fingerprint companion on the validation split.

A regression companion (:mod:`molsepnorm.train.companion`) with ``train.companion_weight``
``"auto"`` is blended in with the weight the validation split prefers
(:meth:`ValidationBlend.choose`): the best of :data:`BLEND_WEIGHTS`, kept only when it
lowers the validation error by :data:`MIN_VALIDATION_GAIN` or more, and, where another
:data:`MIN_VALIDATION_GAIN` is to be had, a lower weight of its own for a molecule with a
substructure no training molecule has (a *novel* one, :func:`covered_by`), which the
linear model cannot price (docs/accuracy.md, "A group-contribution companion for
regression" and "Blend weights by coverage"). The companion's validation predictions do
not change while the Graphormer trains, so :class:`ValidationBlend` holds them and scores
the blend of any epoch without running the model again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import torch

from molsepnorm.nn.fingerprint import FingerprintCompanion

if TYPE_CHECKING:
    from molsepnorm.train.companion import CompanionFit

#: the blend weights :meth:`ValidationBlend.choose` tries for a regression target
BLEND_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: the (covered, novel) weight pairs :meth:`ValidationBlend.choose` tries: never more weight on the
#: linear model for a molecule with a substructure it has not seen than for one it has seen whole
BLEND_PAIRS = tuple((a, b) for a in BLEND_WEIGHTS for b in BLEND_WEIGHTS if b <= a)
#: a weight above 0 must improve the validation metric by this fraction of its value without
#: the companion; a smaller difference is within a validation split's noise
MIN_VALIDATION_GAIN = 0.02


@dataclass
class BlendChoice:
    """The blend weights :meth:`ValidationBlend.choose` chose per target, and why."""

    weights: dict[str, float]  # per target: the weight on the companion
    weights_novel: dict[str, float]  # per target: the same for a molecule with a novel substructure
    validation: dict[str, dict[str, float]]  # per fitted target: the validation metric of every weight
    coverage: dict[str, dict[str, Any]]  # per fitted target with novel molecules: the best pair

    def set(self, companion: FingerprintCompanion) -> None:
        """Set ``companion``'s weights to these (the targets in the order of :attr:`weights`)."""
        companion.set_weights(torch.as_tensor(list(self.weights.values())),
                              torch.as_tensor(list(self.weights_novel.values())))

    def apply(self, companion: FingerprintCompanion, fit: CompanionFit) -> None:
        """Set ``companion``'s weights to these and record them in ``fit``."""
        self.set(companion)
        fit.weights, fit.weights_novel = dict(self.weights), dict(self.weights_novel)
        fit.validation, fit.coverage = dict(self.validation), dict(self.coverage)


class ValidationBlend:
    """A fitted regression companion on the validation split: its targets and its own
    predictions, which do not change while the Graphormer trains, so that the blend of any
    Graphormer predictions can be chosen and scored without running the model again (after
    the last epoch, and after every epoch with ``train.monitor_blend``).

    Args:
        y: (N, T) the validation targets, original units.
        own: (N, T) the companion's predictions alone, original units.
        covered: (N,) bool, the validation molecules whose every substructure occurs in the
            training split (:func:`~molsepnorm.train.companion.covered_rows`), or None: one weight for every molecule.
        fitted: per target, whether the companion was fitted (:attr:`~molsepnorm.train.companion.CompanionFit.fitted`).
        task, metric: the task and the validation metric that chooses the weights.
    """

    def __init__(self, y: np.ndarray, own: np.ndarray, covered: Optional[np.ndarray], fitted: dict[str, bool],
                 task: str, metric: str) -> None:
        self.y, self.own, self.covered, self.fitted = y, own, covered, dict(fitted)
        self.task, self.metric = task, metric

    @classmethod
    def measure(cls, companion: FingerprintCompanion, fitted: dict[str, bool],
                predict: Callable[[], tuple[np.ndarray, np.ndarray]], task: str, metric: str,
                covered: Optional[np.ndarray] = None) -> "ValidationBlend":
        """Run ``predict() -> (targets, predictions)`` once with the companion alone on every
        fitted target; its weights are 0 afterwards (the Graphormer alone)."""
        companion.set_weights(torch.as_tensor([float(ok) for ok in fitted.values()]))
        try:
            y, own = predict()
        finally:
            companion.set_weights(0.0)
        return cls(y, own, covered, fitted, task, metric)

    def choose(self, alone: np.ndarray) -> BlendChoice:
        """The blend weights for the Graphormer's (N, T) validation predictions ``alone``.

        Per fitted target, first one weight for every molecule: the best of
        :data:`BLEND_WEIGHTS`, kept only when it improves the metric by at least
        :data:`MIN_VALIDATION_GAIN` of its value with the Graphormer alone
        (:func:`pick_weight`); otherwise the Graphormer alone predicts it. Then, with
        ``covered``, the best pair of weights, one for covered molecules and a lower or
        equal one for the others (:data:`BLEND_PAIRS`): it replaces the single weight only
        when it improves the metric by at least :data:`MIN_VALIDATION_GAIN` of the single
        weight's value. A target not fitted gets weight 0.
        """
        from molsepnorm.inference.metrics import compute_metrics
        from molsepnorm.metric_names import HIGHER_IS_BETTER

        higher = HIGHER_IS_BETTER[self.metric]
        choice = BlendChoice({name: 0.0 for name in self.fitted}, {name: 0.0 for name in self.fitted}, {}, {})
        covered = self.covered
        for t, name in enumerate(self.fitted):
            if not self.fitted[name]:
                continue

            def score(w: Any) -> float:
                blend = _mix(alone[:, t], self.own[:, t], w)
                return compute_metrics(self.task, self.y[:, t:t + 1], blend[:, None], [name])[self.metric]

            scores = {w: score(w) for w in BLEND_WEIGHTS}
            choice.validation[name] = {f"{w:g}": float(value) for w, value in scores.items()}
            best_pair = {}
            if covered is not None and 0 < covered.sum() < len(covered):
                pairs = {(a, b): score(np.where(covered, a, b)) for a, b in BLEND_PAIRS}
                best = best_of(pairs, higher)
                best_pair = {best: pairs[best]}
                choice.coverage[name] = {"novel_molecules": int((~covered).sum()), "pair": list(best),
                                         "score": float(pairs[best])}
            choice.weights[name], choice.weights_novel[name] = pick_weights(scores, best_pair, higher)
        return choice

    def settle(self, companion: FingerprintCompanion, fit: CompanionFit,
               predict: Callable[[], tuple[np.ndarray, np.ndarray]]) -> BlendChoice:
        """Choose the weights for the model as it is (``predict() -> (targets, predictions)``
        runs it on the validation split with the companion's weights at 0), set them in
        ``companion`` and record them in ``fit``."""
        _, alone = predict()
        choice = self.choose(alone)
        choice.apply(companion, fit)
        return choice

    def predictions(self, alone: np.ndarray, choice: BlendChoice) -> np.ndarray:
        """(N, T): the blend of ``choice`` of the Graphormer's validation predictions ``alone``."""
        weights = np.asarray([choice.weights[name] for name in self.fitted])  # (T,)
        novel = np.asarray([choice.weights_novel[name] for name in self.fitted])
        w = weights[None, :] if self.covered is None else np.where(self.covered[:, None], weights, novel)  # (N, T)
        return _mix(alone, self.own, w)


def _mix(alone: np.ndarray, own: np.ndarray, w: Any) -> np.ndarray:
    """The blend of the Graphormer's predictions ``alone`` and the companion's ``own`` with
    weight ``w`` (a number or an array that broadcasts) on the companion."""
    return (1 - w) * alone + w * own

def covered_by(X: Any, seen: np.ndarray) -> np.ndarray:
    """(M,) bool: the rows of ``X`` ((M, bits) substructure counts, dense or scipy sparse) with
    no count in a bucket outside ``seen`` ((bits,) bool: the buckets of the training split)."""
    return np.asarray((X != 0).astype(np.float64) @ (~seen).astype(np.float64)).ravel() == 0


def best_of(scores: dict[Any, float], higher_is_better: bool) -> Any:
    """The key of the best value in ``scores`` (the first of equals)."""
    return max(scores, key=lambda key: scores[key] if higher_is_better else -scores[key])


def pick_weight(scores: dict[float, float], higher_is_better: bool,
                min_gain: float = MIN_VALIDATION_GAIN) -> float:
    """The blend weight of :meth:`ValidationBlend.choose`'s rule from ``{weight: validation metric}``:
    the best weight (the first of equals), or 0 when it improves on weight 0 by less than
    ``min_gain`` of weight 0's value."""
    best = best_of(scores, higher_is_better)
    return best if relative_gain(scores[0.0], scores[best], higher_is_better) >= min_gain else 0.0


def pick_weights(scores: dict[float, float], pairs: dict[tuple[float, float], float], higher_is_better: bool,
                 min_gain: float = MIN_VALIDATION_GAIN) -> tuple[float, float]:
    """``(weight, weight_novel)`` by :meth:`ValidationBlend.choose`'s rule from the validation metric of
    every single weight (``scores``) and of every pair (covered, novel) (``pairs``; empty:
    one weight for all): :func:`pick_weight`, then the best pair if it improves on that by at
    least ``min_gain`` of its value."""
    chosen = pick_weight(scores, higher_is_better, min_gain)
    if pairs:
        best = best_of(pairs, higher_is_better)
        if relative_gain(scores[chosen], pairs[best], higher_is_better) >= min_gain:
            return best
    return chosen, chosen


def relative_gain(base: float, value: float, higher_is_better: bool) -> float:
    """How much better ``value`` is than ``base``, as a fraction of ``base``."""
    return (value - base if higher_is_better else base - value) / max(abs(base), 1e-12)


def format_weights(weights: dict[str, float], novel: Optional[dict[str, float]] = None) -> str:
    """``"0.5"`` when every target has the same blend weight, else ``"a 0.5, b 0"``; with
    ``novel`` weights that differ: ``"1 (0.25 for a molecule with a novel substructure)"``."""
    def text(values: dict[str, float]) -> str:
        if len(set(values.values())) == 1:
            return f"{next(iter(values.values())):g}"
        return ", ".join(f"{name} {w:g}" for name, w in values.items())

    if not novel or novel == weights:
        return text(weights)
    return f"{text(weights)} ({text(novel)} for a molecule with a novel substructure)"


def component_scores(companion: FingerprintCompanion, evaluate: Any) -> dict[str, dict[str, dict[str, float]]]:
    """``{"graphormer": {"val": ..., "test": ...}, "fingerprint": {...}}``: the metrics of each
    model of the blend alone, from ``evaluate(split) -> metrics`` run with the blend weight
    set to 0 (the Graphormer's output unchanged) and to 1; the weights are restored after."""
    blend, novel = companion.weight.clone(), companion.weight_novel.clone()
    scores = {}
    try:
        for name, weight in (("graphormer", 0.0), ("fingerprint", 1.0)):
            companion.set_weights(weight)
            scores[name] = {part: evaluate(part) for part in ("val", "test")}
    finally:
        companion.set_weights(blend, novel)
    return scores
