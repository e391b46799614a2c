"""InfTDA's top-down descent (paper, Algorithm 1, left column): any batch of subtrees, in blocks.

:func:`release_below` is the one entry point every engine calls (DuckDB's levels UDF, Spark's
executors, :func:`release_tree`): given the nodes released at a cut level ``c`` (a batch of
subtrees) and the true counts below them, it releases levels ``c+1..u``. Level by level, every
child of every released parent is noised (line 5), optimised with IntOpt against the parent's
count (line 6) and kept when > 0 (lines 7-9); parents released 0 are pruned (line 3).

Noise is addressed by the tree (:mod:`~inftda_duckdb.core.tree`), so each subtree's release
depends only on its own root and the truth below it: the result is the same for any grouping of
subtrees into batches, any block size and any number of workers.

Work per level: the parents are cut into blocks of about ``BLOCK_CELLS`` noised cells; a block
draws its noise straight into one cache-sized matrix, adds its parents' true children, runs IntOpt
in place and keeps the children > 0 (densify, noise, IntOpt and keep fused). Blocks run on a pool
of ``workers`` threads (numpy and the AES cipher release the GIL); results are joined in order.
Memory: the truth and the released nodes (proportional to the data), plus a few blocks per worker,
whatever the number of noised cells.
"""

from __future__ import annotations

import collections
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .accounting import BudgetPlan
from .errors import InftdaError, InternalError, bad_argument
from .intopt import intopt, intopt_ragged
from .noise import DiscreteGaussian
from .randomness import RandomSource
from .tree import MAX_KEY_SPAN, Allowed, Levels, Nodes, find_columns, lookup, mixed_radix

IntArray = npt.NDArray[np.int64]
Sizes = list[int] | tuple[int, ...]

BLOCK_CELLS = 1 << 16
"""Cells noised and optimised per block (cache-sized: a block's temporaries stay in L2)."""


class LevelProgress(NamedTuple):
    """A progress report: ``cells_done`` of the ``cells_planned`` cells of ``level`` (every
    child of the level's ``parents``) are noised and optimised, ``seconds`` after it began."""

    level: int
    depth: int
    parents: int
    cells_done: int
    cells_planned: int
    seconds: float


ProgressHook = Callable[[LevelProgress], None]
"""Called from the thread that called :func:`release_below`: once per level with ``cells_done
== cells_planned``, and on long levels up to 16 times before (bounded)."""
CancelHook = Callable[[], bool]
"""Called between blocks; a true result stops the release with :class:`Cancelled` (it may also
raise its own exception, which propagates)."""


class Cancelled(InftdaError):
    """The release stopped between two blocks because its cancel hook asked it to."""


# ---------------------------------------------------------------------------------------------
# Algorithm 1, line 1


def release_root(n: int, plan: BudgetPlan, source: RandomSource) -> int:
    """Algorithm 1, line 1: the root is n (substitute: n is public); add_remove noises it."""
    if plan.root_sigma2 is None:
        return int(n)
    z = DiscreteGaussian(plan.root_sigma2).sample(source.derive(0), np.zeros(1, np.uint64))
    return max(0, int(n) + int(z[0]))


def check_total(nodes: Nodes, root: int, level: int) -> None:
    """The invariant of every level: its released counts add up to the root's."""
    total = int(nodes.counts.sum())
    if total != root:
        raise InternalError(f"level {level} released {total} records, not the root's {root}")


# ---------------------------------------------------------------------------------------------
# The engine-neutral API


