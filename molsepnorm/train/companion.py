"""Fitting the fingerprint companion of a Graphormer (:mod:`molsepnorm.nn.fingerprint`); its
blend weights are chosen by :mod:`molsepnorm.train.blend`.

``train.companion`` chooses it: ``"auto"`` (the default) and ``"fingerprint"`` fit one;
``"none"`` never. :func:`fit_companion` reads the hashed substructure counts of every
training molecule and fits an L2-regularized linear model on them per target, of a kind
that depends on the task:

* binary targets: logistic regression (scikit-learn) on ``log(1 + count)`` of substructures of radius
  0..2 (ECFP4-like, 2,048 buckets), penalty :data:`COMPANION_L2` per training molecule
  (``C = 1 / (l2 n)``), blended with weight 0.5;
* regression: a group-contribution model, ridge regression (:func:`ridge`) on the raw
  counts of every atom's environment (16,384 buckets) with a light penalty
  (:data:`GROUP_L2` per molecule, ``alpha = l2 n``) on the standardized targets. The
  environments are the atoms alone (radius 0) or with their bonded neighbours as well
  (radius 0 and 1), with or without each atom's feature values one by one, whichever
  predicts the validation split better (:data:`GROUP_FEATURES`; docs/accuracy.md, "The
  group-contribution radius" and "Atom properties in the group-contribution model").
  Its blend weight is chosen per target on the validation split
  (:meth:`~molsepnorm.train.blend.ValidationBlend.choose`):
  on a property that is a sum of atom contributions it wins (Crippen logP); on others the
  validation split usually keeps the Graphormer alone (docs/accuracy.md, "A
  group-contribution companion for regression"). Validation may also give a molecule with
  an environment no training molecule has (a *novel* one, which the linear model cannot
  price) a weight of its own (docs/accuracy.md, "Blend weights by coverage").

The fit reads the training split only; the validation split chooses a regression
companion's features and blend weight, as it chooses the epoch; the test split plays no part.

When: a classification companion, or a regression one with a fixed weight, is fitted after
the last epoch (:func:`fit_blend`). A regression companion with weight ``"auto"`` is fitted
before the first (:func:`prepare_blend`, ``train.monitor_blend``, the default): its
predictions do not depend on the Graphormer, so after every epoch its
:class:`~molsepnorm.train.blend.ValidationBlend` chooses the weights for that epoch's
Graphormer and scores the blend, and the blend's validation metric picks ``best.pt`` and
drives early stopping. The epoch kept is then the one whose *blend* predicts best, not the
one whose Graphormer alone does; where the linear model takes the prediction (an additive
property) the run stops once the blend has stopped improving (docs/accuracy.md, "The blend
picks the epoch").
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import torch

from molsepnorm.errors import MolsepnormError
from molsepnorm.nn.fingerprint import FingerprintCompanion, substructure_count_groups, substructure_counts
from molsepnorm.train.blend import ValidationBlend, component_scores, covered_by
from molsepnorm.train.config import COMPANIONS, resolve_monitor
from molsepnorm.train.logs import LOGGER_NAME

log = logging.getLogger(LOGGER_NAME)

COMPANION_BITS = 2048  # binary targets: hashed buckets, as RDKit's default Morgan fingerprint
COMPANION_RADIUS = 2  # substructures of radius 0..2 (ECFP4)
COMPANION_L2 = 0.003  # L2 penalty per training molecule (docs/accuracy.md, "A fingerprint companion")
COMPANION_WEIGHT = 0.5  # binary targets: the blend weight of train.companion_weight "auto"
GROUP_BITS = 16_384  # regression: buckets; the radius-1 environments of a data set seldom collide in them
GROUP_RADIUS = 1  # the largest radius a regression companion is built with (its model config)
#: the features a regression companion tries, (radius, properties), chosen on validation
#: (:func:`fit_companion`): every atom alone (the atom types of Ertl's polar surface area) or
#: with its bonded neighbours (those of Crippen's logP), counts of radius 0..R; with or
#: without each atom's feature values one by one (a price for an atom type not seen whole)
GROUP_FEATURES = ((0, False), (0, True), (1, False), (1, True))
GROUP_L2 = 1e-5  # L2 penalty per training molecule: light, the counts are few and exact


def resolve_companion(companion: str) -> str:
    """``"fingerprint"`` or ``"none"``: ``"auto"`` fits a companion for every task.

    Why for every task: docs/accuracy.md, "A fingerprint companion" (classification) and "A
    group-contribution companion for regression"; a regression companion's weight is chosen
    on validation, so where it does not help the Graphormer predicts alone."""
    if companion not in COMPANIONS:
        raise MolsepnormError(f"train.companion must be one of {COMPANIONS}, got {companion!r}")
    return "fingerprint" if companion == "auto" else companion


def companion_model_keys(companion: str, task: str) -> dict[str, Any]:
    """The model-section keys (:class:`~molsepnorm.nn.graphormer.GraphormerConfig`) of a resolved companion."""
    if companion == "none":
        return {"companion_bits": 0}
    if task == "binary":
        return {"companion_bits": COMPANION_BITS, "companion_radius": COMPANION_RADIUS,
                "companion_blend": "probability", "companion_counts": "log"}
    return {"companion_bits": GROUP_BITS, "companion_radius": GROUP_RADIUS, "companion_blend": "value",
            "companion_counts": "raw"}


def companion_kind(counts: str) -> str:
    """What the companion is called: a linear model on raw atom-environment counts is a
    group-contribution model (regression), one on log counts a fingerprint model."""
    return "group-contribution" if counts == "raw" else "fingerprint"


@dataclass
class CompanionFit:
    """What :func:`fit_companion` (and :meth:`~molsepnorm.train.blend.ValidationBlend.choose`) did: per
    target, whether it was fitted (a binary target needs both classes among its training
    labels) and its blend weight, and the time taken."""

    weight: Union[float, str]  # what was asked: a number, or "auto"
    bits: int
    radius: int
    counts: str
    l2: float
    molecules: int
    fitted: dict[str, bool]
    seconds: float
    weights: dict[str, float] = field(default_factory=dict)  # per target: the blend weight best.pt uses
    properties: bool = False  # the counts also hold each atom's feature values one by one
    # regression with weight "auto": the validation MAE (standardized targets, mean over
    # targets) of the linear model alone on each kind of features tried (``feature_name``;
    # None where no fitted target has a validation label); ``radius`` and ``properties`` are the best's
    features: dict[str, Optional[float]] = field(default_factory=dict)
    # per target: the blend weight for a molecule with a substructure no training molecule has
    weights_novel: dict[str, float] = field(default_factory=dict)
    # per target, with weight "auto" on regression: the validation metric of every weight tried
    validation: dict[str, dict[str, float]] = field(default_factory=dict)
    # per target, likewise: the validation molecules with a novel substructure, and the best
    # pair of weights (covered, novel) with its validation metric
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: dict[str, Any] = field(default_factory=dict)  # filled by the trainer: each model's val / test metrics
    # unseen atoms priced by their nearest training environments (molsepnorm.train.novel_atoms): the
    # validation metric of each rule tried and the one chosen; empty where not tried
    novel: dict[str, Any] = field(default_factory=dict)
    kind: str = field(init=False)  # companion_kind(counts): "group-contribution" or "fingerprint"

    def __post_init__(self) -> None:
        self.kind = companion_kind(self.counts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def substructure_features(graphs: Sequence[Any], sizes: Sequence[int], bits: int, radius: int,
                          batch_size: int = 256, counts: str = "log", properties: bool = False) -> tuple[Any, np.ndarray]:
    """``log(1 + counts)`` (``counts="log"``) or the counts (``"raw"``) of every graph as a
    sparse ``(M, bits)`` CSR matrix (input order), and the graphs' targets ``(M, T)`` (NaN
    where missing); ``properties``: the counts also hold each atom's feature values
    (:func:`~molsepnorm.nn.fingerprint.substructure_counts`)."""
    found, y = _hashed(graphs, sizes, batch_size, lambda batch: {"": substructure_counts(batch, bits, radius, properties)})
    return _as_read(found[""], counts), y


def feature_groups(graphs: Sequence[Any], sizes: Sequence[int], bits: int, radius: int, properties: bool,
                   batch_size: int = 256) -> tuple[dict[str, Any], np.ndarray]:
    """The raw counts of every graph by group of identifiers (sparse ``(M, bits)`` each,
    :func:`~molsepnorm.nn.fingerprint.substructure_count_groups`), in one pass, and the
    targets; :func:`combine_groups` sums them into any smaller radius, with or without properties."""
    return _hashed(graphs, sizes, batch_size, lambda batch: substructure_count_groups(batch, bits, radius, properties))


def combine_groups(groups: dict[str, Any], radius: int, properties: bool, counts: str) -> Any:
    """The features :func:`substructure_features` would give for ``radius``, ``properties``
    and ``counts``, from :func:`feature_groups`' counts."""
    X = groups["radius 0"]
    for name in [f"radius {r}" for r in range(1, radius + 1)] + (["properties"] if properties else []):
        X = X + groups[name]
    return _as_read(X.tocsr(), counts)


