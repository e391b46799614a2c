"""Sources in DuckDB's catalog: names resolved as DuckDB's binder does (ASCII case folding, TEMP
first, USE, search_path), each database's stored identity, which ledger a source is charged to,
and the binding that refuses another ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from inftda_duckdb import BudgetExceededError, InputError, LedgerError, load, release, set_budget
from inftda_duckdb.duckdb import catalog
from inftda_duckdb.duckdb.catalog import home, parse_sources, resolve, resolve_release

DOM = {"x": [0, 1, 2]}


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    c.execute("CREATE TABLE trips (a INTEGER)")
    yield c
    c.close()


def table(con: duckdb.DuckDBPyConnection, name: str, n: int = 30) -> None:
    con.execute(f"CREATE TABLE {name} AS SELECT (i % 3)::INTEGER AS x FROM range({n}) t(i)")


# ---------------------------------------------------------------------------------------------
# names


def test_spellings_of_one_table_resolve_to_it(con: duckdb.DuckDBPyConnection) -> None:
    for name in ["trips", "main.trips", "memory.main.trips", "TRIPS", '"Trips"',
                 "Memory.MAIN.trips"]:
        assert resolve(con, name) == ("memory", "main", "trips")
        assert resolve(con.cursor(), name) == ("memory", "main", "trips")


def test_the_catalog_spelling_is_returned(con: duckdb.DuckDBPyConnection) -> None:
    con.execute('CREATE TABLE "MixedCase" (x INTEGER)')
    con.execute("CREATE VIEW TripView AS SELECT 1")
    assert resolve(con, "mixedcase") == ("memory", "main", "MixedCase")
    assert resolve(con, "tripview") == ("memory", "main", "TripView")


@pytest.mark.parametrize(("upper", "lower"), [("Ä", "ä"), ("Σ", "σ"), ("Ǆ", "ǆ")])
def test_non_ascii_letters_are_compared_exactly_as_duckdb_does(
    con: duckdb.DuckDBPyConnection, upper: str, lower: str
) -> None:
    con.execute(f'CREATE TABLE "{upper}" AS SELECT 1 AS v')
    con.execute(f'CREATE TABLE "{lower}" AS SELECT 2 AS v')
    for name in (upper, lower):  # DuckDB itself reads two tables
        (v,) = con.execute(f'SELECT v FROM "{name}"').fetchall()[0]
        assert resolve(con, f'"{name}"') == ("memory", "main", name)
        assert v == (1 if name == upper else 2)
    con.execute(f'DROP TABLE "{lower}"')
    assert resolve(con, f'"{lower}"') is None  # no Unicode folding: "ä" does not find "Ä"


def test_a_database_file_and_temp_tables(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "cur.db")) as c:
        c.execute("CREATE TABLE trips (a INTEGER)")
        for name in ["trips", "main.trips", "cur.main.trips", "cur.trips"]:
            assert resolve(c, name) == ("cur", "main", "trips")
        c.execute("CREATE TEMP TABLE trips (a INTEGER)")  # DuckDB reads TEMP first
        assert resolve(c, "trips") == ("temp", "main", "trips")
        assert resolve(c, "cur.main.trips") == ("cur", "main", "trips")
        # a cursor cannot see its connection's TEMP tables; the macro passes their names
        assert resolve(c.cursor(), "trips") == ("cur", "main", "trips")
        assert resolve(c.cursor(), "trips", temp=("Trips",)) == ("temp", "main", "Trips")
        assert resolve_release(c.cursor(), "scratch") == ("temp", "main", "scratch")


def test_attached_databases_schemas_and_use(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("ATTACH ':memory:' AS other")
    con.execute("CREATE TABLE other.main.u (x INTEGER)")
    con.execute("CREATE SCHEMA memory.s; CREATE TABLE memory.s.w (x INTEGER)")
    con.execute('CREATE TABLE "a.b" (x INTEGER)')
    assert resolve(con, "other.u") == ("other", "main", "u")
    assert resolve(con, "s.w") == ("memory", "s", "w")
    assert resolve(con, '"a.b"') == ("memory", "main", "a.b")
    assert resolve(con, "other.missing") is None
    assert resolve_release(con, "other.missing") == ("other", "main", "missing")
    con.execute("USE other")
    assert resolve(con, "u") == ("other", "main", "u")
    assert resolve(con, "trips") is None  # DuckDB cannot see it either
    assert resolve(con.cursor(), "trips") == ("memory", "main", "trips")  # cursors ignore USE
    con.execute("SET search_path = 'memory.s'")
    assert resolve(con, "w") == ("memory", "s", "w")


def test_an_ambiguous_name_is_refused(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("ATTACH ':memory:' AS other")
    con.execute("CREATE TABLE other.main.u (x INTEGER)")
    con.execute("CREATE SCHEMA memory.other; CREATE TABLE memory.other.u (x INTEGER)")
    with pytest.raises(duckdb.BinderException):  # DuckDB refuses too
        con.execute("SELECT * FROM other.u")
    with pytest.raises(InputError, match="ambiguous"):
        resolve(con, "other.u")
    with pytest.raises(InputError, match="source"):
        resolve(con, "a..b")


def test_budget_sources_resolve_or_name_candidates(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE trips_2024 (a INTEGER)")
    with pytest.raises(InputError, match=r"'trip'.*similar names: memory\.main\.trips"):
        parse_sources(con, "trip", missing_ok=False)
    with pytest.raises(InputError, match=r"'zzz' names no table(?!.*similar)"):
        parse_sources(con, "zzz", missing_ok=False)
    got = parse_sources(con, ["trips", "file:/d/t.parquet", "name:frame", "later"],
                        missing_ok=True)
    assert [(w.kind, w.parts) for w in got] == [
        ("table", ("memory", "main", "trips")), ("file", ("/d/t.parquet",)),
        ("name", ("frame",)), ("table", ("memory", "main", "later"))]
    con.execute("ATTACH ':memory:' AS db2")
    assert parse_sources(con, "db2.new", missing_ok=True)[0].parts == ("db2", "main", "new")
    for bad in ([], "", 3, [None]):
        with pytest.raises(InputError):
            parse_sources(con, bad, missing_ok=False)


# ---------------------------------------------------------------------------------------------
# identity and binding


def test_a_database_gets_one_identity_kept_in_its_file(tmp_path: Path) -> None:
    path = tmp_path / "a.duckdb"
    with duckdb.connect(str(path)) as c:
        first = home(c, "a")
        assert first.id is not None and first.path == str(path) and not first.read_only
        assert home(c, "a").id == first.id
    with duckdb.connect() as c:
        c.execute(f"ATTACH '{path}' AS renamed (READ_ONLY)")
        assert home(c, "renamed").id == first.id  # another alias, read-only: the same id
    fresh = tmp_path / "b.duckdb"
    with duckdb.connect(str(fresh)) as c:  # written without the package
        table(c, "t")
    with duckdb.connect() as c:
        c.execute(f"ATTACH '{fresh}' AS b (READ_ONLY)")
        assert home(c, "b").id is None  # never opened read-write with it: no identity
        load(c, ledger=":memory:")
        with pytest.raises(LedgerError, match="no identity"):
            release(c, "b.main.t", ["x"], rho=1, domains=DOM)


def test_a_database_is_bound_to_the_ledger_its_sources_were_first_charged_to(
    tmp_path: Path,
) -> None:
    data, shared = tmp_path / "data.duckdb", tmp_path / "budget.duckdb"
    with duckdb.connect(str(data)) as c:
        table(c, "trips")
        load(c, ledger=str(shared))
        set_budget(c, "trips", rho=1)
        release(c, "trips", ["x"], rho="1/2", domains=DOM)
    with duckdb.connect(str(data)) as c:
        load(c)  # forgot the shared ledger: its own would start a fresh budget
        with pytest.raises(LedgerError, match=str(shared)):
            release(c, "trips", ["x"], rho="1/2", domains=DOM)
        with pytest.raises(LedgerError, match="kept in the ledger"):
            set_budget(c, "trips", rho=5)
        cur = c.cursor()
        catalog.choose(cur, str(shared))
        with pytest.raises(BudgetExceededError):  # the right ledger: the cap holds
            release(cur, "trips", ["x"], rho="3/4", domains=DOM)
        release(cur, "trips", ["x"], rho="1/2", domains=DOM)


def test_the_ledger_file_may_be_the_data_file_itself(tmp_path: Path) -> None:
    path = tmp_path / "city.duckdb"
    with duckdb.connect(str(path)) as c:
        table(c, "trips")
        load(c, ledger=str(path))  # attached in this instance: used through it
        set_budget(c, "trips", rho=1)
        release(c, "trips", ["x"], rho="1/2", domains=DOM)
        assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(1,)]
    with duckdb.connect() as c:
        load(c, ledger=str(path))  # from another connection: attached per operation
        c.execute("CREATE TABLE t AS SELECT 1 AS x")
        release(c, "t", ["x"], rho="1/2", domains={"x": [1]})
    with duckdb.connect(str(path)) as c:
        assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(2,)]
