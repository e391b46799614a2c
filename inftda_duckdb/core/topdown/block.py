"""One block of a level's parents (Algorithm 1, lines 4-9, fused): noise, truth, IntOpt, keep.

:func:`release_block` draws the noise of every child cell of the block's parents straight into
this thread's reused matrix (line 5; addressed by the tree, so the same whatever the block),
adds the parents' true children, runs IntOpt against each parent's released count (line 6:
:mod:`~inftda_duckdb.core.intopt_blocks`, or the compiled :mod:`~inftda_duckdb.core.kernel`
when it is wanted, the same integers) and keeps the children > 0 (lines 7-9). A block's result
depends only on its parents and the truth below them: blocks run on any thread, in any order.
With ``estimator := 'least_squares'`` (``levels.estimates``, from
:mod:`~inftda_duckdb.core.leastsquares`) a cell's rounded least-squares estimate minus its true
count stands where its noise would.
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from .. import kernel, memory
from ..errors import InternalError
from ..intopt_blocks import intopt_positive, intopt_positive_runs, ranges
from ..noise import address_buffer
from ..tree import Levels
from .truth import TruthLevel

IntArray = npt.NDArray[np.int64]


BLOCK_CELLS = 1 << 18
"""Cells noised and optimised per block, at most. Large enough that a block's numpy calls
outweigh their dispatch, which holds the GIL (with small blocks, workers wait on each other
for it); small enough that a worker's temporaries stay a few MB."""