def _as_read(X: Any, counts: str) -> Any:
    """The raw counts ``X`` as the linear model reads them (``"log"``: ``log(1 + count)``)."""
    return X.log1p() if counts == "log" else X


def _hashed(graphs: Sequence[Any], sizes: Sequence[int], batch_size: int,
            count: Callable[[Any], dict[str, torch.Tensor]]) -> tuple[dict[str, Any], np.ndarray]:
    """Run ``count(batch) -> {name: (B, bits) counts}`` over the graphs in size-bucketed
    batches: ``{name: sparse (M, bits) CSR}`` in input order, and the targets ``(M, T)``."""
    from scipy import sparse
    from torch.utils.data import DataLoader

    from molsepnorm.data.collate import GraphCollator
    from molsepnorm.data.sampler import size_batches

    batches = size_batches(sizes, batch_size)
    # one hop of edge paths is all the hash reads (the bond of each adjacent pair)
    loader = DataLoader(graphs, batch_sampler=batches, collate_fn=GraphCollator(1))
    parts: dict[str, list[Any]] = {}
    order: list[int] = []
    ys = []
    with torch.inference_mode():
        for idx, batch in zip(batches, loader):
            if batch.y is None:
                raise MolsepnormError("the companion is fitted on labelled molecules; these have none")
            for name, found in count(batch).items():  # (B, bits) each
                r, c = found.nonzero(as_tuple=True)
                parts.setdefault(name, []).append(sparse.csr_matrix(
                    (found[r, c].double().numpy(), (r.numpy(), c.numpy())), shape=found.shape))
            order.extend(idx)
            ys.append(batch.y.double().numpy())
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[np.asarray(order)] = np.arange(len(order))
    return {name: sparse.vstack(blocks, format="csr")[inverse] for name, blocks in parts.items()}, \
        np.concatenate(ys)[inverse]


