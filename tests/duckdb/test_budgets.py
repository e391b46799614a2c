"""Budgets from DuckDB: the Python API and the SQL functions (inftda_set_budget, inftda_budget,
inftda_releases, inftda_require_budget), shared ledgers, require_budget end to end, the
capability tokens of a release, and the upgrade of an old ledger."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb import BudgetExceededError, InputError, LedgerError, budget, load, release
from inftda_duckdb import set_budget as set_budget
from inftda_duckdb.core.accounting import CONVERSION
from inftda_duckdb.duckdb import budgets, capabilities, udfs
from inftda_duckdb.duckdb.catalog import home
from inftda_duckdb.duckdb.registry import RELEASES

Vouched = Callable[[duckdb.DuckDBPyConnection, str], list[tuple[object, ...]]]  # conftest's

DOM = {"x": [0, 1, 2]}
SQL_DOM = "domains := {'x': [0, 1, 2]}"


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TABLE trips AS SELECT (i % 3)::INTEGER AS x FROM range(300) t(i)")
    yield c
    c.close()


def row(c: duckdb.DuckDBPyConnection, name: str | None, sources: list[str] | None = None) -> dict:
    (r,) = [r for r in budget(c).to_pylist()
            if r["budget"] == name and (sources is None or r["sources"] == sources)]
    return r


def test_sql_inftda_budget_matches_python(con: duckdb.DuckDBPyConnection) -> None:
    empty = con.sql("SELECT * FROM inftda_budget()").to_arrow_table()
    assert empty.num_rows == 0 and empty.column_names == budget(con).column_names
    set_budget(con, "trips", rho=1)
    release(con, "trips", ["x"], rho="1/3", domains=DOM)
    release(con, con.table("trips"), ["x"], rho=2, domains=DOM, source_name="o'neil")
    got = con.sql("SELECT * FROM inftda_budget(delta := 1e-9)").to_arrow_table()
    want = budget(con, 1e-9)
    assert got.drop(["set_at"]).to_pylist() == want.drop(["set_at"]).to_pylist()
    assert got.column("set_at").to_pylist()[0] == want.column("set_at").to_pylist()[0]
    assert con.execute("SELECT remaining_rho_exact FROM inftda_budget() WHERE budget LIKE "
                       "'%trips'").fetchall() == [("2/3",)]
    rel = con.sql("SELECT id, source, rho, origin, conversion FROM inftda_releases()")
    assert rel.fetchall() == [(1, "memory.main.trips", "1/3", "python", CONVERSION),
                              (2, "o'neil", "2", "python", CONVERSION)]
    assert con.execute("SELECT id FROM inftda_releases('o''neil')").fetchall() == [(2,)]
    assert con.execute("SELECT id FROM inftda_releases('memory.main.trips')").fetchall() == [(1,)]


def test_sql_inftda_releases_resolves_names_as_set_budget_does(
        con: duckdb.DuckDBPyConnection) -> None:
    # inftda_releases('trips') found nothing: it compared the raw string with the stored
    # 'memory.main.trips', while inftda_set_budget('trips') resolves the name
    release(con, "trips", ["x"], rho="1/3", domains=DOM)
    release(con, con.table("trips"), ["x"], rho=2, domains=DOM, source_name="o'neil")
    con.execute("CREATE SCHEMA s; CREATE TABLE s.other AS SELECT * FROM trips")
    release(con, "s.other", ["x"], rho=1, domains=DOM)
    ids = lambda arg: [r[0] for r in con.execute(  # noqa: E731
        f"SELECT id FROM inftda_releases({arg}) ORDER BY id").fetchall()]
    for name in ("'trips'", "'TRIPS'", "'main.trips'", "'memory.main.trips'"):
        assert ids(name) == [1], name
    assert ids("'o''neil'") == [2]
    assert ids("['trips', 's.other']") == [1, 3]
    assert ids("'other'") == []  # not on the search path: placed as memory.main.other
    con.execute("SET search_path = 's'")
    assert ids("'other'") == [3]
    con.execute("RESET search_path; DROP TABLE s.other")
    assert ids("'s.other'") == [3]  # a dropped table's releases stay findable
    assert ids("NULL") == [1, 2, 3]


@pytest.mark.parametrize(("call", "exact"), [
    ("inftda_set_budget('trips', rho := 2.0)", "2"),
    ("inftda_set_budget('trips', 0.1)", "1/10"),
    ("inftda_set_budget('trips', rho := '1/3')", "1/3"),
    ("inftda_set_budget('TRIPS', rho := 0)", "0"),
    ("inftda_set_budget(source := 'main.trips', rho := 3)", "3"),
])
def test_sql_inftda_set_budget(con: duckdb.DuckDBPyConnection, call: str, exact: str,
                               vouched: Vouched) -> None:
    (msg,) = vouched(con, f"SELECT {call}")[0]
    assert msg.startswith(f"memory.main.trips: budget rho {exact}, spent 0, remaining {exact}")
    assert row(con, "memory.main.trips")["budget_rho_exact"] == exact


def test_sql_set_budget_lists_names_files_and_missing_tables(
    con: duckdb.DuckDBPyConnection, vouched: Vouched,
) -> None:
    msg = vouched(con, "SELECT inftda_set_budget(['trips', 'file:/data/t.parquet'], "
                  "name := 'riders', rho := 1)")[0][0]
    assert msg == "riders: budget rho 1, spent 0, remaining 1"
    assert row(con, "riders")["sources"] == ["memory.main.trips", "/data/t.parquet"]
    with pytest.raises(duckdb.Error, match="later"):
        vouched(con, "SELECT inftda_set_budget('later', rho := 1)")
    vouched(con, "SELECT inftda_set_budget('later', rho := 1, missing_ok := true)")
    con.execute("CREATE TABLE later AS SELECT * FROM trips")
    con.execute(f"SELECT * FROM inftda_release('later', ['x'], rho := 1, {SQL_DOM})").fetchall()
    with pytest.raises(duckdb.Error, match="refused"):
        con.execute(f"SELECT * FROM inftda_release('later', ['x'], rho := 0.1, {SQL_DOM})")


def test_sql_set_budget_epsilon_and_errors(con: duckdb.DuckDBPyConnection,
                                           vouched: Vouched) -> None:
    vouched(con, "SELECT inftda_set_budget('trips', epsilon := 1, delta := 1e-6)")
    with_sql = row(con, "memory.main.trips")["budget_rho_exact"]
    set_budget(con, "trips", epsilon=1, delta=1e-6)
    assert row(con, "memory.main.trips")["budget_rho_exact"] == with_sql
    for bad in ["rho := 1, epsilon := 1", "rho := -1", "epsilon := 1"]:
        with pytest.raises(duckdb.Error, match=r"rho|delta|epsilon"):
            vouched(con, f"SELECT inftda_set_budget('trips', {bad})")
    assert row(con, "memory.main.trips")["budget_rho_exact"] == with_sql


def test_sql_set_budget_sees_the_callers_temp_tables_use_and_search_path(
    con: duckdb.DuckDBPyConnection, vouched: Vouched,
) -> None:
    def capped(name: str, label: str) -> None:
        out = vouched(con, f"SELECT inftda_set_budget('{name}', rho := 1)")[0][0]
        assert out.startswith(f"{label}: budget rho 1")
        release(con, name, ["x"], rho="3/4", domains=DOM)
        with pytest.raises(BudgetExceededError):
            release(con, name, ["x"], rho="1/2", domains=DOM)

    con.execute("CREATE TEMP TABLE scratch AS SELECT * FROM trips")
    capped("scratch", "temp.main.scratch")
    con.execute("ATTACH ':memory:' AS db2")
    con.execute("CREATE TABLE db2.main.t AS SELECT (range % 3)::INTEGER AS x FROM range(300)")
    con.execute("CREATE TABLE t AS SELECT 1 AS x")  # a namesake in the default database
    con.execute("USE db2")
    capped("t", "db2.main.t")
    with pytest.raises(duckdb.Error, match="refused"):
        con.execute(f"SELECT * FROM inftda_release('t', ['x'], rho := 0.5, {SQL_DOM})")


def test_register_twice_and_on_several_connections(tmp_path: Path, vouched: Vouched) -> None:
    path = str(tmp_path / "cur.db")
    a = duckdb.connect(path)
    a.execute("CREATE TABLE trips (a INTEGER)")
    load(a)
    load(a)  # same connection again
    b = duckdb.connect(path)  # same instance: UDF names are shared
    load(b)
    load(a.cursor())
    vouched(a, "SELECT inftda_set_budget('trips', rho := 1)")
    a.close()  # b's functions do not depend on a
    vouched(b, "SELECT inftda_set_budget('trips', rho := 4)")
    assert b.execute("SELECT budget_rho_exact FROM inftda_budget()").fetchall() == [("4",)]
    b.close()


def test_require_budget_end_to_end(con: duckdb.DuckDBPyConnection, vouched: Vouched) -> None:
    release(con, "trips", ["x"], rho=1, domains=DOM)
    assert vouched(con, "SELECT inftda_require_budget()") == [
        ("require_budget is on",)]
    with pytest.raises(BudgetExceededError, match="no budget covers it"):
        release(con, "trips", ["x"], rho=1, domains=DOM)
    with pytest.raises(duckdb.Error, match="no budget covers it"):
        con.execute(f"SELECT * FROM inftda_release('trips', ['x'], rho := 1, {SQL_DOM})")
    set_budget(con, "trips", rho=3)
    release(con, "trips", ["x"], rho=1, domains=DOM)
    inftda_duckdb.require_budget(con, False)
    release(con, con.table("trips"), ["x"], rho=1, domains=DOM, source_name="frame")


def test_in_memory_sources_are_charged_to_their_source_name(con: duckdb.DuckDBPyConnection,
                                                             tmp_path: Path) -> None:
    set_budget(con, ["name:frame", "trips"], name="people", rho=1)
    frame = con.table("trips")  # any in-memory object: a relation here
    release(con, frame, ["x"], rho="1/2", domains=DOM, source_name="name:Frame")  # ASCII case
    with pytest.raises(BudgetExceededError, match="people"):
        release(con, "trips", ["x"], rho="3/4", domains=DOM)
    for bad in ("file:", "name: "):
        with pytest.raises(InputError, match="source_name"):
            release(con, frame, ["x"], rho=1, domains=DOM, source_name=bad)
    with pytest.raises(InputError, match="source_name"):  # a table is charged as itself
        release(con, "trips", ["x"], rho=1, domains=DOM, source_name="frame")
    with pytest.raises(LedgerError, match="lost when the connection closes"):  # durable data
        release(con, frame, ["x"], rho=1, domains=DOM, source_name=f"file:{tmp_path}/t.csv")
    assert [r["sources"] for r in budget(con).to_pylist()] == [["frame", "memory.main.trips"]]


def test_budgets_of_sources_in_different_databases_need_a_shared_ledger(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    con.execute(f"ATTACH '{tmp_path / 'a.duckdb'}' AS a")
    con.execute("CREATE TABLE a.main.t (x INTEGER)")
    with pytest.raises(InputError, match=r"one ledger file"):
        set_budget(con, ["trips", "a.main.t"], name="both", rho=1)
    load(con, ledger=str(tmp_path / "budget.duckdb"))
    set_budget(con, ["trips", "a.main.t"], name="both", rho=1)
    assert row(con, "both")["ledger"] == str(tmp_path / "budget.duckdb")


def test_sql_functions_use_the_ledger_the_connection_was_loaded_with(
    tmp_path: Path, vouched: Vouched,
) -> None:
    shared = tmp_path / "budget.duckdb"
    with duckdb.connect() as c:
        load(c, ledger=str(shared))
        c.execute("CREATE TABLE t AS SELECT (i % 3)::INTEGER AS x FROM range(30) t(i)")
        vouched(c, "SELECT inftda_set_budget('t', rho := 1)")
        vouched(c, "SELECT inftda_require_budget()")
        assert c.execute("SELECT budget, ledger FROM inftda_budget()").fetchall() == [
            ("memory.main.t", str(shared))]
        c.execute(f"SELECT * FROM inftda_release('t', ['x'], rho := 1, {SQL_DOM})").fetchall()
        assert c.execute("SELECT count(*) FROM inftda_releases()").fetchall() == [(1,)]
    with duckdb.connect(str(shared), read_only=True) as c:
        assert c.execute("SELECT name, value FROM inftda_settings").fetchall() == [
            ("require_budget", "true")]
        assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(1,)]


def test_verify_ledger_and_rows(con: duckdb.DuckDBPyConnection) -> None:
    release(con, "trips", ["x"], rho=1, domains=DOM)
    (report,) = inftda_duckdb.verify_ledger(con).to_pylist()
    assert report["ok"] and report["rows"] == 1 and not report["keyed"]
    assert budgets.ledger_rows(con).column("rho").to_pylist() == ["1"]
    con.execute("DELETE FROM inftda_ledger")
    (report,) = inftda_duckdb.verify_ledger(con).to_pylist()
    assert not report["ok"] and "deleted" in report["problem"]


def test_the_generator_s_tokens_work_only_in_their_statement(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """A token minted for one statement fails in another; one spec cannot be altered."""
    token = capabilities.new()
    capabilities.mint(token, "spec", 7)
    with pytest.raises(InputError, match="internal step"):
        capabilities.redeem("begin", token, "spec", 8)  # another statement
    with pytest.raises(InputError, match="internal step"):
        capabilities.redeem("begin", token, "spec!", 7)  # another text
    capabilities.redeem("begin", token, "spec", 7)
    with pytest.raises(InputError, match="correlated"):
        capabilities.redeem("begin", token, "spec", 7)  # a second begin before the claim
    with pytest.raises(InputError, match="correlated"):
        capabilities.claim(token)
    ok = capabilities.new()
    capabilities.mint(ok, "s", None)
    capabilities.redeem("begin", ok, "s", None)
    capabilities.claim(ok)
    capabilities.redeem("begin", ok, "s", None)  # re-executed without re-rendering (DuckDB 1.5)
    capabilities.claim(ok)


def test_a_prepared_release_executed_twice_is_charged_twice(
    con: duckdb.DuckDBPyConnection,
) -> None:
    con.execute(f"PREPARE p AS SELECT sum(count) FROM inftda_release('trips', ['x'], rho := 1, "
                f"{SQL_DOM})")
    assert con.execute("EXECUTE p").fetchall() == [(300,)]
    assert con.execute("EXECUTE p").fetchall() == [(300,)]
    assert con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(2,)]


def test_a_release_failing_between_its_steps_leaves_no_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom(rid: object, part: object, leaves: object, allowed: object, threads: object,
             cut: object, parts: object) -> None:
        raise InputError("boom")

    monkeypatch.setattr(udfs, "levels", boom)  # registered by the load below
    with duckdb.connect() as c:
        load(c)
        c.execute("CREATE TABLE trips AS SELECT (i % 3)::INTEGER AS x FROM range(30) t(i)")
        tokens, begun = set(capabilities._TOKENS), RELEASES.ids()
        with pytest.raises(InputError, match="boom"):
            release(c, "trips", ["x"], rho=1, domains=DOM)
        assert set(capabilities._TOKENS) <= tokens  # its token forgotten
        assert RELEASES.ids() <= begun  # its begun state dropped (it held no key)
        assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]


def test_upgrade_of_an_old_ledger(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as c:
        c.execute("CREATE TABLE trips AS SELECT (i % 3)::INTEGER AS x FROM range(300) t(i)")
        c.execute("CREATE TABLE inftda_budgets (source VARCHAR PRIMARY KEY, rho VARCHAR NOT "
                  "NULL, rho_approx DOUBLE NOT NULL, set_at TIMESTAMPTZ NOT NULL)")
        c.execute("INSERT INTO inftda_budgets VALUES ('oldname.main.trips', '1', 1.0, now())")
        c.execute("CREATE TABLE inftda_ledger (id BIGINT PRIMARY KEY, started_at TIMESTAMPTZ, "
                  "source VARCHAR, columns VARCHAR[], neighbours VARCHAR, privacy_unit VARCHAR, "
                  "max_rows_per_unit BIGINT, rho VARCHAR, rho_approx DOUBLE, epsilon DOUBLE, "
                  "delta DOUBLE, output VARCHAR, seeded BOOLEAN, data_domain BOOLEAN, private "
                  "BOOLEAN, origin VARCHAR)")
        c.execute("INSERT INTO inftda_ledger VALUES (1, now(), 'oldname.main.trips', ['x'], "
                  "'substitute', NULL, 1, '3/4', 0.75, 9.9, 1e-6, 'counts', false, false, "
                  "true, 'python')")
    with duckdb.connect(str(path)) as c:
        load(c)  # loads; releases wait for the upgrade
        with pytest.raises(LedgerError, match="upgrade"):
            release(c, "trips", ["x"], rho="1/4", domains=DOM)
        assert inftda_duckdb.upgrade_ledger(c) == 2
        assert home(c, "old").ledger_id is None
        with pytest.raises(BudgetExceededError):  # the file was renamed since: same budget
            release(c, "trips", ["x"], rho="1/2", domains=DOM)
        release(c, "trips", ["x"], rho="1/4", domains=DOM)
        assert c.execute("SELECT count(*) FROM inftda_ledger_v1").fetchall() == [(1,)]
