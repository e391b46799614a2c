"""The levels of a release: the top ones on the driver, every subtree below the cut on executors.

Level ``c`` (the *cut*) is the deepest level ``< d`` with at most :data:`CUT_CELLS` cells (N_c):
the driver collects the true counts of the c-prefixes (one small job, a few hundred kB at most)
and releases levels 1..c (Algorithm 1, lines 1-9) in numpy. Each node released at level c roots
a subtree that the rest of the algorithm treats on its own, because a cell's noise is addressed
by its own prefix. So the pinned leaves and the released cut nodes go through ONE shuffle by
subtree, and :class:`SubtreeJob` (the Python function of ``mapInArrow``) releases levels c+1..d
of whole subtrees per Arrow chunk on the executors, and decodes the released leaves to the
columns' own values. No leaf-level data reaches the driver.

The executors build their random sources from the level keys that :class:`SubtreeJob` carries
(:class:`ExportedKey`, a deliberate export: a ``RandomSource`` itself refuses pickling and is
re-keyed after fork, and PySpark forks its Python workers). The keys travel inside the task
closures: see the README's "Secrets in transit" for the settings that encrypt them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pyarrow as pa

from ..core.errors import InternalError
from ..core.randomness import RandomSource
from ..core.topdown import MAX_KEY_SPAN, Allowed, Nodes, check_total, release_children

CUT_CELLS = 1 << 13
"""At most this many cells at the cut level: the driver's share of a release (its memory, and
the true prefix counts it collects with the data checks, at most ~50 bytes each: ~400 kB,
within a spark.driver.maxResultSize of 1 MB)."""
CHUNK_CELLS = 1 << 20
"""Subtrees are released together until about this many cells (leaves, plus an upper bound on
the cells noised below each cut node): bounded executor memory whatever the partition size."""
OUT_ROWS = 1 << 16
"""Rows per Arrow batch handed back to Spark."""
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


def decode(keys: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Codes (len(sizes), N) of mixed-radix keys ``((c1 * s2 + c2) * s3 + ...)``."""
    codes = np.empty((len(sizes), keys.shape[0]), np.int32)
    rest = keys.astype(np.int64, copy=True)
    for j in range(len(sizes) - 1, -1, -1):
        rest, codes[j] = np.divmod(rest, int(sizes[j]))
    return codes


