"""Estimator 'least_squares' on Spark at the cut levels a release can take: the whole tree below
the root on the executors (cut 0), and the default cut; each equals the DuckDB release."""

from __future__ import annotations

from typing import Any

import pinned
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb import spark as inftda_spark
from inftda_duckdb.spark import subtrees

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
