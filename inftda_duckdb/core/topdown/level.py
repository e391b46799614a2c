"""One level of a batch (Algorithm 1, lines 3-9, for level ``k``), block by block.

:func:`release_level` drops the parents released 0 (their branches are empty), cuts the others
into blocks of about :data:`.block.BLOCK_CELLS` noised cells (fewer, down to
:data:`MIN_BLOCK_CELLS`, so that each of several workers gets two blocks or more), has the runner
release every block (:func:`.block.release_block`) and gathers the kept children in code order,
each linked to its true prefix for the level below. On a flat level every parent has every code
of the level as a child; on a nested level each parent has its own allowed children, and the
parents are taken in the order of their numbers of them, so that each run of equal widths is a
dense matrix again. Block sizes never change the result: noise is addressed by the tree.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import kernel, memory
from ..tree import Levels, Nodes
from .block import BLOCK_CELLS, release_block
from .runner import Runner
from .truth import Truth, code_dtype, index_dtype

IntArray = npt.NDArray[np.int64]


MIN_BLOCK_CELLS = 1 << 14
"""Blocks of a small level shrink to this, so that every worker gets some (block sizes never
change the result: noise is addressed by the tree)."""


def release_level(levels: Levels, k: int, parents: Nodes, parent_truth: IntArray, truth: Truth,
           runner: Runner, last: bool) -> tuple[Nodes, IntArray]:
    """Algorithm 1, lines 3-9, for level ``k``: the children of every parent > 0.

    A nested level's parents have their own allowed children: they are taken in the order of
    their numbers of them, so each run of equal widths is a dense matrix again, and blocks of
    about the block size pack consecutive runs (several widths share a block's calls:
    :func:`.block._mixed_block`); the kept children are put back in parent order at the end (each
    parent's run moved whole). The ``last`` level needs no link from its
    children to the truth."""
    live = parents.counts > 0  # line 3: a parent released 0 is pruned with its branch
    if not live.all():
        parents = Nodes(parents.codes[:, live], parents.counts[live])
        parent_truth = parent_truth[live]
    n_par, m = parents.counts.shape[0], levels.sizes[k - 1]
    j = k - truth.top
    children = levels.children[k - 1]
    order: IntArray | None = None
    if children is None:
        width = np.full(1, m)
        runs = [(0, n_par, m)]
    else:
        a_lo, a_hi = children.of(parents.codes)
        span = a_hi - a_lo
        # parents by number of children: a stable sort of 16-bit keys is a radix sort (faster
        # than one of int64 keys), the same order
        order = np.argsort(span.astype(np.uint16) if span.size and span.max() < 1 << 16
                           else span, kind="stable")
        width = span[order]
        bounds = np.flatnonzero(np.diff(width)) + 1
        edges = [0, *bounds.tolist(), n_par]
        runs = [(a, b, int(width[a])) for a, b in itertools.pairwise(edges) if b > a]
    planned = sum((b - a) * w for a, b, w in runs)
    if children is None:  # a large flat level: the compiled kernel loads in the background
        kernel.warm_up(planned)
    size = _block_cells(planned, runner.workers)
    code_type = code_dtype(levels.sizes[:k])
    tasks = _tasks(runs, size, children is not None)
    cells = [(b - a) * w if w else int(width[a:b].sum()) for a, b, w in tasks]

    def work(p0: int, p1: int, w: int) -> tuple[np.ndarray, ...] | tuple[Any, ...]:
        rows: slice | IntArray = slice(p0, p1) if order is None else order[p0:p1]
        kids = None if order is None else a_lo[rows]
        lo, hi = _true_children(truth.first[j - 1], parent_truth[rows])
        # (np.take along the columns: faster than codes[:, rows] for a block's parents)
        codes = parents.codes[:, rows] if isinstance(rows, slice) \
            else np.take(parents.codes, rows, axis=1)
        out = release_block(levels, k, codes, parents.counts[rows], lo, hi, truth.levels[j], kids,
                     w or width[p0:p1], not last)
        if order is not None:  # the parent rows: their codes are gathered after the merge
            return (order[p0:p1][out[0]], *out[1:])
        return (out[0] + p0, *out[1:])

    if order is not None:  # nested: the blocks' children go straight to their parent's slots
        return _nested_level(k, parents, planned, runner, tasks, cells, work, truth, j,
                             code_type, last)
    # the released children, written as the blocks finish (in order): at most one per unit of
    # the parents' counts (children > 0 add up to their parent) and one per noised cell, so that
    # bounds the arrays (untouched pages take no memory, but the allocator maps them). Each
    # child keeps its parent's row (4 bytes on a flat level, not k - 1 codes): the parents'
    # codes are gathered once, at the end, straight into the output
    cap = min(int(parents.counts.sum()), planned)
    kid_codes = memory.empty(cap, code_type)
    counts = memory.empty(cap, np.int64)
    tidx = None if last else memory.empty(cap, index_dtype(truth.levels[j].counts.shape[0]))
    prow = memory.empty(cap, index_dtype(n_par))
    filled = 0

    def sink(result: tuple[np.ndarray, ...]) -> None:
        nonlocal filled
        rows, kid, count, tix = result
        a, b = filled, filled + count.shape[0]
        prow[a:b] = rows
        kid_codes[a:b] = kid
        counts[a:b] = count
        if tidx is not None:
            tidx[a:b] = tix
        filled = b

    runner.run(k, n_par, planned, tasks, cells, work, sink)
    truth.done(k)  # read: its memory is free before the outputs are copied (it can be reused)
    out_codes = memory.empty((k, filled), code_type)
    _parent_codes(parents.codes, prow[:filled], list(out_codes[:-1]))  # rows ascending
    out_codes[-1] = kid_codes[:filled]
    out_truth = tidx[:filled] if tidx is not None else np.zeros(0, np.int64)
    return Nodes(out_codes, counts[:filled], planned), out_truth


def _nested_level(k: int, parents: Nodes, planned: int, runner: Runner,
                  tasks: list[tuple[int, int, int]], cells: list[int],
                  work: Callable[..., tuple[np.ndarray, ...]], truth: Truth, j: int,
                  code_type: type[np.signedinteger], last: bool) -> tuple[Nodes, IntArray]:
    """The end of :func:`release_level` for a nested level, whose blocks take the parents in the
    order of their widths: each block's children (a few per parent) are kept as they come, then
    written once, straight into their parents' slots of the output (parent order, codes
    ascending within a parent: each parent's run moves whole, no sort). No arrays sized by a
    bound on the children: mapping them and touching their pages first is a cost of its own."""
    n_par = parents.counts.shape[0]
    links = None if last else index_dtype(truth.levels[j].counts.shape[0])
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]] = []

    def sink(result: tuple[np.ndarray, ...]) -> None:
        rows, kid, count, tix = result
        if not rows.size:
            return
        firsts = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
        lengths = np.diff(np.append(firsts, rows.shape[0]))  # a parent's children: one run
        parts.append((rows[firsts], lengths, kid.astype(code_type), count,
                      None if links is None else tix.astype(links)))

    runner.run(k, n_par, planned, tasks, cells, work, sink)
    truth.done(k)
    kept = np.zeros(n_par, np.int64)
    for part in parts:
        kept[part[0]] = part[1]
    start = np.cumsum(kept) - kept
    filled = int(kept.sum())
    out_codes = memory.empty((k, filled), code_type)
    counts = memory.empty(filled, np.int64)
    tidx = memory.empty(filled, links) if links is not None else np.zeros(0, np.int64)
    parts.reverse()
    while parts:  # each block's children into their parents' slots, in the order they came
        owners, lengths, kid, count, tix = parts.pop()
        slots = np.arange(count.shape[0]) + np.repeat(start[owners] - (np.cumsum(lengths)
                                                                       - lengths), lengths)
        out_codes[-1][slots] = kid
        counts[slots] = count
        if tix is not None:
            tidx[slots] = tix
    prow = np.repeat(np.arange(n_par, dtype=index_dtype(n_par)), kept)
    _parent_codes(parents.codes, prow, list(out_codes[:-1]))  # rows ascending
    return Nodes(out_codes, counts, planned), tidx


def _tasks(runs: list[tuple[int, int, int]], size: int,
           nested: bool) -> list[tuple[int, int, int]]:
    """Blocks of about ``size`` cells over runs of parents with ``w`` children each: (first,
    end, w) within a run of a flat level; on a nested level, (first, end, 0) over consecutive
    runs of several widths (a run is cut between parents where a block fills up: a nested
    level with many distinct widths would pay a block's fixed cost for each of them)."""
    if not nested:
        return [(p, min(p + max(1, size // w), b), w) for a, b, w in runs
                for p in range(a, b, max(1, size // w))]
    tasks: list[tuple[int, int, int]] = []
    first, used = (runs[0][0] if runs else 0), 0  # the open block: its first parent, its cells
    for a, b, w in runs:
        p = a
        while p < b:
            take = min(b - p, (size - used) // w)
            if take <= 0 and used:  # full: close it
                tasks.append((first, p, 0))
                first, used = p, 0
                continue
            take = max(take, 1)  # (a parent wider than a block has a block of its own)
            p += take
            used += take * w
    if used:
        tasks.append((first, runs[-1][1], 0))
    return tasks


def _parent_codes(parent_codes: np.ndarray, rows: IntArray, out: list[np.ndarray]) -> None:
    """The codes of the parents ``rows`` (one row per level above), into the rows ``out``."""
    rows = rows.astype(np.intp, copy=False)  # (once: np.take converts other indices per call)
    for r, dest in enumerate(out):
        if parent_codes.dtype == dest.dtype:
            np.take(parent_codes[r], rows, out=dest, mode="clip")
        else:
            dest[:] = parent_codes[r, rows]


def _block_cells(planned: int, workers: int) -> int:
    """Cells per block for a level of ``planned`` cells: :data:`BLOCK_CELLS`, or fewer (down to
    :data:`MIN_BLOCK_CELLS`) so that each of several workers gets two blocks or more."""
    if workers == 1:
        return BLOCK_CELLS
    return min(BLOCK_CELLS, max(MIN_BLOCK_CELLS, -(-planned // (2 * workers))))


def _true_children(first: IntArray, parent_truth: IntArray) -> tuple[IntArray, IntArray]:
    """The run ``lo .. hi - 1`` of each parent's true children at the level below (empty for a
    parent with no true prefix, ``-1``); per block, so no array of the level's parents."""
    if first.shape[0] <= 1:
        lo = np.zeros(parent_truth.shape[0], np.int64)
        return lo, lo
    has = parent_truth >= 0
    t = np.where(has, parent_truth, 0)
    return np.where(has, first[t], 0), np.where(has, first[t + 1], 0)