def release_below(
    levels: Levels,
    nodes: Nodes,
    truth: npt.ArrayLike,
    counts: npt.ArrayLike,
    *,
    upto: int | None = None,
    workers: int = 1,
    progress: ProgressHook | None = None,
    cancel: CancelHook | None = None,
) -> Nodes:
    """Algorithm 1, lines 2-9, below a cut: release levels ``c+1..upto`` of a batch of subtrees.

    ``nodes`` are released nodes of level ``c = nodes.codes.shape[0]`` (any of them, each once;
    ``Nodes.root(n)`` for the whole tree). ``truth``/``counts`` are the true counts of the
    prefixes below them at some level ``t >= upto`` (``upto`` defaults to the leaves): codes
    (t, N) (one row per level), or, with ``t = upto``, mixed-radix keys (N,) when the domain
    product up to ``upto`` is below 2**62; the non-zero ones suffice, in any order, each prefix
    once; prefixes under other nodes are ignored. Returns the released nodes of level ``upto``
    below ``nodes``, in code order.

    The result for a subtree depends only on its root, the truth below it and ``levels``: any
    split of a level's nodes into batches (run anywhere, in any order) gives the same nodes.
    ``workers`` threads release the blocks of each level; ``progress`` and ``cancel`` are the
    hooks of :data:`ProgressHook` and :data:`CancelHook`.
    """
    top, depth = int(nodes.codes.shape[0]), levels.depth
    upto = depth if upto is None else int(upto)
    if not 0 <= top <= upto <= depth:
        raise InternalError(f"release_below from level {top} to {upto} of a {depth}-level tree")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise bad_argument("workers", workers, "must be a positive integer", "pass e.g. 4")
    counts_arr = np.asarray(counts, dtype=np.int64)
    if counts_arr.size and counts_arr.min() < 0:
        raise bad_argument("counts", int(counts_arr.min()), "must be >= 0",
                           "pass the true (non-negative) counts")
    truth_arr = np.asarray(truth)
    t = truth_arr.shape[0] if truth_arr.ndim == 2 else upto
    if not upto <= t <= depth:
        raise InternalError(f"true counts of level {t} to release down to level {upto}")
    truth_t = _Truth.build(truth_arr, counts_arr, levels.sizes[:t], top)
    nodes = _sorted(nodes, levels.sizes[:top])
    parent_truth = truth_t.match(nodes.codes)
    runner = _Runner(depth, workers, progress, cancel)
    for k in range(top + 1, upto + 1):
        nodes, parent_truth = _level(levels, k, nodes, parent_truth, truth_t, runner)
    return nodes


def release_tree(
    leaf_codes: npt.ArrayLike,
    leaf_counts: npt.ArrayLike,
    domain_sizes: Sizes,
    plan: BudgetPlan,
    source: RandomSource,
    allowed: dict[int, Allowed] | None = None,
    *,
    workers: int = 1,
) -> tuple[IntArray, IntArray]:
    """The whole of Algorithm 1 in memory: returns the released leaves (codes (M, d), counts).

    ``leaf_codes`` (N, d) are the codes of the non-zero leaves (any order, no repeats) and
    ``leaf_counts`` their true counts; ``allowed[k]`` lists the public children of a nested
    level k (0-based). The result lists the released leaves in code order and equals the
    DuckDB (and Spark) release with the same source.
    """
    d = len(domain_sizes)
    codes = np.asarray(leaf_codes, dtype=np.int64).reshape(-1, d)
    counts = np.asarray(leaf_counts, dtype=np.int64)
    root = release_root(int(counts.sum()), plan, source)
    levels = Levels.build(domain_sizes, plan, source, allowed)
    nodes = release_below(levels, Nodes.root(root), codes.T, counts, workers=workers)
    check_total(nodes, root, d)
    return nodes.codes.T.astype(np.int64), nodes.counts


# ---------------------------------------------------------------------------------------------
# The truth below a batch, as a sorted forest


