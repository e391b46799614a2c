"""End-to-end releases through SQL and Python: exact agreement with the numpy reference,
types, shapes, sources, and every error path leaving the database unchanged."""

from __future__ import annotations

import datetime as dt
import math
import threading
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from inftda_duckdb.core.accounting import error_bound, plan_budget
from inftda_duckdb.core.errors import BudgetExceededError, InputError, InternalError
from inftda_duckdb.core.noise import DiscreteGaussian
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import LevelProgress, Nodes, release_tree
from inftda_duckdb.duckdb import api, arrow_io, extension, udfs
from inftda_duckdb.duckdb.budgets import set_budget
from inftda_duckdb.duckdb.connections import registered
from inftda_duckdb.duckdb.extension import load, preview, release
from inftda_duckdb.duckdb.registry import RELEASES, Release

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")

DEST = [f"d{i}" for i in range(7)]


@pytest.fixture
def trips(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute("CREATE TYPE origin_t AS ENUM ('EWR', 'JFK', 'LGA')")
    con.execute(
        "CREATE TABLE trips AS SELECT (['EWR','JFK','LGA'])[1 + (i * 7 % 3)]::origin_t AS origin,"
        " 'd' || (i % 7) AS dest, (i * 13 % 24)::INTEGER AS hour,"
        " DATE '2024-01-01' + (i % 3)::INTEGER AS day, i % 50 AS person"
        " FROM range(3000) t(i) WHERE i % 11 <> 0"
    )
    return con


def levels_only(seen: list[LevelProgress]) -> object:
    """A progress hook keeping the levels' reports (DuckDB's scan reports come first when the
    scan takes over a second, as on a busy machine)."""
    return lambda p: seen.append(p) if isinstance(p, LevelProgress) else None


def ledger_rows(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0]


def reference(con, sql_source, columns, domains, plan, seed):
    """The pure-numpy release of the same data (codes = positions in the domain lists)."""
    rows = con.execute(
        f"SELECT {', '.join(columns)}, count(*) FROM {sql_source} GROUP BY ALL"
    ).fetchall()
    codes = np.array([[domains[j].index(r[j]) for j in range(len(columns))] for r in rows])
    counts = np.array([r[-1] for r in rows])
    sizes = [len(d) for d in domains]
    out_codes, out_n = release_tree(codes, counts, sizes, plan, RandomSource.from_seed(seed))
    return [
        (*(domains[j][c] for j, c in enumerate(row)), int(n))
        for row, n in zip(out_codes.tolist(), out_n.tolist(), strict=True)
    ]


HOURS = list(range(24))
ORIGINS = ["EWR", "JFK", "LGA"]


@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
def test_sql_and_python_equal_numpy_reference(trips, neighbours):
    cols = ["origin", "dest", "hour"]
    doms = {"dest": DEST, "hour": range(24)}
    sql = trips.execute(  # a seeded release says it is not private in a column of its own
        "SELECT * EXCLUDE (inftda_not_private) FROM inftda_release('trips', "
        f"['origin', 'dest', 'hour'], rho := 0.3, domains := {{'dest': {DEST}, "
        "'hour': range(24)}, seed := 7, "
        f"neighbours := '{neighbours}')"
    ).fetchall()
    with pytest.warns(UserWarning, match="NOT private"):
        py = release(trips, "trips", cols, rho=0.3, domains=doms, seed=7, neighbours=neighbours)
    plan = plan_budget(3, rho=0.3, neighbours=neighbours)
    ref = reference(trips, "trips", cols, [ORIGINS, DEST, HOURS], plan, 7)
    assert sql == ref
    assert set(py["inftda_not_private"].to_pylist()) == {
        "NOT PRIVATE: seeded (seed 7): its noise is reproducible, so anyone who knows the seed "
        "can remove it. For tests and exploration only: never publish"}
    py = py.drop_columns(["inftda_not_private"])
    assert [tuple(r.values()) for r in py.to_pylist()] == ref
    assert py.schema.metadata[b"private"] == b"false"
    assert py.schema.metadata[b"seed"] == b"7"
    if neighbours == "substitute":
        assert sum(r[-1] for r in sql) == 3000 - 273
    assert all(r[-1] > 0 for r in sql)


@pytest.mark.parametrize("keys", [True, False])
def test_seeded_release_same_under_any_batching_and_equal_to_numpy(con, monkeypatch, keys):
    # 200,000 leaves, 40,000 parents at level 2: DuckDB aggregates the lists a level gets on
    # several threads (the code and count lists must stay aligned) and batches differ; the
    # result does not change and equals the in-memory reference, whether the prefixes travel
    # as mixed-radix keys (domain sizes known when planned) or as codes (sizes known only as
    # the statement runs, and their product too large for keys)
    from inftda_duckdb.core.domains import DomainPlan
    from inftda_duckdb.duckdb import sqlgen
    from inftda_duckdb.duckdb.sqlgen import render_release

    if not keys:
        monkeypatch.setattr(DomainPlan, "key_sizes", lambda self, level: None)
        monkeypatch.setattr(sqlgen, "MAX_KEY_SPAN", 40000 * 5)
    con.execute(
        "CREATE TABLE big AS SELECT i % 40000 AS a, (i // 40000) % 5 AS b FROM range(400000) t(i)"
    )
    request, plan_, names = api.prepare(
        con, "big", ["a", "b"], {"rho": 1, "domains": {"a": range(40000), "b": range(5)}})
    sql = render_release(request, plan_, names, "sql")
    assert ("system.main.list(k1) FILTER (NOT z.small)" in sql) != keys
    q = (
        "SELECT * FROM inftda_release('big', ['a', 'b'], rho := 5, "
        "domains := {'a': range(40000), 'b': range(5)}, seed := 3)"
    )
    con.execute("SET threads = 1")
    one = con.execute(q).fetchnumpy()
    con.execute("SET threads = 2")
    two = con.execute(q).fetchnumpy()
    leaves = con.execute("SELECT a, b, count(*) AS n FROM big GROUP BY ALL").fetchnumpy()
    codes, counts = release_tree(
        np.column_stack([leaves["a"], leaves["b"]]), leaves["n"], [40000, 5],
        plan_budget(2, rho=5), RandomSource.from_seed(3),
    )
    for out in (one, two):
        assert np.array_equal(np.column_stack([out["a"], out["b"]]), codes)
        assert np.array_equal(out["count"], counts)
    assert counts.sum() == 400000


def test_types_order_and_rows_output(trips):
    rel = trips.sql(
        "SELECT * FROM inftda_release('trips', ['day', 'origin', 'hour'], rho := 1, seed := 1, "
        "domains := {'day': ['2024-01-01', '2024-01-02', '2024-01-03'], 'hour': range(24)})"
    )
    assert rel.columns == ["day", "origin", "hour", "count", "inftda_not_private"]
    assert [str(t) for t in rel.types] == ["DATE", "ENUM('EWR', 'JFK', 'LGA')", "INTEGER", "BIGINT",
                                           "VARCHAR"]
    counts = [r[:4] for r in rel.fetchall()]
    assert isinstance(counts[0][0], dt.date)
    assert counts == sorted(counts, key=lambda r: (r[0], ORIGINS.index(r[1]), r[2]))
    rows = trips.execute(
        "SELECT day, origin, hour, count(*) FROM inftda_release('trips', ['day', 'origin', "
        "'hour'], rho := 1, seed := 1, output := 'rows', domains := {'day': ['2024-01-01', "
        "'2024-01-02', '2024-01-03'], 'hour': range(24)}) GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert sorted(rows, key=lambda r: (r[0], ORIGINS.index(r[1]), r[2])) == counts


def test_each_execution_is_a_fresh_charged_release(trips):
    q = (
        "SELECT * FROM inftda_release('trips', ['origin', 'hour'], rho := 0.01, "
        "domains := {'hour': range(24)})"
    )
    before = ledger_rows(trips)
    live = RELEASES.ids()
    a = trips.execute(q).fetchall()
    b = trips.execute(q).fetchall()
    assert a != b  # sigma^2 = 200 on 72 cells: equal outputs have probability < 1e-50
    assert ledger_rows(trips) == before + 2
    trips.execute("EXPLAIN " + q).fetchall()
    trips.execute("DESCRIBE " + q).fetchall()
    assert ledger_rows(trips) == before + 2
    assert RELEASES.ids() <= live  # finished releases leave no state behind
    row = trips.execute(
        "SELECT private, seeded, origin, rho FROM inftda_ledger ORDER BY id DESC LIMIT 1"
    ).fetchall()
    assert row == [(True, False, "sql", "1/100")]


@pytest.mark.parametrize("shape", [
    "SELECT count(*) FROM ({q})", "SELECT * FROM ({q}) LIMIT 2",
    "SELECT origin, sum(count) FROM ({q}) GROUP BY ALL", "SELECT * FROM ({q}) WHERE hour = 3",
    "CREATE TABLE out AS {q}", "EXPLAIN ANALYZE {q}"])
def test_the_levels_run_once_per_execution(monkeypatch, shape):
    # inftda_levels is not in a MATERIALIZED CTE (its lists go straight to the unnest): DuckDB
    # must still call it exactly once, whatever the query around the release needs
    calls = []
    levels = udfs.levels

    def counted(rid, part, leaves, allowed, threads, cut, parts):
        calls.append(1)
        return levels(rid, part, leaves, allowed, threads, cut, parts)

    monkeypatch.setattr(udfs, "levels", counted)
    con = duckdb.connect()
    load(con)
    con.execute("CREATE TABLE trips AS SELECT ['EWR','JFK'][1 + i % 2] AS origin, "
                "(i % 24)::INTEGER AS hour FROM range(500) t(i)")
    q = ("SELECT * FROM inftda_release('trips', ['origin', 'hour'], rho := 1, "
         "domains := {'origin': ['EWR', 'JFK'], 'hour': range(24)})")
    live = RELEASES.ids()
    con.execute(shape.format(q=q)).fetchall()
    assert len(calls) == 1  # a second call would raise: its release state is gone
    assert RELEASES.ids() <= live  # the levels dropped the release's state


def test_empty_table_and_single_category(con):
    con.execute("CREATE TABLE e (a VARCHAR, b INTEGER)")
    out = con.sql(
        "SELECT * FROM inftda_release('e', ['a', 'b'], rho := 1, "
        "domains := {'a': ['x'], 'b': [1, 2]})"
    )
    assert out.columns == ["a", "b", "count"]
    assert out.fetchall() == []
    con.execute("INSERT INTO e SELECT 'x', 1 FROM range(10)")
    got = con.execute(
        "SELECT * FROM inftda_release('e', ['a'], rho := 1, domains := {'a': ['x']})"
    ).fetchall()
    assert got == [("x", 10)]  # one category: the root n is exact under substitution
    py = release(con, "e", ["a", "b"], rho=1, domains={"a": ["x"], "b": [1, 2]}, output="rows")
    assert py.num_rows == 10 and py.column_names == ["a", "b"]


def test_temp_view_qualified_and_hostile_identifiers(con):
    name = 'we"ird; DROP TABLE x; --'
    con.execute("CREATE SCHEMA s")
    con.execute(
        'CREATE TABLE s."we""ird; DROP TABLE x; --" ("col ""q""; x" VARCHAR, "b b" INTEGER)'
    )
    con.execute(
        'INSERT INTO s."we""ird; DROP TABLE x; --" '
        "SELECT 'v' || (i % 2), i % 3 FROM range(30) t(i)"
    )
    col = 'col "q"; x'
    source = 's."we""ird; DROP TABLE x; --"'
    doms = {col: ["v0", "v1"], "b b": [0, 1, 2]}
    t = release(con, source, [col, "b b"], rho=2, domains=doms, seed=1)
    assert t.column_names == [col, "b b", "count", "inftda_not_private"]
    assert sum(t["count"].to_pylist()) == 30
    sql = con.execute(
        "SELECT * FROM inftda_release(?, [?, 'b b'], rho := 2, seed := 1, "
        "domains := MAP {?: ['v0', 'v1'], 'b b': ['0', '1', '2']})",
        [source, col, col],
    ).fetchall()
    assert [tuple(r.values()) for r in t.to_pylist()] == sql
    con.execute(
        f'CREATE TEMP VIEW "{name.replace(chr(34), chr(34) * 2)}" AS SELECT * FROM {source}'
    )
    v = con.execute(
        "SELECT * FROM inftda_release(?, [?, 'b b'], rho := 2, seed := 1, "
        "domains := MAP {?: ['v0', 'v1'], 'b b': ['0', '1', '2']})",
        ['"' + name.replace('"', '""') + '"', col, col],
    ).fetchall()
    assert v == sql
    con.execute("CREATE TEMP TABLE tt AS SELECT * FROM " + source)
    assert release(con, "temp.main.tt", [col, "b b"], rho=2, domains=doms, seed=1).num_rows


def test_budget_forms_weights_and_unit_clipping(trips):
    a = release(
        trips,
        "trips",
        ["origin", "hour"],
        epsilon=1,
        delta=1e-6,
        domains={"hour": range(24)},
        level_weights=[1, 3],
        seed=2,
    )
    assert sum(a["count"].to_pylist()) == 2727
    assert a.schema.metadata[b"rho"] != b""
    clipped = release(trips, "trips", ["origin"], rho=1, privacy_unit="person",
                      max_rows_per_unit=2, rows_per_unit_public=True, seed=2)
    assert sum(clipped["count"].to_pylist()) == 100  # 50 persons x at most 2 rows, asserted public
    last = trips.execute(
        "SELECT privacy_unit, max_rows_per_unit FROM inftda_ledger ORDER BY id DESC LIMIT 1"
    ).fetchall()
    assert last == [("person", 2)]
    secure = release(trips, "trips", ["person"], rho=1, privacy_unit="person",
                     max_rows_per_unit=3, rows_per_unit_public=True, domains={"person": range(50)})
    assert sum(secure["count"].to_pylist()) == 150  # unseeded: random rows kept per unit


def test_unknown_drop_with_add_remove(con):
    con.execute(
        "CREATE TABLE d AS SELECT CASE WHEN i % 4 = 0 THEN NULL ELSE i % 3 END AS a "
        "FROM range(4000) t(i)"
    )
    t = release(
        con,
        "d",
        ["a"],
        rho=100,
        domains={"a": [0, 1]},
        unknown="drop",
        neighbours="add_remove",
        seed=1,
    )
    # kept rows: a in {0, 1} and not NULL: 2000 rows; the root is noised with sigma^2 = 1/200
    assert abs(sum(t["count"].to_pylist()) - 2000) <= 2


def test_nested_domain_table(con):
    con.execute("CREATE TABLE geo (state VARCHAR, county VARCHAR)")
    con.execute("INSERT INTO geo VALUES ('A','a1'),('A','a2'),('B','b1'),('B','b2'),('B','b3')")
    con.execute(
        "CREATE TABLE p AS SELECT s AS state, c AS county, h AS hour FROM (VALUES ('A','a1',0),"
        "('A','a2',1),('B','b3',1),('B','b1',0)) v(s, c, h), range(5)"
    )
    allowed = {("A", "a1"), ("A", "a2"), ("B", "b1"), ("B", "b2"), ("B", "b3")}
    seen = set()
    for seed in range(30):
        t = release(
            con,
            "p",
            ["state", "hour", "county"],
            rho=0.2,
            domain_tables=["geo"],
            domains={"hour": [0, 1]},
            seed=seed,
        )
        rows = t.to_pylist()
        assert sum(r["count"] for r in rows) == 20
        pairs = {(r["state"], r["county"]) for r in rows}
        assert pairs <= allowed
        seen |= pairs
    assert ("B", "b2") in seen  # a county with no data still gets noise (support not confined)
    sql = con.execute(
        "SELECT * FROM inftda_release('p', ['state', 'hour', 'county'], rho := 0.2, "
        "domain_tables := ['geo'], domains := {'hour': [0, 1]}, seed := 29)"
    ).fetchall()
    assert sql == [tuple(r.values()) for r in rows]


def test_domain_table_leaves_travel_as_keys_when_they_fit(con, monkeypatch):
    """Domain sizes known only as the statement runs (a domain table): the leaves reach the
    levels call as one list of mixed-radix keys when the sizes' product stays below 2**62, else
    as the codes column after column; the same seeded release either way."""
    from inftda_duckdb.duckdb import sqlgen

    con.execute("CREATE TABLE geo (state VARCHAR, county VARCHAR)")
    con.execute("INSERT INTO geo VALUES ('A','a1'),('A','a2'),('B','b1'),('B','b2'),('B','b3')")
    con.execute("CREATE TABLE p AS SELECT s AS state, c AS county, h AS hour FROM (VALUES "
                "('A','a1',0), ('A','a2',1), ('B','b3',1), ('B','b1',0)) v(s, c, h), range(5)")
    shapes = []
    inner = udfs.release_below

    def spy(levels, nodes, truth, *args, **kwargs):
        shapes.append(np.asarray(truth).ndim)
        return inner(levels, nodes, truth, *args, **kwargs)

    monkeypatch.setattr(udfs, "release_below", spy)
    sql = ("SELECT * FROM inftda_release('p', ['state', 'county', 'hour'], rho := 0.5, "
           "domain_tables := ['geo'], domains := {'hour': [0, 1]}, seed := 3)")
    keys = con.execute(sql).fetchall()
    monkeypatch.setattr(sqlgen, "MAX_KEY_SPAN", 2 * 5 * 2)  # the product (20) no longer fits
    codes = con.execute(sql).fetchall()
    assert shapes == [1, 2] and keys == codes and sum(r[3] for r in keys) > 0


def test_enum_leaves_travel_as_key_shifted_by_the_bits_of_the_rows(con, monkeypatch):
    # all-ENUM leaves go to the levels call as (key << b) | n, b the bits of the rows kept
    # (5000: 13 bits), which the core sorts as they are (radix 2**b, no division); keys and
    # counts as two lists once 2**b times the key span (6) would pass MAX_KEY_SPAN: on each
    # side of that edge, the same release
    from inftda_duckdb.duckdb import sqlgen

    con.execute("CREATE TYPE e3 AS ENUM ('x', 'y', 'z'); CREATE TYPE e2 AS ENUM ('p', 'q')")
    con.execute("CREATE TABLE ee AS SELECT ['x', 'y', 'z'][1 + i % 3]::e3 AS a, "
                "['p', 'q'][1 + i // 3 % 2]::e2 AS b FROM range(5000) r(i)")
    radixes = []
    inner = udfs.release_below

    def spy(*args, **kwargs):
        radixes.append(kwargs["radix"])
        return inner(*args, **kwargs)

    monkeypatch.setattr(udfs, "release_below", spy)
    sql = "SELECT * FROM inftda_release('ee', ['a', 'b'], rho := 1, seed := 3) ORDER BY ALL"
    got = [con.execute(sql).fetchall()]
    for span in (6 * 2**13 + 1, 6 * 2**13):  # 13 bits fit (the edge), then they do not
        monkeypatch.setattr(sqlgen, "MAX_KEY_SPAN", span)
        got.append(con.execute(sql).fetchall())
    assert radixes == [2**13, 2**13, None]
    assert got[0] == got[1] == got[2] and sum(r[2] for r in got[0]) > 4000


def test_nested_leaves_coded_by_one_join_per_domain_table(con):
    """The leaves take their codes from ONE join per domain table on their raw combination;
    only the rows that miss (NULLs, undeclared values or combinations) are coded column by
    column. Every kind of miss still gets its own error before the charge, and with 'drop' the
    release equals the release of the valid rows alone."""
    from inftda_duckdb.duckdb.sqlgen import render_release

    con.execute("CREATE TABLE geo (state VARCHAR, county VARCHAR)")
    con.execute("INSERT INTO geo VALUES ('A','a1'),('A','a2'),('B','b1'),('B','b2'),('B','b3')")
    good = "('A','a1',0), ('A','a2',1), ('B','b3',1), ('B','b1',0)"
    con.execute(f"CREATE TABLE ok AS SELECT * FROM (VALUES {good}) v(state, county, hour), "
                "range(5)")
    con.execute("CREATE TABLE p AS SELECT state, county, hour FROM ok")
    request, plan_, names = api.prepare(
        con, "p", ["state", "hour", "county"],
        {"rho": 1, "domain_tables": ["geo"], "domains": {"hour": [0, 1]}})
    sql = render_release(request, plan_, names, "sql")
    hit = sql[sql.index("leaf_hit AS"):sql.index("leaf_miss AS")]
    assert hit.count("JOIN nestv1") == 1 and hit.count("JOIN dom") == 1  # hour's domain only
    args = ("p", ["state", "hour", "county"])
    opts = {"rho": 1, "domain_tables": ["geo"], "domains": {"hour": [0, 1]}}
    bad = {
        "('A','b1',0)": r"1 rows of p have a combination of \(state, county\) that domain table "
                        r"\S*geo does not list \(e\.g\. \['A, b1'\]\)",
        "('C','a1',0)": r"column 'state' of p has 1 rows with values outside its declared domain "
                        r"\(e\.g\. \['C'\]\)",
        "('A','zz',1)": r"column 'county' of p has 1 rows .*\(e\.g\. \['zz'\]\)",
        "(NULL,'a1',0)": r"column 'state' of p is NULL in 1 rows",
        "('B','b2',7)": r"column 'hour' of p has 1 rows .*\(e\.g\. \['7'\]\)",
        "('B','b2',NULL)": r"column 'hour' of p is NULL in 1 rows",
    }
    before = ledger_rows(con)
    for row, message in bad.items():
        con.execute(f"INSERT INTO p VALUES {row}")
        with pytest.raises(InputError, match=message):
            release(con, *args, **opts)
        con.execute(f"DELETE FROM p WHERE {row} IS NOT DISTINCT FROM (state, county, hour)")
    assert ledger_rows(con) == before
    con.execute(f"INSERT INTO p VALUES {', '.join(bad)}")
    drop = {**opts, "unknown": "drop", "neighbours": "add_remove", "seed": 4}
    dropped = release(con, *args, **drop).to_pylist()
    assert dropped == release(con, "ok", args[1], **drop).to_pylist()
    assert sum(r["count"] for r in dropped) > 0
    # a privacy unit: NULL units among the hits are counted too (the hits' own sum)
    before = ledger_rows(con)
    con.execute("CREATE TABLE u AS SELECT *, CASE WHEN hour = 0 THEN NULL ELSE 1 END AS person "
                "FROM ok")
    with pytest.raises(InputError, match="privacy_unit 'person' of u is NULL in 10 rows"):
        release(con, "u", args[1], privacy_unit="person", **opts)
    assert ledger_rows(con) == before


def test_nested_domain_errors(con):
    con.execute("CREATE TYPE st AS ENUM ('A', 'B', 'C')")
    con.execute("CREATE TABLE geo (state VARCHAR, county VARCHAR)")
    con.execute("INSERT INTO geo VALUES ('A','a1'),('B','b1')")
    con.execute("CREATE TABLE p AS SELECT 'A'::st AS state, 'a1' AS county FROM range(5)")
    with pytest.raises(InputError, match=r"no row in domain table (memory\.main\.)?geo"):
        release(con, "p", ["state", "county"], rho=1, domain_tables=["geo"])
    con.execute("INSERT INTO geo VALUES ('C', 'c1')")
    con.execute("INSERT INTO p VALUES ('A', 'b1')")
    with pytest.raises(InputError, match=r"of .state, county. that domain table \S*geo"):
        release(con, "p", ["state", "county"], rho=1, domain_tables=["geo"])
    assert ledger_rows(con) == 0


def test_preview(trips):
    before = ledger_rows(trips)
    sql = trips.sql(
        "SELECT * FROM inftda_preview('trips', ['origin', 'dest', 'hour'], rho := 0.5, "
        f"beta := 0.05, domains := {{'dest': {DEST}, 'hour': range(24)}})"
    )
    rows = sql.fetchall()
    assert sql.columns[:6] == ["level", "column", "domain_size", "nodes", "rho_k", "sigma2_k"]
    py = preview(
        trips,
        "trips",
        ["origin", "dest", "hour"],
        rho=0.5,
        domains={"dest": DEST, "hour": range(24)},
    )
    assert [tuple(r.values()) for r in py.to_pylist()] == rows
    bound = error_bound([3, 7, 24], 0.5, 0.05)
    assert [r[7] for r in rows] == pytest.approx(bound)
    assert [r[2] for r in rows] == [3, 7, 24] and [r[3] for r in rows] == [3, 21, 504]
    assert rows[0][5] == "6" and math.isclose(rows[0][6], math.sqrt(6))
    assert ledger_rows(trips) == before
    ar = preview(trips, "trips", ["origin"], epsilon=1, delta=1e-5, neighbours="add_remove")
    assert ar["level"].to_pylist() == [0, 1] and ar["delta"].to_pylist() == [1e-5, 1e-5]
    with pytest.warns(UserWarning, match="private data"):
        dd = preview(trips, "trips", ["dest"], rho=1, domain_from_data=True)
    assert dd["domain_size"].to_pylist() == [7] and dd["private"].to_pylist() == [False]


def test_preview_shows_the_auto_split_beside_the_uniform_one(trips):
    """Columns split, uniform_bound, auto_rho_k, auto_bound: the same from SQL and Python; with
    level_weights := 'auto' the split in force is the auto one, for its target."""
    domains = {"dest": DEST, "hour": range(24)}
    sql = trips.sql(
        "SELECT * FROM inftda_preview('trips', ['origin', 'dest', 'hour'], rho := 0.5, "
        f"domains := {{'dest': {DEST}, 'hour': range(24)}}, level_weights := 'auto', "
        "auto_target := 'origin')"
    )
    rows = [dict(zip(sql.columns, r, strict=True)) for r in sql.fetchall()]
    py = preview(trips, "trips", ["origin", "dest", "hour"], rho=0.5, domains=domains,
                 level_weights="auto", auto_target=1)
    assert py.to_pylist() == rows
    auto = plan_budget(3, rho=0.5, level_weights="auto", auto_target=1, nodes=[3, 21, 504])
    assert [r["split"] for r in rows] == ["auto (level 1)"] * 3
    assert [r["rho_k"] for r in rows] == [r["auto_rho_k"] for r in rows] == [
        str(x) for x in auto.level_rho]
    assert [r["bound"] for r in rows] == [r["auto_bound"] for r in rows]
    assert [r["uniform_bound"] for r in rows] == pytest.approx(error_bound([3, 7, 24], 0.5))
    assert rows[0]["bound"] < rows[0]["uniform_bound"]  # the target gains
    uniform = preview(trips, "trips", ["origin", "dest", "hour"], rho=0.5, domains=domains)
    assert uniform["split"].to_pylist() == ["uniform"] * 3
    leaves = plan_budget(3, rho=0.5, level_weights="auto", nodes=[3, 21, 504])
    assert uniform["auto_rho_k"].to_pylist() == [str(x) for x in leaves.level_rho]
    assert uniform["bound"].to_pylist() == uniform["uniform_bound"].to_pylist()


def test_domain_from_data_is_marked_not_private(trips):
    with pytest.warns(UserWarning, match="NOT private"):
        t = release(trips, "trips", ["dest"], rho=1, domain_from_data=True)
    assert t.schema.metadata[b"private"] == b"false"
    assert set(t["dest"].to_pylist()) <= set(DEST)
    assert trips.execute(
        "SELECT data_domain, private FROM inftda_ledger ORDER BY id DESC LIMIT 1"
    ).fetchall() == [(True, False)]


def test_load_twice_and_cursors(trips):
    load(trips)
    load(trips)
    cur = trips.cursor()
    load(cur)
    q = "SELECT * FROM inftda_release('trips', ['origin'], rho := 1, seed := 5)"
    assert cur.execute(q).fetchall() == trips.execute(q).fetchall()
    other = duckdb.connect()
    load(other)
    other.execute("CREATE TABLE t AS SELECT 'x' AS a FROM range(3)")
    assert other.execute(
        "SELECT * FROM inftda_release('t', ['a'], rho := 1, domains := {'a': ['x']})"
    ).fetchall() == [("x", 3)]
    other.close()


def test_budget_refusal_charges_nothing(trips):
    set_budget(trips, "trips", rho=1)
    release(trips, "trips", ["origin"], rho=0.75)
    before = ledger_rows(trips)
    with pytest.raises(BudgetExceededError):
        release(trips, "trips", ["origin"], rho=0.5)
    with pytest.raises(duckdb.Error, match="BudgetExceededError"):
        trips.execute(
            "CREATE TABLE out AS SELECT * FROM inftda_release('trips', ['origin'], rho := 0.5)"
        )
    assert ledger_rows(trips) == before
    assert not trips.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'out'").fetchall()


BAD = [
    ("rho := -1", "rho must be a positive finite number"),
    ("rho := 0", "rho must be a positive finite number"),
    ("rho := 'nan'::DOUBLE", "rho must be a positive finite number"),
    ("rho := 'inf'::DOUBLE", "rho must be a positive finite number"),
    ("rho := 'abc'", "rho must be a finite number"),
    ("epsilon := 1", "rho must be given"),
    ("rho := 1, epsilon := 1, delta := 1e-6", "rho must be given alone"),
    ("rho := 1, output := 'table'", "output must be one of counts, rows"),
    ("rho := 1, neighbours := 'sometimes'", "neighbours must be one of substitute, add_remove"),
    ("rho := 1, unknown := 'skip'", "unknown must be one of error, drop"),
    ("rho := 1, unknown := 'drop'", "unknown cannot be 'drop' with neighbours 'substitute'"),
    ("rho := 1, level_weights := [1]", "level_weights must have 2 weights, one per level"),
    ("rho := 1, seed := -3", "seed must be a non-negative integer"),
    ("rho := 1, domains := {'nope': [1]}", "names a column that is not in columns"),
    ("rho := 1, domains := {'hour': [1, 1]}", "must not repeat a value"),
    ("rho := 1, domains := {'hour': ['x', '1']}", "1 values declared for column 'hour'"),
    ("rho := 1, max_rows_per_unit := 2", "max_rows_per_unit needs privacy_unit"),
    ("rho := 1, domain_tables := ['nowhere']", "names a table that was not found"),
]


@pytest.mark.parametrize(("options", "message"), BAD)
def test_bad_options_sql(trips, options, message):
    before = ledger_rows(trips)
    with pytest.raises(duckdb.Error, match=message):
        trips.execute(
            "CREATE TABLE out AS SELECT * FROM inftda_release('trips', ['origin', 'hour'], "
            f"{options})"
        )
    assert ledger_rows(trips) == before
    assert not trips.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'out'").fetchall()


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ("['origin', 'nope']", r"columns not found in trips; got \['nope'\]"),
        ("['origin', 'ORIGIN']", "columns must not repeat a column"),
        ("[]", "columns must not be empty"),
        ("'origin'", "columns must be a list of column names"),
    ],
)
def test_bad_columns_sql(trips, columns, message):
    with pytest.raises(duckdb.Error, match=message):
        trips.execute(f"SELECT * FROM inftda_release('trips', {columns}, rho := 1)")
    assert ledger_rows(trips) == 0


