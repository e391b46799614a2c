"""One local[2] SparkSession for every Spark test (starting one costs 15-25 s).

Every Spark test runs under ``spark.driver.maxResultSize=1m``: whatever a release collects to
the driver (public domains, the true counts above the cut, the checks) must stay below it.
The master is ``local[2, 2]``: local mode on 2 cores that retries a failed task once (so that a
test can fail a task on purpose and watch Spark recompute it). The tests need the ``spark``
extra; without PySpark they are skipped (the modules call ``pytest.importorskip``).
"""

from __future__ import annotations

import os
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
