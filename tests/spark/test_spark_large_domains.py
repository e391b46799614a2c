"""Large public domains under ``spark.driver.maxResultSize=1m`` (the fixture's session): a
domain of 200,000 values, declared as a range of a BIGINT column (cast by Spark) or read from a
domain table, is brought to the driver in jobs that each stay within the limit
(:mod:`inftda_duckdb.spark.gather`); the seeded release equals DuckDB's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb.duckdb import extension
from inftda_duckdb.spark import release as spark_release
from inftda_duckdb.spark.sessions import result_limit

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

SIZE = 200_000


def test_the_session_limits_results_to_1m(spark: Any) -> None:
    assert result_limit(spark) == 1 << 20


@pytest.mark.parametrize("declared", ["range", "domain table"])
def test_a_domain_of_200000_values_within_max_result_size_1m(spark: Any, declared: str,
                                                            tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    data = pa.table({"item": pa.array(rng.integers(0, SIZE, 2000), pa.int64()),
                     "kind": pa.array(rng.choice(["a", "b", "c"], 2000))})
    domains: dict[str, Any] = {"kind": ["a", "b", "c"]}
    tables: list[Any] = []
    if declared == "range":
        domains["item"] = range(SIZE)
    else:
        tables = [spark.range(SIZE).selectExpr("id AS item")]
    con = duckdb.connect()
    extension.load(con)
    con.register("data_arrow", data)
    con.execute("CREATE TABLE data AS SELECT * FROM data_arrow")
    duck = extension.release(con, "data", ["item", "kind"], rho=1.0, seed=12,
                             domains={"item": range(SIZE), "kind": ["a", "b", "c"]})
    result = spark_release(spark.createDataFrame(data), ["item", "kind"], rho=1.0, seed=12,
                           domains=domains, domain_tables=tables, ledger=con,
                           source_name="data")
    result.write.parquet(str(tmp_path / "out"))  # its rows would pass maxResultSize too
    got = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "out").to_pylist())
    con.close()
    assert got == sorted(tuple(r.values()) for r in duck.to_pylist())
