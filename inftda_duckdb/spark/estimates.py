"""Estimator 'least_squares' on Spark: the sums below the cut, and below each band's lower level.

The estimates are two passes over every public cell (:mod:`inftda_duckdb.core.leastsquares`):
upward sums, then each node's error ``e`` downward. The driver needs the sums below every public
cell of the cut (at most :data:`.subtrees.CUT_CELLS` rows) to estimate the levels above it; each
band of the descent (:mod:`.descent`) needs the sums below every public cell of its lower level,
to estimate its own levels below its released nodes. All of them are noise only, no data, and
their work is spread over the cells, never one subtree per task:

1. the public cells of each band's lower level, expanded band by band from the cut's
   (:class:`CellsJob`, a run of parents at a time);
2. the sums below the lowest of them, from the leaves up (:class:`MessageJob`, a run of cells at a
   time);
3. band by band upwards, the sums below each level's cells from those below the next one's
   (:class:`MessageJob` with ``upto``: the cells of the levels between, noised again), up to
   the cut's, which the driver collects.

Each band's sums are pinned (:mod:`.pins`): the driver's job computes them once and the bands
read them when the release is evaluated. Without bands (one band below the cut: the subtrees
fit a task's share) step 2 alone runs, at the cut. Tree-addressed noise and exact integer sums
(:mod:`inftda_duckdb.core.leastsquares.passes`) make every split give the same numbers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from ..core import leastsquares
from ..core.leastsquares import Arithmetic, Sums, cut_cells
from ..core.tree import Levels, mixed_radix
from . import pins
from .subtrees import CHUNK_CELLS, decode, export_below, integers

SCHEMA = T.StructType([T.StructField("s", T.LongType()), T.StructField("t", T.LongType()),
                       T.StructField("vs", T.DoubleType())])
"""The sums below cells ``s`` (mixed-radix keys): ``t`` (fixed point) and ``vs``."""


def sums(spark: SparkSession, levels: Levels, bands: list[int], arith: Arithmetic,
         chunk: int, partitions: int) -> tuple[Sums, dict[int, DataFrame], list[DataFrame]]:
    """The sums below every public cell of the cut ``bands[0]`` (collected: codes, ``t``,
    ``vs``), those below every public cell of each band's lower level (lazy DataFrames of
    :data:`SCHEMA`, by level), and the pinned DataFrames (:func:`.pins.attach` them)."""
    sizes, cut = levels.sizes, bands[0]
    keys = mixed_radix(cut_cells(levels, cut), sizes[:cut], np.int64)
    cells = spark.createDataFrame(pa.table({"s": pa.array(keys, pa.int64())}))
    lower = bands[1:-1]
    for b, e in itertools.pairwise(bands[:-1]):  # the public cells of each band's lower level
        expand = CellsJob(top=b, upto=e, levels=export_below(levels, e, e), chunk_cells=chunk)
        cells = cells.repartition(max(1, min(partitions, keys.shape[0])) if b == cut
                                  else partitions, "s").mapInArrow(expand, "s long")
    last = bands[-2]
    job = MessageJob(cut=last, levels=export_below(levels, last), arith=arith, chunk_cells=chunk)
    parts = partitions if lower else max(1, min(keys.shape[0], partitions))
    found = cells.repartition(parts, "s").mapInArrow(job, SCHEMA)
    below: dict[int, DataFrame] = {}
    for b, e in reversed(list(itertools.pairwise(bands[:-1]))):
        found = below[e] = pins.pin(found)
        job = MessageJob(cut=b, levels=export_below(levels, b, e), arith=arith,
                         chunk_cells=chunk, upto=e)
        found = found.selectExpr(f"s div {math.prod(sizes[b:e])}L AS s", "s AS key", "t", "vs") \
            .repartition(partitions, "s").sortWithinPartitions("s").mapInArrow(job, SCHEMA)
    rows = found.collect()
    s = np.array([r["s"] for r in rows], np.int64)
    at_cut = (decode(s, sizes[:cut]), np.array([r["t"] for r in rows], np.int64),
              np.array([r["vs"] for r in rows], np.float64))
    return at_cut, below, list(below.values())


@dataclass(frozen=True)
class CellsJob:
    """The public cells of level ``upto`` below cells ``s`` of level ``top`` (a ``mapInArrow``
    function; keys in, keys out; public: the level keys it carries are not the release's)."""

    top: int
    upto: int
    levels: dict[str, Any]  # Levels.export() with fresh keys: only the domain tables are used
    chunk_cells: int = CHUNK_CELLS

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        levels = Levels.from_export(self.levels)
        sizes = levels.sizes
        per = max(1, self.chunk_cells // max(1, math.prod(sizes[self.top:self.upto])))
        for batch in batches:
            keys = np.sort(integers(batch.column("s")))
            for a in range(0, keys.shape[0], per):
                roots = decode(keys[a:a + per], sizes[:self.top])
                below = cut_cells(levels, self.upto, self.top, roots)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(mixed_radix(below, sizes[:self.upto], np.int64))], names=["s"])