def test_bad_arguments_python(trips):
    cases = [
        (dict(columns=[]), "columns must not be empty"),
        (dict(columns=["origin", "ORIGIN"]), "must not repeat a column"),
        (dict(columns="origin"), "columns must be a list"),
        (dict(columns=["origin", "nope"]), "not found in trips"),
        (dict(source="nope"), "source was not found .no such table or view.; got 'nope'"),
        (
            dict(domains={"origin": ["EWR", 3]}),
            "1 values declared for column 'origin' in "
            "domains are not valid ENUM.*got|1 values declared",
        ),
        (dict(source=""), "source must be a non-empty"),
        (dict(columns=["dest"]), "column 'dest' .VARCHAR. has no public domain"),
        (dict(columns=["origin"], rho=float("nan")), "rho must be a positive finite number"),
        (dict(columns=["origin"], rho="1/0"), "rho must be a finite number"),
    ]
    before = ledger_rows(trips)
    for override, message in cases:
        args = {"source": "trips", "columns": ["origin"], "rho": 1} | override
        with pytest.raises(InputError, match=message):
            release(trips, args.pop("source"), args.pop("columns"), **args)
    trips.execute("CREATE TABLE c AS SELECT 'x' AS count FROM range(3)")
    with pytest.raises(InputError, match="named 'count'"):
        release(trips, "c", ["count"], rho=1, domains={"count": ["x"]})
    assert ledger_rows(trips) == before


