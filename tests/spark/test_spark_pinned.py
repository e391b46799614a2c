"""Seeded Spark releases equal the DuckDB engine's pinned hashes (:mod:`tests.pinned`)."""

from __future__ import annotations

from typing import Any

import pinned
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb import spark as inftda_spark

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]


@pytest.mark.parametrize("estimator", list(pinned.ESTIMATORS))
@pytest.mark.parametrize("case", list(pinned.CASES))
def test_seeded_spark_release_matches_the_pinned_hash(spark: Any, case: str,
                                                      estimator: str) -> None:
    options = dict(pinned.CASES[case])
    if "domain_tables" in options:
        options["domain_tables"] = [spark.createDataFrame(pinned.geo())]
    frame = spark.createDataFrame(pinned.trips())
    result = inftda_spark.release(frame, pinned.COLUMNS, seed=pinned.SEED, ledger=":memory:",
                                  source_name="trips", estimator=estimator, **options)
    rows = [tuple(r) for r in result.collect()]
    assert pinned.digest(rows) == pinned.ESTIMATORS[estimator][case]
