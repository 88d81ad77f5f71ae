"""Values computed from a padded batch alone, once per batch object.

An ensemble's members share each batch (:func:`molsepnorm.inference.runner.run`), also
from threads of their own; what depends on the batch and not on a model's weights (the
fingerprint's substructure counts, the edge encoding's real (pair, hop) entries) is then
computed by the first member and read by the others.
"""
from __future__ import annotations

import threading
from typing import Callable, Hashable, TypeVar

__all__ = ["batch_memo"]

T = TypeVar("T")
_LOCK = threading.Lock()


def batch_memo(batch: object, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, a value that depends on ``batch`` alone, computed once per batch object.

    The value is kept on the object, outside its fields, so a copy made by
    :meth:`~molsepnorm.data.collate.GraphBatch.to` starts without it.  The first caller
    computes under a lock, threads asking meanwhile wait for it, later callers read
    without the lock.  An object without ``__dict__`` is not memoized.
    """
    memo = batch.__dict__.setdefault("_memo", {}) if hasattr(batch, "__dict__") else None
    if memo is None:
        return compute()
    value = memo.get(key)
    if value is None:
        with _LOCK:
            value = memo.get(key)
            if value is None:
                value = memo[key] = compute()
    return value
