"""Parallel under skew: below the cut the descent is split into bands (:mod:`.spark.descent`)
wherever a subtree may hold more than a task's fair share of leaves, so a heavy subtree, or a
single one (level 1 wider than the cut allows), no longer runs on one task; the release is the
same (tree-addressed noise). The other seeded cases with bands: tests/spark/test_spark_equality.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

from inftda_duckdb.duckdb import extension
from inftda_duckdb.spark import release as spark_release
from inftda_duckdb.spark.descent import SHARE_SETTING
from inftda_duckdb.spark.subtrees import CUT_CELLS, choose_cut, plan_bands

from .compare import SEED, as_rows, duckdb_rows, spark_rows, sparse_tree, table

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]


def test_bands_split_where_a_subtree_may_exceed_the_share() -> None:
    assert plan_bands([40] * 5, 2, 1 << 16) == [2, 5]  # subtrees of 64,000 leaves at most
    assert plan_bands([3, 10_000, 100], 1, 1 << 16) == [1, 2, 3]  # 1e6 under an origin
    assert plan_bands([50_000, 10, 10, 10], 0, 1 << 16) == [0, 1, 4]  # the root alone
    assert plan_bands([50_000, 10, 10, 10], 0, 50) == [0, 2, 3, 4]  # 550,000 cells, then 1
    assert plan_bands([4] * 12, 6, 16) == [6, 10, 12]  # the first level that fits
    assert plan_bands([2] * 30, 13, 4) == [13, 28, 30]  # a band of at most 2**20 cells each
    assert plan_bands([3000] * 6, 4, 10) == [4, 5, 6]
    assert plan_bands([6000] * 6, 4, 10) == [4, 6]  # level 5's prefixes: no BIGINT key
    assert plan_bands([3, 7], 1, 1) == [1, 2]  # the leaves' parents: nothing to split


def task_shares(spark: Any, codes: np.ndarray, sizes: list[int], partitions: int,
                **options: Any) -> tuple[int, list[int]]:
    """Release (rho 1e4: the true leaves) the rows of leaf codes (N, d) over ``partitions``
    tasks; the leaves each task of the last stage released, largest first (``spark_partition_id``
    of the released rows: ``mapInArrow`` keeps the shuffle's partitions), and their total."""
    names = [f"c{k}" for k in range(len(sizes))]
    frame = spark.createDataFrame(pa.table({n: pa.array(codes[:, k].astype(np.int64))
                                            for k, n in enumerate(names)}))
    con = duckdb.connect()
    extension.load(con)
    result = spark_release(frame, names, rho=1e4, seed=7, partitions=partitions,
                           domains={n: list(range(s)) for n, s in zip(names, sizes,
                                                                       strict=True)},
                           ledger=con, source_name="skewed", **options)
    per_task = result.groupBy(F.spark_partition_id().alias("p")).count().collect()
    con.close()
    shares = sorted((r["count"] for r in per_task), reverse=True)
    return sum(shares), shares


def test_no_task_holds_more_than_a_fair_share_on_a_skewed_tree(spark: Any) -> None:
    """87% of the rows under one of 3 values of level 1 (the cut): that subtree held 74% of the
    leaves in one task; with bands the subtrees of level 2 spread them over the 8 tasks."""
    sizes = [3, 5000, 40]
    rng = np.random.default_rng(5)
    codes = np.stack([rng.integers(0, s, 100_000) for s in sizes], axis=1)
    codes[rng.random(100_000) < 0.8, 0] = 0
    assert choose_cut(np.cumprod(sizes).tolist(), sizes) == 1
    total, shares = task_shares(spark, codes, sizes, 8)
    assert total == np.unique(codes, axis=0).shape[0]  # rho 1e4: every true leaf
    assert shares[0] <= 1.15 * total / 8, shares


def test_a_level_1_wider_than_the_cut_is_spread_over_the_tasks(spark: Any) -> None:
    """Level 1 of 9,000 values (over :data:`CUT_CELLS`): the cut is the root, which held the
    whole tree in one task; a band releases level 1 and its subtrees spread."""
    sizes = [9000, 4, 3]
    assert choose_cut(np.cumprod(sizes).tolist(), sizes) == 0
    rng = np.random.default_rng(6)
    codes = np.stack([rng.integers(0, s, 20_000) for s in sizes], axis=1)
    total, shares = task_shares(spark, codes, sizes, 8)
    assert total == np.unique(codes, axis=0).shape[0]
    assert len(shares) == 8 and shares[0] <= 1.15 * total / 8, shares


@pytest.mark.parametrize("rho", [1e4, 1.0])
def test_a_level_1_wider_than_the_cut_is_released_in_bands(spark: Any, rho: float) -> None:
    """Level 1 of 9,000 values (over :data:`CUT_CELLS`): the cut is the root; was one task for
    the whole tree, now a band releases level 1 and the subtrees below it spread. Seeded Spark
    == DuckDB, and at rho 1e4 (no noise) every true leaf."""
    sizes = [9000, 50, 40]
    assert sizes[0] > CUT_CELLS and choose_cut(np.cumprod(sizes).tolist(), sizes) == 0
    _equal_to_duckdb(spark, sizes, rho, {})


def test_bands_on_the_codes_path(spark: Any) -> None:
    """A product of sizes past 2**62 (codes per level) split into bands at levels whose
    prefixes still have BIGINT keys."""
    sizes = [6000] * 5
    assert math.prod(sizes) >= 2**62
    _equal_to_duckdb(spark, sizes, 1.0, {SHARE_SETTING: "20"})


def test_a_level_1_wider_than_the_cut_is_spread_over_the_tasks_with_least_squares(
        spark: Any) -> None:
    """Estimator 'least_squares' hands each band's nodes on with their errors: it ran in one
    band, the whole tree in one task when the cut is the root; now its bands spread like the
    default's."""
    sizes = [9000, 4, 3]
    rng = np.random.default_rng(8)
    codes = np.stack([rng.integers(0, s, 20_000) for s in sizes], axis=1)
    total, shares = task_shares(spark, codes, sizes, 8, estimator="least_squares")
    assert total == np.unique(codes, axis=0).shape[0]
    assert len(shares) == 8 and shares[0] <= 1.15 * total / 8, shares


@pytest.mark.parametrize("conf", [{}, {SHARE_SETTING: "5"}])
def test_least_squares_in_bands_equals_the_duckdb_release(spark: Any,
                                                          conf: dict[str, str]) -> None:
    """Level 1 of 9,000 values: the cut is the root; least squares in bands (levels 0-1 and
    1-3; with a share of 5 leaves, 0-2 and 2-3) equals the DuckDB release, seeded."""
    sizes = [9000, 4, 3]
    assert choose_cut(np.cumprod(sizes).tolist(), sizes) == 0
    assert plan_bands(sizes, 0, int(conf.get(SHARE_SETTING, 1 << 16))) == \
        ([0, 2, 3] if conf else [0, 1, 3])
    _equal_to_duckdb(spark, sizes, 1.0, conf, estimator="least_squares")


def _equal_to_duckdb(spark: Any, sizes: list[int], rho: float, conf: dict[str, str],
                     **options: Any) -> None:
    values, leaves, counts = sparse_tree(sizes)
    names = [f"c{k}" for k in range(len(sizes))]
    domains = {n: values[k] for k, n in enumerate(names)}
    data = table(values, leaves, counts)
    con, got_duck = duckdb_rows({"data": data}, names, rho, domains=domains, **options)
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        got_spark = spark_rows(spark_release(spark.createDataFrame(data), names, rho=rho,
                                             domains=domains, seed=SEED, ledger=con,
                                             source_name="data", **options))
    finally:
        for key in conf:
            spark.conf.unset(key)
    if rho >= 1e4:
        assert got_duck == as_rows(values, leaves, counts)
    assert got_spark == got_duck
    con.close()
