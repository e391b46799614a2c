"""Per-connection Python UDFs, and macros that every cursor sees.

DuckDB's Python UDF names are instance-wide, and only the connection that created a UDF can
remove it. So every connection (or cursor) that loads the package gets its own numbered UDFs,
created once under a lock, and its TEMP macros (which are per connection) call those.

A cursor (``con.cursor()``, which jupysql opens for every ``%sql`` statement) is a connection of
its own: it sees the instance's UDFs and catalog, but not its parent's TEMP macros, and DuckDB
has no instance-wide search path (``SET GLOBAL search_path`` is refused). So :func:`create_macro`
also writes each macro to the ``main`` schema of the instance's default database, where every
cursor finds it; the loaded connection's own TEMP macro shadows it. In a database file that copy
is stored with the file (like the ledger) and is re-created by every ``load``; opened without the
package, calling it fails with DuckDB's "Scalar Function ... does not exist" (nothing else
changes). A read-only database gets TEMP macros only: load each cursor there (``load(cur)``).
"""

from __future__ import annotations

import contextlib
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


def create_function(con: Any, name: str, function: Callable[..., Any], *args: Any,
                    **kwargs: Any) -> None:
    """``con.create_function(name, function, ...)``, the function kept alive for the life of
    the process: DuckDB holds only a borrowed reference to it, but the UDF's name is
    instance-wide, so once the connection that made it is closed and collected any connection
    calling the UDF (by name, or through the macros of the default database) would call freed
    memory and crash the process (SIGSEGV). Kept, the call finds the connection gone and says
    so. (A few closures per loaded connection, each holding the connection weakly.)"""
    _KEPT.append(function)  # (atomic; register_udfs may hold _LOCK here)
    con.create_function(name, function, *args, **kwargs)


_KEPT: list[Callable[..., Any]] = []


def registered(con: Any, group: str) -> int | None:
    """The UDF suffix of (connection, group), or None if it was never registered."""
    with _LOCK:
        return _NUMBERS.get(con, {}).get(group)


def create_macro(con: Any, definition: str) -> None:
    """``CREATE OR REPLACE TEMP MACRO <definition>`` on ``con``, and the same macro in the default
    database's ``main`` schema for its cursors (skipped where the database is read-only)."""
    con.execute(f"CREATE OR REPLACE TEMP MACRO {definition}")
    with con.cursor() as cur, contextlib.suppress(Exception):  # read-only: TEMP only
        db = cur.execute("SELECT system.main.current_database()").fetchall()[0][0]
        quoted = '"' + str(db).replace('"', '""') + '"'
        cur.execute(f"CREATE OR REPLACE MACRO {quoted}.main.{definition}")
