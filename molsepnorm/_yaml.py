"""Reading YAML configuration files: ``safe_load`` with numbers written as people write them.

PyYAML follows YAML 1.1, where ``1e-3`` (no dot) is the *string* "1e-3"; a learning rate
written so would reach the optimizer as text.  :class:`Loader` also reads YAML 1.2's
floats with an exponent and no dot (``1e-3``, ``5E4``, ``-2e+1``) as floats.
"""
from __future__ import annotations

import re
from typing import IO, Any, Union

import yaml

_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


class Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also resolves ``1e-3`` and the like to float."""


Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789."))


def safe_load(stream: Union[str, IO[str]]) -> Any:
    """``yaml.safe_load`` with :class:`Loader`."""
    return yaml.load(stream, Loader=Loader)  # noqa: S506 - Loader is a SafeLoader