def test_data_errors_before_charging(con):
    con.execute(
        "CREATE TEMP TABLE t AS SELECT CASE WHEN i < 3 THEN NULL ELSE i % 5 END AS a, "
        "'v' || (i % 4) AS b FROM range(100) t(i)"
    )
    with pytest.raises(duckdb.Error, match=r"column 'a' of t is NULL in 3 rows"):
        con.execute(
            "CREATE TABLE o AS SELECT * FROM inftda_release('t', ['a'], rho := 1, "
            "domains := {'a': range(5)})"
        )
    with pytest.raises(InputError, match=r"column 'b' of t has 25 rows with values outside .*v3"):
        release(con, "t", ["b"], rho=1, domains={"b": ["v0", "v1", "v2"]})
    with pytest.raises(duckdb.Error, match=r"column 'b' .VARCHAR. has no public domain"):
        con.execute("SELECT * FROM inftda_release('t', ['b'], rho := 1)").fetchall()
    assert ledger_rows(con) == 0
    assert not con.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'o'").fetchall()


def test_charge_survives_rollback_and_python_autoloads(trips):
    trips.execute("BEGIN")
    trips.execute(
        "CREATE TABLE inside AS SELECT * FROM inftda_release('trips', ['origin'], rho := 0.5)"
    )
    trips.execute("ROLLBACK")
    assert ledger_rows(trips) == 1  # noise was drawn: the spend is recorded regardless
    fresh = duckdb.connect()
    fresh.execute("CREATE TABLE t AS SELECT 'x' AS a FROM range(4)")
    assert release(fresh, "t", ["a"], rho=1, domains={"a": ["x"]}).to_pylist() == [
        {"a": "x", "count": 4}
    ]
    fresh.close()


