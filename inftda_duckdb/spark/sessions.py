"""What a release asks of its Spark session, on a classic session or a Spark Connect one.

A Spark Connect session (``SparkSession.builder.remote(...)``: Databricks' Standard and Serverless
compute, any ``sc://`` server) has no ``sparkContext``: the driver's JVM is on the server. Every
use a release makes of the session goes through this module, which asks a classic session's
SparkContext and a Connect session's configuration (or a small job) the same questions.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import functions as F

from ..core.errors import bad_argument

_LOCAL_CORES = re.compile(r"\s*local\[(\d+)(,\s*\d+)?\]\s*", re.IGNORECASE)


def positive_setting(spark: Any, key: str, example: int) -> int | None:
    """A release's own Spark setting (``spark.conf.set(key, ...)``) that must be a positive
    integer: None when unset. Read before anything is charged, so a bad value changes
    nothing."""
    text = spark.conf.get(key, None)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise bad_argument(key, text, "must be a positive integer",
                           f"unset it, or spark.conf.set('{key}', '{example}')")
    return int(text)


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (no SparkContext in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def master(spark: Any) -> str:
    """The master URL the session's driver runs on (``local[2]``, ``yarn``, ``spark://...``)."""
    if is_connect(spark):
        return str(spark.conf.get("spark.master", "") or "")
    return str(spark.sparkContext.master)


def parallelism(spark: Any) -> int:
    """The cores Spark schedules tasks on by default (``defaultParallelism``). On Connect: the
    setting if set, else ``local[N]``'s N, else the partitions of a ``range`` (one small job)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    text = spark.conf.get("spark.default.parallelism", None)
    if text and text.strip().isdigit():
        return max(1, int(text))
    local = _LOCAL_CORES.fullmatch(master(spark))
    if local:
        return max(1, int(local.group(1)))
    row = spark.range(0, 1 << 10).agg(F.max(F.spark_partition_id())).collect()[0]
    return max(1, int(row[0] or 0) + 1)


def checkpoint_dir(spark: Any) -> str | None:
    """The session's reliable checkpoint directory, if it has one."""
    if is_connect(spark):
        return spark.conf.get("spark.checkpoint.dir", None) or None
    found = spark.sparkContext.getCheckpointDir()
    return None if found is None else str(found)


_BYTES = re.compile(r"\s*(\d+)\s*([kmgtp]?)i?b?\s*", re.IGNORECASE)


def result_limit(spark: Any) -> int | None:
    """``spark.driver.maxResultSize`` in bytes (Spark's default 1g; ``None``: 0, no limit): the
    most one job may bring back to the driver."""
    text = str(spark.conf.get("spark.driver.maxResultSize", "1g") or "1g")
    found = _BYTES.fullmatch(text)
    if found is None:
        return 1 << 30
    size = int(found.group(1)) << (10 * "bkmgtp".index(found.group(2).lower() or "b"))
    return size or None