def fit_companion(companion: FingerprintCompanion, graphs: Sequence[Any], sizes: Sequence[int], task: str,
                  target_names: Sequence[str], weight: Union[float, str] = "auto", scaler: Optional[Any] = None,
                  l2: Optional[float] = None, val: Optional[tuple[Sequence[Any], Sequence[int]]] = None) -> CompanionFit:
    """Fit ``companion``'s coefficients on the training ``graphs`` and set its blend weight.

    Args:
        companion: the model's :class:`~molsepnorm.nn.fingerprint.FingerprintCompanion` (changed in place).
        graphs: the training split (graphs with targets ``y``); ``sizes`` their atom counts.
        task: ``"binary"`` or ``"regression"``.
        target_names: one per target, for the log and :class:`CompanionFit`.
        weight: the blend weight on the companion, in (0, 1], or ``"auto"``:
            :data:`COMPANION_WEIGHT` for binary targets; for regression 0 (the Graphormer
            alone) until :meth:`~molsepnorm.train.blend.ValidationBlend.choose` chooses it on validation.
        scaler: the run's target standardization (regression), or None.
        l2: the L2 penalty per training molecule (default :data:`COMPANION_L2` for binary
            targets, :data:`GROUP_L2` for regression).
        val: the validation split (graphs with targets, atom counts). With regression and
            weight ``"auto"``, a linear model is fitted on every kind of features of
            :data:`GROUP_FEATURES` and the one with the lowest validation MAE is kept:
            ``companion.radius`` and ``companion.properties`` change, and the caller stores
            them in the model config that rebuilds the checkpoint (:func:`store_features`).
    """
    return _fit(companion, graphs, sizes, task, target_names, weight, scaler, l2, val)[0]


