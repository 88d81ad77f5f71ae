"""Spectrum, effective rank and uniformity against hand-computed values and closed forms."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from molsepnorm.analysis.spectrum import (
    components_for_variance,
    effective_rank,
    explained_variance,
    singular_values,
    spectrum_stats,
    uniformity,
)


def circle(n: int, radius: float = 1.0) -> torch.Tensor:
    theta = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    return radius * torch.stack([theta.cos(), theta.sin()], 1)  # (n, 2)


def simplex(m: int) -> torch.Tensor:
    """The m vertices of a regular simplex on the unit sphere of R^m: e_i minus the centroid."""
    v = torch.eye(m, dtype=torch.float64) - 1.0 / m
    return v / v.norm(dim=1, keepdim=True)


def orthogonal(d: int, seed: int = 0) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return q


# --- uniformity (Wang & Isola 2020) ------------------------------------------------------


def test_uniformity_of_identical_points_is_zero():
    z = torch.tensor([[0.3, -1.2, 2.0]]).repeat(50, 1)
    assert uniformity(z) == pytest.approx(0.0, abs=1e-12)


def test_uniformity_is_scale_invariant_per_row():
    z = torch.randn(40, 6, generator=torch.Generator().manual_seed(1))
    scales = torch.rand(40, 1, generator=torch.Generator().manual_seed(2)) * 10 + 0.1
    assert uniformity(z * scales) == pytest.approx(uniformity(z), abs=1e-6)  # float32 input


def test_uniformity_of_two_antipodal_points():
    # ||x - y||^2 = 4 -> log exp(-2 * 4) = -8
    assert uniformity(torch.tensor([[2.0, 0.0], [-5.0, 0.0]])) == pytest.approx(-8.0, abs=1e-12)


def test_uniformity_of_a_square_by_hand():
    # 4 points on the unit circle: 4 pairs at squared distance 2, 2 pairs at 4
    expected = math.log((4 * math.exp(-4) + 2 * math.exp(-8)) / 6)
    assert uniformity(circle(4, radius=3.0)) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("m", [2, 3, 5, 17])
def test_uniformity_of_a_regular_simplex(m):
    # every pair at squared distance 2m / (m - 1)
    assert uniformity(simplex(m)) == pytest.approx(-2 * 2 * m / (m - 1), abs=1e-10)


def test_uniformity_of_many_points_on_a_circle_approaches_the_closed_form():
    # uniform on S^1: E exp(-t ||x - y||^2) = exp(-2t) I_0(2t); over distinct pairs of n
    # evenly spaced points the mean is (n * that - 1) / (n - 1)
    n, t = 2000, 2.0
    limit = math.exp(-2 * t) * float(torch.special.i0(torch.tensor(2 * t, dtype=torch.float64)))
    expected = math.log((n * limit - 1) / (n - 1))
    assert uniformity(circle(n), t=t) == pytest.approx(expected, abs=1e-9)
    assert uniformity(circle(n)) < uniformity(circle(n)[: n // 4])  # a quarter circle is less uniform


def test_uniformity_chunks_match_torch_pdist():
    z = torch.randn(301, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    x = z / z.norm(dim=1, keepdim=True)
    reference = torch.pdist(x).pow(2).mul(-2).exp().mean().log().item()
    for chunk in (1, 7, 300, 1024):
        assert uniformity(z, chunk_size=chunk) == pytest.approx(reference, abs=1e-10)


def test_uniformity_subset_and_errors():
    z = torch.randn(500, 4, generator=torch.Generator().manual_seed(4))
    assert uniformity(z, max_points=100, seed=1) == pytest.approx(uniformity(z, max_points=100, seed=1))
    assert uniformity(z, max_points=1000) == uniformity(z)
    with pytest.raises(ValueError, match="two"):
        uniformity(torch.ones(1, 3))
    with pytest.raises(ValueError, match="zero vector"):
        uniformity(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="NaN"):
        uniformity(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"\(M, D\)"):
        uniformity(torch.ones(3))


# --- singular values and effective rank (Roy & Vetterli 2007) ------------------------------


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_effective_rank_of_equal_singular_values_is_the_rank(k):
    s = torch.tensor([3.0] * k + [0.0] * (8 - k))
    assert effective_rank(s) == pytest.approx(k, abs=1e-12)


def test_effective_rank_by_hand():
    # p = (0.5, 0.25, 0.25): H = 1.5 log 2 -> exp(H) = 2^1.5
    assert effective_rank([2.0, 1.0, 1.0]) == pytest.approx(2 ** 1.5, abs=1e-12)
    assert effective_rank([0.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        effective_rank([1.0, -1.0])


def test_singular_values_of_a_rank_k_matrix_with_equal_values():
    # Z = U diag(5, 5, 5, 0, 0, 0) V^T with orthonormal U (M = 10) and V (D = 6)
    u = orthogonal(10, seed=1)[:, :3]
    v = orthogonal(6, seed=2)[:, :3]
    z = 5.0 * u @ v.T  # (10, 6), rank 3
    s = singular_values(z, center=False)
    assert s.shape == (6,)
    assert torch.allclose(s[:3], torch.full((3,), 5.0, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(s[3:], torch.zeros(3, dtype=torch.float64), atol=1e-10)
    assert effective_rank(s) == pytest.approx(3.0, abs=1e-8)


def test_centering_removes_the_mean_direction():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 4)) * np.array([3.0, 2.0, 1.0, 0.5]) + 100.0  # big common offset
    raw = singular_values(z, center=False)
    centered = singular_values(z, center=True)
    assert raw[0] > 50 * raw[1]  # the offset dominates the raw spectrum
    assert effective_rank(raw) < 1.5 < 3.0 < effective_rank(centered)
    # centered singular values are sqrt((M - 1) * PCA variances)
    variances = np.sort(np.linalg.eigvalsh(np.cov(z, rowvar=False)))[::-1]
    assert np.allclose(centered.numpy() ** 2 / 199, variances)


def test_singular_values_are_sorted_and_identical_rows_give_zero_rank():
    z = torch.randn(50, 20, generator=torch.Generator().manual_seed(5)) * torch.logspace(0, -3, 20)
    s = singular_values(z)
    assert s.shape == (20,) and (s[:-1] >= s[1:]).all() and (s >= 0).all()
    assert effective_rank(singular_values(torch.ones(10, 3))) == 0.0


def test_explained_variance_and_components():
    s = torch.tensor([3.0, 2.0, 1.0, 1.0, 1.0])  # energies 9, 4, 1, 1, 1 of 16
    assert explained_variance(s, 1) == pytest.approx(9 / 16)
    assert explained_variance(s, 2) == pytest.approx(13 / 16)
    assert explained_variance(s, 99) == pytest.approx(1.0)
    assert components_for_variance(s, 0.5) == 1
    assert components_for_variance(s, 13 / 16) == 2
    assert components_for_variance(s, 0.9) == 4
    assert components_for_variance(torch.ones(4), 0.75) == 3
    assert math.isnan(explained_variance(torch.zeros(3), 1)) and components_for_variance(torch.zeros(3)) == 0


def test_spectrum_stats_keys_and_values():
    z = simplex(6).float()
    stats = spectrum_stats(z, top_k=(1, 5))
    assert stats["num_embeddings"] == 6 and stats["embedding_dim"] == 6 and stats["uniformity_points"] == 6
    assert stats["uniformity"] == pytest.approx(-2 * 2 * 6 / 5, abs=1e-6)
    # the simplex's vertices are already centered: 5 equal singular values and a zero
    assert stats["effective_rank"] == pytest.approx(5.0, abs=1e-6)
    assert stats["explained_variance_top5"] == pytest.approx(1.0)
    assert stats["components_90"] == 5
    assert stats["singular_values"].dtype == torch.float64
