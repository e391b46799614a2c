"""Blocks of numpy work on a thread per core.

The heavy steps (AES in ``cryptography``, numpy sorts, prefix sums, fancy indexing) release the
GIL, so independent blocks of a level run ~2x faster on 2 cores. Noise is addressed by cell id
and IntOpt works row by row: how work is split changes nothing but the time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

PARALLEL_MIN = 1 << 15
"""Work items smaller than this many cells are not worth a thread."""

_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()
_LOCAL = threading.local()


def workers() -> int:
    """Threads used for a level's blocks: one per core, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def _mark_worker() -> None:
    _LOCAL.worker = True


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(workers(), "inftda", initializer=_mark_worker)
        return _POOL


def map_blocks(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, on the pool when there are several items (inline when called
    from a pool thread, so nested use cannot deadlock)."""
    items = list(items)
    if len(items) < 2 or workers() == 1 or getattr(_LOCAL, "worker", False):
        return [fn(x) for x in items]
    return list(_pool().map(fn, items))


def _forget_pool() -> None:  # a forked child has none of the parent's threads
    global _POOL, _LOCK
    _POOL, _LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)
