"""The only scans of the private data: the leaf GROUP BY, coded by the public domains, pinned.

Algorithm 1 needs the true count of every non-empty leaf (c1..cd). Spark computes them in one
GROUP BY over the source (a privacy unit adds a window that keeps at most ``m`` rows per unit,
as DuckDB does); :func:`coded` codes each level's values against its public domain (broadcast
hash joins with small local tables, shuffled ones past :mod:`.gather`'s share of
``spark.driver.maxResultSize``, in the JVM, in the stage of the GROUP BY's final aggregation:
no Python worker, no extra job), and the result is **pinned** (:mod:`.pins`). :func:`summary`
is the one job that materialises the pinned leaves
and brings the driver the data checks and the true counts above the cut. Every later job of the
release, and every re-evaluation of the released DataFrame, starts from the pinned leaves.

A pinned leaf is ``(key, n, flags[, outside][, nulls_unit, read_unit])``: ``key`` the
mixed-radix key of its codes ``((c1 * s2 + c2) * s3 + ...)`` (NULL for a row that is not kept),
``n`` its count, and ``flags`` NULL for a clean row, else bit ``k`` for a NULL in column k and bit
``32 + k`` for a value outside column k's domain; ``outside`` has bit t for a combination that
domain table t does not list; ``read_unit`` (a privacy unit) the rows its units had before the
cap (the curator's notice, :func:`inftda_duckdb.core.release.unit_cap_text`). When the key would
pass 2**62 the codes travel as columns ``k1..kd`` instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core import units
from ..core.request import ReleaseRequest
from ..core.tree import MAX_KEY_SPAN
from . import gather
from .domains import Domains, Source, col, key_span
from .spread import EXAMPLES


def raw_leaves(request: ReleaseRequest, source: Source) -> DataFrame:
    """Counts of the distinct raw leaves ``(r1..rd, n[, nulls_unit, read_unit])``: the one
    GROUP BY."""
    raw = [col(f.name).alias(f"r{k}") for k, f in enumerate(source.fields, 1)]
    names = [f"r{k}" for k in range(1, request.depth + 1)]
    if source.unit is None:
        return source.frame.select(*raw).groupBy(*names).agg(F.count(F.lit(1)).alias("n"))
    kept = _capped(request, source.frame.select(*raw, col(source.unit.name).alias("u")), names)
    return kept.groupBy(*names).agg(
        F.sum("w").alias("n"), F.coalesce(F.sum(F.when(F.col("u").isNull(), F.col("w"))),
                                          F.lit(0)).cast("long").alias("nulls_unit"),
        F.sum("read").cast("long").alias("read_unit"),
    )


def _capped(request: ReleaseRequest, rows: DataFrame, names: list[str]) -> DataFrame:
    """At most ``m`` rows per privacy unit, chosen by :mod:`inftda_duckdb.core.units`' keyed
    PRF exactly as DuckDB's ``@unit_source`` does (same row key, group text, SHA-256 and
    exponential keys): identical rows of a unit form a group of ``c``; its candidates
    ``i < min(c, m)`` get ``E_0 + ... + E_i``, ``E_i = -ln(U_i) / (c - i)``; each unit keeps its
    ``m`` smallest. Rows with a NULL unit are never pooled: all are kept (``w = c``) and counted
    (refused before charging), or dropped with ``unknown='drop'``. ``w``: rows per candidate;
    ``read``: the rows its unit had before the cap, on the unit's first candidate (0 on the
    others and for NULL units): each group's count on its first candidate, summed over the unit
    in the cap's own window (no other pass)."""
    key = units.row_key(request.seed)  # drawn on the driver, before the data is read
    m = request.max_rows_per_unit
    groups = rows.groupBy(*names, "u").agg(F.count(F.lit(1)).alias("c"))
    text = F.to_json(F.array(*[F.col(x).cast("string") for x in ["u", *names]]))
    c = F.col("c")

    def exp(i: Any) -> Any:  # E_i, from U_i = (int(sha256(K:i:G)[:13], 16) + 0.5) / 2**52
        digest = F.sha2(F.concat_ws(":", F.lit(key), i.cast("string"), F.col("g")), 256)
        u = (F.conv(F.substring(digest, 1, 13), 16, 10).cast("double") + 0.5) / float(1 << 52)
        return -F.log(u) / (c - i)

    exps = F.transform(F.sequence(F.lit(0), F.least(c, F.lit(m)) - 1), exp)
    sums = F.transform(F.sequence(F.lit(1), F.size("e")),
                       lambda j: F.aggregate(F.slice("e", 1, j), F.lit(0.0), lambda a, x: a + x))
    null = F.col("u").isNull()
    keyed = (groups.withColumn("g", text)
             .withColumn("e", F.when(null, F.array(F.lit(0.0))).otherwise(exps))
             .select(*names, "u", F.when(null, c).otherwise(1).alias("w"), "c",
                     F.posexplode(F.when(null, F.array(F.lit(0.0))).otherwise(sums))
                     .alias("i", "k")))
    unit = Window.partitionBy("u").orderBy("k")
    whole = unit.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    first = F.when(null | (F.col("i") > 0), F.lit(0)).otherwise(c)  # the group's rows, once
    kept = (keyed.withColumn("rn", F.row_number().over(unit))
            .withColumn("read", F.when(F.col("rn") == 1, F.sum(first).over(whole))
                        .otherwise(F.lit(0)))
            .where((F.col("rn") <= m) | null).drop("c", "i"))
    return kept.where(~null) if request.unknown == "drop" else kept


