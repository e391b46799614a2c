"""Large public domains kept on the executors: coded, checked and decoded where the values are.

A level whose domain has more than :data:`DRIVER_VALUES` values never comes to the driver and
never travels inside a task: the values stay a DataFrame (:class:`Spread`), the leaves are coded
against it by a join (:func:`inftda_duckdb.spark.leaves.coded`), the released codes are decoded
by a join (:func:`inftda_duckdb.spark.descent.descend`), and the checks are aggregates whose
results are a few numbers and at most :data:`.domains.EXAMPLES` values. Only public data goes
through here; the sizes decided on are public (a declared list's length, or the distinct values
of a domain table, counted by one small job).

The codes are the ones every engine gives (:mod:`inftda_duckdb.core.domains`):

- a declared list (``domains``): a value's position in the list. Its labels go to the executors
  once (a ``range`` is generated there) and are converted to the column's type there by
  ``try_cast``, as the driver's path does.
- a domain table's column, or the data (``domain_from_data``): the rank of the value among the
  sorted distinct values, computed on the executors (:func:`_ranked`): range-partitioned and
  sorted, each value's position in its partition plus the values of the partitions before it
  (one small job counts each partition). The ranked values are pinned (:mod:`.pins`) first, so
  that every use reads the same ranking.

A domain table that nests the first levels of the hierarchy (levels 1..m, in order) and lists
more than :data:`DRIVER_VALUES` combinations stays on the executors too (:class:`Nested`): its
levels' values are ranked there, its rows coded by joins and checked by aggregates; the allowed
children of its levels above the cut come to the driver (at most the cut's cells), and those of
the levels below travel with the subtrees, in the same shuffle as their leaves
(:func:`inftda_duckdb.spark.descent.descend`): a subtree's key is its codes at the first levels,
which the table lists. Any other nesting (not of the first levels, or with the estimator
``'least_squares'``, which noises every allowed cell) comes to the driver (:mod:`.domains`,
within ``maxResultSize`` by :mod:`.gather`), with the declared lists checked against a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.errors import InputError
from ..core.request import Labels
from . import pins
from .sessions import parallelism

DRIVER_VALUES = 1 << 16
"""A domain of more values stays on the executors (public sizes decide)."""
EXAMPLES = 5
"""Values quoted in an error message, as in DuckDB's checks (every Spark domain check)."""
_LONG = 1 << 62  # a range whose ends pass this is generated from its labels' text instead


@dataclass
class Spread:
    """One level's domain on the executors: ``values`` holds the typed values ``v`` (and, for a
    declared list, ``code``, the position); ``size`` the number of distinct non-NULL values."""

    values: DataFrame
    size: int
    positional: bool
    _ranked: list[tuple[DataFrame, DataFrame]] = field(default_factory=list, repr=False)

    def coded(self) -> DataFrame:
        """The values and their codes ``(v, code INT)``, hinted for a shuffled hash join (a
        broadcast would bring them to the driver first). Ranked at the first call."""
        if self.positional:
            return self.values.select("v", "code").hint("shuffle_hash")
        if not self._ranked:
            self._ranked.append(_ranked(self.values, self.size))
        return self._ranked[0][0].hint("shuffle_hash")

    def pinned(self) -> list[DataFrame]:
        """The pinned ranking, once made (freed with the release's other pinned data)."""
        return [pinned for _, pinned in self._ranked]


def column_check(kind: T.DataType, size: int, bad: int = 0,
                 bad_examples: list[str] | None = None, dups: int = 0) -> dict[str, Any]:
    """One level's domain check, as DuckDB's ``@column_check`` reports it (every Spark domain,
    on the driver or the executors): ``size`` valid values, ``bad`` labels that do not convert
    (the first ``bad_examples``), ``dups`` values that repeat after the conversion."""
    return {"type": kind.simpleString().upper(), "size": size, "bad": bad,
            "bad_examples": bad_examples or [], "dups": dups}