class _Truth:
    """True counts of the prefixes of levels ``top..upto``, each level sorted in code order:
    ``counts[j]`` and ``codes[j]`` (the last code) of level ``top + j``'s prefixes, and
    ``first[j]``: prefix ``i`` of level ``top + j`` has the children ``first[j][i]`` to
    ``first[j][i + 1] - 1`` at the level below."""

    def __init__(self, top: int, counts: list[IntArray], codes: list[np.ndarray],
                 first: list[IntArray], top_keys: IntArray | None, top_codes: np.ndarray,
                 sizes: Sizes) -> None:
        self.top, self.counts, self.codes, self.first = top, counts, codes, first
        self._keys, self._codes, self._sizes = top_keys, top_codes, sizes

    @classmethod
    def build(cls, truth: np.ndarray, counts: IntArray, sizes: Sizes, top: int) -> _Truth:
        u = len(sizes)
        if truth.ndim == 1 and u > 1:  # mixed-radix keys
            if math.prod(sizes) >= MAX_KEY_SPAN:
                raise InternalError("prefix keys for domains whose product passes 2**62")
            keys = truth.astype(np.int64, copy=False)
        else:
            codes = truth.reshape(u, -1)
            if codes.size and (codes.min() < 0 or (codes.max(axis=1) >= sizes).any()):
                raise InternalError("a true prefix has a code outside its domain")
            if math.prod(sizes) >= MAX_KEY_SPAN:
                return cls._from_codes(codes, counts, sizes, top)
            keys = mixed_radix(codes, sizes, np.int64)
        if keys.shape != counts.shape:
            raise InternalError("different numbers of true prefixes and counts")
        return cls._from_keys(keys, counts, sizes, top)

    @classmethod
    def _from_keys(cls, keys: IntArray, counts: IntArray, sizes: Sizes, top: int) -> _Truth:
        span = math.prod(sizes)
        if keys.size and (int(keys.min()) < 0 or int(keys.max()) >= span):
            raise InternalError("a prefix key outside its domain")
        if not counts.all():
            keys, counts = keys[counts > 0], counts[counts > 0]
        n = keys.shape[0]
        bits = max(1, n.bit_length())
        if span << bits < MAX_KEY_SPAN:  # sort (key, position) packed: ~8x faster than argsort
            packed = np.left_shift(keys, bits)
            packed |= np.arange(n, dtype=np.int64)
            packed.sort()
            keys = packed >> bits
            counts = counts[packed & ((1 << bits) - 1)]
        else:
            order = np.argsort(keys, kind="stable")
            keys, counts = keys[order], counts[order]
        if n > 1 and not (keys[1:] > keys[:-1]).all():
            raise _repeated_child()
        u = len(sizes)
        level_counts, level_codes, level_first = [counts], [np.zeros(0, np.int32)], []
        for k in range(u, top, -1):  # bottom up: a level's prefixes from the one below
            m = int(sizes[k - 1])
            parent = keys // m
            level_codes.append((keys - parent * m).astype(np.int32))
            starts = _starts(parent)
            level_first.append(np.append(starts, n))
            keys = parent[starts]
            counts = np.add.reduceat(counts, starts) if n else counts
            level_counts.append(counts)
            n = keys.shape[0]
        return cls(top, level_counts[::-1], [level_codes[0], *level_codes[:0:-1]],
                   level_first[::-1], keys, np.zeros((0, 0), np.int32), sizes)

    @classmethod
    def _from_codes(cls, codes: np.ndarray, counts: IntArray, sizes: Sizes, top: int) -> _Truth:
        """Domains too wide for int64 keys: sort the code columns, find each level's prefixes
        where a code changes."""
        keep = counts > 0
        codes, counts = codes[:, keep], counts[keep]
        order = np.lexsort(codes[::-1])
        codes, counts = codes[:, order], counts[order]
        n, u = codes.shape[1], len(sizes)
        change = np.zeros(n, bool)
        change[:1] = True
        starts = [np.flatnonzero(change)]
        for k in range(1, u + 1):
            change[1:] |= codes[k - 1][1:] != codes[k - 1][:-1]
            starts.append(np.flatnonzero(change))
        if starts[u].shape[0] != n:
            raise _repeated_child()
        level_counts = [np.add.reduceat(counts, s) if n else counts[:0] for s in starts[top:]]
        level_codes = [np.zeros(0, np.int32)] + [
            codes[k - 1][starts[k]].astype(np.int32) for k in range(top + 1, u + 1)]
        level_first = [np.append(np.searchsorted(starts[k + 1], starts[k]), starts[k + 1].size)
                       for k in range(top, u)]
        return cls(top, level_counts, level_codes, level_first, None,
                   codes[:top, starts[top]], sizes)

    def match(self, node_codes: np.ndarray) -> IntArray:
        """Index of each node (columns of ``node_codes``, level ``top``) among the true
        prefixes of that level, -1 where it has none."""
        if self._keys is None:
            return find_columns(self._codes, node_codes, self._sizes[: self.top])
        keys = mixed_radix(node_codes, self._sizes[: self.top], np.int64)
        return lookup(self._keys, keys)


def _starts(sorted_keys: IntArray) -> IntArray:
    """Where each run of equal values begins in a sorted array."""
    if sorted_keys.shape[0] == 0:
        return np.zeros(0, np.int64)
    starts = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1])
    starts += 1
    return np.concatenate([[0], starts])


def _sorted(nodes: Nodes, sizes: Sizes) -> Nodes:
    """The nodes in code order (an engine may pass a batch in any order); repeats refused."""
    codes = nodes.codes
    if codes.shape[1] < 2 or codes.shape[0] == 0:
        return nodes
    order = np.lexsort(codes[::-1])
    if not (np.diff(order) == 1).all():
        codes = codes[:, order]
        nodes = Nodes(codes, nodes.counts[order])
    same = np.ones(codes.shape[1] - 1, bool)
    for row in codes:
        same &= row[1:] == row[:-1]
    if same.any():
        raise InternalError("a batch lists a node twice")
    return nodes


def _repeated_child() -> InftdaError:
    # a repeated prefix would keep one count and drop the other: unbounded sensitivity for a
    # caller that passes non-aggregated counts
    return bad_argument(
        "truth", "a prefix listed twice", "must list each prefix at most once",
        "aggregate the true counts by prefix before calling release_below",
    )