def test_sql_preview_delta_and_epsilon_forms(trips):
    rho_form = trips.execute(
        "SELECT level, epsilon, delta FROM inftda_preview('trips', ['origin'], rho := 0.5, "
        "delta := 1e-8)"
    ).fetchall()
    assert rho_form[0][0] == 1 and rho_form[0][2] == 1e-8
    eps_form = trips.execute(
        "SELECT epsilon, delta FROM inftda_preview('trips', ['origin'], epsilon := 1, "
        "delta := 1e-8)"
    ).fetchall()
    assert eps_form[0][0] <= 1 + 1e-9 and eps_form[0][1] == 1e-8
    with pytest.raises(duckdb.Error, match="beta must be a number in"):
        trips.execute("SELECT * FROM inftda_preview('trips', ['origin'], rho := 1, beta := 2)")
    assert ledger_rows(trips) == 0


def test_macro_parameters_match_the_python_options(con):
    from inftda_duckdb.core.request import OPTIONS

    params = con.execute(
        "SELECT parameters FROM duckdb_functions() WHERE function_name = 'inftda_release'"
    ).fetchall()[0][0]
    assert params == ["source", "columns", *OPTIONS]


def test_internal_udfs_refuse_junk_and_check_totals(con):
    n = registered(con, "release")
    with pytest.raises(duckdb.Error, match="unknown or expired release id"):
        con.execute(f"SELECT inftda_levels_{n}('nope', 0, NULL, [], 1, 0, 0)").fetchall()
    # every level releases the root's total, and a release gets exactly its levels
    source = RandomSource.from_seed(1)
    level = (source.derive(1), DiscreteGaussian(1), 3, None)
    prefixes = pa.struct([("k", pa.list_(pa.int32())), ("key", pa.list_(pa.int64())),
                          ("n", pa.list_(pa.int64()))])

    def lists(*rows):
        return pa.array([list(rows)], type=pa.list_(prefixes))

    def one(row):
        return pa.array([row], type=prefixes)

    def call(kids, allowed, part=0):
        return udfs.levels(rid, pa.array([part]), one(kids), allowed, pa.array([2]),
                                 pa.array([0]), pa.array([0]))

    kids = {"k": [0], "key": None, "n": [10]}
    rid = pa.array(["r"])
    RELEASES.add(Release([level, level], 10, Nodes.root(10)), "r")
    with pytest.raises(InternalError, match="of 2 levels got 1 levels of allowed children"):
        call({"k": [0, 1], "key": None, "n": [10]}, lists(None))
    assert "r" not in RELEASES.ids()  # used once, even when it fails
    RELEASES.add(Release([level], 9, Nodes.root(10)), "r")
    with pytest.raises(InternalError, match="level 1 released 10 records, not the root's 9"):
        call(kids, lists(None))
    bad = {"k": [0, 1], "key": None, "n": [10]}  # 2 codes, 1 count
    RELEASES.add(Release([level], 10, Nodes.root(10)), "r")
    with pytest.raises(InternalError, match="different numbers of prefixes and counts"):
        call(bad, lists(None))
    RELEASES.add(Release([level], 10, Nodes.root(10)), "r")
    with pytest.raises(InternalError, match="one-call release got a part other than 0"):
        call(kids, lists(None), part=3)
    RELEASES.add(Release([level], 10, Nodes.root(10)), "r")
    out = call(kids, lists(None))
    assert out.to_pylist()[0]["n"] == [c for c in out.to_pylist()[0]["n"] if c > 0]
    assert sum(out.to_pylist()[0]["n"]) == 10
    odd = pa.array([{"k": [0, 1, 2], "key": None, "n": [1]}], type=prefixes)  # 3 codes, 2 cols
    with pytest.raises(InternalError, match="prefixes of the wrong length"):
        arrow_io.prefixes(odd, 2)


