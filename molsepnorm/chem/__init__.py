"""Chemistry: SMILES / RDKit Mol -> validated molecule -> PyG graph.

* :func:`parse_molecule` - a sanitized RDKit Mol, or ``InvalidMoleculeError`` with RDKit's reason.
* :func:`featurize` - a ``torch_geometric.data.Data`` in the ``"ogb"`` or ``"zinc"`` vocabulary.
* :func:`featurize_graph` - the model-ready :class:`MolGraph`: graph and Graphormer encodings as NumPy arrays.
* :func:`vocab_sizes` - the embedding-table sizes a model needs for a vocabulary.
* :mod:`molsepnorm.chem.readers` - the records of a .smi / .csv / .tsv / .sdf file (or stdin), streamed
  (``predict``, ``pretrain`` and unlabelled data sets read molecule files through it).
"""
from molsepnorm.chem.featurize import FEATURIZER_VERSION, VOCABS, MolGraph, featurize, featurize_graph, vocab_sizes
from molsepnorm.chem.parse import parse_molecule

__all__ = ["FEATURIZER_VERSION", "VOCABS", "MolGraph", "featurize", "featurize_graph", "parse_molecule", "vocab_sizes"]
