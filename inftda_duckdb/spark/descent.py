"""Below the cut, on the executors: the levels c+1..d in bands, laid out so that no task holds
more than a fair share of the leaves.

The driver releases levels 1..c (:mod:`.subtrees`); each released cut node roots a subtree the
executors release on their own (Algorithm 1 below a node depends only on the node, the truth
below it and the level keys: the noise is addressed by the tree). A subtree is the unit of work,
so one that holds most of the leaves (skewed data), or a single one (the root, when level 1 has
more than :data:`.subtrees.CUT_CELLS` values), would hold the release on one task. So the
descent is split further, in *bands* (:func:`.subtrees.plan_bands`): while the subtrees of the
band's top level may hold more than a task's fair share of leaves (by the public sizes), a band
releases the next levels of every subtree from the true counts of their prefixes (an aggregate of
the pinned leaves) and hands on its released nodes as the next band's roots, shuffled by their
own prefix: many small subtrees, spread over the tasks by hash. The last band releases down to
the leaves and decodes them (:class:`.subtrees.SubtreeJob`). The split depends only on public
sizes and the released root count (never on the data's own shape), so the files Spark writes
reveal nothing the release does not; any split gives the same release.

With estimator 'least_squares' the bands are laid out before the root is released (from the
public leaves, which it noises whatever the data), each band also reads the sums below every
public cell of its bottom level (:mod:`.estimates`, in the same shuffle) and its released nodes
carry their errors ``e`` on to the next band.

Each band is one shuffle (of at most the prefixes of its bottom level) and one ``mapInArrow``;
the last is the shuffle of the pinned leaves by subtree. Everything is lazy: it runs when the
released DataFrame is evaluated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.leastsquares import Arithmetic
from ..core.request import ReleaseRequest
from ..core.tree import Levels, Nodes, mixed_radix
from . import domains as dom
from . import leaves as lv
from .sessions import parallelism
from .subtrees import SubtreeJob, export_below, plan_bands

ROWS_PER_PARTITION = 1 << 20
"""Default partitions: one per this many leaves at most (at least the default parallelism)."""
TASK_LEAVES = 1 << 16
"""A task's fair share of leaves is at least this many: a subtree that may hold fewer is never
split (splitting costs a band's shuffle, and a task this size takes milliseconds)."""
SHARE_SETTING = "inftda.spark.taskLeaves"
"""A Spark setting (``spark.conf.set``) for a task's fair share of leaves: subtrees that may hold
more are split into bands (default: the leaves' bound over the partitions, at least
:data:`TASK_LEAVES`)."""


@dataclass(frozen=True)
class Layout:
    """How the levels below the cut run: ``bands`` (``[c, ..., d]``), ``partitions`` (tasks per
    band), and ``share`` (the leaves a subtree may hold without a split)."""

    bands: list[int]
    partitions: int
    share: int


def layout(spark: SparkSession, sizes: Sequence[int], cut: int, root: int,
           partitions: int | None, share: int | None = None) -> Layout:
    """The layout of a release whose root was released as ``root`` (public): the leaves are at
    most ``min(root, prod(sizes))``; one partition per :data:`ROWS_PER_PARTITION` of them (at
    least the default parallelism) unless ``partitions`` is given. Estimator
    ``'least_squares'`` noises every public leaf, whatever the data: ``root`` is their number
    (public), and the layout is known before the root is released. ``share``: the setting
    :data:`SHARE_SETTING`, read before the charge (:func:`.sessions.positive_setting`)."""
    bound = max(1, min(int(root), math.prod(int(s) for s in sizes)))
    if partitions is None:
        partitions = max(parallelism(spark), -(-bound // ROWS_PER_PARTITION))
    if share is None:
        share = max(TASK_LEAVES, -(-bound // partitions))
    bands = plan_bands(sizes, cut, share)
    return Layout(bands, partitions, share)


def descend(
    spark: SparkSession,
    request: ReleaseRequest,
    values: dom.Domains,
    leaves: DataFrame,
    cut_nodes: Nodes,
    levels: Levels,
    plan: Layout,
    chunk_cells: int,
    types: Sequence[T.StructField],
    *,
    arith: Arithmetic | None = None,
    cut_e: np.ndarray | None = None,
    sums: Mapping[int, DataFrame] | None = None,
) -> DataFrame:
    """The released leaves (lazy): the bands of ``plan`` from the released cut nodes down;
    with ``estimator := 'least_squares'`` (``arith``) each cut node carries its ``e``
    (``cut_e``), each band reads the sums below the public cells of its lower level (``sums``,
    by level: :func:`.estimates.sums`) and hands its released nodes on with their ``e``."""
    sizes, bands = values.sizes, plan.bands
    kept = leaves.where(lv.is_kept(values))
    columns = {"s": pa.array(mixed_radix(cut_nodes.codes, sizes[:bands[0]], np.int64)),
               "n": pa.array(cut_nodes.counts, pa.int64())}
    if cut_e is not None:
        columns["e"] = pa.array(cut_e, pa.int64())
    top = spark.createDataFrame(
        pa.table(columns),
        schema=T.StructType([T.StructField(c, T.LongType()) for c in columns]))
    for b, e in itertools.pairwise(bands[:-1]):  # the bands above the last
        truth = kept.groupBy(F.expr(lv.subtree(values, e)).alias("key")).agg(
            F.sum("n").alias("n"))
        truth = truth.selectExpr(f"key div {math.prod(sizes[b:e])}L AS s", "false AS node", "key",
                                 "n")
        if arith is not None:  # and the sums below every public cell of level e (n: 0)
            assert sums is not None
            truth = truth.unionByName(sums[e].selectExpr(
                f"s div {math.prod(sizes[b:e])}L AS s", "false AS node", "s AS key", "0L AS n",
                "t", "vs"), allowMissingColumns=True)
        band = SubtreeJob(cut=b, levels=export_below(levels, b, e), values=(), names=(),
                          rows=False, keyed=True, chunk_cells=chunk_cells, upto=e, arith=arith,
                          nested=_nested(values, b, e))
        top = _shuffled(truth, top, ["key"], T.LongType(), plan.partitions,
                        _allowed_rows(values, b, e)).mapInArrow(
            band, "s long, n long" + (", e long" if arith is not None else ""))
    cut = bands[-2]
    keyed = lv.keyed(values)
    address = ["key"] if keyed else [f"k{j}" for j in range(1, request.depth + 1)]
    extra = [] if cut_e is None else ["CAST(NULL AS BIGINT) AS e"]
    rows = kept.selectExpr(f"{lv.subtree(values, cut)} AS s", "false AS node", *address, "n",
                           *extra)
    names = tuple(c if values.values[j] is not None else _CODE + str(j)
                  for j, c in enumerate(request.columns))
    job = SubtreeJob(cut=cut, levels=export_below(levels, cut), values=values.values,
                     names=names, rows=request.output == "rows", keyed=keyed,
                     chunk_cells=chunk_cells, arith=arith, nested=_nested(values, cut, len(sizes)))
    partitions = plan.partitions if len(bands) > 2 else max(1, min(plan.partitions,
                                                                   cut_nodes.counts.shape[0]))
    shuffled = _shuffled(rows, top, address, T.LongType() if keyed else T.IntegerType(),
                         partitions, _allowed_rows(values, cut, len(sizes)))
    fields = [T.StructField(c, f.dataType if c in request.columns else T.IntegerType())
              for c, f in zip(names, types, strict=True)]
    if request.output == "counts":
        fields.append(T.StructField("count", T.LongType(), nullable=False))
    return _decoded(spark, values, shuffled.mapInArrow(job, T.StructType(fields)),
                    request.columns)


_CODE = "__inftda_code_"
"""The released codes of a level whose domain is on the executors, until decoded."""


def _decoded(spark: SparkSession, values: dom.Domains, released: DataFrame,
             columns: Sequence[str]) -> DataFrame:
    """``released`` with the codes of each domain on the executors (:mod:`.spread`) replaced by
    their values, by a shuffled join with the domain: no domain reaches the driver or a task."""
    if not values.spreads:
        return released
    for j in sorted(values.spreads):
        domain = values.frame(spark, j).select(F.col("code").alias(_CODE + str(j)),
                                               F.col("v").alias(columns[j]))
        released = released.join(domain, _CODE + str(j)).drop(_CODE + str(j))
    rest = [c for c in released.columns if c not in columns]
    return released.select(*[dom.col(c) for c in (*columns, *rest)])


def _nested(values: dom.Domains, b: int, e: int) -> tuple[int, ...]:
    """The levels released below level ``b`` down to ``e`` whose allowed children travel as
    rows (a nesting domain table on the executors, :mod:`.spread`)."""
    return tuple(k for k in range(b, e) if values.spread_nested(k))


def _allowed_rows(values: dom.Domains, b: int, e: int) -> DataFrame | None:
    """The allowed children of the :func:`_nested` levels as rows of the band's shuffle: ``s``
    the subtree (the key of the codes of levels 1..b, which a nesting of the first levels
    lists), ``al`` the level, ``a0..a{al}`` the codes, ``n`` 0."""
    frames = []
    for k in _nested(values, b, e):
        rows = values.nested_rows(k)
        frames.append(rows.select(
            F.expr(lv.key_sql([f"c{j}" for j in range(b)], values.sizes[:b])).alias("s"),
            F.lit(False).alias("node"), F.lit(k).alias("al"),
            *[F.col(f"c{j}").alias(f"a{j}") for j in range(k + 1)],
            F.lit(0).cast("long").alias("n")))
    if not frames:
        return None
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame, allowMissingColumns=True)
    return out


def _shuffled(rows: DataFrame, top: DataFrame, address: list[str], kind: T.DataType,
              partitions: int, allowed: DataFrame | None = None) -> DataFrame:
    """The true rows, the released roots ``(s, n)`` of a band and the rows of its levels'
    allowed children (:func:`_allowed_rows`, if any), in ONE shuffle by subtree ``s``, sorted
    by it within each partition (what :class:`.subtrees.SubtreeJob` reads)."""
    nodes = top.selectExpr("s", "true AS node",
                           *[f"CAST(NULL AS {kind.simpleString()}) AS {a}" for a in address], "n",
                           *(["e"] if "e" in top.columns else []))
    out = rows.unionByName(nodes, allowMissingColumns=True)
    if allowed is not None:
        out = out.unionByName(allowed, allowMissingColumns=True)
    return out.repartition(partitions, "s").sortWithinPartitions("s")