def test_concurrent_releases_on_cursors(trips):
    import threading

    results: list[int] = []

    def work() -> None:
        cur = trips.cursor()
        load(cur)
        out = cur.execute(
            "SELECT sum(count) FROM inftda_release('trips', ['origin', 'hour'], rho := 1, "
            "domains := {'hour': range(24)})"
        ).fetchall()
        results.append(out[0][0])
        cur.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [2727] * 4
    assert ledger_rows(trips) == 4


def test_explicit_domain_labels_round_trip(con):
    labels = ["it's", 'a"b', "back\\slash", "ünï", "😀", "[1, 2]", "x"]
    con.execute("CREATE TABLE lab (s VARCHAR, i INTEGER)")
    con.executemany("INSERT INTO lab VALUES (?, ?)", [(s, k) for k, s in enumerate(labels)])
    out = release(con, "lab", ["s"], rho=10**6, domains={"s": labels}, seed=1)
    assert out["s"].to_pylist() == labels  # code order = the declared order
    for ints in ([3, 1, 2, 0, 6, 5, 4], range(6, -1, -1), range(0, 14, 2)):
        con.execute("DELETE FROM lab")
        con.executemany("INSERT INTO lab VALUES ('x', ?)", [(v,) for v in ints])
        got = release(con, "lab", ["i"], rho=10**6, domains={"i": ints}, seed=1)
        assert got["i"].to_pylist() == list(ints)