def _fit(companion: FingerprintCompanion, graphs: Sequence[Any], sizes: Sequence[int], task: str,
         target_names: Sequence[str], weight: Union[float, str], scaler: Optional[Any], l2: Optional[float],
         val: Optional[tuple[Sequence[Any], Sequence[int]]]) -> tuple[CompanionFit, Optional[Any]]:
    """:func:`fit_companion`, and the validation split's features of the kind chosen (sparse
    ``(N, bits)``, input order) when it chose one, else None: :func:`prepare_blend` reads its
    coverage from them rather than hashing the split again."""
    if weight != "auto" and (isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1):
        raise MolsepnormError(f"train.companion_weight must be in (0, 1] or 'auto', got {weight!r}")
    if weight == "auto":
        blend = COMPANION_WEIGHT if task == "binary" else 0.0
    else:
        blend = float(weight)
    if l2 is None:
        l2 = COMPANION_L2 if task == "binary" else GROUP_L2
    start = time.perf_counter()
    choose = task == "regression" and weight == "auto" and val is not None
    kinds = GROUP_FEATURES if choose else ((companion.radius, companion.properties),)
    scores: dict[str, Optional[float]] = {}
    best: Optional[tuple[float, tuple[int, bool], dict[str, bool], np.ndarray, np.ndarray]] = None
    # every kind of features from one pass over each split: the counts of its groups add up
    largest, with_properties = max(r for r, _ in kinds), any(p for _, p in kinds)
    train_groups, y = feature_groups(graphs, sizes, companion.bits, largest, with_properties)

    def scaled(targets: np.ndarray) -> np.ndarray:  # regression: what the head predicts
        if task != "regression" or scaler is None:
            return targets
        return scaler.transform(torch.as_tensor(targets, dtype=torch.float32)).double().numpy()

    y = scaled(y)
    if choose:
        assert val is not None
        val_groups, y_val = feature_groups(val[0], val[1], companion.bits, largest, with_properties)
        y_val = scaled(y_val)
    for radius, properties in kinds:
        X = combine_groups(train_groups, radius, properties, companion.counts)
        fitted, coef, intercept = _fit_linear(X, y, task, target_names, l2)
        score = np.inf  # unmeasured: the first kind of features is kept
        if choose:
            X_val = combine_groups(val_groups, radius, properties, companion.counts)
            errors = np.abs(np.asarray(X_val @ coef) + intercept - y_val)  # (N, T)
            per_target = [float(np.nanmean(errors[:, t])) for t, name in enumerate(target_names)
                          if fitted[name] and np.isfinite(errors[:, t]).any()]
            measured = float(np.mean(per_target)) if per_target else None
            scores[feature_name(radius, properties)] = measured
            score = np.inf if measured is None else measured
        if best is None or score < best[0]:
            best = (score, (radius, properties), fitted, coef, intercept)
    assert best is not None
    _, (radius, properties), fitted, coef, intercept = best
    X = combine_groups(train_groups, radius, properties, companion.counts)
    chosen_val = combine_groups(val_groups, radius, properties, companion.counts) if choose else None
    for t, name in enumerate(target_names):
        if not fitted[name]:
            n = int(np.isfinite(y[:, t]).sum())
            log.warning("companion: target %s has %s in the training split: not fitted, the Graphormer alone "
                        "predicts it", name, "no labels" if n == 0 else "one class only")
    device = companion.coef.device
    companion.reset_parameters()
    companion.radius, companion.properties = radius, properties
    seen = np.zeros(companion.bits, dtype=np.float32)
    seen[np.unique(X.indices)] = 1.0
    companion.seen.copy_(torch.as_tensor(seen, device=device))
    companion.coef.copy_(torch.as_tensor(coef, dtype=companion.coef.dtype, device=device))
    companion.intercept.copy_(torch.as_tensor(intercept, dtype=companion.intercept.dtype, device=device))
    companion.set_weights(torch.as_tensor([blend if fitted[name] else 0.0 for name in target_names]))
    weights = {name: float(companion.weight[t]) for t, name in enumerate(target_names)}
    return CompanionFit(weight=weight, bits=companion.bits, radius=radius,
                        counts=companion.counts, l2=l2, molecules=X.shape[0], fitted=fitted,
                        seconds=time.perf_counter() - start, weights=weights, weights_novel=dict(weights),
                        properties=properties, features=scores), chosen_val


