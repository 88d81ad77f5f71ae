"""Alignment-free statistics of an embedding matrix: spectrum, effective rank, uniformity.

Everything here takes an embedding matrix ``z`` of shape ``(M, D)`` (M molecules, D
dimensions; a torch tensor or anything ``torch.as_tensor`` reads) and computes in float64.

* :func:`singular_values` - the sorted singular values of the **centered** matrix
  ``z - mean(z, 0)`` by default (``center=False`` for the raw matrix).  Centered is the
  default because the raw matrix's top singular value mostly measures the mean embedding
  (a common offset that every molecule shares), not how the molecules spread; the
  centered spectrum is that of the covariance (its squares are ``(M - 1)`` times the PCA
  variances), the quantity plotted in dimensional-collapse studies.
* :func:`effective_rank` - Roy & Vetterli, "The effective rank: a measure of effective
  dimensionality", EUSIPCO 2007: ``exp(H(p))`` with ``p_k = s_k / sum_j s_j`` and
  ``H(p) = -sum_k p_k log p_k``.  Between 1 (one direction) and ``min(M, D)`` (all
  singular values equal).
* :func:`uniformity` - Wang & Isola, "Understanding contrastive representation learning
  through alignment and uniformity on the hypersphere", ICML 2020:
  ``log( mean_{i<j} exp(-t * ||x_i - x_j||^2) )`` over all distinct pairs of the
  L2-normalized rows ``x_i = z_i / ||z_i||``, ``t = 2``.  Lower is more uniform: 0 when
  every embedding points the same way; ``-2t M / (M - 1)`` for the M vertices of a
  regular simplex (every squared distance ``2M / (M - 1)``); ``-2t + log I_0(2t)`` for
  points spread evenly over a circle (M -> inf).
* :func:`explained_variance` - the fraction of the total variance carried by the top-k
  principal directions, ``sum_{i<=k} s_i^2 / sum_i s_i^2`` (centered singular values).

The paper this package implements (Chen et al., "On Separate Normalization in
Self-supervised Transformers", NeurIPS 2023) reports that SepNorm's [CLS] embeddings
suffer less dimensional collapse (a flatter spectrum, a higher effective rank) and are
more uniform (a lower uniformity loss) than with one shared LayerNorm.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import torch
from torch import Tensor

__all__ = [
    "as_matrix",
    "singular_values",
    "effective_rank",
    "uniformity",
    "explained_variance",
    "components_for_variance",
    "spectrum_stats",
]


def as_matrix(z: Any) -> Tensor:
    """``z`` as a float64 CPU tensor of shape (M, D); raises on another rank or non-finite values."""
    t = torch.as_tensor(z).detach().to("cpu", torch.float64)
    if t.dim() != 2:
        raise ValueError(f"expected an embedding matrix of shape (M, D), got shape {tuple(t.shape)}")
    if t.size(0) == 0 or t.size(1) == 0:
        raise ValueError(f"empty embedding matrix of shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError("the embedding matrix holds NaN or infinite values")
    return t


def singular_values(z: Any, center: bool = True) -> Tensor:
    """Singular values of ``z`` (M, D), largest first: shape ``(min(M, D),)``, float64.

    Args:
        z: embedding matrix (M, D).
        center: subtract the mean embedding (column means) first; see the module docstring.
    """
    m = as_matrix(z)
    if center:
        m = m - m.mean(dim=0, keepdim=True)
    s = torch.linalg.svdvals(m)
    return torch.sort(s.clamp_min(0.0), descending=True).values


def effective_rank(s: Any) -> float:
    """Roy & Vetterli's (2007) effective rank of singular values ``s`` (K,): ``exp(-sum p log p)``.

    ``p = s / sum(s)``; zero singular values contribute nothing (``0 log 0 = 0``).  Returns
    0.0 for an all-zero spectrum (e.g. the centered spectrum of identical embeddings).
    """
    s = torch.as_tensor(s, dtype=torch.float64).flatten()
    if (s < 0).any():
        raise ValueError("singular values must be non-negative")
    total = s.sum()
    if total <= 0:
        return 0.0
    p = s / total
    entropy = -torch.special.xlogy(p, p).sum()
    return float(torch.exp(entropy))


def explained_variance(s: Any, k: int) -> float:
    """Fraction of the variance in the top ``k`` singular directions: ``sum_{i<=k} s_i^2 / sum s^2``.

    ``s`` should be sorted, largest first (as :func:`singular_values` returns); NaN for an
    all-zero spectrum.
    """
    s = torch.as_tensor(s, dtype=torch.float64).flatten()
    energy = s.pow(2)
    total = energy.sum()
    if total <= 0:
        return float("nan")
    return float(energy[: max(int(k), 0)].sum() / total)


def components_for_variance(s: Any, fraction: float = 0.9) -> int:
    """The fewest top singular directions that hold at least ``fraction`` of the variance (0 if none)."""
    s = torch.as_tensor(s, dtype=torch.float64).flatten()
    energy = s.pow(2)
    total = energy.sum()
    if total <= 0:
        return 0
    cumulative = torch.cumsum(energy, 0) / total
    # a tiny tolerance so that e.g. exactly 0.9 of equal values is not missed by rounding
    return int(torch.searchsorted(cumulative, torch.tensor(fraction - 1e-12, dtype=torch.float64)).item()) + 1


def uniformity(
    z: Any,
    t: float = 2.0,
    normalize: bool = True,
    max_points: Optional[int] = None,
    seed: int = 0,
    chunk_size: int = 1024,
) -> float:
    """Wang & Isola's (2020) uniformity ``log mean_{i<j} exp(-t ||x_i - x_j||^2)`` of ``z`` (M, D).

    Exact over all ``M (M - 1) / 2`` distinct pairs, computed in row chunks with a
    log-sum-exp (memory ``chunk_size * M``, no under- or overflow).

    Args:
        z: embedding matrix (M, D), M >= 2.
        t: the temperature (2 in Wang & Isola and in the SepNorm paper).
        normalize: L2-normalize the rows first (the definition; False for points already
            on the sphere, or to study raw distances).
        max_points: if M is larger, use a random subset of this many rows (seeded), to
            bound the O(M^2 D) cost on very large splits.  None: all rows.
        seed: seed of that subset.
        chunk_size: rows per chunk.

    Raises:
        ValueError: fewer than two embeddings, or a zero row when ``normalize``.
    """
    x = as_matrix(z)
    if x.size(0) < 2:
        raise ValueError("uniformity needs at least two embeddings")
    if max_points is not None and x.size(0) > max_points:
        generator = torch.Generator().manual_seed(int(seed))
        x = x[torch.randperm(x.size(0), generator=generator)[: int(max_points)]]
    if normalize:
        norms = x.norm(dim=1, keepdim=True)
        if (norms == 0).any():
            raise ValueError("an embedding is the zero vector: it has no direction to normalize")
        x = x / norms
    M = x.size(0)
    sq = x.pow(2).sum(1)  # (M,)
    parts = []
    for start in range(0, M - 1, chunk_size):
        stop = min(start + chunk_size, M - 1)
        rows = x[start:stop]  # (C, D)
        d2 = (sq[start:stop, None] + sq[None, :] - 2.0 * rows @ x.T).clamp_min(0.0)  # (C, M)
        # keep the pairs (i, j) with j > i only
        upper = torch.arange(M)[None, :] > torch.arange(start, stop)[:, None]
        parts.append(torch.logsumexp((-t * d2)[upper], dim=0))
    total = torch.logsumexp(torch.stack(parts), dim=0)
    return float(total - math.log(M * (M - 1) / 2))


def spectrum_stats(
    z: Any, top_k: Sequence[int] = (1, 5), t: float = 2.0, max_points: Optional[int] = None, seed: int = 0
) -> dict[str, Any]:
    """All the scalar figures of one embedding matrix ``z`` (M, D), plus both spectra.

    Returns:
        ``num_embeddings`` (M), ``embedding_dim`` (D), ``effective_rank`` (centered),
        ``effective_rank_raw``, ``uniformity`` (t = ``t``), ``uniformity_points`` (rows
        used), ``explained_variance_top{k}`` for each k, ``components_90`` (directions
        holding 90 % of the variance), ``singular_values`` and ``singular_values_raw``
        (float64 tensors, largest first).
    """
    m = as_matrix(z)
    s = singular_values(m, center=True)
    s_raw = singular_values(m, center=False)
    stats: dict[str, Any] = {
        "num_embeddings": int(m.size(0)),
        "embedding_dim": int(m.size(1)),
        "effective_rank": effective_rank(s),
        "effective_rank_raw": effective_rank(s_raw),
        "uniformity": uniformity(m, t=t, max_points=max_points, seed=seed),
        "uniformity_points": int(min(m.size(0), max_points) if max_points else m.size(0)),
    }
    for k in top_k:
        stats[f"explained_variance_top{k}"] = explained_variance(s, k)
    stats["components_90"] = components_for_variance(s, 0.9)
    stats["singular_values"] = s
    stats["singular_values_raw"] = s_raw
    return stats
