"""The client side of tests/spark/test_spark_connect.py, run in a process of its own (a process
that has made a classic SparkContext cannot also make a Spark Connect session):

    python tests/spark/connect_client.py sc://localhost:PORT FOLDER

On a session from ``SparkSession.builder.remote(URL)``: every pinned seeded release
(:mod:`tests.pinned`), written by Spark to FOLDER and read back, hashed; a preview; a ledger
charged once per release under the source's dataset; a table name; and Ctrl-C before and after
the charge. Prints one JSON object.
"""

from __future__ import annotations

import _thread
import json
import os
import sys
import threading
import time
import warnings
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pinned
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from inftda_duckdb import spark as inftda_spark
from inftda_duckdb.core.errors import ReleaseInterrupted
from inftda_duckdb.ledger import Ledger
from inftda_duckdb.spark.jobs import Run, run_tagged


def rows_of(folder: str) -> list[tuple[Any, ...]]:
    table = pq.read_table(folder)
    return [tuple(r.values()) for r in table.to_pylist()]


def interrupted(spark: Any, work: Any) -> dict[str, Any]:
    """Ctrl-C in this thread 3 s after ``work`` starts: what the error says."""
    timer = threading.Timer(3.0, _thread.interrupt_main)
    timer.start()
    start = time.monotonic()
    try:
        work()
    except ReleaseInterrupted as stopped:
        return {"charged": stopped.charged, "text": str(stopped),
                "seconds": time.monotonic() - start}
    finally:
        timer.cancel()
    return {"charged": None, "text": "not interrupted", "seconds": time.monotonic() - start}


def main(url: str, folder: str) -> None:
    warnings.simplefilter("ignore")
    spark = SparkSession.builder.remote(url).getOrCreate()
    out: dict[str, Any] = {"connect": type(spark).__module__, "digests": {}}
    book = Ledger.open(os.path.join(folder, "budget.duckdb"))
    trips = os.path.join(folder, "trips")
    spark.createDataFrame(pinned.trips()).write.parquet(trips)
    frame = spark.read.parquet(trips)
    for i, (case, options) in enumerate(pinned.CASES.items()):
        options = dict(options)
        if "domain_tables" in options:
            options["domain_tables"] = [spark.createDataFrame(pinned.geo())]
        result = inftda_spark.release(frame, pinned.COLUMNS, seed=pinned.SEED, ledger=book,
                                      **options)
        result.write.parquet(os.path.join(folder, f"out{i}"))
        out["digests"][case] = pinned.digest(rows_of(os.path.join(folder, f"out{i}")))
    out["keys"] = book.rows().column("source_key").to_pylist()
    out["preview"] = inftda_spark.preview(frame, pinned.COLUMNS, rho=1,
                                          domains=pinned.FLAT).to_pylist()
    frame.createOrReplaceTempView("connect_trips")
    named = inftda_spark.release("connect_trips", ["origin"], rho=1, ledger=":memory:",
                                 domains={"origin": pinned.ORIGINS}, seed=1)
    out["named_total"] = named.agg(F.sum("count")).collect()[0][0]

    def slow(i: int) -> str:
        time.sleep(0.5)
        return f"v{i % 3}"

    udf = F.udf(slow, "string", useArrow=False)
    slow_frame = spark.range(0, 40, numPartitions=2).select(udf(F.col("id")).alias("c"))
    out["before_charge"] = interrupted(spark, lambda: inftda_spark.release(
        slow_frame, ["c"], rho=1, domains={"c": ["v0", "v1", "v2"]}, ledger=book,
        source_name="slow", seed=1))
    out["after_charge"] = interrupted(spark, lambda: run_tagged(
        spark, lambda _: slow_frame.write.parquet(os.path.join(folder, "slow")),
        Run(charged="rho 1 on name:slow", ledger_id=7)))
    out["charges"] = book.rows().num_rows
    out["still_works"] = spark.range(3).count()
    spark.stop()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