def fit_blend(companion: FingerprintCompanion, config: Any, train: tuple[Sequence[Any], Sequence[int]],
              val: tuple[Sequence[Any], Sequence[int]], task: str, target_names: Sequence[str],
              weight: Union[float, str], scaler: Optional[Any],
              predict_val: Callable[[], tuple[np.ndarray, np.ndarray]], metric: str) -> CompanionFit:
    """What training does with a companion after the last epoch (unless ``train.monitor_blend``
    fitted it before the first) and :func:`add_companion` after it: :func:`prepare_blend`,
    then for regression with weight ``"auto"`` the blend weights chosen on ``val`` for the
    model as it is (:meth:`~molsepnorm.train.blend.ValidationBlend.choose`)."""
    fit, blend = prepare_blend(companion, config, train, val, task, target_names, weight, scaler, predict_val, metric)
    if blend is not None:
        blend.settle(companion, fit, predict_val)
    return fit


def prepare_blend(companion: FingerprintCompanion, config: Any, train: tuple[Sequence[Any], Sequence[int]],
                  val: tuple[Sequence[Any], Sequence[int]], task: str, target_names: Sequence[str],
                  weight: Union[float, str], scaler: Optional[Any],
                  predict_val: Callable[[], tuple[np.ndarray, np.ndarray]],
                  metric: str) -> tuple[CompanionFit, Optional[ValidationBlend]]:
    """:func:`fit_companion` on the ``train`` split (graphs, atom counts), the chosen features
    stored in the model ``config`` (:func:`store_features`), and for regression with weight
    ``"auto"`` the :class:`~molsepnorm.train.blend.ValidationBlend` that chooses its weights on ``val``
    (``predict_val() -> (targets, predictions)`` runs the model once; the companion's
    weights are 0 afterwards, the Graphormer alone), else None."""
    fit, val_features = _fit(companion, train[0], train[1], task, target_names, weight, scaler, None, val)
    store_features(config, companion)
    if task != "regression" or weight != "auto":
        return fit, None
    covered = (covered_rows(companion, val[0], val[1]) if val_features is None
               else covered_by(val_features, companion.seen.cpu().numpy() != 0))
    return fit, ValidationBlend.measure(companion, fit.fitted, predict_val, task, metric, covered)


