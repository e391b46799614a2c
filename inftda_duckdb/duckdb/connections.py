"""Per-connection Python UDFs.

DuckDB's Python UDF names are instance-wide, and only the connection that created a UDF can
remove it. So every connection (or cursor) that loads the package gets its own numbered UDFs,
created once under a lock, and its TEMP macros (which are per connection) call those.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any

_LOCK = threading.Lock()
_COUNTER = itertools.count(1)
_NUMBERS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def register_udfs(con: Any, group: str, create: Callable[[int], None]) -> int:
    """Run ``create(n)`` once per (connection, group) and return ``n``, the suffix of its UDFs."""
    with _LOCK:
        groups = _NUMBERS.setdefault(con, {})
        n = groups.get(group)
        if n is None:
            n = next(_COUNTER)
            create(n)
            groups[group] = n
        return n


def registered(con: Any, group: str) -> int | None:
    """The UDF suffix of (connection, group), or None if it was never registered."""
    with _LOCK:
        return _NUMBERS.get(con, {}).get(group)
