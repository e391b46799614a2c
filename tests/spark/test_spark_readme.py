"""The README's Spark example runs as written (the README test skips it: it needs Spark), on
sample trips in ``data/trips/`` and a public ``airports`` table, in a scratch folder."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

pytestmark = pytest.mark.spark

README = Path(__file__).resolve().parents[2] / "README.md"


def spark_example() -> str:
    section = README.read_text().split("## Spark: the same release past one machine", 1)[1]
    return re.search(r"^```python\n(.*?)^```", section, re.S | re.M)[1]  # type: ignore[index]


def test_readme_spark_example_runs(spark: Any, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "trips").mkdir(parents=True)
    n = 5000
    pq.write_table(pa.table({
        "origin": [["EWR", "JFK", "LGA"][i % 3] for i in range(n)],
        "dest": [f"D{i % 11}" for i in range(n)],
        "hour": pa.array([i * 7 % 24 for i in range(n)], pa.int32()),
    }), tmp_path / "data" / "trips" / "part-0.parquet")
    spark.createDataFrame(pa.table({"dest": [f"D{i}" for i in range(12)]})) \
        .createOrReplaceTempView("airports")
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    # the JVM keeps its own working folder: Spark's paths are made absolute
    code = spark_example()
    for path in ('"data/trips/"', '"trips_dp.parquet"'):
        assert path in code
        code = code.replace(path, repr(str(tmp_path / path.strip('"'))))
    try:
        exec(compile(code, "README.md (Spark)", "exec"), namespace)
    finally:
        spark.catalog.dropTempView("airports")
    written = spark.read.parquet(str(tmp_path / "trips_dp.parquet"))
    assert written.groupBy().sum("count").collect()[0][0] == n
    assert namespace["plan"].column("column").to_pylist() == ["origin", "dest", "hour"]
    assert (tmp_path / "budget.duckdb").exists()
