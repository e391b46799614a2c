"""The workload generators: documented shapes, sizes, nesting and determinism (small variants)."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from inftda_duckdb.core.errors import InputError
from inftda_duckdb.duckdb.evaluation import evaluate
from inftda_duckdb.tools import workloads as w


@pytest.fixture
def con():
    c = duckdb.connect()
    yield c
    c.close()


def leaves(con, wl):
    return con.sql(f"SELECT * FROM {wl.counts} ORDER BY ALL").fetchall()


def test_pareto_flows_are_scaled_into_1_1000():
    f = w.pareto_flows(np.random.default_rng(1), 10_000)
    assert f.dtype == np.int64 and f.min() == 1 and f.max() == 1000
    assert np.median(f) < 50  # heavy tail: most flows are small
    assert len(w.pareto_flows(np.random.default_rng(1), 0)) == 0


@pytest.mark.parametrize(
    ("variant", "nonzero"), [("complete", 65_536), ("dense", 32_768), ("sparse", 655)]
)
def test_binary_tree(con, variant, nonzero):
    wl = w.synthetic_tree(con, kind="binary", variant=variant)
    assert wl.columns == tuple(f"{s}{i}" for i in range(1, 9) for s in "do")  # D1, O1, D2, O2...
    assert wl.nonzero == nonzero and wl.cells == tuple(2**k for k in range(1, 17))
    assert wl.domains == {c: [0, 1] for c in wl.columns}
    lo, hi, total = con.sql(f"SELECT min(n), max(n), sum(n) FROM {wl.counts}").fetchall()[0]
    assert (lo, hi, total) == (1, 1000, wl.n)
    assert con.sql(f"SELECT count(*) FROM {wl.source}").fetchall()[0][0] == wl.n


def test_generators_are_deterministic_by_seed(con):
    a = leaves(con, w.synthetic_tree(con, "a", kind="binary", variant="sparse"))
    b = leaves(con, w.synthetic_tree(con, "b", kind="binary", variant="sparse"))
    c = leaves(con, w.synthetic_tree(con, "c", kind="binary", variant="sparse", seed=7))
    assert a == b and a != c


def test_random_geography_has_435_leaves_and_branching_up_to_10():
    paths = w.random_geography(np.random.default_rng(42))
    assert paths.shape == (435, 4) and len(np.unique(paths[:, 3])) == 435
    for lev in range(3):  # each node has between 1 and 10 children, parents are consistent
        kids = np.unique(paths[:, lev : lev + 2], axis=0)
        per_parent = np.bincount(kids[:, 0])
        assert per_parent.min() >= 1 and per_parent.max() <= 10
        assert len(np.unique(kids[:, 1])) == len(kids)  # a child has one parent


def test_random_tree_sparse(con):
    wl = w.synthetic_tree(con, kind="random", variant="sparse")
    assert wl.columns == ("d1", "o1", "d2", "o2", "d3", "o3", "d4", "o4")
    assert wl.cells[-1] == 189_225 and wl.nonzero == 189_225 - round(189_225 * 0.99)
    assert len(wl.domain_tables) == 2
    for t in wl.domain_tables:
        assert con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0] == 435
    # every leaf is a valid (destination path, origin path) pair of the domain tables
    geo_d = wl.domain_tables[0]
    bad = con.sql(
        f"SELECT count(*) FROM {wl.counts} ANTI JOIN {geo_d} USING (d1, d2, d3, d4)"
    ).fetchall()[0][0]
    assert bad == 0
    # the evaluation counts the same public domain, level by level
    con.execute(f"CREATE VIEW rel AS SELECT * EXCLUDE (n), n AS count FROM {wl.counts}")
    tables = list(wl.domain_tables)
    out = evaluate(con, wl.counts, "rel", list(wl.columns), domain_tables=tables, true_count="n")
    assert tuple(out.column("domain_cells").to_pylist()) == wl.cells
    assert set(out.column("max_abs_error").to_pylist()) == {0}


def test_italy_like_small_is_nested(con):
    wl = w.italy_like(con, "it", regions=3, provinces=6, municipalities=50, pairs=400)
    assert wl.columns == ("o_region", "o_province", "o_municipality",
                          "d_region", "d_province", "d_municipality")  # fmt: skip
    assert wl.cells == (3, 6, 50, 150, 300, 2500)
    # provinces nest in regions, municipalities in provinces, on both sides
    geo = con.sql("SELECT * FROM it_geo").fetchall()
    assert (
        len(geo) == 50
        and len({(r, p) for r, p, _ in geo}) == 6
        and len({r for r, _, _ in geo}) == 3
    )
    assert all(len({r for r, p2, _ in geo if p2 == p}) == 1 for _, p, _ in geo)
    assert (
        con.sql("SELECT count(*) FROM it_counts WHERE o_municipality = d_municipality").fetchall()[
            0
        ][0]
        == 50
    )
    out = evaluate(
        con, wl.source, wl.counts, list(wl.columns), domain_tables=list(wl.domain_tables)
    )
    assert tuple(out.column("domain_cells").to_pylist()) == wl.cells
    with pytest.raises(InputError, match="regions"):
        w.italy_like(con, "x", regions=5, provinces=2)


@pytest.mark.slow
def test_italy_like_default_size(con):
    wl = w.italy_like(con)
    assert wl.cells[:3] == (20, 110, 8000) and wl.cells[-1] == 64_000_000
    assert 500_000 <= wl.nonzero <= 600_000 and wl.n > 10_000_000


def test_enum_table(con):
    wl = w.enum_table(con, "trips", 2_000)
    assert wl.columns == ("origin", "dest", "hour", "mode") and wl.cells[-1] == 240_000
    types = dict(zip(con.table("trips").columns, con.table("trips").types, strict=True))
    sizes = [len(dict(types[c].children)["values"]) for c in wl.columns]
    assert [types[c].id for c in wl.columns] == ["enum"] * 4 and sizes == [50, 20, 24, 10]
    assert con.sql("SELECT count(*) FROM trips").fetchall()[0][0] == 2_000
    assert con.sql("SELECT sum(n) FROM trips_counts").fetchall()[0][0] == 2_000
    first = con.sql("SELECT * FROM trips_counts ORDER BY ALL").fetchall()
    w.enum_table(con, "trips", 2_000)
    assert con.sql("SELECT * FROM trips_counts ORDER BY ALL").fetchall() == first
    out = evaluate(con, "trips", "trips", list(wl.columns))  # ENUM domains found
    assert tuple(out.column("domain_cells").to_pylist()) == wl.cells


def test_bad_arguments(con):
    with pytest.raises(InputError, match="kind"):
        w.synthetic_tree(con, kind="ternary")
    with pytest.raises(InputError, match="variant"):
        w.synthetic_tree(con, kind="binary", variant="full")
    with pytest.raises(InputError, match="sizes"):
        w.enum_table(con, "t", 10, sizes=(2, 0, 1, 1))
