"""Sources whose reading can fail on one row, in the public-facing mode (issue 33, D3): a
budgeted view with a CAST that fails on one row failed before the charge, and DuckDB's error
quoted the private value; on data without that row the release ran. Whether a release fails,
and what it says, must not depend on the data there, and DuckDB's own error (raised while it
scans, before the charge) cannot be replaced. So the mode releases only sources whose reading
cannot fail: tables of DuckDB databases, and what the curator declared
(``declare_failsafe_source``, ``declare_public_table``); anything else is refused when the
statement is bound, before any row is read, with the same message whatever the data."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import inftda_duckdb
from inftda_duckdb.duckdb import disclosure
from inftda_duckdb.duckdb.extension import load

DATA = {"bad row": ["1", "2", "Zyzzyva"] * 40, "clean": ["1", "2", "3"] * 40}
SECRET = "Zyzzyva"
DOM = "domains := {'a': [1, 2, 3]}"

SOURCES: dict[str, Callable[[duckdb.DuckDBPyConnection, Path], str]] = {
    "view with a CAST": lambda con, tmp: con.execute(
        "CREATE VIEW src AS SELECT CAST(x AS INTEGER) AS a FROM t") and "src",
    "view with error()": lambda con, tmp: con.execute(
        "CREATE VIEW src AS SELECT CASE WHEN x = 'Zyzzyva' THEN error('row ' || x) ELSE "
        "x::INTEGER END AS a FROM t") and "src",
    "view over a CSV file": lambda con, tmp: (
        con.execute(f"COPY (SELECT x AS a FROM t) TO '{tmp}/t.csv' (HEADER)"),
        con.execute(f"CREATE VIEW src AS SELECT * FROM read_csv('{tmp}/t.csv', "
                    "columns = {'a': 'INTEGER'}, header = true)")) and "src",
    "registered DataFrame": lambda con, tmp: con.register(
        "src", pd.DataFrame({"a": [int(x) if x.isdigit() else None
                                   for x in con.execute("SELECT x FROM t").fetchnumpy()["x"]]}))
    and "src",
    "TEMP table": lambda con, tmp: con.execute(
        "CREATE TEMP TABLE src AS SELECT TRY_CAST(x AS INTEGER) AS a FROM t") and "src",
}


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Callable[[str, str], tuple[duckdb.DuckDBPyConnection,
                                                                     str]]]:
    opened = []

    def make(variant: str, source: str) -> tuple[duckdb.DuckDBPyConnection, str]:
        con = duckdb.connect()
        opened.append(con)
        con.execute("CREATE TABLE t (x VARCHAR)")
        con.executemany("INSERT INTO t VALUES (?)", [[x] for x in DATA[variant]])
        folder = tmp_path / f"{variant}-{len(opened)}"
        folder.mkdir()
        name = SOURCES[source](con, folder)
        load(con, mode="public")
        inftda_duckdb.set_budget(con, name, rho=10)
        return con, name

    yield make
    for con in opened:
        con.close()


def _charges(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_a_source_that_could_fail_is_refused_whatever_the_data(connect: Callable[..., Any],
                                                                source: str) -> None:
    seen = []
    for variant in DATA:
        con, name = connect(variant, source)
        with pytest.raises(duckdb.Error) as info:
            con.execute(f"SELECT * FROM inftda_release('{name}', ['a'], rho := 1, "
                        f"{DOM})").fetchall()
        text = str(info.value).split("\n\nAt:\n")[0]
        assert "refused in public-facing mode" in text and "declare_failsafe_source" in text
        assert SECRET not in text and _charges(con) == 0
        if source != "TEMP table":  # from Python, the caller's own connection sees it: a table
            with pytest.raises(inftda_duckdb.InputError, match="declare_failsafe_source"):
                inftda_duckdb.release(con, name, ["a"], rho=1, domains={"a": [1, 2, 3]})
            assert _charges(con) == 0
        seen.append(text)
    assert seen[0] == seen[1]


@pytest.mark.parametrize("source", ["view with a CAST", "registered DataFrame", "TEMP table"])
def test_a_declared_source_is_released(connect: Callable[..., Any], source: str) -> None:
    """The curator vouches for it (here on data that cannot fail): released and charged."""
    con, name = connect("clean", source)
    disclosure.declare_failsafe_source(con, name)
    rows = con.execute(f"SELECT * FROM inftda_release('{name}', ['a'], rho := 1, "
                       f"{DOM})").fetchall()
    assert {r[0] for r in rows} <= {1, 2, 3} and _charges(con) == 1
    inftda_duckdb.release(con, name, ["a"], rho=1, domains={"a": [1, 2, 3]})
    assert _charges(con) == 2


def test_tables_and_objects_passed_from_python_are_released(tmp_path: Path) -> None:
    """The negative control: a table of a DuckDB database (an attached one too), and an object
    a Python caller passes (it holds the data), are released as before."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    for table in ("t", "other.t"):
        con.execute(f"CREATE TABLE {table} AS SELECT (i % 3 + 1)::INTEGER AS a "
                    "FROM range(90) r(i)")
    load(con, mode="public", ledger=str(tmp_path / "budget.duckdb"))
    for table in ("t", "other.t", "name:frame"):
        inftda_duckdb.set_budget(con, table, rho=10)
    for table in ("t", "other.t"):
        assert con.execute(f"SELECT * FROM inftda_release('{table}', ['a'], rho := 1, "
                           f"{DOM})").fetchall()
    frame = pd.DataFrame({"a": [1, 2, 3] * 30})
    inftda_duckdb.release(con, frame, ["a"], rho=1, domains={"a": [1, 2, 3]},
                          source_name="frame")
    spent = {r["budget"]: r["releases"] for r in inftda_duckdb.budget(con).to_pylist()}
    assert spent == {"memory.main.t": 1, "other.main.t": 1, "frame": 1}, spent
    con.close()


def test_declaring_a_missing_source_is_an_error() -> None:
    con = duckdb.connect()
    load(con, mode="public")
    with pytest.raises(inftda_duckdb.InputError, match="names no table or view"):
        disclosure.declare_failsafe_source(con, "nope")
    con.close()
