"""Every public cell below a batch of roots, level by level, with its noise (one full histogram per
level), and the sums the least-squares passes take over each node's children.

A forest is rooted at some cells of level ``top`` (the whole tree: the root, ``top = 0``; on
Spark, the cut nodes of a partition) and holds every public cell of levels ``top+1..upto`` below
them, in code order: on a flat level each parent has every code of the level as a child; on a
nested level, the children a domain table allows (:class:`~inftda_duckdb.core.tree.Children`).
A cell is addressed by its index at its level; a parent's children are a contiguous run. Each
cell's noise is drawn at its tree address (:mod:`~inftda_duckdb.core.tree`), so a cell noised
here draws the same value as when InfTDA noises it, whatever the batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import InternalError
from ..intopt_blocks import ranges
from ..tree import Levels, find_columns

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BLOCK = 1 << 18
"""Cells noised per call (bounded temporaries: the addresses and the AES words)."""
Stop = Callable[[], None] | None
"""Called between blocks of cells: raises to stop the release (an engine's cancel)."""


@dataclass
class Cells:
    """One level ``k`` of a forest: ``count`` cells in code order, the children of the level
    above as runs (``width`` each on a flat level; on a nested level, parent ``p`` has the cells
    ``first[p] .. first[p + 1] - 1``), and one integer per cell (the noise, then the estimates:
    :mod:`.passes` rewrites it in place; int32 at the leaves, whose noise is exact and whose
    estimates are written rounded, int64 in fixed point above)."""

    k: int
    count: int
    width: int | None
    first: IntArray | None
    values: npt.NDArray[np.signedinteger]

    @property
    def widths(self) -> IntArray:
        """Each parent's number of children."""
        assert self.first is not None
        return np.diff(self.first)

    @property
    def parents(self) -> int:
        return self.count // self.width if self.width is not None else self.widths.shape[0]

    def parent_of(self, values: np.ndarray, p0: int = 0, p1: int | None = None) -> np.ndarray:
        """``values`` (one per parent ``p0..p1-1``) repeated for each of its children."""
        if self.width is not None:
            return np.repeat(values, self.width)
        return np.repeat(values, self.widths[p0:p1])

    def blocks(self) -> Iterator[tuple[int, int, int, int]]:
        """Runs of whole parents of about :data:`BLOCK` cells: ``(p0, p1, c0, c1)``, parents
        ``p0..p1-1`` and their children ``c0..c1-1``."""
        if self.width is not None:
            step = max(1, BLOCK // max(1, self.width))
            for p in range(0, self.parents, step):
                q = min(self.parents, p + step)
                yield p, q, p * self.width, q * self.width
            return
        assert self.first is not None
        cuts = np.unique(np.searchsorted(self.first, np.arange(0, self.count, BLOCK)))
        edges = [*cuts[cuts < self.parents].tolist(), self.parents]
        for p, q in itertools.pairwise(edges):
            yield p, q, int(self.first[p]), int(self.first[q])

    def child_sums(self, values: np.ndarray) -> IntArray:
        """Exact int64 sums of ``values`` (one per cell) over each parent's children: integer
        additions, so the same in any order; a sum that would leave int64 is an error."""
        if not values.size:
            return np.zeros(self.parents, np.int64)
        most = max(int(values.max()), -int(values.min()))
        span = self.width if self.width is not None else int(self.widths.max())
        if most * span < 1 << 62:
            return self._sums(values)
        hi, lo = self._sums(values >> 31), self._sums(values & ((1 << 31) - 1))  # exact parts
        if np.abs(hi).max() >= 1 << 31:
            raise InternalError("a least-squares sum left int64 (noise beyond its cap)")
        return (hi << 31) + lo

    def _sums(self, values: np.ndarray) -> IntArray:
        if self.width is not None:
            return values.reshape(-1, self.width).sum(axis=1, dtype=np.int64)
        assert self.first is not None
        return np.add.reduceat(values, self.first[:-1], dtype=np.int64)

    def sequential_sums(self, values: FloatArray | float) -> FloatArray:
        """float64 sums of ``values`` (one per cell, or one for all) over each parent's children,
        added one child after the other in code order: the same floats for any batch of
        parents on any engine (numpy's own sums pair terms in ways that depend on the array)."""
        if self.width is not None:
            parents = self.count // self.width
            if np.ndim(values) == 0:
                row = np.add.accumulate(np.full(self.width, float(values)))[-1]
                return np.full(parents, row)
            matrix = np.asarray(values).reshape(parents, self.width)
            return np.add.accumulate(matrix, axis=1)[:, -1].copy()
        widths = self.widths
        if np.ndim(values) == 0:
            prefix = np.add.accumulate(np.full(int(widths.max(initial=1)), float(values)))
            return prefix[widths - 1]
        out = np.empty(widths.shape[0])
        vals = np.asarray(values)
        order = np.argsort(widths, kind="stable")
        edges = np.flatnonzero(np.diff(widths[order])) + 1
        for run in np.split(order, edges):
            if run.size:
                w = int(widths[run[0]])
                assert self.first is not None
                matrix = vals[self.first[run][:, None] + np.arange(w)]
                out[run] = np.add.accumulate(matrix, axis=1)[:, -1]
        return out


@dataclass
class Forest:
    """The public cells of levels ``top+1..upto`` below the roots ``roots`` (codes of level
    ``top``, one row per level, distinct, in code order), noised (``cells[j]``: level
    ``top + 1 + j``)."""

    levels: Levels
    top: int
    roots: np.ndarray
    cells: list[Cells]
    last_codes: np.ndarray | None = None  # the last level's codes, when asked for

    @property
    def upto(self) -> int:
        return self.top + len(self.cells)

    def level(self, k: int) -> Cells:
        return self.cells[k - self.top - 1]

    @classmethod
    def build(cls, levels: Levels, top: int, roots: np.ndarray | None, upto: int,
              caps: tuple[int, ...] | None, keep_codes: bool = False,
              stop: Stop = None) -> Forest:
        """Enumerate and noise every public cell below ``roots`` (None: the root) down to
        level ``upto``; ``caps[k]``: the largest |noise| level k may draw
        (:class:`.arithmetic.Arithmetic`; None: no noise, the cells only); ``keep_codes``: keep
        the last level's codes; ``stop()``, called between blocks, may raise to stop."""
        roots = np.zeros((0, 1), np.int64) if top == 0 else \
            np.asarray(roots, dtype=np.int64).reshape(top, -1)
        codes = roots
        cells = []
        for k in range(top + 1, upto + 1):
            table = levels.children[k - 1]
            n_par = codes.shape[1]
            kind = np.int32 if k == levels.depth else np.int64
            if table is None:
                m = levels.sizes[k - 1]
                level = Cells(k, n_par * m, m, None,
                              np.empty(n_par * m if caps is not None else 0, kind))
                kids, rows = np.arange(m, dtype=np.int64), None
            else:
                lo, hi = table.of(codes)
                first = np.concatenate([[0], np.cumsum(hi - lo)])
                level = Cells(k, int(first[-1]), None, first,
                              np.empty(int(first[-1]) if caps is not None else 0, kind))
                kids = table.children[ranges(lo, hi - lo)].astype(np.int64)
                rows = np.repeat(np.arange(n_par), hi - lo)
            if caps is not None:
                _noise(levels, level, codes, rows, kids, caps[k], stop)
            cells.append(level)
            if k < upto or keep_codes:
                if rows is None:
                    parent, child = np.repeat(np.arange(n_par), len(kids)), np.tile(kids, n_par)
                else:
                    parent, child = rows, kids
                codes = np.vstack([codes[:, parent], child[None, :]])
        return cls(levels, top, roots, cells, codes if keep_codes else None)

    def index(self, k: int, codes: np.ndarray) -> IntArray:
        """The index at level ``k`` of the cells with ``codes`` (one row per level 1..k; every
        one in the forest, else an internal error)."""
        codes = np.asarray(codes)
        if self.top == 0:
            idx = np.zeros(codes.shape[1], np.int64)
        else:
            idx = find_columns(self.roots, codes[: self.top], self.levels.sizes[: self.top])
            if idx.size and idx.min() < 0:
                raise InternalError("a node below none of the least-squares roots")
        for j in range(self.top + 1, k + 1):
            idx = self.child(j, idx, codes[: j - 1], None, codes[j - 1])
        return idx

    def child(self, k: int, parents: IntArray, parent_codes: np.ndarray, rows: IntArray | None,
              kids: np.ndarray) -> IntArray:
        """Indices at level ``k`` of the children ``kids`` of the level-(k-1) cells
        ``parents`` (with codes ``parent_codes``): child i of parent ``rows[i]`` (rows None:
        of parent i)."""
        level = self.level(k)
        kids = kids.astype(np.int64, copy=False)
        at = parents if rows is None else parents[rows]
        if level.width is not None:
            return at * level.width + kids
        table = self.levels.children[k - 1]
        assert table is not None and level.first is not None
        lo, _ = table.of(parent_codes)
        local = np.arange(parents.shape[0]) if rows is None else rows
        return level.first[at] + table.positions(lo, local, kids)


def _noise(levels: Levels, level: Cells, parent_codes: np.ndarray, rows: IntArray | None,
           kids: IntArray, cap: int, stop: Stop) -> None:
    """Draw level ``k``'s noise into ``level.values``, ``BLOCK`` cells at a time (addressed by
    the tree: any split gives the same values)."""
    k = level.k
    noise, source, addresser = levels.noise[k - 1], levels.sources[k - 1], levels.addressers[k - 1]
    scratch = np.empty(min(BLOCK, level.count) or 1, np.int64)  # sample() writes int64
    most = 0
    for p, q, a, b in level.blocks():
        if stop is not None:
            stop()
        if rows is None:
            ids = addresser.cells(parent_codes[:, p:q], None, kids)
        else:
            ids = addresser.cells(parent_codes, rows[a:b], kids[a:b])
        out = noise.sample(source, ids, out=scratch[: b - a] if b - a <= scratch.shape[0]
                           else np.empty(b - a, np.int64))
        if out.size:
            most = max(most, int(out.max()), -int(out.min()))
            if most > cap:
                raise InternalError(f"least-squares noise at level {k} beyond its cap {cap} "
                                    "(probability below 2**-60)")
        level.values[a:b] = out


__all__ = ["BLOCK", "Cells", "Forest"]