def keyed(domains: Domains) -> bool:
    """Leaves travel as one mixed-radix BIGINT key when the domains' product fits."""
    return key_span(domains.sizes) < MAX_KEY_SPAN


def _mixed(codes: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Mixed-radix keys of codes (one row per level)."""
    key = np.zeros(codes.shape[1], np.int64)
    for row, size in zip(codes, sizes, strict=True):
        key *= int(size)
        key += row
    return key


LITERAL_VALUES = 64
"""Domains up to this size are looked up in a literal map (linear, but no job); larger ones by a
broadcast hash join (one small job to broadcast the values)."""
LITERAL_KEYS = 4096
"""A domain table's listed combinations up to this many are checked by a hash set in the plan."""


def coded(request: ReleaseRequest, domains: Domains, raw: DataFrame) -> DataFrame:
    """The raw leaves coded by the public domains (the layout in the module docstring), in the
    JVM, in the stage of the GROUP BY's final aggregation (no Python worker): each level's values
    are looked up in its domain (a literal map for small domains, else a broadcast hash join, or
a shuffled one for a domain on the executors: :mod:`.spread`),
    the nested levels' combinations among the listed keys of their domain tables (a hash set,
    else a broadcast hash join). The expressions are SQL text where they can be: each Column
    built in Python costs the driver a few calls to the JVM."""
    spark = raw.sparkSession
    d, sizes = request.depth, domains.sizes
    frame = raw
    schema = raw.schema
    lookups = []
    for k in range(d):
        kind = schema[f"r{k + 1}"].dataType
        held = domains.values[k]  # None: on the executors (a shuffled join)
        if held is not None and len(held) <= LITERAL_VALUES:  # a literal map: no job at all
            lookups.append(_literal_map(held, kind)[F.col(f"r{k + 1}")].alias(f"c{k + 1}"))
            continue
        values = domains.frame(spark, k).select(F.col("v").cast(kind).alias(f"v{k + 1}"),
                                                F.col("code").alias(f"c{k + 1}"))
        frame = frame.join(values, F.col(f"r{k + 1}") == F.col(f"v{k + 1}"),
                           "left")
    bits = " | ".join(f"CASE WHEN r{k + 1} IS NULL THEN {1 << k}L WHEN c{k + 1} IS NULL "
                      f"THEN {1 << (32 + k)}L ELSE 0L END" for k in range(d))
    frame = frame.select("*", *lookups).withColumn(
        "flags", F.expr(f"CASE WHEN ({bits}) != 0 THEN {bits} END"))
    clean = F.col("flags").isNull()
    outside: Any = F.lit(0).cast("long")
    for t, nest in enumerate(domains.plan.nestings):
        if t in domains.nested:  # on the executors: a shuffled join on the codes
            frame, unlisted = _listed_codes(frame, clean, t, nest.levels,
                                            domains.nest_frame(spark, t).hint("shuffle_hash"))
            outside = outside.bitwiseOR(F.when(clean & unlisted, F.lit(1 << t))
                                        .otherwise(F.lit(0)).cast("long"))
            continue
        table = domains.nests[t]
        if table is None:  # one column on the executors: it lists every value of its domain
            continue
        table = table[:, (table >= 0).all(axis=0)]
        nest_sizes = [sizes[k] for k in nest.levels]
        if key_span(nest_sizes) >= MAX_KEY_SPAN:  # no BIGINT key: the codes, column by column
            listed = np.unique(table, axis=1) if table.size else table
            frame, unlisted = _listed_codes(frame, clean, t, nest.levels, gather.local(
                spark, pa.table({f"c{j}": pa.array(row.astype(np.int32))
                                 for j, row in enumerate(listed)})))
            outside = outside.bitwiseOR(F.when(clean & unlisted, F.lit(1 << t))
                                        .otherwise(F.lit(0)).cast("long"))
            continue
        listed = np.unique(_mixed(table, nest_sizes))
        at = _key([f"c{k + 1}" for k in nest.levels], nest_sizes)
        if listed.size <= LITERAL_KEYS:  # a hash set in the plan (InSet): no job
            unlisted = ~at.isin([int(x) for x in listed]) if listed.size else F.lit(True)
        else:
            keys = gather.local(spark, pa.table({f"a{t}": pa.array(listed, pa.int64()),
                                                 f"l{t}": pa.array(np.ones(listed.size,
                                                                           bool))}))
            frame = frame.join(keys, clean & (at == F.col(f"a{t}")), "left")
            unlisted = F.col(f"l{t}").isNull()
        outside = outside.bitwiseOR(F.when(clean & unlisted, F.lit(1 << t))
                                    .otherwise(F.lit(0)).cast("long"))
    kept = clean & (outside == 0) if domains.plan.nestings else clean
    columns = []
    if keyed(domains):
        columns.append(F.when(kept, _key([f"c{k + 1}" for k in range(d)], sizes)).alias("key"))
    columns += [F.col("n"), F.col("flags")]
    if not keyed(domains):
        columns += [F.when(kept, F.col(f"c{k + 1}")).cast("int").alias(f"k{k + 1}")
                    for k in range(d)]
    if domains.plan.nestings:
        columns.append(F.when(clean & ~kept, outside).alias("outside"))
    if request.privacy_unit is not None:
        columns += [F.col("nulls_unit"), F.col("read_unit")]
    return frame.select(*columns)


def _listed_codes(frame: DataFrame, clean: Any, t: int, levels: tuple[int, ...],
                  listed: DataFrame) -> tuple[DataFrame, Any]:
    """Domain table t's listed combinations (``listed``: distinct codes ``c0, c1, ...``)
    joined on the code columns: when their codes have no BIGINT mixed-radix key (the product
    of its levels' sizes passes 2**62), or the table is on the executors. Returns the frame
    joined and the condition of a combination it does not list."""
    keys = listed.select(*[F.col(f"c{j}").alias(f"a{t}_{j}") for j in range(len(levels))],
                         F.lit(True).alias(f"l{t}"))
    on = clean
    for j, k in enumerate(levels):
        on = on & (F.col(f"c{k + 1}") == F.col(f"a{t}_{j}"))
    frame = frame.join(keys, on, "left").drop(*[f"a{t}_{j}" for j in
                                                            range(len(levels))])
    return frame, F.col(f"l{t}").isNull()


_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _literal_map(values: pa.Array, kind: T.DataType) -> Any:
    """The map value -> code of a small domain. Strings and integers are written as ONE SQL
    expression (strings as UTF-8 bytes, so no quoting applies): one call to the JVM instead of
    three per value, which cost ~1 s of driver time at 104 values (PySpark records a call site
    for every Column it builds). Other types: a typed literal per value."""
    found = values.to_pylist()
    keys: list[str] = []
    if kind == T.StringType() and all(isinstance(v, str) for v in found):  # no collation
        keys = [f"CAST(X'{v.encode().hex()}' AS STRING)" for v in found]
    elif isinstance(kind, _INTEGRAL) and all(type(v) is int for v in found):
        keys = [f"CAST({v} AS {kind.simpleString()})" for v in found]
    if not keys:
        return F.create_map(*[x for code, value in enumerate(found)
                              for x in (F.lit(value).cast(kind), F.lit(code))])
    pairs = ", ".join(f"{key}, {code}" for code, key in enumerate(keys))
    return F.expr(f"map({pairs})")


def _key(codes: list[str], sizes: list[int]) -> Any:
    """The mixed-radix key (BIGINT) of the code columns named ``codes``, as one expression."""
    return F.expr(key_sql(codes, sizes))


def key_sql(codes: list[str], sizes: list[int]) -> str:
    """The mixed-radix key (BIGINT) of the code columns named ``codes`` (SQL; ``0L`` for
    none: the root's)."""
    if not codes:
        return "0L"
    key = f"CAST({codes[0]} AS BIGINT)"
    for c, size in zip(codes[1:], sizes[1:], strict=True):
        key = f"({key} * {int(size)}L + {c})"
    return key


def is_kept(domains: Domains) -> str:
    """The condition of a kept leaf on the pinned layout (SQL)."""
    return "key IS NOT NULL" if keyed(domains) else "k1 IS NOT NULL"


def subtree(domains: Domains, cut: int) -> str:
    """The subtree of a kept leaf (SQL): the mixed-radix key of its codes at levels 1..cut."""
    if cut == 0:
        return "0L"
    if keyed(domains):
        return f"key div {key_span(domains.sizes[cut:])}L"
    return key_sql([f"k{j}" for j in range(1, cut + 1)], domains.sizes[:cut])


@dataclass(frozen=True)
class Summary:
    """The data checks' counts and the true counts of the cut prefixes, from ONE job."""

    stats: dict[str, int]
    prefix_keys: np.ndarray
    prefix_counts: np.ndarray


def summary(request: ReleaseRequest, domains: Domains, leaves: DataFrame, cut: int) -> Summary:
    """ONE aggregate over the pinned leaves (the job that materialises them): grouped by subtree
    for kept leaves and by problem (``flags``, ``outside``) for the others, so that the driver
    gets the rows, rows kept, kept leaves, per column NULLs and undeclared values, per nesting
    rows outside, NULL units, and the true count of every cut prefix (at most the cells of the
    cut level: a few hundred kB)."""
    s = f"CASE WHEN {is_kept(domains)} THEN {subtree(domains, cut)} END AS s"
    keys: list[Any] = [F.expr(s), "flags", *(["outside"] if domains.plan.nestings else [])]
    aggs = ["sum(n) AS n", "count(1) AS leaves",
            *(["sum(nulls_unit) AS nulls_unit", "sum(read_unit) AS read_unit"]
              if request.privacy_unit is not None else [])]
    table = leaves.groupBy(*keys).agg(*[F.expr(a) for a in aggs]).toArrow()

    def column(name: str) -> np.ndarray:
        if name not in table.column_names:
            return np.zeros(table.num_rows, np.int64)
        return table.column(name).fill_null(0).to_numpy().astype(np.int64)

    n, s_valid = column("n"), table.column("s").is_valid().to_numpy(zero_copy_only=False)
    flags, outside = column("flags"), column("outside")
    stats = {"n": int(n.sum()), "kept": int(n[s_valid].sum()),
             "leaves": int(column("leaves")[s_valid].sum()),
             "nulls_unit": int(column("nulls_unit").sum())}
    if request.privacy_unit is not None:
        stats["read_unit"] = int(column("read_unit").sum())
    for k in range(request.depth):
        stats[f"nulls{k + 1}"] = int(n[(flags >> k) & 1 == 1].sum())
        stats[f"unknown{k + 1}"] = int(n[(flags >> (32 + k)) & 1 == 1].sum())
    for t in range(len(domains.plan.nestings)):
        stats[f"outside{t}"] = int(n[(outside >> t) & 1 == 1].sum())
    return Summary(stats, column("s")[s_valid], n[s_valid])


def checks_json(request: ReleaseRequest, domains: Domains, data: dict[str, Any],
                examples: dict[str, list[str]]) -> str:
    """The check row in the form :mod:`inftda_duckdb.core.checks` reads."""
    stats_row: dict[str, Any] = {"n": data["n"], "kept": data["kept"],
                                 "nulls_unit": data.get("nulls_unit", 0)}
    if "read_unit" in data:
        stats_row["read_unit"] = data["read_unit"]
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
        bad = raw.join(values, r == F.col("v"), "left_anti").where(r.isNotNull())
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
        frame = frame.join(values, F.col(f"r{k + 1}") == F.col(f"v{k}"), "inner")
    ok = domains.nest_frame(spark, t)
    ok = ok.select(*[F.col(f"c{j}").alias(f"o{j}") for j in range(len(nest.levels))])
    on = [F.col(f"c{k}") == F.col(f"o{j}") for j, k in enumerate(nest.levels)]
    return frame.join(ok, on, "left_anti")


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
