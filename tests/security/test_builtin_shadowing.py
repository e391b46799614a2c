"""DuckDB's own functions shadowed by macros (issue 33, the attacker pass on D1/D2 and D9): a
macro may carry the name of a built-in function (TEMP, or kept in a database file), and DuckDB
then calls the macro. The package's SQL read the statement with ``current_query()``, the
profiling with ``current_setting(...)``, and ran the rendered release with ``query(...)``:

- ``CREATE MACRO current_query() AS 'SELECT 1'`` let ``EXPLAIN ANALYZE`` of a release run in the
  public-facing mode (charged, printing the private table's exact row counts);
- ``CREATE MACRO current_setting(x) AS NULL`` hid the profiling the mode refuses;
- ``CREATE MACRO query(x) AS TABLE ...`` could rewrite the release's SQL before it ran (here:
  every count times 1000, so one person moves a count by 1000 under noise calibrated to 1).

The package's SQL now names DuckDB's functions as ``system.main.<name>``, which no macro can be:
the macros, and every function the rendered release calls (``CREATE TEMP MACRO enum_code(x) AS
0`` had counted every row of an ENUM column under its first label; ``ln``, ``sha256`` or
``list_sum`` macros chose which rows of a privacy unit the cap keeps)."""

from __future__ import annotations

import re
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


# Every DuckDB function a release statement calls, shadowed at once by TEMP macros of every
# arity up to 4 that fail when called: a bare name in the rendered SQL would reach the macro.
UNIT = ("SELECT * FROM inftda_release('u', ['a', 'b'], rho := 1, privacy_unit := 'p', "
        "max_rows_per_unit := 2, domains := {{'a': ['0', '1', '2'], 'b': [0, 1, 2, 3]}}, "
        "seed := 3{more}) ORDER BY ALL")
WITH_ENUM = ("SELECT * FROM inftda_release('u', ['e', 'b'], rho := 1, "
             "domains := {{'b': [0, 1, 2, 3]}}, seed := 3{more}) ORDER BY ALL")


def _rendered(con: duckdb.DuckDBPyConnection, statements: list[str],
              monkeypatch: pytest.MonkeyPatch) -> str:
    """Run ``statements``; the release SQL they rendered, without its comments."""
    from inftda_duckdb.duckdb import statements as module

    seen: list[str] = []
    render = module.render_release
    monkeypatch.setattr(module, "render_release",
                        lambda *a, **k: seen.append(render(*a, **k)) or seen[-1])
    for statement in statements:
        con.execute(statement).fetchall()
    return "\n".join(line.split("--")[0] for text in seen for line in text.splitlines())


@pytest.mark.filterwarnings("ignore:this release used seed")
@pytest.mark.parametrize("more", ["", ", estimator := 'least_squares'"])
def test_the_release_calls_duckdb_functions_no_macro_can_shadow(
        more: str, monkeypatch: pytest.MonkeyPatch) -> None:
    con = duckdb.connect()
    con.execute("CREATE TYPE e AS ENUM ('x', 'y')")
    con.execute("CREATE TABLE u AS SELECT (i % 3)::VARCHAR AS a, i % 4 AS b, i % 50 AS p, "
                "['x', 'y'][i % 2 + 1]::e AS e FROM range(600) r(i)")
    load(con)
    statements = [UNIT.format(more=more), WITH_ENUM.format(more=more)]
    sql = _rendered(con, statements, monkeypatch)
    builtin = {r[0] for r in con.execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE internal AND NOT "
        "starts_with(function_name, 'inftda')").fetchall()}
    called = {m.group(1).lower() for m in re.finditer(r"(?<![\w.\"])(\w+)\s*\(", sql)}
    assert called & builtin <= {"filter"}, called & builtin  # FILTER (...) is a clause
    qualified = sorted({m.group(1) for m in re.finditer(r"system\.main\.(\w+)\s*\(", sql)})
    assert {"least", "count", "sum", "list", "unnest", "ln", "sha256"} <= set(qualified)
    expected = [con.execute(s).fetchall() for s in statements]
    arities = ", ".join(f"({', '.join(f'x{i}' for i in range(k))}) AS error('shadowed')"
                        for k in range(5))
    for name in qualified:
        if name != "query":
            con.execute(f"CREATE TEMP MACRO \"{name}\"{arities}")
    assert [con.execute(s).fetchall() for s in statements] == expected
    con.close()
