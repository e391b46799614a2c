"""Estimator 'least_squares' on Spark at the cut levels a release can take: the whole tree below
the root on the executors (cut 0), and the default cut; each equals the DuckDB release. In bands
(more: tests/spark/test_spark_skew.py, test_spark_equality.py) the sums it pins are freed."""

from __future__ import annotations

from typing import Any

import pinned
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb import spark as inftda_spark
from inftda_duckdb.spark import subtrees
from inftda_duckdb.spark.descent import SHARE_SETTING

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]


@pytest.mark.parametrize("case", ["flat", "add_remove, level weights"])
def test_a_release_cut_at_the_root_equals_the_duckdb_release(
        spark: Any, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    monkeypatch.setattr(subtrees, "CUT_CELLS", 1)  # level 1 has 4 cells: the cut is the root
    assert subtrees.choose_cut([4, 48, 1152], [4, 12, 24]) == 0
    frame = spark.createDataFrame(pinned.trips())
    result = inftda_spark.release(frame, pinned.COLUMNS, seed=pinned.SEED, ledger=":memory:",
                                  source_name="trips", estimator="least_squares",
                                  **pinned.CASES[case])
    rows = [tuple(r) for r in result.collect()]
    assert pinned.digest(rows) == pinned.PINNED_LEAST_SQUARES[case]
    assert result.schema.fields[0].metadata["inftda"].count('"estimator": "least_squares"') == 1


def test_unpin_frees_the_sums_below_the_bands_with_the_leaves(
        spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """In bands (the cut at the root, a share of 2 leaves: levels 0-2, then 2-3) the sums below
    every public cell of level 2 are pinned with the leaves; ``unpin`` frees both."""
    monkeypatch.setattr(subtrees, "CUT_CELLS", 1)
    assert subtrees.plan_bands([4, 12, 24], 0, 2) == [0, 2, 3]
    persisted = spark.sparkContext._jsc.getPersistentRDDs
    before = {int(k) for k in persisted().keySet().toArray()}
    spark.conf.set(SHARE_SETTING, "2")
    try:
        result = inftda_spark.release(spark.createDataFrame(pinned.trips()), pinned.COLUMNS,
                                      seed=pinned.SEED, ledger=":memory:", source_name="trips",
                                      estimator="least_squares", **pinned.CASES["flat"])
        rows = [tuple(r) for r in result.collect()]
    finally:
        spark.conf.unset(SHARE_SETTING)
    assert pinned.digest(rows) == pinned.PINNED_LEAST_SQUARES["flat"]
    held = {int(k) for k in persisted().keySet().toArray()} - before
    assert len(held) == 2  # the leaves and the sums below level 2
    assert inftda_spark.unpin(result) == 2
    assert not held & {int(k) for k in persisted().keySet().toArray()}
