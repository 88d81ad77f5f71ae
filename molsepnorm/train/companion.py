"""Fitting the fingerprint companion of a trained Graphormer (:mod:`molsepnorm.nn.fingerprint`).

``train.companion`` chooses it: ``"auto"`` (the default) fits one for binary targets and
none for regression; ``"fingerprint"`` fits one for either; ``"none"`` never. When the
Graphormer has trained, :func:`fit_companion` reads the hashed substructure counts of
every training molecule, fits an L2-regularized linear model on them per target
(scikit-learn: logistic regression for binary targets, ridge regression on the
standardized targets for regression), and sets the blend weight ``train.companion_weight``.
Validation plays no part in the fit, so the validation split still judges the result.

The penalty is :data:`COMPANION_L2` per training molecule (logistic regression's
``C = 1 / (l2 n)``, ridge's ``alpha = l2 n``), so a data set of a thousand molecules is
regularized as strongly, per molecule, as one of thirty thousand.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

import numpy as np
import torch

from molsepnorm.errors import MolsepnormError
from molsepnorm.nn.fingerprint import FingerprintCompanion, substructure_counts
from molsepnorm.train.config import COMPANIONS
from molsepnorm.train.logs import LOGGER_NAME

log = logging.getLogger(LOGGER_NAME)

COMPANION_BITS = 2048  # hashed buckets, as RDKit's default Morgan fingerprint
COMPANION_RADIUS = 2  # substructures of radius 0..2 (ECFP4)
COMPANION_L2 = 0.003  # L2 penalty per training molecule (docs/accuracy.md, "A fingerprint companion")


def resolve_companion(companion: str, task: str) -> str:
    """``"fingerprint"`` or ``"none"``: ``"auto"`` fits a companion for binary targets only.

    On molhiv (scaffold split) the even blend was ahead of the Graphormer alone on every
    seed, and on the small classification set level with it; regression is unmeasured
    with it and keeps the Graphormer alone (docs/accuracy.md, "A fingerprint companion")."""
    if companion not in COMPANIONS:
        raise MolsepnormError(f"train.companion must be one of {COMPANIONS}, got {companion!r}")
    if companion == "auto":
        return "fingerprint" if task == "binary" else "none"
    return companion


def companion_model_keys(companion: str, task: str) -> dict[str, Any]:
    """The model-section keys (:class:`~molsepnorm.nn.graphormer.GraphormerConfig`) of a resolved companion."""
    if companion == "none":
        return {"companion_bits": 0}
    return {"companion_bits": COMPANION_BITS, "companion_radius": COMPANION_RADIUS,
            "companion_blend": "probability" if task == "binary" else "value"}


@dataclass
class CompanionFit:
    """What :func:`fit_companion` did: per target, whether it was fitted (a binary target
    needs both classes among its training labels), and the time taken."""

    kind: str
    weight: float
    bits: int
    radius: int
    l2: float
    molecules: int
    fitted: dict[str, bool]
    seconds: float
    scores: dict[str, Any] = field(default_factory=dict)  # filled by the trainer: each model's val / test metrics

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def substructure_features(graphs: Sequence[Any], sizes: Sequence[int], bits: int, radius: int,
                          batch_size: int = 256) -> tuple[Any, np.ndarray]:
    """``log(1 + counts)`` of every graph as a sparse ``(M, bits)`` CSR matrix (input
    order), and the graphs' targets ``(M, T)`` (NaN where missing)."""
    from scipy import sparse
    from torch.utils.data import DataLoader

    from molsepnorm.data.collate import GraphCollator
    from molsepnorm.data.sampler import size_batches

    batches = size_batches(sizes, batch_size)
    # one hop of edge paths is all the hash reads (the bond of each adjacent pair)
    loader = DataLoader(graphs, batch_sampler=batches, collate_fn=GraphCollator(1))
    rows, cols, vals, order, ys = [], [], [], [], []
    offset = 0
    with torch.inference_mode():
        for idx, batch in zip(batches, loader):
            counts = substructure_counts(batch, bits, radius)  # (B, bits)
            r, c = counts.nonzero(as_tuple=True)
            rows.append(r.numpy() + offset)
            cols.append(c.numpy())
            vals.append(torch.log1p(counts[r, c]).numpy())
            offset += len(idx)
            order.extend(idx)
            if batch.y is None:
                raise MolsepnormError("the companion is fitted on labelled molecules; the training split has none")
            ys.append(batch.y.double().numpy())
    features = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                 shape=(offset, bits), dtype=np.float64)
    inverse = np.empty(offset, dtype=np.int64)
    inverse[np.asarray(order)] = np.arange(offset)
    return features[inverse], np.concatenate(ys)[inverse]


