"""The package's layers: what may import what.

The path of data runs chem -> encodings -> data -> nn -> inference; checkpoint sits below
the verbs; train, predict and analysis are verbs that share those layers and never import
each other; pretrain sits above train and predict (it reuses train's optimisation step,
schedule and DDP set-up, and predict's featurization); the CLI is the only
layer above them all.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "molsepnorm"
VERBS = ("train", "predict", "analysis", "pretrain")
# subpackage -> subpackages (or top-level modules) it must not import; ``config``, what the
# verbs' configurations share, reads the model's and the data's layers
FORBIDDEN = {
    "chem": ("data", "nn", "inference", "checkpoint", "config", *VERBS, "cli"),
    "encodings": ("data", "nn", "inference", "checkpoint", "config", *VERBS, "cli"),
    "data": ("nn", "inference", "checkpoint", "config", *VERBS, "cli"),
    "nn": ("inference", "checkpoint", "config", *VERBS, "cli"),  # it reads data's padded batch
    "checkpoint": ("inference", "config", *VERBS, "cli"),
    "inference": ("config", *VERBS, "cli"),
    "train": ("predict", "analysis", "pretrain", "cli"),
    "predict": ("train", "analysis", "pretrain", "cli"),
    "analysis": ("train", "predict", "pretrain", "cli"),
    "pretrain": ("analysis", "cli"),
}


def imported_subpackages(path: Path) -> set[str]:
    """``molsepnorm.<sub>`` names imported anywhere in a file (module level or in functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "molsepnorm" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_nothing_above_it(layer):
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files
    bad = {f"{path.relative_to(PACKAGE)} imports molsepnorm.{sub}"
           for path in files for sub in imported_subpackages(path) & set(FORBIDDEN[layer])}
    assert not bad, sorted(bad)


def test_top_level_modules_serve_every_layer_and_import_no_verb():
    """``errors.py``, ``config.py`` (what training's and pretraining's configurations share),
    ``formats.py`` ...: below the verbs (``config.py`` above the model and data layers, which
    must not import it); ``__main__`` is the CLI's entry point."""
    files = [path for path in sorted(PACKAGE.glob("*.py")) if path.name != "__main__.py"]
    assert PACKAGE / "config.py" in files
    bad = {f"{path.name} imports molsepnorm.{sub}" for path in files
           for sub in imported_subpackages(path) & {*VERBS, "cli"}}
    assert not bad, sorted(bad)


def test_the_check_sees_function_level_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from molsepnorm.train.loop import Trainer\n")
    assert imported_subpackages(module) == {"train"}
