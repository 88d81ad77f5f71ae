"""Chemistry: SMILES / RDKit Mol -> validated molecule -> PyG graph.

* :func:`parse_molecule` - a sanitized RDKit Mol, or ``InvalidMoleculeError`` with RDKit's reason.
* :func:`featurize` - a ``torch_geometric.data.Data`` in the ``"ogb"`` or ``"zinc"`` vocabulary.
* :func:`featurize_graph` - the model-ready :class:`MolGraph`: graph and Graphormer encodings as NumPy arrays.
* :func:`vocab_sizes` - the embedding-table sizes a model needs for a vocabulary.

The names are imported on first use, so light modules of this package (``chem.sdf``, read
by the predict CLI) do not pull in torch and PyTorch Geometric.
"""
from molsepnorm._lazy import lazy_exports

_EXPORTS = {
    "FEATURIZER_VERSION": "molsepnorm.chem.featurize",
    "VOCABS": "molsepnorm.chem.featurize",
    "MolGraph": "molsepnorm.chem.featurize",
    "featurize": "molsepnorm.chem.featurize",
    "featurize_graph": "molsepnorm.chem.featurize",
    "vocab_sizes": "molsepnorm.chem.featurize",
    "parse_molecule": "molsepnorm.chem.parse",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
__all__ = sorted(_EXPORTS)
