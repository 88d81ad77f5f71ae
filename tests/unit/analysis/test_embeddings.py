"""Graph-token embeddings of a model on a list of molecules: order, completeness, eval mode."""
from __future__ import annotations

import pytest
import torch

from molsepnorm.analysis.embeddings import graph_embeddings
from molsepnorm.chem import featurize
from molsepnorm.data.collate import collate_graphs
from molsepnorm.encodings import GraphormerEncoding
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

SMILES = ["C", "CCO", "c1ccccc1", "CC(=O)Nc1ccc(O)cc1", "[Na+].[Cl-]", "CCN(CC)CC", "O=C=O",
          "CC(C)Cc1ccc(cc1)C(C)C(=O)O", "N", "C1CC1"]


@pytest.fixture(scope="module")
def graphs():
    encode = GraphormerEncoding()
    return [encode(featurize(s, vocab="ogb")) for s in SMILES]


@pytest.mark.parametrize("norm", ["sep", "share"])
def test_embeddings_are_in_data_order_and_independent_of_batching(graphs, norm):
    torch.manual_seed(0)
    model = Graphormer(GraphormerConfig(vocab="ogb", num_layers=2, hidden_dim=16, ffn_dim=16, num_heads=4,
                                        multi_hop_max_dist=3, norm=norm))
    model.train()  # must be switched to eval for the call, and back afterwards
    z = graph_embeddings(model, graphs, batch_size=3)
    assert model.training
    assert z.shape == (len(SMILES), 16) and z.dtype == torch.float32 and torch.isfinite(z).all()
    with torch.inference_mode():
        model.eval()
        one_by_one = torch.cat([model.embed(collate_graphs([g], 3)) for g in graphs])
    torch.testing.assert_close(z, one_by_one, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(graph_embeddings(model, graphs, batch_size=100), z, atol=1e-5, rtol=1e-5)


def test_empty_data_is_an_error():
    model = Graphormer(GraphormerConfig(vocab="ogb", num_layers=1, hidden_dim=8, ffn_dim=8, num_heads=2))
    with pytest.raises(Exception, match="empty"):
        graph_embeddings(model, [])
    with pytest.raises(ValueError, match="batch_size"):
        graph_embeddings(model, [None], batch_size=0)
