"""Where users already work: cursors and jupysql see the functions; release / preview accept a
table name, a DuckDB relation, a pandas or polars DataFrame or an Arrow table (charged to an
explicit source_name), and messages never print or execute the user's object."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import inftda_duckdb
from inftda_duckdb.core.errors import InputError

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

DOMAINS = {"a": ["x", "y"], "b": [0, 1, 2]}
ROWS = 300


def frame() -> pd.DataFrame:
    return pd.DataFrame({"a": ["x", "y", "x"] * (ROWS // 3), "b": [0, 1, 2] * (ROWS // 3)})


def ledger(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("SELECT source, origin FROM inftda_ledger ORDER BY id").fetchall()


def test_cursor_sees_every_function(con: duckdb.DuckDBPyConnection, vouched: Any) -> None:
    # before: 'Table Function with name inftda_release does not exist!' on con.cursor()
    con.execute("CREATE TABLE t AS SELECT (['x', 'y'])[1 + i % 2] AS a, i % 3 AS b "
                "FROM range(300) r(i)")
    cur = con.cursor()
    out = cur.sql("SELECT sum(count) FROM inftda_release('t', ['a', 'b'], rho := 1, "
                  "domains := {'a': ['x', 'y'], 'b': [0, 1, 2]})").fetchall()
    assert out == [(300,)]
    assert cur.sql("SELECT count(*) FROM inftda_preview('t', ['a'], rho := 1, "
                   "domains := {'a': ['x', 'y']})").fetchall() == [(1,)]
    vouched(cur, "SELECT inftda_set_budget('t', rho := 3)")
    assert cur.sql("SELECT spent_rho FROM inftda_budget()").fetchall() == [(1.0,)]
    assert ledger(con) == [("memory.main.t", "sql")]


def test_read_only_database_keeps_temp_macros(tmp_path: Path) -> None:
    path = tmp_path / "ro.duckdb"
    with duckdb.connect(str(path)) as rw:
        inftda_duckdb.load(rw)
        rw.execute("CREATE TABLE t AS SELECT 'x' AS a FROM range(10)")
    with duckdb.connect(str(path), read_only=True) as ro:
        inftda_duckdb.load(ro)  # no catalog macro can be written: TEMP ones only, no error
        assert ro.sql("SELECT count(*) FROM inftda_preview('t', ['a'], rho := 1, "
                      "domains := {'a': ['x']})").fetchall() == [(1,)]


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow", "relation"])
def test_in_memory_sources_are_released_and_charged_to_their_name(
        con: duckdb.DuckDBPyConnection, kind: str) -> None:
    df = frame()
    source = {"pandas": lambda: df, "polars": lambda: pl.from_pandas(df),
              "arrow": lambda: pa.Table.from_pandas(df),
              "relation": lambda: con.from_df(df)}[kind]()
    out = inftda_duckdb.release(con, source, ["a", "b"], rho=1, domains=DOMAINS,
                                source_name="people")
    assert sum(out["count"].to_pylist()) == ROWS
    assert out.schema.metadata[b"source"] == b"people"  # charged as name:people
    assert ledger(con) == [("people", "python")]
    assert out.schema.metadata[b"ledger_id"] == b"1"
    plan = inftda_duckdb.preview(con, source, ["a", "b"], rho=1, domains=DOMAINS)
    assert plan.num_rows == 2 and len(ledger(con)) == 1  # preview spends nothing
    # the registration is gone: nothing of the call is left on the connection
    assert con.sql("SELECT count(*) FROM duckdb_views() WHERE view_name LIKE 'inftda_source_%'"
                   ).fetchall() == [(0,)]


def test_in_memory_source_under_a_budget(con: duckdb.DuckDBPyConnection) -> None:
    inftda_duckdb.set_budget(con, "name:people", rho=1)
    inftda_duckdb.release(con, frame(), ["a"], rho=1, domains={"a": ["x", "y"]},
                          source_name="people")
    with pytest.raises(inftda_duckdb.BudgetExceededError, match="refused"):
        inftda_duckdb.release(con, pl.from_pandas(frame()), ["a"], rho=1,
                              domains={"a": ["x", "y"]}, source_name="people")


def test_messages_never_print_the_object(con: duckdb.DuckDBPyConnection) -> None:
    # before: the message embedded the whole DataFrame repr and never mentioned a way out
    df = frame()
    with pytest.raises(InputError) as info:
        inftda_duckdb.release(con, df, ["a"], rho=1, domains={"a": ["x", "y"]})
    text = str(info.value)
    assert "source_name is required" in text and "<a pandas DataFrame>" in text
    assert "source_name='trips'" in text and "set_budget(con, 'name:trips', rho=1)" in text
    assert "x  0" not in text and len(text) < 600
    with pytest.raises(InputError, match=r"got <a builtins object>.*con.register"):
        inftda_duckdb.release(con, object(), ["a"], rho=1)


def test_a_lazy_relation_over_a_release_is_not_run_by_an_error(
        con: duckdb.DuckDBPyConnection) -> None:
    # before: formatting the message executed the relation, which charged a release
    con.execute("CREATE TABLE t AS SELECT 'x' AS a FROM range(50)")
    lazy = con.sql("SELECT * FROM inftda_release('t', ['a'], rho := 1, domains := {'a': ['x']})")
    for bad in ({}, {"domains": "nope"}):
        with pytest.raises(InputError):
            inftda_duckdb.release(con, lazy, ["a"], rho=1, **bad)
    with pytest.raises(InputError):
        inftda_duckdb.preview(con, lazy, ["nope"], rho=1)
    assert ledger(con) == []


def test_sql_replacement_scan_of_a_dataframe(con: duckdb.DuckDBPyConnection) -> None:
    people = frame()  # noqa: F841 - read by DuckDB's replacement scan, by its variable name
    out = con.sql("SELECT sum(count) FROM inftda_release('people', ['a', 'b'], rho := 1, "
                  "domains := {'a': ['x', 'y'], 'b': [0, 1, 2]})").fetchall()
    assert out == [(ROWS,)]
    assert ledger(con) == [("temp.main.people", "sql")]


def test_jupysql_runs_the_functions(tmp_path: Path) -> None:
    """jupysql itself, in IPython: %sql runs each statement on a fresh cursor."""
    pytest.importorskip("sql")  # jupysql
    script = textwrap.dedent("""
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        def cell(code):
            r = ip.run_cell(code)
            if not r.success:
                raise SystemExit(f"cell failed: {code!r}: {r.error_in_exec!r}")
            return r.result
        cell("import duckdb, inftda_duckdb\\n"
             "from inftda_duckdb.tools.demo import load_sample\\n"
             "con = duckdb.connect()\\ninftda_duckdb.load(con)\\nload_sample(con, 'trips', 2000)")
        cell("%load_ext sql")
        cell("%sql con")
        cell("%sql CREATE TABLE trips_dp AS SELECT * FROM inftda_release('trips', "
             "['origin', 'hour'], rho := 1, domains := {'hour': range(24)})")
        print("TOTAL", list(cell("%sql SELECT sum(count) AS n FROM trips_dp").dict()["n"]))
        print("LEDGER", cell("%sql SELECT count(*) AS n FROM inftda_ledger").dict()["n"])
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TOTAL [2000]" in result.stdout and "LEDGER (1,)" in result.stdout