def release_block(levels: Levels, k: int, parent_codes: np.ndarray, c: IntArray, lo: IntArray,
           hi: IntArray, truth: TruthLevel, first_child: IntArray | None, width: int | IntArray,
           link: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Lines 4-9 for a block of parents with ``width`` children each, fused: noise drawn into the
    block's cells, the true children added, IntOpt, children > 0 kept. A nested level's parents
    have the allowed children ``children[first_child[p]:][:width[p]]`` (:func:`_mixed_block`);
    a flat level's have every code 0..m-1. Returns, per kept child, its parent's row in the
    block, its code, its count and (with ``link``) its true prefix (index at level k, -1 if
    none)."""
    if first_child is not None:
        widths = np.full(c.shape[0], width) if isinstance(width, int) else width
        return _mixed_block(levels, k, parent_codes, c, lo, hi, truth, first_child, widths, link)
    assert isinstance(width, int)
    n_par, n = c.shape[0], c.shape[0] * width
    x = _noised(levels, k, parent_codes, None, np.arange(width), n)  # line 5
    # lines 5-8: the true children added, IntOpt, and the children > 0 in code order (flat
    # positions ascending): fused in the compiled kernel when it is on, which reads the leaves
    # (sorted pairs, no link to keep) straight from the truth
    if not link and truth.codes is None and truth.bits and kernel.wanted(n):
        assert truth.m == width  # (the leaves: the last level's codes)
        flat, kept, sums = kernel.intopt_pairs(x, width, c, lo.astype(np.int64),
                                               hi.astype(np.int64), truth.counts, truth.bits)
        links = None
    else:
        groups, true_rows, true_codes, true_counts = _block_truth(truth, lo, hi)
        pos = true_rows * width + true_codes  # cell (p, j) has code j; ascending
        if kernel.wanted(n):
            flat, kept, sums = kernel.intopt_kept(x, width, c, pos, true_counts)
        else:
            x[pos] += true_counts
            flat, kept, sums = intopt_positive(x.reshape(n_par, width), c)
        links = _links(pos, flat, groups) if link else None
    _check(sums, c, kept)
    rows = flat // width
    return rows, flat - rows * width, kept, links


def _mixed_block(levels: Levels, k: int, parent_codes: np.ndarray, c: IntArray, lo: IntArray,
                 hi: IntArray, truth: TruthLevel, first_child: IntArray | None, widths: IntArray,
                 link: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`release_block` (Algorithm 1, lines 4-9) for nested parents taken in the order of their
    numbers of allowed children ``widths`` (runs of equal widths): each run's cells are a
    dense (parents, width) matrix, laid out one after the other, so the runs share one noise
    call (line 5), one IntOpt call (line 6, :func:`intopt_positive_runs`: the same integers as
    run by run; with the compiled kernel, one fused call per run) and one keep (lines 7-9);
    only the allowed children and their addresses are written run by run (a level with many
    distinct widths pays a block's fixed cost per block, not per width)."""
    table = levels.children[k - 1]
    assert table is not None and first_child is not None
    n_par = c.shape[0]
    edges = [0, *(np.flatnonzero(widths[1:] != widths[:-1]) + 1).tolist(), n_par]
    runs = [(e - a, int(widths[a])) for a, e in itertools.pairwise(edges)]
    starts = np.cumsum(widths) - widths
    n = int(starts[-1] + widths[-1])
    groups, true_rows, true_codes, true_counts = _block_truth(truth, lo, hi)
    pos = starts[true_rows] + table.positions(first_child, true_rows, true_codes)
    noise, source = levels.noise[k - 1], levels.sources[k - 1]
    addresser = levels.addressers[k - 1]
    if addresser.narrow and levels.estimates is None:  # line 5: each run's addresses, straight
        # into this thread's AES input
        out = address_buffer(n)
        for a, e in itertools.pairwise(edges):
            w, o = int(widths[a]), int(starts[a])
            addresser.cells(parent_codes[:, a:e], None, table.rows(first_child[a:e], w),
                            out=out[o:o + (e - a) * w])
        x = noise.sample_addressed(source, n, _scratch(n))
    else:
        kids = table.children.view(np.uint64)[ranges(first_child, widths)]
        x = _noised(levels, k, parent_codes, np.repeat(np.arange(n_par), widths), kids, n)
    if kernel.wanted(n) and widths.min() > 0:  # lines 5-8 fused, run by run
        flat, kept, sums = _kernel_runs(x, runs, c, pos, true_counts)
    else:
        x[pos] += true_counts
        flat, kept, sums = intopt_positive_runs(x, runs, c)  # line 6
    _check(sums, c, kept)
    rows = np.searchsorted(starts, flat, side="right") - 1  # lines 7-9: the children > 0
    codes = table.children[first_child[rows] + (flat - starts[rows])].astype(np.int64)
    return rows, codes, kept, _links(pos, flat, groups) if link else None


def _kernel_runs(x: IntArray, runs: list[tuple[int, int]], c: IntArray, pos: IntArray,
                 add: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """What ``x[pos] += add; intopt_positive_runs(x, runs, c)`` returns, from the compiled
    kernel (:func:`.kernel.intopt_kept`) on each run of equal widths (a dense matrix)."""
    cuts = np.cumsum([0, *(r * w for r, w in runs)])
    at = np.searchsorted(pos, cuts)  # each run's true children (pos ascending)
    flats, vals, sums = [], [], []
    row = 0
    for (r, w), o, e, a, b in zip(runs, cuts[:-1], cuts[1:], at[:-1], at[1:], strict=True):
        flat, val, s = kernel.intopt_kept(x[o:e], w, c[row:row + r], pos[a:b] - o, add[a:b])
        flats.append(flat + o)
        vals.append(val)
        sums.append(s)
        row += r
    return _cat(flats), _cat(vals), _cat(sums)


def _block_truth(truth: TruthLevel, lo: IntArray,
                 hi: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """The true children of a block's parents (parent ``p`` has ``lo[p]..hi[p] - 1`` at the
    level), in code order: their indices at the level, parent rows, codes and counts."""
    groups = ranges(lo, hi - lo)
    true_codes, true_counts = truth(groups)
    true_rows = np.repeat(np.arange(lo.shape[0], dtype=np.int64), hi - lo)
    return groups, true_rows, true_codes, true_counts


def _noised(levels: Levels, k: int, parent_codes: np.ndarray, rows: IntArray | None,
            kids: np.ndarray, n: int) -> np.ndarray:
    """Line 5: the noise of a block's ``n`` cells (the children ``kids`` of the parents, each
    cell's parent row ``rows``, or None for a (parents, width) matrix), addressed by the tree."""
    if levels.estimates is not None:  # estimator 'least_squares': round(x) - q, not noise
        return levels.estimates.cells(k, parent_codes, rows, kids, _scratch(n))
    noise, source, addresser = levels.noise[k - 1], levels.sources[k - 1], levels.addressers[k - 1]
    if addresser.narrow:  # addresses written straight into this thread's AES input
        addresser.cells(parent_codes, rows, kids, out=address_buffer(n))
        return noise.sample_addressed(source, n, _scratch(n))
    return noise.sample(source, addresser.cells(parent_codes, rows, kids), _scratch(n))


def _links(pos: IntArray, flat: IntArray, groups: IntArray) -> IntArray:
    """The true prefix of each released child (cells ``flat``): its index at the level, or -1
    if none (``pos``: the true children's cells, ascending; ``groups``: their indices)."""
    if not pos.size or not flat.size:
        return np.full(flat.shape[0], -1, np.int64)
    # a table over the block's cells (this thread's): cheaper than a binary search of every
    # kept child among the true ones
    table = memory.scratch("topdown.links", int(max(pos[-1], flat[-1])) + 1, np.int64, BLOCK_CELLS)
    table.fill(-1)
    table[pos] = groups
    return table[flat]


def _scratch(n: int) -> IntArray:
    """This thread's block matrix (int64, ``n`` cells): reused, so no block faults in fresh
    pages. A block's outputs are copied out of it before the next block."""
    return memory.scratch("topdown.cells", n, np.int64, BLOCK_CELLS)


def _check(sums: IntArray, c: IntArray, y: IntArray) -> None:
    if not np.array_equal(sums, c) or (y.size and y.min() < 0):
        raise InternalError("IntOpt returned children that do not sum to the parent or are < 0")


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
