"""The levels of a release: the top ones on the driver, every subtree below the cut on executors.

Level ``c`` (the *cut*) is the deepest level ``< d`` with at most :data:`CUT_CELLS` cells (N_c):
the driver collects the true counts of the c-prefixes (one small job, a few hundred kB at most)
and releases levels 1..c (Algorithm 1, lines 1-9) in numpy. Each node released at level c roots
a subtree that the rest of the algorithm treats on its own, because a cell's noise is addressed
by its own prefix. So the pinned leaves and the released cut nodes go through ONE shuffle by
subtree, and :class:`SubtreeJob` (the Python function of ``mapInArrow``) releases levels c+1..d
of whole subtrees per Arrow chunk on the executors, and decodes the released leaves to the
columns' own values. No leaf-level data reaches the driver.

Both sides call the engine-neutral core (:func:`inftda_duckdb.core.topdown.release_below`),
whose noise is addressed by the tree: a subtree released alone on any executor, in any batch,
draws the same noise as in the DuckDB release. The executors rebuild the levels (and their random
sources) from :meth:`Levels.export`, a deliberate export of the level keys made on the driver
and carried by :class:`SubtreeJob` (a ``RandomSource`` itself refuses pickling and is re-keyed
after fork, and PySpark forks its Python workers); only the keys of the levels below the cut are
exported. They travel inside the task closures: see the README's "Secrets in transit" for the
settings that encrypt them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import leastsquares
from ..core.errors import InternalError
from ..core.leastsquares import Arithmetic
from ..core.topdown import release_below
from ..core.tree import MAX_KEY_SPAN, Allowed, Levels, Nodes, mixed_radix

CUT_CELLS = 1 << 13
"""At most this many cells at the cut level: the driver's share of a release (its memory, and
the true prefix counts it collects with the data checks, at most ~50 bytes each: ~400 kB,
within a spark.driver.maxResultSize of 1 MB)."""
CHUNK_CELLS = 1 << 20
"""Subtrees are released together until about this many cells (leaves, plus an upper bound on
the cells noised below each cut node): bounded executor memory whatever the partition size."""
OUT_ROWS = 1 << 16
"""Rows per Arrow batch handed back to Spark (fewer when a column's values are wide)."""
OUT_BYTES = 1 << 30
"""At most this many bytes of one string or binary column per output batch: their Arrow offsets
are 32-bit (2 GiB at most), so 2**16 rows of a domain whose values reach 32 kB would overflow."""
FAIL_FIRST_ATTEMPT = "inftda.test.failFirstAttempt"
"""Tests only: a Spark local property naming a folder; while it is set, the first attempt of
each subtree task fails after its first batch (and leaves a file there), so Spark recomputes it."""


def choose_cut(nodes: Sequence[int], sizes: Sequence[int]) -> int:
    """The cut: the deepest level c < d with N_c <= CUT_CELLS (0: the root alone)."""
    cut = 0
    for k in range(1, len(sizes)):
        if nodes[k - 1] > CUT_CELLS or math.prod(sizes[:k]) >= MAX_KEY_SPAN:
            break
        cut = k
    return cut


def plan_bands(sizes: Sequence[int], cut: int, share: int) -> list[int]:
    """The levels where the descent below the cut is split: ``[cut, b_1, ..., d]``.

    The subtrees of level ``b`` hold at most ``prod(sizes[b:])`` leaves (public sizes). While that
    passes ``share`` (a task's fair share of leaves), the next split level ``e`` is the first
    whose subtrees fit it, as long as a band of levels ``b+1..e`` under one node stays within
    :data:`CHUNK_CELLS` cells (else a band ends earlier and another follows; one level at least)
    and the prefixes of level ``e`` have BIGINT keys. Tree-addressed noise makes any split give
    the same release."""
    d, bands, b = len(sizes), [cut], cut
    while b < d - 1 and math.prod(sizes[b:]) > share:
        e = b + 1
        while (e < d - 1 and math.prod(sizes[e:]) > share
               and math.prod(sizes[b:e + 1]) <= CHUNK_CELLS
               and math.prod(sizes[:e + 1]) < MAX_KEY_SPAN):
            e += 1
        if math.prod(sizes[:e]) >= MAX_KEY_SPAN:
            break
        bands.append(e)
        b = e
    return [*bands, d]


def decode(keys: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Codes (len(sizes), N) of mixed-radix keys ``((c1 * s2 + c2) * s3 + ...)``."""
    codes = np.empty((len(sizes), keys.shape[0]), np.int32)
    rest = keys.astype(np.int64, copy=True)
    for j in range(len(sizes) - 1, -1, -1):
        rest, codes[j] = np.divmod(rest, int(sizes[j]))
    return codes


def export_below(levels: Levels, cut: int, upto: int | None = None) -> dict[str, Any]:
    """:meth:`Levels.export` for the executors, which release levels cut+1..upto only (default:
    to the leaves): the keys of the other levels are replaced by fresh random bytes, so those
    keys never leave the driver."""
    data = levels.export()
    upto = levels.depth if upto is None else upto
    data["keys"] = [key if cut <= k < upto else os.urandom(32)
                    for k, key in enumerate(data["keys"])]
    return data


@dataclass(frozen=True)
class SubtreeJob:
    """The executors' part of a release, as the function of ``mapInArrow``.

    Input rows, sorted by subtree ``s`` (the mixed-radix key of a cut prefix) within each
    partition: a released cut node ``(s, node=true, n=its released count)`` and the pinned true
    leaves ``(s, node=false, key or k1..kd, n)``. Output: the released leaves decoded to the
    columns' values (their codes, for a domain on the executors: :mod:`.spread`), with ``count``
    (or repeated, for rows output).

    A *band* (``upto`` < d) releases levels cut+1..upto only: its true rows are the prefixes of
    level ``upto`` (``key``, their mixed-radix keys, and ``n``), and it outputs the released nodes
    of level ``upto`` as ``(s, n)``, ``s`` their keys: the cut nodes of the next band.

    Estimator 'least_squares' (``arith``): the cut nodes carry their errors ``e`` (column
    ``e``), a band's input also has the sums below every public cell of level ``upto`` (rows
    with ``key``, ``t``, ``vs``; :func:`~inftda_duckdb.core.leastsquares.band`), and its output
    nodes carry their ``e`` too.
    """

    cut: int
    levels: dict[str, Any]  # Levels.export(): holds the level keys below the cut (secret)
    values: tuple[pa.Array | None, ...]  # None: output the codes (decoded by a join)
    names: tuple[str, ...]
    rows: bool
    keyed: bool
    chunk_cells: int = CHUNK_CELLS
    upto: int | None = None  # a band: release down to this level, output its nodes
    arith: Arithmetic | None = None  # estimator 'least_squares': nodes carry their ``e``
    nested: tuple[int, ...] = ()  # levels whose allowed children come as rows (al, a0..)

    def __repr__(self) -> str:  # never print the keys
        return f"SubtreeJob(cut={self.cut}, names={self.names})"

    @cached_property
    def batch_rows(self) -> int:
        """Rows per output batch: :data:`OUT_ROWS`, fewer when the widest value of a string or
        binary column would take a batch's column past :data:`OUT_BYTES` (public sizes)."""
        widest = 1
        for values in self.values:
            if values is not None and len(values) and (pa.types.is_string(values.type)
                                or pa.types.is_binary(values.type)):
                widest = max(widest, pc.max(pc.binary_length(values)).as_py() or 0)
        return max(1, min(OUT_ROWS, OUT_BYTES // widest))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        levels = Levels.from_export(self.levels)  # built here, after the worker's fork
        yield from _fail_first_attempt(self._run(batches, levels))

    def _run(self, batches: Iterator[pa.RecordBatch], levels: Levels
             ) -> Iterator[pa.RecordBatch]:
        bound = _cells_bound(levels.sizes[self.cut:self.upto], every=self.arith is not None)
        buffer: list[pa.RecordBatch] = []
        cells = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            buffer.append(batch)
            node = _flags(batch.column("node"))
            cells += batch.num_rows + bound(integers(batch.column("n"))[node])
            if cells >= self.chunk_cells:
                table = pa.Table.from_batches(buffer).combine_chunks()
                s = integers(table.column("s"))
                done = int(np.searchsorted(s, s[-1], side="left"))  # complete subtrees
                if done:
                    yield from self._release(table.slice(0, done), levels)
                buffer = table.slice(done).to_batches()
                cells = sum(b.num_rows for b in buffer)
        if buffer:
            yield from self._release(pa.Table.from_batches(buffer).combine_chunks(), levels)

    def _release(self, table: pa.Table, levels: Levels) -> Iterator[pa.RecordBatch]:
        s = integers(table.column("s"))
        if s.shape[0] > 1 and (np.diff(s) < 0).any():
            raise InternalError("a partition's subtrees are not sorted")
        node = _flags(table.column("node"))
        n = integers(table.column("n"))
        if np.unique(s[node]).shape[0] != int(node.sum()):
            raise InternalError("a subtree has two cut nodes")
        nodes = Nodes(decode(s[node], levels.sizes[: self.cut]), n[node])
        # a least-squares band's sums below the cells of its lower level (t not NULL)
        given = ~node & _flags(table.column("t").is_valid()) if "t" in table.column_names \
            else np.zeros(s.shape[0], bool)
        leaf = ~node & ~given  # a cut node's row has NULL key (k1..kd): read the leaves' rows
        if self.nested:  # and the rows of allowed children
            listed = _flags(table.column("al").is_valid())
            levels = self._with_allowed(levels, table, listed)
            leaf &= ~listed
        if self.keyed:  # mixed-radix keys of the leaves (t = d), or of a band's prefixes
            truth = integers(table.column("key"), leaf)
        else:
            truth = np.stack([integers(table.column(f"k{j}"), leaf)
                              for j in range(1, levels.depth + 1)])
        e_out = None
        if self.arith is not None:  # the integer pass reads the subtrees' own estimates
            if not node.any():  # nothing released above these rows
                return
            e_nodes = integers(table.column("e"), node)
            if self.upto is None:
                levels = leastsquares.below(levels, self.arith, self.cut, nodes.codes, e_nodes)
            else:
                mine = given & np.isin(s, s[node])
                sums = (decode(integers(table.column("key"), mine), levels.sizes[: self.upto]),
                        integers(table.column("t"), mine), table.column("vs").to_numpy()[mine])
                levels, e_codes, e_out = leastsquares.band(levels, self.arith, self.cut,
                                                           nodes.codes, e_nodes, self.upto, sums)
        out = release_below(levels, nodes, truth, n[leaf], upto=self.upto)
        if int(out.counts.sum()) != int(nodes.counts.sum()):
            raise InternalError("a subtree's leaves do not add up to its cut node")
        if self.upto is None:
            yield from self._decoded(out)
            return
        keys = mixed_radix(out.codes, levels.sizes[: self.upto], np.int64)
        columns = {"s": keys, "n": out.counts}
        if e_out is not None:  # the next band's nodes carry their e
            at = np.searchsorted(mixed_radix(e_codes, levels.sizes[: self.upto], np.int64), keys)
            columns["e"] = e_out[at]
        for lo in range(0, keys.shape[0], OUT_ROWS):
            yield pa.RecordBatch.from_arrays([pa.array(c[lo: lo + OUT_ROWS])
                                              for c in columns.values()], names=list(columns))

    def _with_allowed(self, levels: Levels, table: pa.Table, listed: np.ndarray) -> Levels:
        """``levels`` with the allowed children of the :attr:`nested` levels that these
        subtrees' rows carry: ``al`` the level, ``a0..a{al}`` the codes of the parent's levels
        and of the child (a nesting of the first levels: the parent's keys are all its levels)."""
        at = integers(table.column("al"), listed)
        allowed = list(levels.allowed)
        for k in self.nested:
            rows = listed.copy()
            rows[listed] = at == k
            codes = np.stack([integers(table.column(f"a{j}"), rows).astype(np.int64)
                              for j in range(k + 1)])
            allowed[k] = Allowed(tuple(range(k)), codes)
        return replace(levels, allowed=tuple(allowed))

    def _decoded(self, out: Nodes) -> Iterator[pa.RecordBatch]:
        """The released nodes as batches of :attr:`batch_rows` rows: with ``count``, or each
        node repeated ``count`` times (rows output; a batch's rows are found by a search of the
        running counts, so no chunk's rows are ever built in one array)."""
        names = list(self.names) + ([] if self.rows else ["count"])
        step = self.batch_rows
        ends = np.cumsum(out.counts) if self.rows else np.arange(1, out.counts.shape[0] + 1)
        total = int(ends[-1]) if ends.shape[0] else 0
        for lo in range(0, total, step):
            hi = min(lo + step, total)
            if self.rows:
                first = int(np.searchsorted(ends, lo, side="right"))
                last = int(np.searchsorted(ends, hi - 1, side="right"))
                nodes = np.arange(first, last + 1)
                starts = np.maximum(ends[nodes] - out.counts[nodes], lo)
                part = np.repeat(nodes, np.minimum(ends[nodes], hi) - starts)
            else:
                part = np.arange(lo, hi)
            columns = [pa.array(out.codes[j][part], pa.int32()) if values is None
                       else values.take(pa.array(out.codes[j][part]))
                       for j, values in enumerate(self.values)]
            if not self.rows:
                columns.append(pa.array(out.counts[part], pa.int64()))
            yield pa.RecordBatch.from_arrays(columns, names=names)


def integers(column: pa.Array | pa.ChunkedArray, rows: np.ndarray | None = None) -> np.ndarray:
    """The values of an integer Arrow column at ``rows`` (a mask; default all), exactly, in the
    column's own integer type: never through float (``to_numpy`` turns an integer column with
    NULLs into float64, exact only below 2**53). The rows read must not be NULL; NULLs
    elsewhere (a cut node's leaf key) are skipped."""
    if not pa.types.is_integer(column.type):
        raise InternalError(f"expected an integer column, got {column.type}")
    if column.null_count:
        valid = _flags(column.is_valid())
        if not (valid if rows is None else valid[rows]).all():
            raise InternalError("a leaf or a cut node came with a NULL key, code or count")
        column = column.fill_null(0)
    values = column.to_numpy()
    if values.dtype.kind not in "iu":
        raise InternalError(f"an integer column became {values.dtype}")
    return values if rows is None else values[rows]


def _flags(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow column without NULLs as a numpy bool array."""
    if not pa.types.is_boolean(column.type) or column.null_count:
        raise InternalError(f"expected booleans without NULLs, got {column.type} with "
                            f"{column.null_count} NULLs")
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=bool)


def _cells_bound(sizes: Sequence[int], every: bool = False) -> Any:
    """``bound(counts)``: at most how many cells are noised below cut nodes released with these
    counts: level k has at most min(count, cells of level k-1) parents, each with s_k children
    (``every``: estimator 'least_squares', every cell of the subtree)."""
    parents = np.cumprod([1, *sizes[:-1]], dtype=float)
    width = np.asarray(sizes, dtype=float)

    def bound(counts: np.ndarray) -> int:
        if every:
            return int(counts.shape[0] * (parents * width).sum())
        c = counts.astype(float)[:, None]
        return int((np.minimum(c, parents) * width).sum())

    return bound


def _fail_first_attempt(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass the batches through; under the tests' :data:`FAIL_FIRST_ATTEMPT` property, fail
    the first attempt of the task after its first batch (Spark then recomputes the task)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    folder = None if context is None else context.getLocalProperty(FAIL_FIRST_ATTEMPT)
    for i, batch in enumerate(batches):
        yield batch
        if folder and i == 0 and context is not None and context.attemptNumber() == 0:
            name = f"partition-{context.partitionId()}-stage-{context.stageId()}"
            with open(os.path.join(folder, name), "w") as marker:
                marker.write("failed on purpose\n")
            raise RuntimeError(f"{FAIL_FIRST_ATTEMPT}: first attempt failed on purpose")
