"""Error bars on Spark: :func:`intervals` of a released DataFrame, and :func:`plan`, the rho a
target error needs; the same numbers as DuckDB's (the bounds are :mod:`inftda_duckdb.core`'s).

A released DataFrame carries its provenance, its public plan included, in every column's
metadata ``inftda`` (Spark keeps it in the Parquet files it writes, so
``spark.read.parquet(...)`` of a written release has it too). :func:`intervals` groups the
released counts by their first k columns and adds the interval of each; :func:`plan` previews
the request (public sizes only, as :func:`~.driver.preview`) and plans from its cells.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..core import errorbars as eb
from ..core import planning, targets
from ..core.errors import bad_argument, speaking
from ..core.identifiers import fold
from ..core.provenance import MARKER
from ..core.request import parse_request
from .driver import preview


def _record(df: DataFrame) -> dict[str, Any] | None:
    for field in df.schema.fields:
        text = (field.metadata or {}).get("inftda")
        if text:
            record: dict[str, Any] = json.loads(text)
            return record
    return None


def intervals(df: DataFrame, level: object = None, beta: float = 0.05, *,
              joint: object = None) -> DataFrame:
    """The k-prefix rows of a released DataFrame (k = ``level``: a number or a column's name):
    the prefix columns, the released ``count`` and ``[lower, upper]``, as
    :func:`inftda_duckdb.intervals` gives them: with probability at least ``1 - beta`` every
    k-prefix's true count lies in its interval, all at once (a prefix absent from the table was
    released as 0: ``[0, half_width]``). ``joint``: a level K >= k whose event the intervals
    share with those of levels 1..K. Each column's metadata ``inftda_intervals`` states the
    guarantee, the bound and the provenance. Lazy: nothing runs until it is evaluated."""
    with speaking("python"):
        if not isinstance(df, DataFrame):
            raise bad_argument("df", type(df).__name__, "must be a released Spark DataFrame",
                               "pass the DataFrame inftda_duckdb.spark.release returned (or "
                               "spark.read.parquet of its files)")
        where = "the DataFrame"
        plan = eb.from_record(_record(df), where)
        spelled = {fold(c): c for c in df.columns}
        missing = [c for c in plan.columns if fold(c) not in spelled]
        if missing or ("count" in spelled) != (plan.output == "counts") or (
                MARKER in spelled and plan.private):
            raise eb.refused(where, "has columns that are not its release's "
                             f"({', '.join(df.columns)})", "pass the DataFrame as released")
        if level is None:
            raise bad_argument("level", None, "is required", "pass e.g. level=1")
        k = plan.level(level)
        together = eb.joint_of(joint, k, plan.depth, plan.columns)
        b = planning.check_beta(beta)
        half = eb.half_width(plan.bound(k, b, together))
        meta = {"inftda_intervals": json.dumps(eb.metadata(plan, k, b, together,
                                                           _record(df) or {}))}
        names = [spelled[fold(c)] for c in plan.columns[:k]]
        n = F.sum("count") if plan.output == "counts" else F.count(F.lit(1))
        grouped = df.groupBy(*names).agg(n.cast("long").alias("count"))
        return grouped.select(
            *[F.col(c).alias(c, metadata=meta) for c in names],
            F.col("count").alias("count", metadata=meta),
            F.greatest(F.col("count") - F.lit(half), F.lit(0)).cast("long")
            .alias("lower", metadata=meta),
            (F.col("count") + F.lit(half)).cast("long").alias("upper", metadata=meta),
        ).orderBy(*names)


def plan(source: DataFrame | str, columns: Sequence[str], *, max_error: object = None,
         level: object = None, beta: float = 0.05, **options: Any) -> dict[str, Any]:
    """The smallest rho whose Theorem 1 bound at ``level`` is at most ``max_error`` (or one
    target per level), as :func:`inftda_duckdb.plan` returns it, for the options of
    :func:`~.driver.release` (``rho``/``epsilon`` excepted). Spends nothing; reads what
    :func:`~.driver.preview` reads."""
    with speaking("python"):
        for name in ("rho", "epsilon"):
            if options.get(name) is not None:
                raise bad_argument(name, options[name], "is what a plan computes",
                                   "leave it out: pass max_error (and level)")
        delta = planning.report_delta(dict(options))
        options.pop("delta", None)
        b = planning.check_beta(beta)
        shape = {k: v for k, v in options.items() if k != "domain_tables"}
        request = parse_request("plan", list(columns), rho=1, **shape)
        goals = targets.targets_of(max_error, level, request.columns)
        rho = targets.placeholder(request.depth, request.max_rows_per_unit,
                                  request.level_weights)
        rows = preview(source, columns, rho=rho, beta=b, **options).to_pylist()
        levels = sorted((r for r in rows if r["level"] >= 1), key=lambda r: r["level"])
        cells = [int(r["nodes"]) for r in levels]
        sizes = [int(r["domain_size"]) for r in levels]
        planned = targets.plan_request(request, cells, goals, b)
        table = pa.Table.from_pylist(targets.rows(planned, request.columns, sizes, cells, delta),
                                     schema=targets.SCHEMA)
        return targets.as_mapping(table)


__all__ = ["intervals", "plan"]