def encode(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Mixed-radix keys of codes (len(sizes), N) (0 for an empty prefix)."""
    keys = np.zeros(codes.shape[1] if codes.ndim == 2 else 0, np.int64)
    for j, size in enumerate(sizes):
        keys *= int(size)
        keys += codes[j]
    return keys


def top_levels(
    prefix_keys: np.ndarray,
    prefix_counts: np.ndarray,
    sizes: Sequence[int],
    sigma2: Sequence[Fraction],
    sources: Sequence[RandomSource],
    allowed: dict[int, Allowed],
    root: int,
) -> Nodes:
    """Algorithm 1, lines 2-9, for levels 1..c on the driver, from the true counts of the
    c-prefixes (mixed-radix keys over ``sizes``, the first c domain sizes)."""
    nodes = Nodes.root(root)
    for k in range(1, len(sizes) + 1):
        span = math.prod(sizes[k:])
        keys, inv = np.unique(prefix_keys // span, return_inverse=True)
        counts = np.bincount(inv.ravel(), weights=prefix_counts, minlength=keys.shape[0])
        true = keys if k > 1 else keys.reshape(1, -1)
        nodes = release_children(nodes, true, counts.astype(np.int64), list(sizes[:k]),
                                 sigma2[k - 1], sources[k - 1], allowed.get(k - 1))
        check_total(nodes, root, k)
    return nodes


@dataclass(frozen=True)
class ExportedKey:
    """A level's PRF key exported on purpose, to rebuild its :class:`RandomSource` in an
    executor (after PySpark's fork). It pickles; its repr hides the key."""

    key: bytes = field(repr=False)
    private: bool

    @classmethod
    def of(cls, source: RandomSource) -> ExportedKey:
        return cls(source._key, source.private)

    def source(self) -> RandomSource:
        return RandomSource._from_key(self.key, self.private)


def release_below(
    nodes: Nodes,
    leaf_codes: np.ndarray,
    leaf_counts: np.ndarray,
    sizes: Sequence[int],
    sigma2: Sequence[Fraction],
    sources: Sequence[RandomSource],
    allowed: dict[int, Allowed],
) -> Nodes:
    """Levels c+1..d of a batch of subtrees: ``nodes`` are released cut nodes (codes (c, B),
    ascending), ``leaf_codes`` (d, N) and ``leaf_counts`` the true leaves below them."""
    cut, d = nodes.codes.shape[0], len(sizes)
    for k in range(cut + 1, d + 1):
        if math.prod(sizes[:k]) < MAX_KEY_SPAN:
            pref, inv = np.unique(encode(leaf_codes[:k], sizes[:k]), return_inverse=True)
            true = decode(pref, sizes[:k])
        else:
            true, inv = np.unique(leaf_codes[:k], axis=1, return_inverse=True)
        counts = np.bincount(inv.ravel(), weights=leaf_counts, minlength=true.shape[1])
        nodes = release_children(nodes, true, counts.astype(np.int64),
                                 list(sizes[:k]), sigma2[k - cut - 1], sources[k - cut - 1],
                                 allowed.get(k - 1))
    return nodes


@dataclass(frozen=True)
class SubtreeJob:
    """The executors' part of a release, as the function of ``mapInArrow``.

    Input rows, sorted by subtree ``s`` (the mixed-radix key of a cut prefix) within each
    partition: a released cut node ``(s, node=true, n=its released count)`` and the pinned true
    leaves ``(s, node=false, key or k1..kd, n)``. Output: the released leaves decoded to the
    columns' values, with ``count`` (or repeated, for rows output).
    """

    cut: int
    sizes: tuple[int, ...]
    sigma2: tuple[Fraction, ...]  # levels cut+1..d
    keys: tuple[ExportedKey, ...]  # levels cut+1..d
    allowed: tuple[tuple[int, tuple[int, ...], np.ndarray], ...]
    values: tuple[pa.Array, ...]
    names: tuple[str, ...]
    rows: bool
    keyed: bool
    chunk_cells: int = CHUNK_CELLS

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sources = [k.source() for k in self.keys]  # built here, after the worker's fork
        yield from _fail_first_attempt(self._run(batches, sources))

    def _run(self, batches: Iterator[pa.RecordBatch],
             sources: list[RandomSource]) -> Iterator[pa.RecordBatch]:
        allowed = {level: Allowed(keys, codes) for level, keys, codes in self.allowed}
        weight = max(1, sum(self.sizes[self.cut:]))
        buffer: list[pa.RecordBatch] = []
        cells = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            buffer.append(batch)
            node = batch.column("node").to_numpy(zero_copy_only=False)
            n = batch.column("n").to_numpy()
            cells += int(batch.num_rows + np.minimum(n[node], 1 << 40).sum() * weight)
            if cells >= self.chunk_cells:
                table = pa.Table.from_batches(buffer).combine_chunks()
                s = table.column("s").to_numpy()
                last = int(s[-1])
                done = int(np.searchsorted(s, last, side="left"))
                if done:
                    yield from self._release(table.slice(0, done), sources, allowed)
                buffer = table.slice(done).to_batches()
                cells = sum(b.num_rows for b in buffer)
        if buffer:
            yield from self._release(pa.Table.from_batches(buffer).combine_chunks(), sources,
                                     allowed)

    def _release(self, table: pa.Table, sources: list[RandomSource],
                 allowed: dict[int, Allowed]) -> Iterator[pa.RecordBatch]:
        s = table.column("s").to_numpy()
        if s.shape[0] > 1 and (np.diff(s) < 0).any():
            raise InternalError("a partition's subtrees are not sorted")
        node = table.column("node").to_numpy(zero_copy_only=False)
        n = table.column("n").to_numpy()
        d = len(self.sizes)
        nodes = Nodes(decode(s[node], self.sizes[: self.cut]), n[node])
        if np.unique(s[node]).shape[0] != nodes.counts.shape[0]:
            raise InternalError("a subtree has two cut nodes")
        leaf = ~node
        if self.keyed:
            leaf_codes = decode(table.column("key").to_numpy(zero_copy_only=False)[leaf],
                                self.sizes)
        else:
            leaf_codes = np.stack([
                table.column(f"k{j}").to_numpy(zero_copy_only=False)[leaf]
                for j in range(1, d + 1)
            ])
        out = release_below(nodes, leaf_codes, n[leaf], self.sizes, self.sigma2, sources,
                            allowed)
        root = int(nodes.counts.sum())
        if int(out.counts.sum()) != root:
            raise InternalError("a subtree's leaves do not add up to its cut node")
        yield from self._decoded(out)

    def _decoded(self, out: Nodes) -> Iterator[pa.RecordBatch]:
        index = np.arange(out.counts.shape[0])
        if self.rows:
            index = np.repeat(index, out.counts)
        for lo in range(0, index.shape[0], OUT_ROWS):
            part = index[lo: lo + OUT_ROWS]
            columns = [values.take(pa.array(out.codes[j][part]))
                       for j, values in enumerate(self.values)]
            if not self.rows:
                columns.append(pa.array(out.counts[part], pa.int64()))
            names = list(self.names) + ([] if self.rows else ["count"])
            yield pa.RecordBatch.from_arrays(columns, names=names)


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
