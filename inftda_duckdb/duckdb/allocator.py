"""DuckDB's memory as a release sees it: the ``memory_limit`` it is planned under, and the
allocator giving back the memory it freed while a large release's levels run.

:func:`memory_limit` reads DuckDB's ``memory_limit`` setting in bytes: a release too large for
one list of its leaves under it is planned in parts (:func:`.sqlgen.render_release`).

DuckDB allocates with its own jemalloc. Memory a query freed (the leaf GROUP BY's hash table)
stays in the process as dirty pages until jemalloc purges it, which by default happens only when
DuckDB allocates again. The levels call allocates its memory with numpy (not jemalloc), so that
memory would stay resident on top of the core's own.

:func:`returning_memory` turns DuckDB's ``allocator_background_threads`` on while the core runs
(jemalloc's background threads then purge the dirty pages without waiting for an allocation) and
restores the value it read when the last release of that connection leaves, also on errors. It does
this only for releases over at least :data:`MIN_CELLS` leaf cells of the public domains (never the
number of true leaves: another connection can read the instance-wide setting while the release runs,
so the decision must reveal nothing uncharged): the setting costs two statements, which a small
release does not pay. A value DuckDB refuses to change (e.g. under ``lock_configuration``) is left
as it is.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from typing import Any

import duckdb

SETTING = "allocator_background_threads"
MIN_CELLS = 1 << 20  #: releases over fewer public leaf cells leave the setting alone

_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "PiB": 1 << 50, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}

_LOCK = threading.Lock()
_USERS: dict[int, list[Any]] = {}  # id(connection) -> [releases inside, value to restore]


def _set(con: Any, value: object) -> None:
    with con.cursor() as cur:
        cur.execute(f"SET GLOBAL {SETTING} = {'true' if value else 'false'}")


@contextlib.contextmanager
def returning_memory(con: Any, cells: int) -> Iterator[None]:
    """While the block runs (a release's levels over ``cells`` public leaf cells, on the DuckDB
    instance of ``con``), DuckDB's allocator purges freed memory in the background; the
    setting's value is restored when the last such block of ``con`` ends."""
    if con is None or cells < MIN_CELLS:
        yield
        return
    key = id(con)
    with _LOCK:
        entry = _USERS.setdefault(key, [0, None])
        if entry[0] == 0:
            try:
                with con.cursor() as cur:
                    old = cur.execute(
                        f"SELECT system.main.current_setting('{SETTING}')").fetchall()[0][0]
                if not old:
                    _set(con, True)
                    entry[1] = old
            except duckdb.Error:  # unknown setting (an older DuckDB) or locked: leave it
                entry[1] = None
        entry[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                del _USERS[key]
                if entry[1] is not None:
                    with contextlib.suppress(duckdb.Error):
                        _set(con, entry[1])


def memory_limit(con: Any) -> int | None:
    """DuckDB's ``memory_limit`` setting in bytes (None if unreadable): a release too large for
    one list of its leaves under it is planned in parts. ``con``: a connection to read it
    from, or the setting's text as the release macro already read it (no query)."""
    text = con
    if not isinstance(con, str):
        try:
            text = str(con.execute(
                "SELECT system.main.current_setting('memory_limit')").fetchall()[0][0])
        except duckdb.Error:
            return None
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", text)
    if m is None or m.group(2) not in _UNITS:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2)])