def feature_name(radius: int, properties: bool) -> str:
    """``"radius 0"``, ``"radius 1 + atom properties"``: a kind of :data:`GROUP_FEATURES`."""
    return f"radius {radius}" + (" + atom properties" if properties else "")


def store_features(config: Any, companion: FingerprintCompanion) -> None:
    """Write the features ``companion`` was fitted on into ``config`` (a
    :class:`~molsepnorm.nn.graphormer.GraphormerConfig`), which rebuilds the checkpoint."""
    config.companion_radius, config.companion_properties = companion.radius, companion.properties


def _fit_linear(X: Any, y: np.ndarray, task: str, target_names: Sequence[str],
                l2: float) -> tuple[dict[str, bool], np.ndarray, np.ndarray]:
    """Per target, a linear model on the (M, bits) features ``X`` and the labelled rows of
    ``y`` (M, T): ``(fitted, coef (bits, T), intercept (T,))``; a target with no labels, or a
    binary one with one class, is not fitted (zero coefficients; the caller says so)."""
    fitted: dict[str, bool] = {}
    coef = np.zeros((X.shape[1], len(target_names)))
    intercept = np.zeros(len(target_names))
    for t, name in enumerate(target_names):
        rows = np.isfinite(y[:, t])
        n = int(rows.sum())
        labels = y[rows, t]
        if n == 0 or (task == "binary" and len(np.unique(labels)) < 2):
            fitted[name] = False
            continue
        if task == "binary":
            from sklearn.linear_model import LogisticRegression  # binary metrics import scikit-learn anyway

            model = LogisticRegression(C=1.0 / (l2 * n), max_iter=1000).fit(X[rows], labels.astype(int))
            coef[:, t], intercept[t] = model.coef_[0], float(model.intercept_[0])
        else:
            coef[:, t], intercept[t] = ridge(X[rows], labels, alpha=l2 * n)
        fitted[name] = True
    return fitted, coef, intercept


