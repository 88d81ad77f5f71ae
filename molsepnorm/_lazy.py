"""Lazy re-exports for package ``__init__`` modules (PEP 562).

Subpackages re-export names from heavy modules (torch, RDKit, PyG) without importing
them until first use, so ``import molsepnorm`` and ``molsepnorm --help`` stay fast.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any],
                 subpackages: tuple[str, ...] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` re-exporting ``{name: defining module}``,
    and its ``subpackages`` imported on first use (``molsepnorm.train.add_companion`` after
    ``import molsepnorm`` alone).

    A resolved name is cached in ``namespace`` (the package's ``globals()``), so each
    is imported once.
    """

    def __getattr__(name: str) -> Any:
        if name in subpackages:
            return importlib.import_module(f"{package}.{name}")  # importing binds it in the namespace
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports) | set(subpackages))

    return __getattr__, __dir__