# ---------------------------------------------------------------------------------------------
# One level of a batch: blocks of parents, run by the workers


def _level(levels: Levels, k: int, parents: Nodes, parent_truth: IntArray, truth: _Truth,
           runner: _Runner) -> tuple[Nodes, IntArray]:
    """Algorithm 1, lines 3-9, for level ``k``: the children of every parent > 0."""
    live = parents.counts > 0  # line 3: a parent released 0 is pruned with its branch
    if not live.all():
        parents = Nodes(parents.codes[:, live], parents.counts[live])
        parent_truth = parent_truth[live]
    n_par, m = parents.counts.shape[0], levels.sizes[k - 1]
    j = k - truth.top
    first, has = truth.first[j - 1], parent_truth >= 0
    t = np.where(has, parent_truth, 0)
    lo = np.where(has, first[t], 0) if first.shape[0] > 1 else np.zeros(n_par, np.int64)
    hi = np.where(has, first[t + 1], 0) if first.shape[0] > 1 else lo
    children = levels.children[k - 1]
    if children is None:
        step = max(1, BLOCK_CELLS // m)
        tasks = [(p, min(p + step, n_par)) for p in range(0, n_par, step)]
        cells, a_lo, a_hi = [(b - a) * m for a, b in tasks], None, None
        planned = n_par * m
    else:
        a_lo, a_hi = children.of(parents.codes)
        ends = np.cumsum(a_hi - a_lo)
        planned = int(ends[-1]) if n_par else 0
        cuts = _cuts(ends, BLOCK_CELLS)
        tasks = list(itertools.pairwise(cuts))
        cells = [int(ends[b - 1] - (ends[a - 1] if a else 0)) for a, b in tasks]

    def work(p0: int, p1: int) -> tuple[np.ndarray, ...]:
        blk = slice(p0, p1)
        return _block(levels, k, parents.codes[:, blk], parents.counts[blk], lo[blk], hi[blk],
                      truth.codes[j], truth.counts[j],
                      None if a_lo is None else (a_lo[blk], a_hi[blk]))  # type: ignore[index]

    parts = runner.run(k, n_par, planned, tasks, cells, work)
    if not parts:
        return Nodes(np.zeros((k, 0), np.int32), np.zeros(0, np.int64), 0), np.zeros(0, np.int64)
    prow = _cat([p[0] + a for p, (a, _) in zip(parts, tasks, strict=True)])
    code, count, tidx = (_cat([p[i] for p in parts]) for i in (1, 2, 3))
    child_codes = np.empty((k, count.shape[0]), np.int32)
    np.take(parents.codes, prow, axis=1, out=child_codes[:-1])
    child_codes[-1] = code
    return Nodes(child_codes, count, planned), tidx


def _cuts(ends: IntArray, cells: int) -> list[int]:
    """Parent boundaries of blocks of about ``cells`` cells (each block at least one parent),
    from the running totals of cells per parent."""
    cuts, n = [0], ends.shape[0]
    while cuts[-1] < n:
        base = int(ends[cuts[-1] - 1]) if cuts[-1] else 0
        nxt = int(np.searchsorted(ends, base + cells, side="right"))
        cuts.append(max(nxt, cuts[-1] + 1))
    return cuts


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _ranges(starts: IntArray, lengths: IntArray) -> IntArray:
    """``starts[i] .. starts[i] + lengths[i] - 1`` for every i, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)


def _block(levels: Levels, k: int, parent_codes: np.ndarray, c: IntArray, lo: IntArray,
           hi: IntArray, true_codes: np.ndarray, true_counts: IntArray,
           allowed: tuple[IntArray, IntArray] | None) -> tuple[np.ndarray, ...]:
    """Lines 4-9 for a block of parents, fused: noise drawn into the block's cells, the true
    children added, IntOpt, children > 0 kept. Returns, per kept child, its parent's row in the
    block, its code, its count and its true prefix (index at level k, -1 if none)."""
    m, noise, source = levels.sizes[k - 1], levels.noise[k - 1], levels.sources[k - 1]
    n_par = c.shape[0]
    groups = _ranges(lo, hi - lo)  # the true children of the block's parents, in code order
    true_rows = np.repeat(np.arange(n_par, dtype=np.int64), hi - lo)
    if allowed is None:  # dense: every child of every parent
        x = noise.sample(source, levels.addressers[k - 1].cells(parent_codes, None,
                                                                 np.arange(m)))  # line 5
        pos = true_rows * m + true_codes[groups]
        x[pos] += true_counts[groups]
        y = intopt(x.reshape(n_par, m), c).reshape(-1)  # line 6
        _check(np.einsum("ij->i", y.reshape(n_par, m)), c, y)
        flat = np.flatnonzero(y > 0)  # lines 7-8, row-major: codes ascending per parent
        rows = flat // m
        codes = flat - rows * m
    else:  # nested: each parent's allowed children (a public domain table)
        table = levels.children[k - 1]
        assert table is not None
        a_lo, a_hi = allowed
        lengths = a_hi - a_lo
        codes_all = table.children[_ranges(a_lo, lengths)]
        rows_all = np.repeat(np.arange(n_par, dtype=np.int64), lengths)
        x = noise.sample(source, levels.addressers[k - 1].cells(parent_codes, rows_all,
                                                                 codes_all))  # line 5
        cell_keys = rows_all * m + codes_all  # ascending
        true_keys = true_rows * m + true_codes[groups]
        pos = np.searchsorted(cell_keys, true_keys)
        if pos.size and (pos.max() >= cell_keys.shape[0] or (cell_keys[pos] != true_keys).any()):
            raise InternalError("a true child of a nested level is not among the allowed children")
        x[pos] += true_counts[groups]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        y = intopt_ragged(x, offsets, c)  # line 6
        _check(np.add.reduceat(y, offsets[:-1]) if y.size else y[:0], c, y)
        flat = np.flatnonzero(y > 0)  # lines 7-8
        rows, codes = rows_all[flat], codes_all[flat]
    # the true prefix of each released child: the truth's positions are ascending
    if pos.size:
        at = np.minimum(np.searchsorted(pos, flat), pos.shape[0] - 1)
        tidx = np.where(pos[at] == flat, groups[at], -1)
    else:
        tidx = np.full(flat.shape[0], -1, np.int64)
    return rows, codes.astype(np.int32), y[flat], tidx


def _check(sums: IntArray, c: IntArray, y: IntArray) -> None:
    if not np.array_equal(sums, c) or (y.size and y.min() < 0):
        raise InternalError("IntOpt returned children that do not sum to the parent or are < 0")


# ---------------------------------------------------------------------------------------------
# Workers, progress and cancellation


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    with _POOL_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="inftda")
        return pool


def _forget_pools() -> None:  # a forked child has none of the parent's threads
    _POOLS.clear()


os.register_at_fork(after_in_child=_forget_pools)


class _Runner:
    """Runs a level's blocks (in order, on the pool when there are workers and several
    blocks), reports progress and checks the cancel hook between blocks."""

    def __init__(self, depth: int, workers: int, progress: ProgressHook | None,
                 cancel: CancelHook | None) -> None:
        self.depth, self.workers, self.progress, self.cancel = depth, workers, progress, cancel

    def _stop(self) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled("the release was cancelled between two blocks")

    def run(self, level: int, parents: int, planned: int, tasks: Sequence[tuple[int, int]],
            cells: Sequence[int], work: Callable[[int, int], Any]) -> list[Any]:
        start, done, told = time.perf_counter(), 0, 0
        results: list[Any] = []

        def finished(result: Any) -> None:
            nonlocal done, told
            results.append(result)
            done += cells[len(results) - 1]
            if self.progress is not None and (done == planned or done - told >= planned / 16):
                told = done
                self.progress(LevelProgress(level, self.depth, parents, done, planned,
                                            time.perf_counter() - start))

        self._stop()
        if self.workers == 1 or len(tasks) < 2:
            for a, b in tasks:
                finished(work(a, b))
                if len(results) < len(tasks):
                    self._stop()
        else:
            pool, pending = _pool(self.workers), collections.deque[Future[Any]]()
            try:
                for a, b in tasks:
                    if len(pending) >= 2 * self.workers:  # bounded: a few blocks per worker
                        finished(pending.popleft().result())
                        self._stop()
                    pending.append(pool.submit(work, a, b))
                while pending:
                    finished(pending.popleft().result())
            finally:  # on an error or a cancel: drop what has not started, wait for the rest
                for f in pending:
                    f.cancel()
                wait(pending)
        if self.progress is not None and not tasks:
            self.progress(LevelProgress(level, self.depth, parents, 0, 0,
                                        time.perf_counter() - start))
        return results


__all__ = [
    "BLOCK_CELLS", "MAX_KEY_SPAN", "Allowed", "CancelHook", "Cancelled", "LevelProgress", "Levels",
    "Nodes", "ProgressHook", "check_total", "release_below", "release_root", "release_tree",
]
