"""molsepnorm.nn.segment: segment sums of gathered rows, a CSR product with its own backward on CPU."""
import pytest
import torch

from molsepnorm.nn.segment import gather_segment_sum


def reference(table: torch.Tensor, index: torch.Tensor, segment: torch.Tensor, num_segments: int) -> torch.Tensor:
    out = torch.zeros(num_segments, table.size(1), dtype=table.dtype)
    for i, s in zip(index.tolist(), segment.tolist()):
        out[s] += table[i]
    return out


def case(rows: int, entries: int, num_segments: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(rows, 4, generator=g, requires_grad=True)
    index = torch.randint(0, rows, (entries,), generator=g)  # rows repeat: their gradients add up
    segment = torch.randint(0, num_segments, (entries,), generator=g).sort().values
    return table, index, segment


@pytest.mark.parametrize("rows", [7, 70_000])  # the second sorts its keys as int64, not uint16
def test_values_and_gradient_match_the_sum(rows: int) -> None:
    table, index, segment = case(rows, 300, 40)
    out = gather_segment_sum(table, index, segment, 40)
    assert type(out.grad_fn).__name__ == "_GatherSegmentSumBackward", "CPU float32 with a gradient: the CSR path"
    grad = torch.randn(40, 4)
    (ours,) = torch.autograd.grad(out, table, grad)
    exact = reference(table.detach().double(), index, segment, 40)
    torch.testing.assert_close(out.double(), exact, atol=1e-5, rtol=1e-5)
    expected = torch.zeros(rows, 4, dtype=torch.float64).index_add_(0, index, grad.double()[segment])
    torch.testing.assert_close(ours.double(), expected, atol=1e-5, rtol=1e-5)
    assert ours[torch.isin(torch.arange(rows), index, invert=True)].eq(0).all(), "rows never gathered get no gradient"


def test_segments_without_entries_are_zero_and_order_within_a_segment_is_free() -> None:
    table = torch.arange(12.0).view(6, 2).requires_grad_()
    index, segment = torch.tensor([5, 0, 5, 2]), torch.tensor([1, 1, 3, 3])
    out = gather_segment_sum(table, index, segment, 5)
    assert torch.equal(out.detach(), torch.tensor([[0.0, 0.0], [10.0, 12.0], [0.0, 0.0], [14.0, 16.0], [0.0, 0.0]]))


def test_without_gradient_and_off_cpu_dtypes_give_the_same_sums() -> None:
    table, index, segment = case(9, 200, 30)
    expected = reference(table.detach().double(), index, segment, 30)
    with torch.no_grad():
        no_grad = gather_segment_sum(table, index, segment, 30)
    assert no_grad.grad_fn is None
    torch.testing.assert_close(no_grad.double(), expected, atol=1e-5, rtol=1e-5)
    as_double = gather_segment_sum(table.detach().double().requires_grad_(), index, segment, 30)
    assert type(as_double.grad_fn).__name__ == "IndexAddBackward0", "other dtypes keep the index_add_ form"
    torch.testing.assert_close(as_double, expected)


@pytest.mark.parametrize("rows,entries", [(0, 0), (5, 0)])
def test_empty(rows: int, entries: int) -> None:
    """A batch without bonds has no table rows; one whose pairs have no path has no entries."""
    table = torch.randn(rows, 3, requires_grad=True)
    out = gather_segment_sum(table, torch.zeros(entries, dtype=torch.long), torch.zeros(entries, dtype=torch.long), 4)
    assert out.shape == (4, 3) and not out.detach().any()
    out.sum().backward()
    assert table.grad is not None and table.grad.shape == (rows, 3) and not table.grad.any()
