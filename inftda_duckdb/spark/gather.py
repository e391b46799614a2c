"""Public data brought to the driver within ``spark.driver.maxResultSize``, however large.

Domains are public and held on the driver (:mod:`.domains`): the leaves are coded against them
and the executors decode the released codes with them. Bringing a large one back in ONE job (a
domain table of 200,000 rows, a list of 200,000 labels cast by Spark) would pass a small
``maxResultSize`` (``1m``) and fail the release before its charge. So a collection whose result
may pass a quarter of the limit is split into several jobs, each bringing back at most about that
much: a local table by row ranges (its order kept), a DataFrame by a hash of its rows (one small
job first sums the rows' sizes). Likewise a broadcast join first collects its small side on the
driver: the public tables the leaves are joined with (:func:`local`) are broadcast only while
they stay within that share, else joined by a shuffled hash join. Only public data goes through
here, and only domains of at most :data:`.spread.DRIVER_VALUES` values: larger ones stay on the
executors (:mod:`.spread`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .sessions import result_limit

SHARE = 4
"""A job brings back at most about a SHARE-th of ``maxResultSize``."""
VALUE_BYTES = 16
"""Added to each value's text length in the estimate of a result's size (a BIGINT or DOUBLE is
8 bytes in Arrow, a DECIMAL 16, a string its bytes plus a 4-byte offset)."""


def rows_of(spark: SparkSession, table: pa.Table, select: Callable[[DataFrame], DataFrame]
            ) -> pa.Table:
    """``select(spark.createDataFrame(table)).toArrow()`` (a row-wise ``select``: one output row
    per input row, in order), in as many jobs as keep each result within the share."""
    share = _share(spark)
    parts = 1 if share is None else max(1, math.ceil(_size(table) / share))
    step = max(1, math.ceil(table.num_rows / parts))
    done = [select(spark.createDataFrame(table.slice(lo, step))).toArrow()
            for lo in range(0, max(1, table.num_rows), step)]
    return done[0] if len(done) == 1 else pa.concat_tables(done)


def local(spark: SparkSession, table: pa.Table) -> DataFrame:
    """``spark.createDataFrame(table)`` (public data), hinted for the joins that read it:
    ``broadcast`` while its size stays within the share, else ``shuffle_hash`` (a hint reaches
    the join through selections and renames)."""
    frame = spark.createDataFrame(table)
    share = _share(spark)
    if share is None or _size(table) <= share:
        return F.broadcast(frame)
    return frame.hint("shuffle_hash")


def distinct_rows(frame: DataFrame, most: int | None = None) -> pa.Table | None:
    """``frame.distinct().toArrow()``, in as many jobs as keep each result within the share
    (split by a hash of the row; the rows come in no particular order). ``most``: None, and no
    collection at all, when there are more distinct rows than that (counted in the job that
    sums their sizes)."""
    frame = frame.distinct()
    share = _share(frame.sparkSession)
    if share is None and most is None:
        return frame.toArrow()
    size: Column = F.lit(VALUE_BYTES * len(frame.columns))
    for c in frame.columns:
        size = size + F.coalesce(F.octet_length(F.col(_quoted(c)).cast("string")), F.lit(0))
    total, rows = frame.agg(F.sum(size), F.count(F.lit(1))).collect()[0]
    if most is not None and int(rows) > most:
        return None
    parts = 1 if share is None else max(1, math.ceil(int(total or 0) / share))
    if parts == 1:
        return frame.toArrow()
    frame = frame.cache()
    try:
        part = F.pmod(F.xxhash64(*[F.col(_quoted(c)) for c in frame.columns]), F.lit(parts))
        return pa.concat_tables([frame.where(part == i).toArrow() for i in range(parts)])
    finally:
        frame.unpersist()


def _size(table: pa.Table) -> int:
    return int(table.nbytes) + VALUE_BYTES * table.num_rows * max(1, table.num_columns)


def _share(spark: SparkSession) -> int | None:
    limit = result_limit(spark)
    return None if limit is None else max(1, limit // SHARE)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
