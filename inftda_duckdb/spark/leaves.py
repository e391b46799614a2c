"""The only scans of the private data: the leaf GROUP BY, coded by the public domains, pinned.

Algorithm 1 needs the true count of every non-empty leaf (c1..cd). Spark computes them in one
GROUP BY over the source (a privacy unit adds a window that keeps at most ``m`` rows per unit,
as DuckDB does), codes each level's values against its public domain (broadcast joins with the
small value tables of :mod:`.domains`), and **pins** the result: ``checkpoint`` (reliable, when
the SparkContext has a checkpoint directory) or ``localCheckpoint`` (executor storage; a lost
executor then fails the job instead of re-reading data that may have changed). Every later job
of the release, and every re-evaluation of the released DataFrame, starts from the pinned leaves.

A pinned leaf is ``(key, n, flags[, outside][, nulls_unit])``: ``key`` the mixed-radix key of its
codes ``((c1 * s2 + c2) * s3 + ...)`` (NULL for a row that is not kept), ``n`` its count, and
``flags`` NULL for a clean row, else bit ``k`` for a NULL in column k and bit ``32 + k`` for a
value outside column k's domain; ``outside`` has bit t for a combination that domain table t does
not list. When the key would pass 2**62 the codes travel as columns ``k1..kd`` instead.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..core.request import ReleaseRequest
from ..core.topdown import MAX_KEY_SPAN
from .domains import EXAMPLES, Domains, Source, col, key_span

UNIT_SEPARATOR = "\x1f"
"""Between the parts of a seeded unit-clipping key (DuckDB's ``chr(31)``)."""


def seeded_order_key(seed: int, columns: list[Any]) -> Any:
    """The seeded order of rows within a privacy unit, the same text DuckDB hashes:
    ``md5(seed, 'v' || value or 'n' for NULL, ...)`` joined by U+001F."""
    parts = [F.coalesce(F.concat(F.lit("v"), c.cast("string")), F.lit("n")) for c in columns]
    return F.md5(F.concat_ws(UNIT_SEPARATOR, F.lit(str(seed)), *parts))


def raw_leaves(request: ReleaseRequest, source: Source) -> DataFrame:
    """Counts of the distinct raw leaves ``(r1..rd, n[, nulls_unit])``: the one GROUP BY."""
    cols = [col(f.name) for f in source.fields]
    raw = [c.alias(f"r{k}") for k, c in enumerate(cols, 1)]
    names = [f"r{k}" for k in range(1, request.depth + 1)]
    if source.unit is None:
        return source.frame.select(*raw).groupBy(*names).agg(F.count(F.lit(1)).alias("n"))
    # a unit contributes at most m rows, chosen at random within the unit (seeded: by the
    # same md5 order as DuckDB); rows with a NULL unit are never pooled: all are kept and
    # counted (refused before charging), or dropped with unknown='drop'
    order = F.rand() if request.seed is None else seeded_order_key(request.seed, cols)
    keyed = source.frame.select(*raw, col(source.unit.name).alias("u"), order.alias("o"))
    rn = F.row_number().over(Window.partitionBy("u").orderBy("o"))
    kept = keyed.withColumn("rn", rn).where(
        (F.col("rn") <= request.max_rows_per_unit) | F.col("u").isNull()
    )
    if request.unknown == "drop":
        kept = kept.where(F.col("u").isNotNull())
    return kept.groupBy(*names).agg(
        F.count(F.lit(1)).alias("n"),
        F.count(F.when(F.col("u").isNull(), 1)).alias("nulls_unit"),
    )


def keyed(domains: Domains) -> bool:
    """Leaves travel as one mixed-radix BIGINT key when the domains' product fits."""
    return key_span(domains.sizes) < MAX_KEY_SPAN


def coded(spark: SparkSession, request: ReleaseRequest, domains: Domains,
          raw: DataFrame) -> DataFrame:
    """The raw leaves coded by the public domains (the layout in the module docstring)."""
    d = request.depth
    frame = raw
    for k in range(d):
        values = domains.frame(spark, k).withColumnRenamed("v", f"v{k}") \
            .withColumnRenamed("code", f"c{k}")
        frame = frame.join(F.broadcast(values), F.col(f"r{k + 1}") == F.col(f"v{k}"), "left")
    nested = []
    for t, nest in enumerate(domains.plan.nestings):
        ok = domains.nest_frame(spark, t).select(
            *[F.col(f"c{j}").alias(f"o{t}_{j}") for j in range(len(nest.levels))])
        on = [F.col(f"c{k}") == F.col(f"o{t}_{j}") for j, k in enumerate(nest.levels)]
        frame = frame.join(F.broadcast(ok.withColumn(f"ok{t}", F.lit(True))), on, "left")
        nested.append(F.col(f"ok{t}").isNotNull())
    codes = [F.col(f"c{k}") for k in range(d)]
    clean = F.lit(True)
    for c in codes:
        clean = clean & c.isNotNull()
    kept = clean
    for ok_t in nested:
        kept = kept & ok_t
    flags = F.lit(0).cast("long")
    for k in range(d):
        null = F.col(f"r{k + 1}").isNull()
        flags = flags + F.when(null, F.lit(1 << k)).otherwise(0).cast("long")
        unknown = F.col(f"c{k}").isNull() & ~null
        flags = flags + F.when(unknown, F.lit(1 << (32 + k))).otherwise(0).cast("long")
    out = [
        F.when(kept, _key(codes, domains.sizes)).alias("key")
        if keyed(domains) else F.lit(None).cast("long").alias("key"),
        F.col("n"),
        F.when(~clean, flags).alias("flags"),
    ]
    if not keyed(domains):
        out += [F.when(kept, c).alias(f"k{k + 1}") for k, c in enumerate(codes)]
    if nested:
        outside = F.lit(0)
        for t, ok_t in enumerate(nested):
            outside = outside + F.when(clean & ~ok_t, F.lit(1 << t)).otherwise(0)
        out.append(F.when(clean & ~kept, outside).alias("outside"))
    if request.privacy_unit is not None:
        out.append(F.col("nulls_unit"))
    return frame.select(*out)


def _key(codes: list[Any], sizes: list[int]) -> Any:
    key = codes[0].cast("long")
    for c, size in zip(codes[1:], sizes[1:], strict=True):
        key = key * F.lit(size).cast("long") + c
    return key


def is_kept(domains: Domains) -> Any:
    """The condition of a kept leaf on the pinned layout."""
    return F.col("key").isNotNull() if keyed(domains) else F.col("k1").isNotNull()


def pin(frame: DataFrame) -> DataFrame:
    """Materialise now and cut the lineage: a reliable checkpoint when a checkpoint directory
    is set, else a local one (a lost executor then fails the job; it never re-reads data)."""
    if frame.sparkSession.sparkContext.getCheckpointDir() is not None:
        return frame.checkpoint(eager=True)
    return frame.localCheckpoint(eager=True)


def stats(request: ReleaseRequest, domains: Domains, leaves: DataFrame) -> dict[str, Any]:
    """ONE aggregate over the pinned leaves: rows, rows kept, kept leaves, per column NULLs and
    undeclared values, per nesting rows outside, NULL units (the data part of the checks)."""
    d = request.depth
    n = F.col("n")

    def total(cond: Any) -> Any:
        return F.coalesce(F.sum(F.when(cond, n)), F.lit(0))

    flags = F.col("flags")
    aggs = [
        F.coalesce(F.sum(n), F.lit(0)).alias("n"),
        total(is_kept(domains)).alias("kept"),
        F.count(F.when(is_kept(domains), 1)).alias("leaves"),
    ]
    for k in range(d):
        aggs.append(total((flags.bitwiseAND(1 << k)) != 0).alias(f"nulls{k + 1}"))
        aggs.append(total((flags.bitwiseAND(1 << (32 + k))) != 0).alias(f"unknown{k + 1}"))
    for t in range(len(domains.plan.nestings)):
        aggs.append(total((F.col("outside").bitwiseAND(1 << t)) != 0).alias(f"outside{t}"))
    if request.privacy_unit is not None:
        aggs.append(F.coalesce(F.sum("nulls_unit"), F.lit(0)).alias("nulls_unit"))
    row = leaves.agg(*aggs).collect()[0].asDict()
    return {k: int(v) for k, v in row.items()}


def checks_json(request: ReleaseRequest, domains: Domains, data: dict[str, Any],
                examples: dict[str, list[str]]) -> str:
    """The check row in the form :func:`inftda_duckdb.duckdb.domain.raise_for_checks` reads."""
    stats_row: dict[str, Any] = {"n": data["n"], "kept": data["kept"],
                                 "nulls_unit": data.get("nulls_unit", 0)}
    for k in range(1, request.depth + 1):
        stats_row[f"nulls{k}"] = data[f"nulls{k}"]
        stats_row[f"unknown{k}"] = data[f"unknown{k}"]
        stats_row[f"examples{k}"] = examples.get(f"r{k}", [])
    nestings = []
    for t, check in enumerate(domains.checks["nestings"]):
        nestings.append(dict(check, outside=data[f"outside{t}"],
                             outside_examples=examples.get(f"o{t}", [])))
    return json.dumps({"stats": stats_row, "columns": domains.checks["columns"],
                       "nestings": nestings})


def examples(request: ReleaseRequest, domains: Domains, raw: DataFrame, spark: SparkSession,
             data: dict[str, Any]) -> dict[str, list[str]]:
    """For a failing check only: the first values outside a domain (sorted, as text), and the
    first combinations a domain table does not list. Read from the raw leaves' lineage: nothing
    is released or charged on this path."""
    found: dict[str, list[str]] = {}
    for k in range(request.depth):
        if data[f"unknown{k + 1}"] == 0:
            continue
        values = domains.frame(spark, k)
        r = F.col(f"r{k + 1}")
        bad = raw.join(F.broadcast(values), r == F.col("v"), "left_anti").where(r.isNotNull())
        rows = bad.select(r).distinct().orderBy(r).limit(EXAMPLES).collect()
        found[f"r{k + 1}"] = [_text(row[0]) for row in rows]
    for t, nest in enumerate(domains.plan.nestings):
        if data[f"outside{t}"] == 0:
            continue
        text = F.concat_ws(", ", *[F.col(f"r{k + 1}").cast("string") for k in nest.levels])
        rebuilt = raw.select(*[F.col(f"r{k + 1}") for k in range(request.depth)], text.alias("t"))
        rows = _outside(spark, domains, t, rebuilt).select("t").distinct() \
            .orderBy("t").limit(EXAMPLES).collect()
        found[f"o{t}"] = [row[0] for row in rows]
    return found


def _outside(spark: SparkSession, domains: Domains, t: int, frame: DataFrame) -> DataFrame:
    """Rows of ``frame`` whose levels of nesting t all have codes but are not listed."""
    nest = domains.plan.nestings[t]
    for k in nest.levels:
        values = domains.frame(spark, k).withColumnRenamed("v", f"v{k}") \
            .withColumnRenamed("code", f"c{k}")
        frame = frame.join(F.broadcast(values), F.col(f"r{k + 1}") == F.col(f"v{k}"), "inner")
    ok = domains.nest_frame(spark, t)
    ok = ok.select(*[F.col(f"c{j}").alias(f"o{j}") for j in range(len(nest.levels))])
    on = [F.col(f"c{k}") == F.col(f"o{j}") for j, k in enumerate(nest.levels)]
    return frame.join(F.broadcast(ok), on, "left_anti")


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
