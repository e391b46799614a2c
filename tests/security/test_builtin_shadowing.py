"""DuckDB's own functions shadowed by macros (issue 33, the attacker pass on D1/D2 and D9): a
macro may carry the name of a built-in function (TEMP, or kept in a database file), and DuckDB
then calls the macro. The package's SQL read the statement with ``current_query()``, the
profiling with ``current_setting(...)``, and ran the rendered release with ``query(...)``:

- ``CREATE MACRO current_query() AS 'SELECT 1'`` let ``EXPLAIN ANALYZE`` of a release run in the
  public-facing mode (charged, printing the private table's exact row counts);
- ``CREATE MACRO current_setting(x) AS NULL`` hid the profiling the mode refuses;
- ``CREATE MACRO query(x) AS TABLE ...`` could rewrite the release's SQL before it ran (here:
  every count times 1000, so one person moves a count by 1000 under noise calibrated to 1).

The package's SQL now names DuckDB's functions as ``system.main.<name>``, which no macro can be."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.duckdb.extension import load

N = 12345
R = "SELECT * FROM inftda_release('t', ['dx'], rho := 1, domains := {'dx': ['0', '1']})"
SHADOWS = {
    "current_query": "CREATE {temp} MACRO current_query() AS 'SELECT 1'",
    "current_setting": "CREATE {temp} MACRO current_setting(x) AS NULL",
}
ATTACKS = {"EXPLAIN ANALYZE": f"EXPLAIN ANALYZE {R}",
           "profiling": f"PRAGMA enable_profiling = 'no_output'; {R}"}


@pytest.fixture
def public() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT (i % 2)::VARCHAR AS dx FROM range({N}) r(i)")
    load(con, mode="public")
    inftda_duckdb.set_budget(con, "t", rho=100)
    yield con
    con.close()


def _charges(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])


@pytest.mark.parametrize("temp", ["TEMP", ""])
@pytest.mark.parametrize("shadow", sorted(SHADOWS))
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_shadowed_builtin_does_not_open_the_public_mode(
        public: duckdb.DuckDBPyConnection, shadow: str, temp: str, attack: str) -> None:
    public.execute(SHADOWS[shadow].format(temp=temp))
    with pytest.raises(duckdb.Error, match="refused in public-facing mode"):
        for statement in public.extract_statements(ATTACKS[attack]):
            public.execute(statement.query).fetchall()
    assert _charges(public) == 0


def test_a_query_macro_cannot_rewrite_the_release() -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT (i % 2)::VARCHAR AS dx FROM range({N}) r(i)")
    load(con)
    con.execute("CREATE MACRO query(x) AS TABLE SELECT * FROM system.main.query("
                "replace(x, 'count(*)', '(count(*) * 1000)'))")
    total = con.execute(f"SELECT sum(count) FROM ({R})").fetchall()[0][0]
    assert total == N  # substitute neighbours: the total is public and exact
    con.close()
