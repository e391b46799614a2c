"""A release under a memory_limit too small for it (issue 33, D13): DuckDB's out-of-memory
error became one message of ours (the limit, the fix, whether anything was charged), with the
ledger unchanged and no partial table. Before: DuckDB's bare ``Out of Memory Error`` (with the
memory in use), which said nothing of the budget.

A wide table (5 ENUM columns of 40 values, 1e6 uniform rows: ~1e6 distinct leaves, as
benchmarks/bench_release.py builds it) under 8MB runs out of memory in the leaf GROUP BY,
before the release's checks: nothing is charged. (At 50MB the 1e7-row wide release runs out in
the parts' list() aggregation, also before the charge.)"""

from __future__ import annotations

import duckdb
import pytest

from inftda_duckdb import ReleaseOutOfMemoryError
from inftda_duckdb.core.release import out_of_memory
from inftda_duckdb.duckdb import api
from inftda_duckdb.duckdb.extension import release

COLUMNS = [f"c{i}" for i in range(1, 6)]


@pytest.fixture
def wide(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    for c in COLUMNS:
        labels = ", ".join(f"'{c}_{j}'" for j in range(40))
        con.execute(f"CREATE TYPE {c}_e AS ENUM ({labels})")
    cols = ", ".join(f"enum_range(NULL::{c}_e)[1 + floor(random() * 40)::INTEGER]::{c}_e AS {c}"
                     for c in COLUMNS)
    con.execute("SELECT setseed(0.42)")
    con.execute(f"CREATE TABLE wide AS SELECT {cols} FROM range(1000000)")
    return con


def _ledger(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0]


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]


def test_a_release_out_of_memory_says_so_and_charges_nothing(
        wide: duckdb.DuckDBPyConnection) -> None:
    wide.execute("SET memory_limit = '8MB'")
    before = _ledger(wide)
    with pytest.raises(ReleaseOutOfMemoryError) as err:
        release(wide, "wide", COLUMNS, rho=1)
    text = str(err.value)
    assert err.value.charged is False
    assert "needs more memory than DuckDB's memory_limit (7.6 MiB now) allows" in text
    assert "nothing was charged" in text
    assert "SET memory_limit = '16MB'" in text and "temp_directory" in text
    assert "MiB used" not in text and "Out of Memory" not in text  # DuckDB's own figures
    assert err.value.__cause__ is None and err.value.__suppress_context__
    wide.execute("RESET memory_limit")
    assert _ledger(wide) == before


def test_a_release_into_a_table_out_of_memory_leaves_no_table(
        wide: duckdb.DuckDBPyConnection) -> None:
    """The command line's path (CREATE TABLE ... AS the release): no partial table."""
    wide.execute("SET memory_limit = '8MB'")
    before, tables = _ledger(wide), _tables(wide)
    with pytest.raises(ReleaseOutOfMemoryError, match="nothing was charged"):
        api.run_release(wide, "wide", COLUMNS, {"rho": 1}, origin="cli",
                        statement=lambda sql: f"CREATE TABLE released AS {sql}")
    wide.execute("RESET memory_limit")
    assert _ledger(wide) == before and _tables(wide) == tables


def test_after_the_charge_the_message_says_what_was_spent() -> None:
    err = out_of_memory(50 * 10**6, "rho 1 on memory.main.wide")
    assert err.charged is True and isinstance(err, MemoryError)
    assert "(47.7 MiB now)" in str(err) and "SET memory_limit = '100MB'" in str(err)
    assert "its budget was already charged (rho 1 on memory.main.wide is spent" in str(err)
    assert "nothing was charged" not in str(err)
    assert "memory_limit allows: nothing was charged" in str(out_of_memory(None, None))