def test_sixteen_level_binary_tree_equals_reference(con):
    # the paper's 'binary' workload has 16 columns: small data, every invariant, and the same
    # release as the in-memory reference under a seed (ids p * 2 + j stay far below 2**64)
    from inftda_duckdb.tools.workloads import synthetic_tree

    wl = synthetic_tree(con, "bin16", kind="binary", variant="complete", materialize=True)
    assert len(wl.columns) == 16
    # one row per leaf with a small count (1-3 rows each), a quarter of the tree
    con.execute(
        f"CREATE TABLE bin16_rows AS SELECT {', '.join(wl.columns)} FROM {wl.counts}, "
        "LATERAL range(1 + (hash(d8, o8, d7) % 3)::BIGINT) WHERE d1 = 0 AND o1 = 1"
    )
    cols = list(wl.columns)
    doms = {c: [0, 1] for c in cols}
    levels: list[LevelProgress] = []
    with pytest.warns(UserWarning, match="NOT private"):
        out = release(con, "bin16_rows", cols, rho=2, domains=doms, seed=5,
                      progress=levels_only(levels))
    got = [tuple(r.values()) for r in out.drop_columns(["inftda_not_private"]).to_pylist()]
    n = con.execute("SELECT count(*) FROM bin16_rows").fetchall()[0][0]
    assert sum(r[-1] for r in got) == n and all(r[-1] > 0 for r in got)
    plan = plan_budget(16, rho=2)
    assert got == reference(con, "bin16_rows", cols, [[0, 1]] * 16, plan, 5)
    # one progress report per level (small levels: one block each), in order, each noising 2
    # cells per released parent, all of them done
    assert [lv[:2] for lv in levels] == [(k, 16) for k in range(1, 17)]
    assert levels[0][2:5] == (1, 2, 2)
    assert all(p.cells_done == p.cells_planned == 2 * p.parents and p.seconds >= 0
               for p in levels)