def of_list(spark: SparkSession, labels: Labels, kind: T.DataType
            ) -> tuple[Spread, dict[str, Any]]:
    """A declared list on the executors, and its check (``size``, ``bad``, ``bad_examples``,
    ``dups``, as :func:`.domains.column_check` computes it on the driver): one job, and one
    more for the first labels that do not convert when some do not."""
    if isinstance(labels, range) and max(abs(labels.start), abs(labels.stop)) < _LONG:
        frame = spark.range(len(labels)).select(
            (F.lit(labels.start) + F.col("id") * F.lit(labels.step)).cast("string").alias("l"),
            F.col("id").cast("int").alias("code"))
    else:
        texts = [str(x) for x in labels] if isinstance(labels, range) else list(labels)
        frame = spark.createDataFrame(pa.table({
            "l": pa.array(texts, pa.string()),
            "code": pa.array(np.arange(len(texts), dtype=np.int32))}))
    v = F.col("l") if isinstance(kind, T.StringType) else F.col("l").try_cast(kind)
    frame = frame.select(v.alias("v"), "code", "l")
    valid, distinct = frame.agg(F.count("v"), F.count_distinct("v")).collect()[0]
    bad = len(labels) - int(valid)
    examples = [] if not bad else [
        r[0] for r in frame.where(F.col("v").isNull()).orderBy("code").select("l")
        .limit(EXAMPLES).collect()]
    check = column_check(kind, int(valid), bad, examples, int(valid) - int(distinct))
    return Spread(frame.select("v", "code"), int(valid), positional=True), check


def of_table(rows: DataFrame) -> tuple[Spread, int, list[str]]:
    """A one-column domain table on the executors from its distinct rows ``(w, s)`` (the value
    converted to the column's type, NULL when it does not convert; its text): the spread values,
    the rows that do not convert (defects) and the first of them as text (one job, and one more
    when there are defects)."""
    w = F.col("w")
    size, defects = rows.agg(F.count_distinct(w),
                             F.count(F.when(w.isNull(), F.lit(1)))).collect()[0]
    examples = [] if not defects else [
        "NULL" if r[0] is None else str(r[0])
        for r in rows.where(w.isNull()).select("s").orderBy("s").limit(EXAMPLES).collect()]
    spread = Spread(rows.select(w.alias("v")).where(F.col("v").isNotNull()), int(size),
                    positional=False)
    return spread, int(defects), examples


def of_values(values: DataFrame) -> Spread:
    """The distinct non-NULL values of column ``v`` (the data, with ``domain_from_data``) on
    the executors (one job counts them)."""
    v = F.col("v")
    kept = values.where(v.isNotNull())
    return Spread(kept, int(kept.agg(F.count_distinct(v)).collect()[0][0]), positional=False)


def _ranked(values: DataFrame, size: int) -> tuple[DataFrame, DataFrame]:
    """``(v, code)``: each distinct value of ``v`` with its rank in ascending order, computed on
    the executors, and the pinned DataFrame it reads. Partition p of a range partitioning holds
    the p-th range of values, sorted; ``monotonically_increasing_id`` numbers its rows from
    ``p << 33``; the one job that pins the rows counts each partition's, so a value's rank is its
    number within its partition plus the rows of the partitions before it. The values must
    still be the ``size`` the checks counted (a domain table changed in between would shift the
    codes): refused otherwise, before the charge (the leaves are coded first)."""
    v = F.col("v")
    ordered = (values.select(v).distinct()
               .repartitionByRange(parallelism(values.sparkSession), v)
               .sortWithinPartitions(v)
               .select(v, F.spark_partition_id().alias("p"),
                       F.monotonically_increasing_id().alias("i")))
    pinned = pins.pin(ordered)
    counts = sorted((int(p), int(n)) for p, n in pinned.groupBy("p").count().collect())
    starts, total = [], 0
    for p, n in counts:
        starts.append(f"{p}, {total}L")
        total += n
    if total != size:
        raise InputError(
            f"a public domain changed while the release read it: {size:,} distinct values when "
            f"checked, {total:,} when coded; nothing was charged. Fix: do not change a domain "
            "table during a release, or pass a snapshot (e.g. a cached or written copy)")
    start = F.expr(f"map({', '.join(starts)})[p]") if starts else F.lit(0)
    code = (start + F.col("i") - F.shiftleft(F.col("p").cast("long"), 33)).cast("int")
    return pinned.select(v, code.alias("code")), pinned