def fit_companion(companion: FingerprintCompanion, graphs: Sequence[Any], sizes: Sequence[int], task: str,
                  target_names: Sequence[str], weight: float = 0.5, scaler: Optional[Any] = None,
                  l2: float = COMPANION_L2) -> CompanionFit:
    """Fit ``companion``'s coefficients on the training ``graphs`` and set its blend weight.

    Args:
        companion: the model's :class:`~molsepnorm.nn.fingerprint.FingerprintCompanion` (changed in place).
        graphs: the training split (graphs with targets ``y``); ``sizes`` their atom counts.
        task: ``"binary"`` or ``"regression"``.
        target_names: one per target, for the log and :class:`CompanionFit`.
        weight: the blend weight on the companion, in (0, 1].
        scaler: the run's target standardization (regression), or None.
        l2: the L2 penalty per training molecule.
    """
    from sklearn.linear_model import LogisticRegression, Ridge

    if not 0 < weight <= 1:
        raise MolsepnormError(f"train.companion_weight must be in (0, 1], got {weight}")
    start = time.perf_counter()
    X, y = substructure_features(graphs, sizes, companion.bits, companion.radius)
    if task == "regression" and scaler is not None:
        y = scaler.transform(torch.as_tensor(y, dtype=torch.float32)).double().numpy()  # what the head predicts
    fitted: dict[str, bool] = {}
    device = companion.coef.device
    companion.reset_parameters()
    for t, name in enumerate(target_names):
        rows = np.isfinite(y[:, t])
        n = int(rows.sum())
        labels = y[rows, t]
        if n == 0 or (task == "binary" and len(np.unique(labels)) < 2):
            log.warning("companion: target %s has %s in the training split: not fitted, the Graphormer alone "
                        "predicts it", name, "no labels" if n == 0 else "one class only")
            fitted[name] = False
            continue
        if task == "binary":
            model = LogisticRegression(C=1.0 / (l2 * n), max_iter=1000).fit(X[rows], labels.astype(int))
            coef, intercept = model.coef_[0], float(model.intercept_[0])
        else:
            model = Ridge(alpha=l2 * n).fit(X[rows], labels)
            coef, intercept = model.coef_, float(model.intercept_)
        companion.coef[:, t] = torch.as_tensor(coef, dtype=companion.coef.dtype, device=device)
        companion.intercept[t] = intercept
        companion.weight[t] = weight
        fitted[name] = True
    return CompanionFit(kind="fingerprint", weight=weight, bits=companion.bits, radius=companion.radius, l2=l2,
                        molecules=X.shape[0], fitted=fitted, seconds=time.perf_counter() - start)


def component_scores(companion: FingerprintCompanion, evaluate: Any) -> dict[str, dict[str, dict[str, float]]]:
    """``{"graphormer": {"val": ..., "test": ...}, "fingerprint": {...}}``: the metrics of each
    model of the blend alone, from ``evaluate(split) -> metrics`` run with the blend weight
    set to 0 (the Graphormer's output unchanged) and to 1; the weight is restored after."""
    blend = companion.weight.clone()
    scores = {}
    try:
        for name, weight in (("graphormer", 0.0), ("fingerprint", 1.0)):
            companion.weight.fill_(weight)
            scores[name] = {part: evaluate(part) for part in ("val", "test")}
    finally:
        companion.weight.copy_(blend)
    return scores


def add_companion(model: Any, out: Any, weight: float = 0.5, data_root: Optional[Any] = None) -> CompanionFit:
    """Fit a fingerprint companion onto a trained model and write the blended model to ``out``.

    For a model trained without one (before ``train.companion`` existed, or with
    ``companion: none``): the companion is fitted on the training split of the model's own
    data set (the training run's loading options, hence the same split), as a training run
    fits it, and the new checkpoint's metrics are the blend's on validation and test. A
    companion the model already has is refitted.

    Args:
        model: a ``best.pt`` file or a bundled model name.
        out: where to write the new checkpoint (not ``model`` itself).
        weight: the blend weight on the companion, in (0, 1].
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
    net = Graphormer(GraphormerConfig.from_dict(config))
    net.load_state_dict(checkpoint.state_dict)  # weights without a companion load as an unfitted one
    net.eval()
    assert net.companion is not None
    fit = fit_companion(net.companion, train, num_atoms(train), task.type, task.target_names, weight=weight,
                        scaler=checkpoint.target_scaling)
    runner = Runner(net, task.type, checkpoint.target_scaling)

    def evaluate(part: str) -> dict[str, float]:
        result = run([runner], splits[part])
        return compute_metrics(task.type, result.targets, result.values[0], task.target_names, dataset=splits.name)

    fit.scores = component_scores(net.companion, evaluate)
    blended = {part: evaluate(part) for part in ("val", "test")}
    metrics = {**blended, "companion": fit.to_dict()}
    if "averaged_epochs" in checkpoint.metrics:
        metrics["averaged_epochs"] = checkpoint.metrics["averaged_epochs"]
    dataclasses.replace(checkpoint, model_config=net.config.to_dict(), state_dict=net.state_dict(),
                        metrics=metrics).save(out)
    return fit