def test_progress_origin_and_delta_in_ledger(trips):
    seen: list[LevelProgress] = []
    release(trips, "trips", ["origin", "dest", "hour"], epsilon=2, delta=1e-8,
            domains={"dest": DEST, "hour": range(24)}, progress=levels_only(seen), origin="cli")
    assert [s[:2] for s in seen] == [(1, 3), (2, 3), (3, 3)]
    assert seen[0][2:5] == (1, 3, 3)  # the root's 3 origins
    assert seen[1].cells_planned == seen[1].parents * 7
    assert seen[2].cells_planned == seen[2].parents * 24
    assert all(s.cells_done == s.cells_planned for s in seen)
    assert 1 <= seen[1].parents <= 3 and seen[2].parents <= 21
    row = trips.execute("SELECT origin, delta FROM inftda_ledger ORDER BY id DESC LIMIT 1")
    assert row.fetchall() == [("cli", 1e-8)]
    release(trips, "trips", ["origin"], rho=1)
    trips.execute("SELECT * FROM inftda_release('trips', ['origin'], rho := 1)").fetchall()
    origins = trips.execute("SELECT origin FROM inftda_ledger ORDER BY id").fetchall()
    assert [o for (o,) in origins][-3:] == ["cli", "python", "sql"]
    with pytest.raises(InputError, match="origin must be one of python, cli"):
        release(trips, "trips", ["origin"], rho=1, origin="sql")
    with pytest.raises(InputError, match="progress must be callable"):
        release(trips, "trips", ["origin"], rho=1, progress=3)  # type: ignore[arg-type]


def test_progress_is_bounded_and_honest_on_long_levels(con):
    # a level of many blocks reports cells done / planned, increasing, at most 17 times (16
    # intermediate reports and the final one), from the thread that runs the release
    con.execute("CREATE TABLE wide AS SELECT i % 3000 AS a, i % 97 AS b FROM range(20000) t(i)")
    seen: list[LevelProgress] = []
    threads: set[int] = set()

    def hook(p: LevelProgress) -> None:
        seen.append(p)
        threads.add(threading.get_ident())

    release(con, "wide", ["a", "b"], rho=1, domains={"a": range(3000), "b": range(97)},
            progress=hook)
    two = [p for p in seen if p.level == 2]
    assert 2 <= len(two) <= 17 and len([p for p in seen if p.level == 1]) in (1, 2)
    assert [p.cells_done for p in two] == sorted(p.cells_done for p in two)
    assert two[-1].cells_done == two[-1].cells_planned == 97 * two[-1].parents
    assert all(p.cells_planned == two[-1].cells_planned for p in two)
    assert len(threads) == 1


def test_budget_refusal_keeps_the_original_exception(trips):
    set_budget(trips, "trips", rho=1)
    release(trips, "trips", ["origin"], rho=0.75)
    with pytest.raises(BudgetExceededError) as info:
        release(trips, "trips", ["origin"], rho=0.5)
    err = info.value
    assert (err.requested, err.remaining, err.difference) == (  # type: ignore[attr-defined]
        Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))
    assert not RELEASES.calls()
    with pytest.raises(InputError, match="NULL in 1 rows") as data_err:
        trips.execute("INSERT INTO trips VALUES ('EWR', NULL, 1, DATE '2024-01-01', 1)")
        release(trips, "trips", ["origin", "dest"], rho=0.1, domains={"dest": DEST})
    assert type(data_err.value) is InputError