@dataclass(frozen=True)
class MessageJob:
    """The sums below public cells ``s`` of level ``cut`` (mixed-radix keys; a ``mapInArrow``
    function; :func:`~inftda_duckdb.core.leastsquares.messages`: noise only, no data), a run of
    about ``chunk_cells`` cells at a time. Output rows :data:`SCHEMA`.

    With ``upto`` (< d), the levels cut+1..upto only: the input rows are the sums below every
    public cell of level ``upto`` (``key``, ``t``, ``vs``) with ``s`` the key of the level-cut
    cell above, sorted by ``s`` within each partition."""

    cut: int
    levels: dict[str, Any]  # Levels.export(): holds the level keys below the cut (secret)
    arith: Arithmetic
    chunk_cells: int = CHUNK_CELLS
    upto: int | None = None

    def __repr__(self) -> str:  # never print the keys
        return f"MessageJob(cut={self.cut}, upto={self.upto})"

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        levels = Levels.from_export(self.levels)  # built here, after the worker's fork
        if self.upto is not None:
            yield from self._above(batches, levels, self.upto)
            return
        per = max(1, self.chunk_cells // max(1, math.prod(levels.sizes[self.cut:])))
        for batch in batches:
            keys = integers(batch.column("s"))
            for a in range(0, keys.shape[0], per):
                yield self._sums(levels, keys[a:a + per], None)

    def _above(self, batches: Iterator[pa.RecordBatch], levels: Levels, upto: int
               ) -> Iterator[pa.RecordBatch]:
        """Complete runs of cells ``s`` (with every cell of level ``upto`` below them) of about
        ``chunk_cells`` cells at a time."""
        sizes = levels.sizes
        buffer: list[pa.RecordBatch] = []
        rows = 0
        for batch in itertools.chain(batches, [None]):
            if batch is not None:
                if not batch.num_rows:
                    continue
                buffer.append(batch)
                rows += batch.num_rows
                if rows < self.chunk_cells:
                    continue
            if not buffer:
                break
            table = pa.Table.from_batches(buffer).combine_chunks()
            s = integers(table.column("s"))
            done = s.shape[0] if batch is None else int(np.searchsorted(s, s[-1], side="left"))
            if done:
                given = (decode(integers(table.column("key"))[:done], sizes[:upto]),
                         integers(table.column("t"))[:done],
                         table.column("vs").to_numpy()[:done])
                yield self._sums(levels, np.unique(s[:done]), given)
            buffer = table.slice(done).to_batches()
            rows = sum(b.num_rows for b in buffer)

    def _sums(self, levels: Levels, keys: np.ndarray, given: Sums | None) -> pa.RecordBatch:
        t, vs = leastsquares.messages(levels, self.arith, self.cut,
                                      decode(keys, levels.sizes[:self.cut]), upto=self.upto,
                                      sums=given)
        return pa.RecordBatch.from_arrays([pa.array(keys, pa.int64()), pa.array(t),
                                           pa.array(vs)], names=["s", "t", "vs"])
