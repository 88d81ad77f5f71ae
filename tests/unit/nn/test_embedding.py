"""molsepnorm.nn.embedding: F.embedding's values and gradients, with an index_add backward on CPU."""
import pytest
import torch
import torch.nn.functional as F

from molsepnorm.nn.embedding import INDEX_ADD_MIN_WIDTH, embedding
from molsepnorm.nn.encoders import AtomEncoder, SpatialEncoder


def test_values_and_gradient_match_f_embedding() -> None:
    torch.manual_seed(0)
    weight = torch.randn(50, 8, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 20, (3, 7, 7))  # repeated rows: their gradients must add up
    grad = torch.randn(3, 7, 7, 8, dtype=torch.float64)
    out = embedding(index, weight)
    (ours,) = torch.autograd.grad(out, weight, grad)
    ref = F.embedding(index, weight)
    (expected,) = torch.autograd.grad(ref, weight, grad)
    assert torch.equal(out, ref)
    torch.testing.assert_close(ours, expected)
    assert (ours[20:] == 0).all(), "rows never looked up get no gradient"


@pytest.mark.parametrize("width", [1, 8, INDEX_ADD_MIN_WIDTH, 80])  # below: a CSR product; from it on: index_add_
def test_float32_gradient_on_either_side_of_the_width_threshold(width: int) -> None:
    torch.manual_seed(0)
    weight = torch.randn(30, width, requires_grad=True)
    index = torch.randint(0, 20, (4, 9, 9))
    grad = torch.randn(4, 9, 9, width)
    (ours,) = torch.autograd.grad(embedding(index, weight), weight, grad)
    (expected,) = torch.autograd.grad(F.embedding(index, weight), weight, grad)
    torch.testing.assert_close(ours, expected)
    assert (ours[20:] == 0).all() and ours[:20].abs().sum() > 0


def test_gradcheck() -> None:
    weight = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([[0, 5, 5], [2, 0, 1]])
    assert torch.autograd.gradcheck(lambda w: embedding(index, w), (weight,))


def test_index_add_backward_on_cpu_only_when_a_gradient_is_needed() -> None:
    weight = torch.randn(6, 3, requires_grad=True)
    index = torch.tensor([1, 4, 4])
    assert type(embedding(index, weight).grad_fn).__name__ == "_EmbeddingBackward"
    assert embedding(index, weight.detach()).grad_fn is None
    with torch.no_grad():
        out = embedding(index, weight)
    assert out.grad_fn is None and torch.equal(out, weight.detach()[index])


def test_encoders_train_through_it() -> None:
    torch.manual_seed(0)
    atoms, spatial = AtomEncoder([5, 3], 4), SpatialEncoder(6, 2)
    x = torch.tensor([[[1, 2], [4, 0]]])
    spd = torch.tensor([[[0, 1], [1, -1]]])
    (atoms(x).sum() + spatial(spd).square().sum()).backward()
    assert atoms.embedding.weight.grad[[1, 4, 5 + 2, 5 + 0]].abs().sum(1).gt(0).all()
    assert spatial.embedding.weight.grad[[0, 1, 5]].abs().sum(1).gt(0).all()
