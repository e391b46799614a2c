"""Shared fixtures: a connection with inftda_duckdb loaded."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import duckdb
import pytest

from inftda_duckdb.duckdb.budgets import outside_transaction
from inftda_duckdb.duckdb.extension import load

# A developer's own shared ledger or ledger key must never see the tests' charges (subprocesses
# inherit this environment too); tests that need them set them explicitly.
for _variable in ("INFTDA_LEDGER", "INFTDA_LEDGER_KEY_FILE"):
    os.environ.pop(_variable, None)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB connection with InfTDA loaded; closed after the test."""
    connection = duckdb.connect()
    load(connection)
    yield connection
    connection.close()


@pytest.fixture
def charges(con: duckdb.DuckDBPyConnection) -> Callable[[], int]:
    """The number of rows in the ledger of ``con`` (charged releases), as a function."""
    return lambda: int(con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])


Vouched = Callable[[duckdb.DuckDBPyConnection, str], list[tuple[object, ...]]]


@pytest.fixture
def vouched() -> Vouched:
    """Run one SQL statement as the shell runs it (vouched: the SQL budget setters may run when
    no transaction is open) and fetch its rows."""

    def run(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[object, ...]]:
        with outside_transaction(con, sql):
            return con.execute(sql).fetchall()

    return run
