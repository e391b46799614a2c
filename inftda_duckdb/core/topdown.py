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
in place and keeps the children > 0 (densify, noise, IntOpt and keep fused; with numba, in one
compiled pass per row: :mod:`~inftda_duckdb.core.kernel`, same outputs). Blocks run on a pool of
``workers`` threads (numpy, the AES cipher and the compiled kernel release the GIL); results are
joined in order.
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

from . import kernel, memory
from .accounting import BudgetPlan
from .errors import InftdaError, InternalError, bad_argument
from .intopt_blocks import intopt_positive, intopt_positive_runs, ranges
from .noise import DiscreteGaussian, address_buffer
from .randomness import RandomSource
from .tree import MAX_KEY_SPAN, Allowed, Levels, Nodes, find_columns, lookup, mixed_radix

IntArray = npt.NDArray[np.int64]
Sizes = list[int] | tuple[int, ...]

BLOCK_CELLS = 1 << 18
"""Cells noised and optimised per block, at most. Large enough that a block's numpy calls
outweigh their dispatch, which holds the GIL (with small blocks, workers wait on each other
for it); small enough that a worker's temporaries stay a few MB."""
MIN_BLOCK_CELLS = 1 << 14
"""Blocks of a small level shrink to this, so that every worker gets some (block sizes never
change the result: noise is addressed by the tree)."""


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
    counts: npt.ArrayLike | None,
    *,
    upto: int | None = None,
    workers: int = 1,
    progress: ProgressHook | None = None,
    cancel: CancelHook | None = None,
    radix: int | None = None,
    overwrite: bool = False,
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
    hooks of :data:`ProgressHook` and :data:`CancelHook`. With ``radix`` (> every count, and
    the domain product up to ``upto`` times ``radix`` below 2**62), ``truth`` holds each prefix
    as one int64 ``key * radix + count`` and ``counts`` is ignored: half the memory of keys and
    counts, as DuckDB sends the leaves. ``overwrite``: ``truth`` is the call's own scratch (a
    private copy nothing reads afterwards, as DuckDB hands its levels call the leaves): the
    pairs are repacked and sorted in it instead of in a new array of their size (no fresh
    memory to fault in, one array of the leaves' size less at the peak).
    """
    top, depth = int(nodes.codes.shape[0]), levels.depth
    upto = depth if upto is None else int(upto)
    if not 0 <= top <= upto <= depth:
        raise InternalError(f"release_below from level {top} to {upto} of a {depth}-level tree")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise bad_argument("workers", workers, "must be a positive integer", "pass e.g. 4")
    counts_arr = None if radix is not None else np.asarray(counts, dtype=np.int64)
    if counts_arr is not None and counts_arr.size and counts_arr.min() < 0:
        raise bad_argument("counts", int(counts_arr.min()), "must be >= 0",
                           "pass the true (non-negative) counts")
    truth_arr = np.asarray(truth)
    t = truth_arr.shape[0] if truth_arr.ndim == 2 else upto
    if not upto <= t <= depth:
        raise InternalError(f"true counts of level {t} to release down to level {upto}")
    truth_t = _Truth.build(truth_arr, counts_arr, levels.sizes[:t], top, radix, overwrite)
    nodes = _sorted(nodes, levels.sizes[:top])
    parent_truth = truth_t.match(nodes.codes)
    runner = _Runner(depth, workers, progress, cancel)
    for k in range(top + 1, upto + 1):
        nodes, parent_truth = _level(levels, k, nodes, parent_truth, truth_t, runner, k == upto)
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


class _Level(NamedTuple):
    """One level of the truth, in code order: the last code and the count of each prefix, as
    arrays, or (the leaves) as the sorted pairs ``(key << bits) | count`` they were sorted as
    (the codes and counts are read from them block by block: no level-sized copies)."""

    codes: np.ndarray | None
    counts: IntArray
    bits: int = 0
    m: int = 0

    def __call__(self, groups: IntArray) -> tuple[np.ndarray, IntArray]:
        """The codes and counts of the prefixes ``groups``."""
        if self.codes is not None:
            return self.codes[groups], self.counts[groups]
        pairs = self.counts[groups]
        keys = pairs >> self.bits
        return keys - keys // self.m * self.m, pairs & ((1 << self.bits) - 1)


class _Truth:
    """True counts of the prefixes of levels ``top..upto``, each level sorted in code order:
    ``levels[j]`` gives the last codes and the counts of level ``top + j``'s prefixes, and
    ``first[j]``: prefix ``i`` of level ``top + j`` has the children ``first[j][i]`` to
    ``first[j][i + 1] - 1`` at the level below."""

    def __init__(self, top: int, levels: list[_Level], first: list[IntArray],
                 top_keys: IntArray | None, top_codes: np.ndarray, sizes: Sizes) -> None:
        self.top, self.levels, self.first = top, levels, first
        self._keys, self._codes, self._sizes = top_keys, top_codes, sizes

    @classmethod
    def build(cls, truth: np.ndarray, counts: IntArray | None, sizes: Sizes, top: int,
              radix: int | None = None, overwrite: bool = False) -> _Truth:
        """``overwrite``: prefix pairs (``radix``) in a writable int64 ``truth`` are sorted in
        place (see :func:`release_below`)."""
        u = len(sizes)
        if radix is not None:  # one int64 per prefix: key * radix + count
            if truth.ndim != 1 or radix < 1 or math.prod(sizes) * radix >= MAX_KEY_SPAN:
                raise InternalError("prefix pairs need keys and counts within 2**62")
            pairs = truth.astype(np.int64, copy=False)
            own = overwrite and pairs.flags.writeable and pairs.flags.c_contiguous
            return cls._from_keys(pairs, None, sizes, top, radix, own)
        assert counts is not None
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
    def _from_keys(cls, keys: IntArray, counts: IntArray | None, sizes: Sizes, top: int,
                   radix: int = 1, overwrite: bool = False) -> _Truth:
        span, u = math.prod(sizes), len(sizes)
        if keys.size and (int(keys.min()) < 0 or int(keys.max()) >= span * radix):
            raise InternalError("a prefix key outside its domain")
        if counts is None:  # pairs key * radix + count
            pairs, bits, sorted_counts = _sort_pairs(keys, radix, span, overwrite)
        else:
            if counts.size and not counts.all():
                keys, counts = keys[counts > 0], counts[counts > 0]
            pairs, bits, sorted_counts = _sort_by_key(keys, counts, span)
        n = pairs.shape[0]
        chunk: Callable[[int, int], tuple[IntArray, IntArray]]
        leaves: _Level | None = None
        current: IntArray | None = sorted_counts
        if bits:  # the leaves stay packed (key << bits) | count, read block by block
            mask = (1 << bits) - 1
            leaves = _Level(None, pairs, bits, int(sizes[-1]) if u else 1)
            chunk = lambda a, b: (pairs[a:b] >> bits, pairs[a:b] & mask)  # noqa: E731
            if top == u:  # nothing to release below: the leaves' keys and counts for matching
                keys, current = pairs >> bits, pairs & mask
        else:
            keys = pairs
            assert sorted_counts is not None
            chunk = _slicer(pairs, sorted_counts)
        levels: list[_Level] = []
        first: list[IntArray] = []
        for k in range(u, top, -1):  # bottom up: a level's prefixes from the one below
            if k == u and bits:
                code, starts, keys, up = _up_pairs(pairs, bits, int(sizes[k - 1]), chunk)
            else:
                code, starts, keys, up = _up(n, chunk, int(sizes[k - 1]), _code_type(sizes),
                                             check=k == u, keep=leaves is None)
            if leaves is None:
                assert current is not None
                leaves = _Level(code, current)
            levels.append(leaves)
            leaves, current = None, up
            first.append(starts)
            n = keys.shape[0]
            chunk = _slicer(keys, up)
        assert current is not None
        levels.append(_Level(None, current))
        return cls(top, levels[::-1], first[::-1], keys, np.zeros((0, 0), np.int32), sizes)

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
        level_codes = [None] + [codes[k - 1][starts[k]].astype(_code_type(sizes))
                                for k in range(top + 1, u + 1)]
        level_first = [np.append(np.searchsorted(starts[k + 1], starts[k]), starts[k + 1].size)
                       for k in range(top, u)]
        return cls(top, [_Level(c, n_) for c, n_ in zip(level_codes, level_counts, strict=True)],
                   level_first, None, codes[:top, starts[top]], sizes)

    def done(self, k: int) -> None:
        """Level ``k`` is released: its prefixes and the links to them are no longer needed."""
        j = k - self.top
        self.levels[j] = _Level(None, np.zeros(0, np.int64))
        self.first[j - 1] = np.zeros(0, np.int64)

    def match(self, node_codes: np.ndarray) -> IntArray:
        """Index of each node (columns of ``node_codes``, level ``top``) among the true
        prefixes of that level, -1 where it has none."""
        if self._keys is None:
            return find_columns(self._codes, node_codes, self._sizes[: self.top])
        keys = mixed_radix(node_codes, self._sizes[: self.top], np.int64)
        return lookup(self._keys, keys)


_CHUNK = 1 << 16  # elements per pass over a sorted truth level (cache-sized temporaries)


def _sort_pairs(pairs: IntArray, radix: int, span: int,
                overwrite: bool = False) -> tuple[IntArray, int, IntArray | None]:
    """:func:`_sort_by_key` of prefixes given as ``key * radix + count`` (one array, as an
    engine sends them: half the memory of keys and counts): repacked as ``(key << bits) |
    count`` (already so for a power-of-two ``radix``, as DuckDB sends them) into the one array
    that is sorted (:func:`.kernel.sort`; ``pairs`` itself with ``overwrite``), zero counts
    dropped."""
    n = pairs.shape[0]
    bits, kbits = max(1, (radix - 1).bit_length()), max(1, (span - 1).bit_length())
    if kbits + bits > 62:  # too wide to repack: keys and counts
        keys = pairs // radix
        counts = pairs - keys * radix
        return _sort_by_key(keys[counts > 0], counts[counts > 0], span)
    packed = pairs if overwrite else memory.empty(n, np.int64)
    zeros, shifted = False, radix == 1 << bits  # shifted: key * radix + count is (key << bits)
    for a in range(0, n, _CHUNK):  # | count already, no division (DuckDB's @leaf_pairs)
        b = min(a + _CHUNK, n)
        if shifted:
            if packed is not pairs:
                packed[a:b] = pairs[a:b]
            zeros = zeros or not np.bitwise_and(pairs[a:b], radix - 1).all()
            continue
        count = np.remainder(pairs[a:b], radix)  # read before packed (maybe pairs) is written
        key = np.floor_divide(pairs[a:b], radix, out=packed[a:b])
        zeros = zeros or not count.all()
        key <<= bits
        key |= count
    if zeros:
        packed = packed[packed & ((1 << bits) - 1) > 0]
    kernel.sort(packed, bits, kbits + bits)
    return packed, bits, None


def _sort_by_key(keys: IntArray, counts: IntArray,
                 span: int) -> tuple[IntArray, int, IntArray | None]:
    """Keys (distinct, in [0, span)) sorted with their counts: ``(pairs, bits, None)`` with the
    sorted pairs ``(key << bits) | count`` when both fit one int64 (one :func:`.kernel.sort`:
    nothing else of the level's size), else ``(keys, 0, counts)`` sorted (packed with
    positions)."""
    n = keys.shape[0]
    kbits = max(1, (span - 1).bit_length())
    cbits = max(1, int(counts.max()).bit_length()) if n else 1
    lbits = cbits if kbits + cbits <= 62 else max(1, n.bit_length())
    if kbits + lbits > 62:  # too wide to pack: an argsort
        order = np.argsort(keys, kind="stable")
        return keys[order], 0, counts[order]
    packed = memory.empty(n, np.int64)
    for a in range(0, n, _CHUNK):  # (key << lbits) | count (or position)
        b = min(a + _CHUNK, n)
        np.left_shift(keys[a:b], lbits, out=packed[a:b])
        packed[a:b] |= counts[a:b] if lbits == cbits else np.arange(a, b, dtype=np.int64)
    kernel.sort(packed, lbits, kbits + lbits)
    if lbits == cbits:
        return packed, cbits, None
    out_counts = memory.empty(n, np.int64)
    mask = (1 << lbits) - 1
    for a in range(0, n, _CHUNK):  # unpacked in place: the keys overwrite the packed pairs
        b = min(a + _CHUNK, n)
        part = packed[a:b]
        np.take(counts, part & mask, out=out_counts[a:b])
        np.right_shift(part, lbits, out=part)
    return packed, 0, out_counts


def _slicer(keys: IntArray, counts: IntArray) -> Callable[[int, int], tuple[IntArray, IntArray]]:
    return lambda a, b: (keys[a:b], counts[a:b])


def _up(n: int, chunk: Callable[[int, int], tuple[IntArray, IntArray]], m: int,
        code_type: type[np.signedinteger], check: bool,
        keep: bool) -> tuple[np.ndarray | None, IntArray, IntArray, IntArray]:
    """One level up a sorted truth level of ``n`` prefixes (read by ``chunk(a, b)``: keys
    ascending and distinct, counts): each key's last code (if ``keep``), where each parent's
    run of children starts (and ``n`` after the last), the parents' keys and their counts. In
    cache-sized chunks, written into buffers of ``n`` entries whose untouched tail costs no
    memory: no temporary of the level's size."""
    codes = memory.empty(n, code_type) if keep else None
    starts = memory.empty(n + 1, _index_type(n + 1))
    parents, sums = memory.empty(n + 1, np.int64), memory.empty(n + 1, np.int64)
    filled, last = 0, None
    for a in range(0, n, _CHUNK):
        b = min(a + _CHUNK, n)
        part, cnt = chunk(a, b)
        parent = part // m
        if codes is not None:
            np.subtract(part, parent * m, out=codes[a:b], casting="unsafe")
        if check and (not (part[1:] > part[:-1]).all() or (last is not None and last >= part[0])):
            raise _repeated_child()
        last = part[-1]
        new = np.flatnonzero(parent[1:] != parent[:-1])
        new += 1
        segments = np.concatenate([[0], new])
        total = np.add.reduceat(cnt, segments)
        if filled and parent[0] == parents[filled - 1]:  # continues the last chunk's parent
            sums[filled - 1] += total[0]
            segments, total = new, total[1:]
        f = filled + segments.shape[0]
        np.add(segments, a, out=starts[filled:f], casting="unsafe")
        parents[filled:f] = parent[segments]
        sums[filled:f] = total
        filled = f
    starts[filled] = n
    return codes, starts[: filled + 1], parents[:filled], sums[:filled]


def _up_pairs(pairs: IntArray, bits: int, m: int,
              chunk: Callable[[int, int], tuple[IntArray, IntArray]]
              ) -> tuple[None, IntArray, IntArray, IntArray]:
    """:func:`_up` of the leaves as sorted pairs ``(key << bits) | count`` (checked, no codes
    kept): in one compiled pass (:func:`.kernel.up_pairs`) when the kernel is wanted, else in
    numpy's chunks (``chunk`` reads the pairs as keys and counts)."""
    n = pairs.shape[0]
    if _index_type(n + 1) is not np.int32 or not kernel.wanted(n):  # (the kernel's starts)
        _, starts, parents, sums = _up(n, chunk, m, np.int8, check=True, keep=False)
        return None, starts, parents, sums
    starts = memory.empty(n + 1, np.int32)  # (untouched tails cost no memory)
    parents, sums = memory.empty(n, np.int64), memory.empty(n, np.int64)
    filled = kernel.up_pairs(pairs, bits, m, starts, parents, sums)
    if filled < 0:
        raise _repeated_child()
    return None, starts[: filled + 1], parents[:filled], sums[:filled]


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
           runner: _Runner, last: bool) -> tuple[Nodes, IntArray]:
    """Algorithm 1, lines 3-9, for level ``k``: the children of every parent > 0.

    A nested level's parents have their own allowed children: they are taken in the order of
    their numbers of them, so each run of equal widths is a dense matrix again, and blocks of
    about the block size pack consecutive runs (several widths share a block's calls:
    :func:`_mixed_block`); the kept children are put back in parent order at the end (each
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
    code_type = _code_type(levels.sizes[:k])
    tasks = _tasks(runs, size, children is not None)
    cells = [(b - a) * w if w else int(width[a:b].sum()) for a, b, w in tasks]

    def work(p0: int, p1: int, w: int) -> tuple[np.ndarray, ...] | tuple[Any, ...]:
        rows: slice | IntArray = slice(p0, p1) if order is None else order[p0:p1]
        kids = None if order is None else a_lo[rows]
        lo, hi = _true_children(truth.first[j - 1], parent_truth[rows])
        # (np.take along the columns: faster than codes[:, rows] for a block's parents)
        codes = parents.codes[:, rows] if isinstance(rows, slice) \
            else np.take(parents.codes, rows, axis=1)
        out = _block(levels, k, codes, parents.counts[rows], lo, hi, truth.levels[j], kids,
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
    tidx = None if last else memory.empty(cap, _index_type(truth.levels[j].counts.shape[0]))
    prow = memory.empty(cap, _index_type(n_par))
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


def _nested_level(k: int, parents: Nodes, planned: int, runner: _Runner,
                  tasks: list[tuple[int, int, int]], cells: list[int],
                  work: Callable[..., tuple[np.ndarray, ...]], truth: _Truth, j: int,
                  code_type: type[np.signedinteger], last: bool) -> tuple[Nodes, IntArray]:
    """The end of :func:`_level` for a nested level, whose blocks take the parents in the order
    of their widths: each block's children (a few per parent) are kept as they come, then
    written once, straight into their parents' slots of the output (parent order, codes
    ascending within a parent: each parent's run moves whole, no sort). No arrays sized by a
    bound on the children: mapping them and touching their pages first is a cost of its own."""
    n_par = parents.counts.shape[0]
    links = None if last else _index_type(truth.levels[j].counts.shape[0])
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
    prow = np.repeat(np.arange(n_par, dtype=_index_type(n_par)), kept)
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


def _index_type(n: int) -> type[np.signedinteger]:
    """Positions among ``n`` entries (and -1) are int32 (half the memory) below 2**31."""
    return np.int32 if n < 1 << 31 else np.int64


def _code_type(sizes: Sizes) -> type[np.signedinteger]:
    """Codes are int32 (half the memory) unless a domain has 2**31 values or more."""
    return np.int32 if max(sizes, default=0) < 1 << 31 else np.int64


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _block(levels: Levels, k: int, parent_codes: np.ndarray, c: IntArray, lo: IntArray,
           hi: IntArray, truth: _Level, first_child: IntArray | None, width: int | IntArray,
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
                 hi: IntArray, truth: _Level, first_child: IntArray | None, widths: IntArray,
                 link: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`_block` (Algorithm 1, lines 4-9) for nested parents taken in the order of their
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
    if addresser.narrow:  # line 5: each run's addresses, straight into this thread's AES input
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


def _block_truth(truth: _Level, lo: IntArray,
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

    def run(self, level: int, parents: int, planned: int, tasks: Sequence[tuple[int, ...]],
            cells: Sequence[int], work: Callable[..., Any], sink: Callable[[Any], None]) -> None:
        """``sink(work(*task))`` for every task, in the order of ``tasks``."""
        start, done, told, count = time.perf_counter(), 0, 0, 0

        def finished(result: Any) -> None:
            nonlocal done, told, count
            sink(result)
            done += cells[count]
            count += 1
            if self.progress is not None and (done == planned or done - told >= planned / 16):
                told = done
                self.progress(LevelProgress(level, self.depth, parents, done, planned,
                                            time.perf_counter() - start))

        self._stop()
        if self.workers == 1 or len(tasks) < 2:
            for task in tasks:
                finished(work(*task))
                if count < len(tasks):
                    self._stop()
        else:
            pool, pending = _pool(self.workers), collections.deque[Future[Any]]()
            try:
                for task in tasks:
                    if len(pending) >= 2 * self.workers:  # bounded: a few blocks per worker
                        finished(pending.popleft().result())
                        self._stop()
                    pending.append(pool.submit(work, *task))
                while pending:
                    finished(pending.popleft().result())
            finally:  # on an error or a cancel: drop what has not started, wait for the rest
                for f in pending:
                    f.cancel()
                wait(pending)
        if self.progress is not None and not tasks:
            self.progress(LevelProgress(level, self.depth, parents, 0, 0,
                                        time.perf_counter() - start))


__all__ = [
    "BLOCK_CELLS", "MAX_KEY_SPAN", "Allowed", "CancelHook", "Cancelled", "LevelProgress", "Levels",
    "Nodes", "ProgressHook", "check_total", "release_below", "release_root", "release_tree",
]
