"""What differs between the databases a ledger is kept in, and DuckDB's side of it.

A :class:`Dialect` holds parameters, DDL, catalog queries, locking, errors, and where the chain's
SQL (DuckDB's: digests, verification, folding) runs; everything else in :mod:`.store` is one code
path. This module is DuckDB's dialect (:data:`DUCKDB`) and its openers: the process's private
in-memory DuckDB (:func:`host`: in-memory ledgers, and the instance that attaches ledger files)
and :func:`attached`, which attaches a ledger file for one operation, waiting up to
:data:`LOCK_WAIT` while another process holds it. PostgreSQL's dialect and opener are in
:mod:`.postgres`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import duckdb

from ..core.errors import LedgerError
from ..core.identifiers import literal, quote
from . import chain

LOCK_WAIT = 30.0  # seconds a process waits for a ledger (file or server) another one holds
STORAGE: dict[str, str | bool | int | float | list[str]] = {
    "storage_compatibility_version": "v1.5.0"}
"""The configuration of every database file the package creates (ledger files, the command
line's databases): DuckDB's v1.5.0 storage format, which DuckDB 1.5 and its command-line shell
read as well as DuckDB 2 does (a file created so keeps that format; an existing file opened with
it is unaffected)."""

_HOST: list[Any] = []  # the process's private in-memory DuckDB (attaches ledger files; memory)


def host() -> Any:
    """The process's private in-memory DuckDB (made on first use)."""
    if not _HOST:
        _HOST.append(duckdb.connect(":memory:", config=STORAGE))  # files it attaches: v1.5.0
    return _HOST[0]


class Dialect:
    """What differs between the databases a ledger is kept in (DuckDB here; PostgreSQL in
    :mod:`.postgres`): parameters, DDL, catalog queries, locking, errors, and where the chain's
    SQL (DuckDB's: digests, verification, folding) runs. Everything else is one code path."""

    errors: tuple[type[BaseException], ...] = (duckdb.Error,)
    missing: tuple[type[BaseException], ...] = (duckdb.CatalogException,)  # no such table
    retry: tuple[type[BaseException], ...] = (duckdb.TransactionException,)  # conflicts

    def prefix(self, database: str | None) -> str:
        return "main." if database is None else f"{quote(database)}.main."

    def sql(self, text: str) -> str:
        """``text`` with ``?`` parameters in this database's style."""
        return text

    def ddl(self, table: str, qualified: str) -> str:
        return chain.ddl(table, qualified)

    def begin(self, write: bool) -> str:
        return "BEGIN TRANSACTION"  # snapshot isolation; DuckDB's conflicts are retried

    def lock(self, cur: Any, prefix: str, create: bool = False) -> None:
        """Serialise writers of the ledger in ``cur``'s open transaction (DuckDB: one writer
        per file, plus the process lock)."""

    def tables(self, database: str | None) -> tuple[str, str]:
        """Queries (parameters: database, then names) listing the ledger's tables present, and
        counting a ``seq`` column of a table (a chained ledger)."""
        where = ("WHERE database_name = coalesce(?, current_database()) AND schema_name = "
                 "'main' AND table_name")
        return (f"SELECT table_name FROM duckdb_tables() {where} IN (?, ?, ?, ?)",
                f"SELECT count(*) FROM duckdb_columns() {where} = ? AND column_name = 'seq'")

    def view(self, cur: Any, prefix: str, after: int) -> tuple[Any, str]:
        """A DuckDB cursor and prefix on which the chained tables' rows with ``seq > after``
        (at least) can be read with DuckDB's SQL: here the tables themselves."""
        return cur, prefix

    def append(self, cur: Any, prefix: str, table: str, columns: list[str],
               params: dict[str, Any]) -> str:
        """Insert the chained row :func:`chain.row_sql` computes; returns its hash."""
        return str(cur.execute(chain.insert_sql(table, prefix, columns), params).fetchall()[0][0])

    def insert(self, table: str, columns: tuple[str, ...]) -> str:
        """INSERT of one row of ``columns`` into the qualified ``table`` from ``?`` parameters
        (DuckDB: from a SELECT, which the columns' types cast as a VALUES list would, without
        the collection of its own a VALUES list goes through on every charge)."""
        return f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join('?' * len(columns))}"


DUCKDB = Dialect()


@contextlib.contextmanager
def attached(path: str) -> Iterator[Any]:
    """A cursor on which the ledger file ``path`` is attached as ``inftda_ledger_file``,
    detached afterwards; waits (with back-off) while another process holds the file."""
    import os

    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise LedgerError(f"the ledger file {path} cannot be created: folder {folder} does not "
                          "exist. Fix: create the folder, or pass another ledger path")
    deadline, wait = time.monotonic() + LOCK_WAIT, 0.005
    with host().cursor() as cur:
        while True:
            try:
                cur.execute(f"ATTACH {literal(path)} AS inftda_ledger_file")  # no parameter
                break
            except duckdb.Error as exc:
                text = str(exc).lower()
                if "unique file handle conflict" in text:  # open in this process already
                    with duckdb.connect(path, config=STORAGE) as own, own.cursor() as same:
                        yield same
                    return
                if "lock" not in text or time.monotonic() > deadline:
                    raise LedgerError(
                        f"the ledger file {path} cannot be opened ({str(exc).strip()}). Nothing "
                        "was charged. Fix: close the program holding it (a DuckDB shell or "
                        "notebook connected to it), or pass another ledger") from None
                time.sleep(wait)
                wait = min(wait * 1.5, 0.25)
        try:
            cur.execute("USE inftda_ledger_file")
            yield cur
        finally:
            cur.execute("USE memory")
            cur.execute("DETACH inftda_ledger_file")