def ridge(X: Any, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Ridge regression with an unpenalized intercept: ``(coef (p,), intercept)`` minimizing
    ``||y - X coef - intercept||^2 + alpha ||coef||^2``, as scikit-learn's ``Ridge`` does.

    Solved by LSQR (Paige & Saunders 1982: ``scipy.sparse.linalg.lsqr`` with ``damp =
    sqrt(alpha)``) on the column-centred sparse ``(n, p)`` matrix ``X`` as an implicit
    operator, restricted to the columns that occur: ``X`` stays sparse, and a regression run
    need not import scikit-learn's linear models.
    """
    from scipy.sparse.linalg import LinearOperator, lsqr

    X = X.tocsr()
    n, p = X.shape
    used = np.unique(X.indices)  # the columns that occur
    Xu = X[:, used]
    mean_x = np.asarray(Xu.mean(0)).ravel()  # (q,)
    mean_y = float(y.mean())
    centred = LinearOperator((n, len(used)), dtype=np.float64, matvec=lambda v: Xu @ v - mean_x @ v,
                             rmatvec=lambda u: Xu.T @ u - mean_x * u.sum())
    coef_u = lsqr(centred, y - mean_y, damp=float(np.sqrt(alpha)), atol=1e-8, btol=1e-8, iter_lim=20 * len(used))[0]
    coef = np.zeros(p)
    coef[used] = coef_u
    return coef, mean_y - float(mean_x @ coef_u)


def covered_rows(companion: FingerprintCompanion, graphs: Sequence[Any], sizes: Sequence[int]) -> np.ndarray:
    """(M,) bool, in input order: the ``graphs`` whose every substructure bucket occurs in the
    companion's training split (its ``seen`` buffer; the graphs need targets ``y``)."""
    X, _ = substructure_features(graphs, sizes, companion.bits, companion.radius, counts="raw",
                                 properties=companion.properties)
    return covered_by(X, companion.seen.cpu().numpy() != 0)


def add_companion(model: Any, out: Any, weight: Union[float, str] = "auto",
                  data_root: Optional[Any] = None) -> CompanionFit:
    """Fit a fingerprint companion onto a trained model and write the blended model to ``out``.

    For a model trained without one (before ``train.companion`` existed, or with
    ``companion: none``): the companion is fitted on the training split of the model's own
    data set (the training run's loading options, hence the same split), as a training run
    fits it (a regression blend's weight chosen on validation, and its pricing of unseen
    atoms: :mod:`molsepnorm.train.novel_atoms`), and the new checkpoint's
    metrics are the blend's on validation and test. A companion the model already has is
    refitted, as today's training would fit it.

    Args:
        model: a ``best.pt`` file or a bundled model name.
        out: where to write the new checkpoint (not ``model`` itself).
        weight: the blend weight on the companion, in (0, 1], or ``"auto"`` (as ``train.companion_weight``).
        data_root: folder of the raw data sets (default as ``molsepnorm evaluate``).

    Returns:
        The :class:`CompanionFit`, its ``scores`` holding each model's and the blend's metrics.
    """
    import dataclasses
    from pathlib import Path

    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.data.columns import num_atoms
    from molsepnorm.inference.metrics import compute_metrics
    from molsepnorm.inference.runner import Runner, run
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

    checkpoint = Checkpoint.load(model)
    task = checkpoint.task
    if task.type not in ("binary", "regression"):
        raise MolsepnormError(f"{checkpoint.name}: a {task.type} model has no trained head to blend a companion with")
    if Path(out).resolve() == Path(str(model)).resolve():
        raise MolsepnormError(f"{out}: write the blended model to another file than {model}")
    train, splits = checkpoint_data(checkpoint, split="train", data_root=data_root)
    config = {**checkpoint.model_config, **companion_model_keys("fingerprint", task.type)}
    with torch.random.fork_rng(devices=[]):  # random weights, replaced below: the caller's draws stay
        net = Graphormer(GraphormerConfig.from_dict(config))
    # weights without a companion load as an unfitted one; one the model has is refitted
    net.load_state_dict({k: v for k, v in checkpoint.state_dict.items() if not k.startswith("companion.")})
    net.eval()
    assert net.companion is not None
    runner = Runner(net, task.type, checkpoint.target_scaling)

    def predict_val() -> tuple[np.ndarray, np.ndarray]:
        result = run([runner], splits["val"])
        return result.targets, result.values[0]

    # the weights are chosen on the validation metric the training run monitored, as it chose them
    monitor = resolve_monitor(checkpoint.config.get("train", {}).get("monitor", "auto"), task.type, task.metric)
    fit = fit_blend(net.companion, net.config, (train, num_atoms(train)), (splits["val"], num_atoms(splits["val"])),
                    task.type, task.target_names, weight, checkpoint.target_scaling, predict_val, monitor)

    def evaluate(part: str) -> dict[str, float]:
        result = run([runner], splits[part])
        return compute_metrics(task.type, result.targets, result.values[0], task.target_names, dataset=splits.name)

    from molsepnorm.train.novel_atoms import price_unseen_atoms

    price_unseen_atoms(net, fit, task.type, task.target_names, train, splits["val"], monitor,  # as training does
                       lambda: evaluate("val")[monitor])
    fit.scores = component_scores(net.companion, evaluate)
    blended = {part: evaluate(part) for part in ("val", "test")}
    metrics = {**blended, "companion": fit.to_dict()}
    if "averaged_epochs" in checkpoint.metrics:
        metrics["averaged_epochs"] = checkpoint.metrics["averaged_epochs"]
    dataclasses.replace(checkpoint, model_config=net.config.to_dict(), state_dict=net.state_dict(),
                        metrics=metrics).save(out)
    return fit
