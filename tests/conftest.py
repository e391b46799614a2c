"""Shared fixtures: a connection with inftda_duckdb loaded."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from inftda_duckdb.duckdb.extension import load


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB connection with InfTDA loaded; closed after the test."""
    connection = duckdb.connect()
    load(connection)
    yield connection
    connection.close()