@dataclass(frozen=True)
class Nested:
    """A domain table that nests the first levels of the hierarchy (levels 1..m, in order) and
    lists more than :data:`DRIVER_VALUES` combinations, on the executors: ``codes`` holds its
    distinct rows coded, pinned (``c0..c{m-1}``, NULL for a value outside the level's domain;
    ``t`` the row as text, for the checks' examples)."""

    codes: DataFrame
    width: int

    def listed(self, width: int | None = None) -> DataFrame:
        """The distinct valid combinations ``(c0, ..., c{width-1})`` (default: every level):
        the allowed children of level ``width - 1`` under their parents' codes."""
        names = [f"c{j}" for j in range(self.width)]
        return self.codes.where(_all_coded(self.width)).select(
            *names[: width or self.width]).distinct()


def of_nest(rows: DataFrame, frames: list[DataFrame], first_size: int
            ) -> tuple[Nested, dict[str, Any]]:
    """A nesting domain table on the executors from its distinct rows (``w{j}``, ``s{j}``: a
    level's value converted to its type, and its text) and its levels' ``(v, code)`` frames:
    the coded rows, pinned, and the check :func:`.domains.code_nest` computes on the driver
    (defects, orphans of the first level (``first_size`` values), nodes per level), from one
    aggregate, and one more job per kind of example when a check fails."""
    width = len(frames)
    coded = rows
    for j, frame in enumerate(frames):
        coded = coded.join(frame.select(F.col("v").alias(f"v{j}"), F.col("code").alias(f"c{j}")),
                           F.col(f"w{j}") == F.col(f"v{j}"), "left")
    text = F.concat_ws(", ", *[F.coalesce(F.col(f"s{j}"), F.lit("NULL")) for j in range(width)])
    nested = Nested(pins.pin(coded.select(*[F.col(f"c{j}") for j in range(width)],
                                          text.alias("t"))), width)
    ok = _all_coded(width)
    found = nested.codes.agg(
        F.count(F.when(~ok, F.lit(1))),
        F.count_distinct(F.when(ok, F.col("c0"))),
        *[F.count_distinct(F.when(ok, F.struct(*[F.col(f"c{i}") for i in range(j + 1)])))
          for j in range(width)]).collect()[0]
    defects, firsts, nodes = int(found[0]), int(found[1]), [int(x) for x in found[2:]]
    defect_examples = [] if not defects else [
        r[0] for r in nested.codes.where(~ok).select("t").orderBy("t").limit(EXAMPLES).collect()]
    orphans = first_size - firsts
    orphan_examples = [] if not orphans else [
        r[0] for r in frames[0].join(nested.listed(1).select(F.col("c0").alias("code")), "code",
                                     "left_anti")
        .orderBy("code").select(F.col("v").cast("string")).limit(EXAMPLES).collect()]
    check = {"defects": defects, "defect_examples": defect_examples, "orphans": orphans,
             "orphan_examples": orphan_examples, "outside": 0, "outside_examples": [],
             "nodes": nodes}
    return nested, check


def _all_coded(width: int) -> Column:
    """A coded row of a nesting whose every level's value is in its domain (codes ``c0..``)."""
    ok: Column = F.lit(True)
    for j in range(width):
        ok = ok & F.col(f"c{j}").isNotNull()
    return ok
