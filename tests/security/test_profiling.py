"""Statements that plan or profile a release in the public-facing mode (issue 33, D1 and D2):
only the prefix ``EXPLAIN ANALYZE`` was refused (a regex on the statement's text), so
``EXPLAIN (ANALYZE)``, ``EXPLAIN (ANALYZE, FORMAT json)`` or ``EXPLAIN ANALYZE`` after a comment
ran (charged, printing every operator's exact row count), and a plain ``EXPLAIN`` was free and
showed DuckDB's estimate of the private table's exact row count.

Every spelling is refused when the statement is bound (the generator runs for EXPLAIN too, and
reads the statement with DuckDB's own parser), before any data is read: nothing is charged, and
the refusal is the same whatever the data. So are profiling and DuckDB's operator logs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.duckdb.extension import load

ROWS = {"a": 12345, "b": 23456}  # the private row counts a plan would show
SECRETS = {"a": ["12345", "12,345", "12.3K", "12.35K"], "b": ["23456", "23,456", "23.5K"]}
R = "SELECT * FROM inftda_release('t', ['dx'], rho := 1, domains := {'dx': ['0', '1']})"
P = "SELECT * FROM inftda_preview('t', ['dx'], rho := 1, domains := {'dx': ['0', '1']})"

SPELLINGS = {
    "EXPLAIN ANALYZE": f"EXPLAIN ANALYZE {R}",
    "EXPLAIN (ANALYZE)": f"EXPLAIN (ANALYZE) {R}",
    "EXPLAIN (ANALYZE, FORMAT json)": f"EXPLAIN (ANALYZE, FORMAT json) {R}",
    "explain analyse, lower case": f"explain analyse {R}",
    "block comment first": f"/* hello */ EXPLAIN ANALYZE {R}",
    "line comment first": f"-- hello\nEXPLAIN ANALYZE {R}",
    "EXPLAIN": f"EXPLAIN {R}",
    "EXPLAIN (FORMAT json)": f"EXPLAIN (FORMAT json) {R}",
    "EXPLAIN (FORMAT html)": f"EXPLAIN (FORMAT html) {R}",
    "EXPLAIN of a preview": f"EXPLAIN {P}",
    "EXPLAIN CREATE TABLE AS": f"EXPLAIN CREATE TABLE x AS {R}",
    "EXPLAIN ANALYZE CREATE TABLE AS": f"EXPLAIN ANALYZE CREATE TABLE x AS {R}",
    "EXPLAIN ANALYZE INSERT": f"CREATE TABLE y (dx VARCHAR, count BIGINT); "
                              f"EXPLAIN ANALYZE INSERT INTO y {R}",
    "EXPLAIN ANALYZE COPY": f"EXPLAIN ANALYZE COPY ({R}) TO '{{tmp}}/out.csv'",
    "second of two statements": f"SELECT 1; EXPLAIN {R}",
    "EXPLAIN of a subquery": f"EXPLAIN SELECT count(*) FROM ({R})",
    "EXPLAIN under explain_output all": f"SET explain_output = 'all'; EXPLAIN {R}",
    "EXPLAIN EXECUTE": f"PREPARE p AS {R}; EXPLAIN EXECUTE p",
    "EXPLAIN ANALYZE EXECUTE": f"PREPARE q AS {R}; EXPLAIN ANALYZE EXECUTE q",
    "EXPLAIN of a view": f"CREATE VIEW v AS {R}; EXPLAIN SELECT * FROM v",
    "EXPLAIN ANALYZE of a view": f"CREATE VIEW w AS {R}; EXPLAIN ANALYZE SELECT * FROM w",
    "PRAGMA enable_profiling": f"PRAGMA enable_profiling; {R}",
    "enable_profiling json": f"SET enable_profiling = 'json'; {R}",
    "enable_profiling no_output": f"SET enable_profiling = 'no_output'; {R}",
    "enable_profiling query_tree_optimizer": f"SET enable_profiling = 'query_tree_optimizer'; "
                                             f"{R}",
    "profiling_mode detailed": f"SET profiling_mode = 'detailed'; {R}",
    "profiling to a file": f"PRAGMA enable_profiling = 'json'; PRAGMA profiling_output = "
                           f"'{{tmp}}/profile.json'; {R}",
    "operator logs": f"CALL enable_logging(level := 'debug'); {R}",
    "operator logs by type": f"CALL enable_logging('PhysicalOperator'); {R}",
}


@pytest.fixture
def public(tmp_path: Path) -> Iterator[dict[str, duckdb.DuckDBPyConnection]]:
    cons = {}
    for variant, n in ROWS.items():
        con = duckdb.connect()
        con.execute(f"CREATE TABLE t AS SELECT (i % 2)::VARCHAR AS dx FROM range({n}) r(i)")
        load(con, mode="public")
        inftda_duckdb.set_budget(con, "t", rho=100)
        cons[variant] = con
    yield cons
    for con in cons.values():
        con.close()


def _charges(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])


def _refusal(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    with pytest.raises(duckdb.Error) as info:
        for statement in con.extract_statements(sql):
            con.execute(statement.query).fetchall()
    return str(info.value).split("\n\nAt:\n")[0]


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_spelling_is_refused_before_the_data(public: dict[str, duckdb.DuckDBPyConnection],
                                                   spelling: str, tmp_path: Path) -> None:
    texts = []
    for variant, con in public.items():
        folder = tmp_path / variant
        folder.mkdir()
        text = _refusal(con, SPELLINGS[spelling].replace("{tmp}", str(folder)))
        assert "refused in public-facing mode" in text, text
        assert not any(secret in text for secret in SECRETS[variant]), text
        assert _charges(con) == 0
        for written in folder.iterdir():  # nothing a refused statement wrote shows the counts
            assert not any(secret in written.read_text() for secret in SECRETS[variant])
        texts.append(text)
    assert texts[0] == texts[1]  # the same refusal whatever the data


@pytest.mark.parametrize("explain", ["standard", "analyze"])
def test_a_relation_explained_from_python_is_refused(
        public: dict[str, duckdb.DuckDBPyConnection], explain: str) -> None:
    """DuckDB's relational API binds a relation first outside any statement (no query text),
    then again under the statement that runs or explains it."""
    for variant, con in public.items():
        relation = con.sql(R)  # bound: nothing runs, nothing is charged
        with pytest.raises(duckdb.Error, match="refused in public-facing mode") as info:
            relation.explain(type=explain)
        assert not any(secret in str(info.value) for secret in SECRETS[variant])
        assert _charges(con) == 0


@pytest.mark.parametrize("statement", [
    R, f"CREATE TABLE out AS {R}", f"SUMMARIZE {R}", f"PREPARE r AS {R}; EXECUTE r",
    f"SELECT count(*) FROM ({R})", "FROM inftda_release('t', ['dx'], rho := 1, "
    "domains := {'dx': ['0', '1']})", f"CALL enable_logging(); {R}"])
def test_what_runs_a_release_is_admitted_and_charged(
        public: dict[str, duckdb.DuckDBPyConnection], statement: str) -> None:
    """The negative control: the statements that run a release (logging at INFO too)."""
    con = public["a"]
    for part in con.extract_statements(statement):
        con.execute(part.query).fetchall()
    assert _charges(con) == 1
    assert con.sql(R).fetchall() and _charges(con) == 2  # a relation, run


def test_curator_mode_still_explains() -> None:
    """The curator may EXPLAIN a release (free: EXPLAIN runs nothing)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 2)::VARCHAR AS dx FROM range(100) r(i)")
    load(con)
    assert con.execute(f"EXPLAIN {R}").fetchall()
    assert con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]
    con.close()