def test_sql_not_private_release_says_so_once(trips, caplog, recwarn):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # -W error must not break a SQL release
        trips.execute(
            "SELECT * FROM inftda_release('trips', ['origin'], rho := 1, seed := 3)"
        ).fetchall()
    msgs = [r.getMessage() for r in caplog.records if r.name == "inftda_duckdb"
            and not r.getMessage().startswith("no budget covers")]  # said once, on its own
    assert len(msgs) == 1 and "seed := 3" in msgs[0] and "NOT private" in msgs[0]
    caplog.clear()
    trips.execute(
        "SELECT * FROM inftda_release('trips', ['dest'], rho := 1, domain_from_data := true)"
    ).fetchall()
    msgs = [r.getMessage() for r in caplog.records if r.name == "inftda_duckdb"
            and not r.getMessage().startswith("no budget covers")]  # said once, on its own
    assert len(msgs) == 1 and "domain_from_data" in msgs[0]
    caplog.clear()
    trips.execute("SELECT * FROM inftda_release('trips', ['origin'], rho := 1)").fetchall()
    trips.execute("EXPLAIN SELECT * FROM inftda_release('trips', ['origin'], rho := 1, seed := 3)")
    assert not [r for r in caplog.records if r.name == "inftda_duckdb"]
    # the Python path warns with its own category (and does not log twice)
    with pytest.warns(extension.NotPrivateWarning, match="seed := 4"):
        release(trips, "trips", ["origin"], rho=1, seed=4)
    assert not [r for r in caplog.records if r.name == "inftda_duckdb"]


@pytest.mark.slow  # about a minute: every block size and split on one tree
def test_splitting_work_into_blocks_changes_nothing(monkeypatch):
    # noise is addressed by the tree and IntOpt works row by row: how a level is cut into
    # blocks, how many workers run them and how the sampler chunks its ids only change the time
    from inftda_duckdb.core import noise, topdown
    from inftda_duckdb.core.noise import DiscreteGaussian

    src = RandomSource.from_seed(9).derive(4)
    ids = np.arange(200_000, dtype=np.uint64)
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, size=(20_000, 7))
    leaves = np.column_stack([np.repeat(np.arange(20_000), 7), np.tile(np.arange(7), 20_000)])
    order = rng.permutation(leaves.shape[0])  # true leaves in any order
    plan = plan_budget(2, rho=Fraction(2, 3))
    results = []
    for block, chunk, workers in ((1 << 16, 1 << 16, 1), (70, 999, 2), (7, 1, 3)):
        monkeypatch.setattr(topdown.level, "BLOCK_CELLS", block)
        monkeypatch.setattr(noise, "_CHUNK", chunk)
        out = release_tree(leaves[order], truth.ravel()[order], [20_000, 7], plan,
                           RandomSource.from_seed(9), workers=workers)
        results.append((DiscreteGaussian(3).sample(src, ids), *out))
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert np.array_equal(a, b)
    assert not np.array_equal(results[0][0], DiscreteGaussian(3).sample(src.derive(1), ids))




# ------------------------------------------------ a privacy unit's cap, told to the curator

# units 1, 2, 3 have 5, 2 and 1 rows (and 2 rows have no unit): at most 2 rows each keeps
# 2 + 2 + 1 = 5 of the 8 rows with a unit, whichever rows the keyed PRF picks
CAPPED = ("(VALUES (1, 'a', 'p'), (1, 'a', 'p'), (1, 'a', 'q'), (1, 'b', 'p'), (1, 'b', 'q'), "
          "(2, 'a', 'p'), (2, 'b', 'q'), (3, 'b', 'p'), (NULL, 'a', 'p'), (NULL, 'b', 'q')) "
          "AS v(u, x, y)")
CAP_SAID = "privacy unit 'u' (at most 2 rows each): kept 5 of 8 rows read (62.5%)"


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "privacy unit" in r.getMessage()]


@pytest.mark.parametrize("kind", ["lists", "enums", "domain table"])
def test_the_cap_of_a_privacy_unit_says_rows_kept_of_rows_read(
        con: duckdb.DuckDBPyConnection, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    # each way of coding the leaves carries the rows read to the check row (the domain
    # tables' hits and misses are summed apart)
    if kind == "enums":
        con.execute("CREATE TYPE xs AS ENUM ('a', 'b'); CREATE TYPE ys AS ENUM ('p', 'q')")
        con.execute(f"CREATE TABLE t AS SELECT u, x::xs AS x, y::ys AS y FROM {CAPPED}")
    else:
        con.execute(f"CREATE TABLE t AS SELECT * FROM {CAPPED}")
    con.execute("CREATE TABLE geo AS SELECT * FROM (VALUES ('a', 'p'), ('a', 'q'), ('b', 'p'), "
                "('b', 'q')) AS g(x, y)")
    domains = {"lists": {"domains": {"x": ["a", "b"], "y": ["p", "q"]}}, "enums": {},
               "domain table": {"domain_tables": ["geo"]}}[kind]
    opts = dict(rho=1, privacy_unit="u", unknown="drop", neighbours="add_remove", **domains)
    for m in (1, 2, 3):  # m = 1 keys each group once; m > 1 unnests candidates
        caplog.clear()
        with caplog.at_level("WARNING", logger="inftda_duckdb"):
            table = release(con, "t", ["x", "y"], max_rows_per_unit=m, seed=m, **opts)
        public = str(table.schema.metadata) + str(table.to_pylist())  # the table is public
        assert "rows read" not in public and " of 8 " not in public
        kept = {1: "3 of 8 rows read (37.5%)", 2: "5 of 8 rows read (62.5%)",
                3: "6 of 8 rows read (75.0%)"}[m]
        row = "row" if m == 1 else "rows"
        assert _said(caplog) == [f"privacy unit 'u' (at most {m} {row} each): kept {kept}"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="inftda_duckdb"):  # from SQL: the same notice
        con.sql("SELECT * FROM inftda_release('t', ['x', 'y'], rho := 1, privacy_unit := 'u', "
                "max_rows_per_unit := 2, unknown := 'drop', neighbours := 'add_remove', "
                "domains := {'x': ['a', 'b'], 'y': ['p', 'q']})").fetchall()
        release(con, "t", ["x", "y"], rho=1, domains={"x": ["a", "b"], "y": ["p", "q"]})
    assert _said(caplog) == [CAP_SAID]  # and nothing without a unit

