"""Seeded equality on random trees: Spark (local[2]) == DuckDB == ``topdown.release_tree``.

Each case draws a random hierarchy (depth, domain sizes, skewed data so that many subtrees are
empty), releases it seeded with the DuckDB engine and with the Spark engine, and rebuilds the
release in numpy (``release_tree`` on the same leaves). The three must agree row for row. The
cases cover flat domains, a nested domain table, privacy units (clipping included), add_remove
with level weights, rows output, domains read from the data, and tiny Arrow batches and chunks
so that subtrees span many batches, chunks and partitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb.core import units
from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.provenance import MARKER
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import Allowed, release_tree
from inftda_duckdb.duckdb import extension
from inftda_duckdb.spark import release as spark_release
from inftda_duckdb.spark.descent import SHARE_SETTING
from inftda_duckdb.spark.driver import CHUNK_SETTING

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:this release used seed"),
              pytest.mark.filterwarnings("ignore:domain_from_data read")]


@dataclass
class Tree:
    """A random hierarchy and data: ``values[k]`` level k's domain in code order, ``codes``
    the rows' codes (N, d), ``unit`` each row's privacy unit."""

    values: list[list[Any]]
    codes: np.ndarray
    unit: np.ndarray
    nest: np.ndarray | None = None  # allowed (level 0, level 1) code pairs (2, M)
    names: list[str] = field(default_factory=list)

    def table(self) -> pa.Table:
        cols = {n: pa.array([self.values[k][c] for c in self.codes[:, k]])
                for k, n in enumerate(self.names)}
        cols["person"] = pa.array(self.unit)
        return pa.table(cols)

    def geo(self) -> pa.Table:
        assert self.nest is not None
        return pa.table({self.names[0]: [self.values[0][c] for c in self.nest[0]],
                         self.names[1]: [self.values[1][c] for c in self.nest[1]]})


def _values(k: int, size: int) -> list[Any]:
    # strings, integers (with gaps) and strings again: each level coded against its own type
    if k % 3 == 1:
        return [int(3 * i + 1) for i in range(size)]
    return [f"{'abc'[k % 3]}{i:02d}" for i in range(size)]


def random_tree(seed: int, depth: int, nested: bool = False) -> Tree:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 7, depth)
    if nested:
        sizes[1] = max(sizes[1], 4)
    values = [_values(k, int(s)) for k, s in enumerate(sizes)]
    n = int(rng.integers(400, 1500))
    # skewed: geometric-ish codes, so that many subtrees are empty
    codes = np.stack([np.minimum(rng.geometric(0.45, n) - 1, s - 1) for s in sizes], axis=1)
    nest = None
    if nested:
        pairs = [(a, b) for a in range(sizes[0]) for b in range(sizes[1])
                 if b == a % sizes[1] or rng.random() < 0.5]
        nest = np.array(pairs).T
        allowed = {(int(a), int(b)) for a, b in pairs}
        ok = np.array([(int(a), int(b)) in allowed for a, b in codes[:, :2]])
        codes = codes[ok]
    unit = rng.integers(0, max(1, codes.shape[0] // 3), codes.shape[0])
    return Tree(values, codes, unit, nest, [f"c{k}" for k in range(depth)])


def clip(tree: Tree, seed: int, m: int) -> np.ndarray:
    """The rows a release keeps, by the engine-neutral reference :func:`core.units.kept`."""
    values = [tuple(tree.values[k][c] for k, c in enumerate(row)) for row in tree.codes]
    kept = units.kept(units.row_key(seed), zip(tree.unit.tolist(), values, strict=True), m)
    index = {v: [tree.values[k].index(x) for k, x in enumerate(v)] for _, v in kept}
    return np.array([index[v] for (_, v), count in kept.items() for _ in range(count)])


def reference(tree: Tree, codes: np.ndarray, seed: int, options: dict[str, Any]) -> list[tuple]:
    depth = len(tree.values)
    neighbours = options.get("neighbours", "substitute")
    # the root is noised with add_remove, and with a privacy unit (its rows per unit private)
    noised_root = neighbours == "add_remove" or (
        "privacy_unit" in options and not options.get("rows_per_unit_public"))
    sizes = [len(v) for v in tree.values]
    target = options.get("auto_target")  # a column's name: its level (c0 is level 1)
    target = int(target[1:]) + 1 if target else None
    plan = plan_budget(depth, rho=options["rho"], neighbours=neighbours,
                       level_weights=options.get("level_weights"),
                       max_rows_per_unit=options.get("max_rows_per_unit", 1),
                       noised_root=noised_root, auto_target=target,
                       nodes=np.cumprod(sizes).tolist())  # the public cells (flat trees)
    leaves, counts = np.unique(codes, axis=0, return_counts=True)
    values = tree.values
    allowed = None
    if tree.nest is not None:
        # a domain table's level: its distinct values (sorted), only the listed pairs
        listed = sorted({tree.values[1][b] for b in tree.nest[1]})
        remap = {tree.values[1].index(v): i for i, v in enumerate(listed)}
        leaves = leaves.copy()
        leaves[:, 1] = [remap[c] for c in leaves[:, 1]]
        pairs = np.unique(np.stack([tree.nest[0], [remap[c] for c in tree.nest[1]]]), axis=1)
        allowed = {1: Allowed((0,), pairs)}
        first = sorted({tree.values[0][a] for a in tree.nest[0]})
        assert first == sorted(tree.values[0])
        sizes[1], values = len(listed), [values[0], listed, *values[2:]]
    out, n = release_tree(leaves, counts, sizes, plan, RandomSource.from_seed(seed), allowed,
                          estimator=options.get("estimator", "inftda"))
    rows = [(*(values[k][c] for k, c in enumerate(row)), int(x))
            for row, x in zip(out.tolist(), n.tolist(), strict=True)]
    if options.get("output") == "rows":
        rows = [r[:-1] for r in rows for _ in range(r[-1])]
    return sorted(rows)


CASES = {
    "flat": (11, 3, {}, {}),
    "flat, deep, many partitions": (12, 4, {"partitions": 5}, {}),
    "nested domain table": (13, 3, {}, {}),
    "privacy units": (14, 3, {"privacy_unit": "person", "max_rows_per_unit": 2}, {}),
    "privacy units, public row counts, m = 1": (19, 3, {"privacy_unit": "person",
                                                        "rows_per_unit_public": True}, {}),
    "add_remove, level weights": (15, 3, {"neighbours": "add_remove",
                                          "level_weights": [1, 2, 3, 4]}, {}),
    "rows output": (16, 2, {"output": "rows"}, {}),
    "auto level weights, a target level": (20, 3, {"level_weights": "auto",
                                                   "auto_target": "c1"}, {}),
    "tiny batches and chunks": (17, 4, {"partitions": 7},
                                {"spark.sql.execution.arrow.maxRecordsPerBatch": "3",
                                 CHUNK_SETTING: "16"}),
    "domain from data": (18, 3, {"domain_from_data": True}, {}),
    # a task's share of leaves so small that the descent below the cut is split into bands
    "bands below the cut": (21, 4, {"partitions": 3}, {SHARE_SETTING: "3"}),
    "nested domain table, bands": (22, 3, {}, {SHARE_SETTING: "2"}),
    "bands, rows output, add_remove": (23, 3, {"output": "rows", "neighbours": "add_remove"},
                                       {SHARE_SETTING: "2"}),
    "bands, privacy units, tiny chunks": (24, 4, {"privacy_unit": "person"},
                                          {SHARE_SETTING: "5", CHUNK_SETTING: "8"}),
}
LSQ = {"estimator": "least_squares"}
CASES.update({  # estimator 'least_squares': every cell noised on both sides of the cut
    "least squares, flat, deep, many partitions": (12, 4, {"partitions": 5, **LSQ}, {}),
    "least squares, nested domain table": (13, 3, LSQ, {}),
    "least squares, privacy units": (14, 3, {"privacy_unit": "person", "max_rows_per_unit": 2,
                                            **LSQ}, {}),
    "least squares, add_remove, level weights": (15, 3, {"neighbours": "add_remove",
                                                        "level_weights": [1, 2, 3, 4], **LSQ},
                                                 {}),
    "least squares, tiny batches and chunks": (17, 4, {"partitions": 7, **LSQ},
                                               {"spark.sql.execution.arrow.maxRecordsPerBatch":
                                                "3", CHUNK_SETTING: "16"}),
    # bands below the cut: each band's nodes handed on with their errors e
    "least squares, bands below the cut": (21, 4, {"partitions": 3, **LSQ}, {SHARE_SETTING: "3"}),
    "least squares, nested domain table, bands": (22, 3, LSQ, {SHARE_SETTING: "2"}),
    "least squares, bands, privacy units, tiny chunks": (24, 4, {"privacy_unit": "person", **LSQ},
                                                         {SHARE_SETTING: "5", CHUNK_SETTING: "8"}),
})


@pytest.mark.parametrize("case", list(CASES))
def test_seeded_release_is_identical_on_spark_duckdb_and_numpy(spark: Any, case: str) -> None:
    seed, depth, options, conf = CASES[case]
    nested = "nested domain table" in case
    tree = random_tree(seed, depth, nested)
    options = {"rho": 0.7, **options}
    con = duckdb.connect()
    extension.load(con)
    con.register("data_arrow", tree.table())
    con.execute("CREATE TABLE data AS SELECT * FROM data_arrow")
    doms: dict[str, Any] = {n: tree.values[k] for k, n in enumerate(tree.names)}
    spark_tables = []
    if nested:
        con.register("geo_arrow", tree.geo())
        con.execute("CREATE TABLE geo AS SELECT * FROM geo_arrow")
        del doms[tree.names[1]], doms[tree.names[0]]
        spark_tables = [spark.createDataFrame(tree.geo())]
    if options.get("domain_from_data"):
        doms = {}
    spark_only = {k: options.pop(k) for k in ("partitions",) if k in options}
    duck = extension.release(con, "data", tree.names, domains=doms or None,
                             domain_tables=["geo"] if nested else None, seed=seed, **options)
    assert duck.column_names[-1] == MARKER  # seeded: marked not private in the rows
    got_duck = sorted(tuple(r.values()) for r in duck.to_pylist())
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        frame = spark.createDataFrame(tree.table())
        result = spark_release(frame, tree.names, domains=doms or None,
                               domain_tables=spark_tables or None, seed=seed, ledger=con,
                               source_name="data", **options, **spark_only)
        got_spark = sorted(tuple(r) for r in result.collect())
    finally:
        for key in conf:
            spark.conf.unset(key)
    codes = tree.codes
    if "privacy_unit" in options:
        codes = clip(tree, seed, options.get("max_rows_per_unit", 1))
    if options.get("domain_from_data"):
        present = [sorted(set(np.unique(codes[:, k]))) for k in range(depth)]
        tree = Tree([[tree.values[k][c] for c in present[k]] for k in range(depth)],
                    np.stack([np.searchsorted(present[k], codes[:, k]) for k in range(depth)],
                             axis=1), tree.unit, None, tree.names)
        codes = tree.codes
    expected = reference(tree, codes, seed, options)
    assert len(expected) > 5
    assert [r[:-1] for r in got_spark] == expected
    assert got_spark == got_duck  # the marker column included
    charged = con.execute("SELECT source, origin, seeded FROM inftda_ledger ORDER BY id").fetchall()
    assert [row[0].split(".")[-1] for row in charged] == ["data", "data"]  # each engine once
    con.close()


TRICKY = ['a"b', "c\\d", "é/ü", "😀 x", "tab\there", "plain"]


def test_unit_capping_is_the_same_on_duckdb(spark: Any) -> None:
    """Both engines keep the same rows of each privacy unit: core.units' keyed PRF over the
    JSON text of (unit, values), here with texts JSON escapes (quotes, a backslash, a tab) and
    non-ASCII (accents, an emoji). A budget so large that the noise is 0 (every sigma^2 below
    1e-5) makes each release the capped histogram itself, compared with ``units.kept``."""
    from collections import Counter

    rng = np.random.default_rng(21)
    people = [f"p{i}{TRICKY[i % len(TRICKY)]}" for i in range(40)]
    rows = [(p, TRICKY[int(rng.integers(len(TRICKY)))], int(rng.integers(3)))
            for i, p in enumerate(people) for _ in range(1 + i % 9)]
    data = pa.table({"person": [r[0] for r in rows], "s": [r[1] for r in rows],
                     "h": [r[2] for r in rows]})
    con = duckdb.connect()
    extension.load(con)
    con.register("data_arrow", data)
    con.execute("CREATE TABLE data AS SELECT * FROM data_arrow")
    names = ["person", "s", "h"]
    options: dict[str, Any] = {"rho": 10**6, "privacy_unit": "person", "max_rows_per_unit": 3,
                               "domains": {"person": people, "s": TRICKY, "h": [0, 1, 2]}}

    def both(seed: int) -> tuple[list[tuple], list[tuple]]:
        duck = extension.release(con, "data", names, seed=seed, **options)
        frame = spark.createDataFrame(data)
        got = release_rows(spark_release(frame, names, ledger=con, source_name="data",
                                         seed=seed, **options))
        return got, sorted(tuple(r.values()) for r in duck.to_pylist())

    got, duck = both(5)
    assert got == duck
    reference = units.kept(units.row_key(5), [(p, (p, s, h)) for p, s, h in rows], 3)
    assert Counter({(r[0], r[:3]): r[3] for r in got}) == reference
    assert sum(r[3] for r in got) < len(rows)  # units were capped
    other, other_duck = both(6)
    assert other == other_duck and other != got  # another key, another choice
    con.close()


def release_rows(frame: Any) -> list[tuple]:
    return sorted(tuple(r) for r in frame.collect())


def test_the_cap_of_a_privacy_unit_says_rows_kept_of_rows_read(
        spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The curator's notice of a privacy unit's cap, from the same scan, in the core's words:
    the same data and texts as tests/duckdb/test_release.py (8 rows with a unit, 2 without,
    dropped by ``unknown='drop'``); nothing without a unit."""
    data = pa.table({"u": pa.array([1, 1, 1, 1, 1, 2, 2, 3, None, None], pa.int64()),
                     "x": ["a", "a", "a", "b", "b", "a", "b", "b", "a", "b"],
                     "y": ["p", "p", "q", "p", "q", "p", "q", "p", "p", "q"]})
    con = duckdb.connect()
    extension.load(con)
    domains = {"x": ["a", "b"], "y": ["p", "q"]}
    said = {1: "3 of 8 rows read (37.5%)", 2: "5 of 8 rows read (62.5%)",
            3: "6 of 8 rows read (75.0%)"}
    for m in (1, 2, 3):
        caplog.clear()
        with caplog.at_level("WARNING", logger="inftda_duckdb"):
            result = spark_release(spark.createDataFrame(data), ["x", "y"], rho=1, seed=m,
                                   domains=domains, privacy_unit="u", max_rows_per_unit=m,
                                   unknown="drop", neighbours="add_remove", ledger=con,
                                   source_name="capped")
        row = "row" if m == 1 else "rows"
        assert [r.getMessage() for r in caplog.records if "privacy unit" in r.getMessage()] \
            == [f"privacy unit 'u' (at most {m} {row} each): kept {said[m]}"]
        assert "rows read" not in str(result.collect())
    caplog.clear()
    with caplog.at_level("WARNING", logger="inftda_duckdb"):
        spark_release(spark.createDataFrame(data.drop(["u"])), ["x", "y"], rho=1, seed=1,
                      domains=domains, ledger=con, source_name="plain")
    assert not [r for r in caplog.records if "privacy unit" in r.getMessage()]
    con.close()
