"""Error bars on Spark: the same intervals and plans as DuckDB's, and a release written by
Spark keeps what its intervals need (DuckDB and Spark both read it back)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

pytest.importorskip("pyspark")

import inftda_duckdb
from inftda_duckdb import InputError
from inftda_duckdb import spark as inftda_spark

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

DOMAINS = {"a": ["x", "y", "z"], "b": range(4)}


@pytest.fixture
def data(spark: Any) -> tuple[Any, duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    inftda_duckdb.load(con)
    con.execute("CREATE TABLE t AS SELECT ['x', 'y', 'z'][1 + i % 3] AS a, (i % 4)::INTEGER AS b "
                "FROM range(400) r(i)")
    frame = spark.createDataFrame(con.sql("SELECT * FROM t").to_arrow_table().to_pandas())
    return frame, con


def test_spark_intervals_equal_duckdbs(data: Any, tmp_path: Path) -> None:
    frame, con = data
    ours = inftda_spark.release(frame, ["a", "b"], rho=1, domains=DOMAINS, seed=5,
                                ledger=":memory:", source_name="t")
    theirs = inftda_duckdb.release(con, "t", ["a", "b"], rho=1, domains=DOMAINS, seed=5)
    for level in (1, "b"):
        got = [tuple(r) for r in inftda_spark.intervals(ours, level=level, beta=0.1).collect()]
        want = [tuple(r.values()) for r in
                inftda_duckdb.intervals(con, theirs, level=level, beta=0.1).to_pylist()]
        assert got == want
    written = str(tmp_path / "r.parquet")
    ours.write.parquet(written)
    back = frame.sparkSession.read.parquet(written)
    assert [tuple(r) for r in inftda_spark.intervals(back, level=2).collect()] == [
        tuple(r.values()) for r in inftda_duckdb.intervals(con, written, level=2).to_pylist()]
    with pytest.raises(InputError, match="no provenance"):
        inftda_spark.intervals(frame, level=1)


def test_spark_plan_equals_duckdbs(data: Any) -> None:
    frame, con = data
    got = inftda_spark.plan(frame, ["a", "b"], max_error=15, level=1, domains=DOMAINS)
    want = inftda_duckdb.plan(con, "t", ["a", "b"], max_error=15, level=1, domains=DOMAINS)
    assert got["rows"].to_pylist() == want["rows"].to_pylist()
    with pytest.raises(InputError, match="what a plan computes"):
        inftda_spark.plan(frame, ["a", "b"], max_error=15, rho=1, domains=DOMAINS)
