"""Install molsepnorm.

Install PyTorch first (``pip install torch==2.13.0`` on a CPU machine), then
``pip install -e ".[dev]"``.  torch is declared without an upper pin so that an
already installed build is kept.
"""
import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = re.search(r'__version__ = "([^"]+)"', (HERE / "molsepnorm" / "version.py").read_text()).group(1)

setup(
    name="molsepnorm",
    version=VERSION,
    description="Molecular property prediction with a Graphormer using separate normalization (SepNorm).",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["molsepnorm", "molsepnorm.*"]),
    include_package_data=True,
    package_data={"molsepnorm": ["py.typed"], "molsepnorm.models": ["*.pt", "*.md", "*.yaml", "*.json"]},
    install_requires=[
        "torch>=2.2",
        "torch-geometric>=2.5",
        "rdkit>=2023.9",
        "ogb>=1.3.6",
        "scikit-learn>=1.3",
        "click>=8.1",
        "numpy>=1.24",
        "scipy>=1.10",
        "pandas>=2.0",
        "tqdm>=4.60",
        "pyyaml>=6.0",
        "matplotlib>=3.7",
        "filelock>=3.12",
    ],
    extras_require={
        # prediction across the workers of a Dask cluster (molsepnorm.predict.distributed)
        "dask": ["dask[distributed]>=2024.1"],
        # transformers: the SepNorm conversion tests build real BERT / RoBERTa / ViT / GPT-2 models;
        # dask[distributed] (pure Python, ~5 MB with its dependencies): the local-cluster prediction test
        "dev": ["pytest>=8", "pytest-xdist>=3.5", "hypothesis>=6.90", "networkx>=3.1", "transformers>=4.45",
                "dask[distributed]>=2024.1"],
    },
    entry_points={"console_scripts": ["molsepnorm=molsepnorm.cli.main:cli"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Chemistry",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
