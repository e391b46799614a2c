"""One local[2] SparkSession for every Spark test (starting one costs 15-25 s).

Every Spark test runs under ``spark.driver.maxResultSize=1m``: whatever a release collects to
the driver (public domains, the true counts above the cut, the checks) must stay below it.
The master is ``local[2, 2]``: local mode on 2 cores that retries a failed task once (so that a
test can fail a task on purpose and watch Spark recompute it). The tests need the ``spark``
extra; without PySpark they are skipped (the modules call ``pytest.importorskip``).
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    # the executors' Python: this interpreter (its venv has numpy, pyarrow and the package)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2, 2]")
        .appName("inftda-duckdb tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.maxResultSize", "1m")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture()
def driver_traffic(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """The most rows any collection of a DataFrame brought to the driver (``toArrow``,
    ``collect``, ``toPandas``) and the largest pickled ``mapInArrow`` function (what each task
    of that stage receives), while the test runs."""
    from pyspark import cloudpickle

    seen = {"rows": 0, "job_bytes": 0}
    cls = type(spark.range(1))

    def watch(name: str, rows: Any) -> None:
        original = getattr(cls, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            seen["rows"] = max(seen["rows"], int(rows(out)))
            return out

        monkeypatch.setattr(cls, name, wrapper)

    watch("toArrow", lambda t: t.num_rows)
    watch("collect", len)
    watch("toPandas", len)
    map_in_arrow = cls.mapInArrow

    def mapped(self: Any, function: Any, *args: Any, **kwargs: Any) -> Any:
        size = len(cloudpickle.dumps(function, protocol=pickle.HIGHEST_PROTOCOL))
        seen["job_bytes"] = max(seen["job_bytes"], size)
        return map_in_arrow(self, function, *args, **kwargs)

    monkeypatch.setattr(cls, "mapInArrow", mapped)
    yield seen
