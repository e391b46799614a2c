"""InfTDA's top-down loop (paper, Algorithm 1, left column), one whole level at a time.

Engine-agnostic: numpy only (no DuckDB). :func:`release_children` runs lines 3-9 for a level:
it matches the true counts of the level's prefixes (any order, zeros implied) to the nodes
released at the level above and calls :func:`release_level`, which noises every child of every
parent, runs IntOpt and keeps the children released > 0, in cache-sized blocks of about
``BLOCK_CELLS`` cells (a level is densified ``DENSE_CELLS`` cells at a time: bounded memory).
The DuckDB extension calls it once per level with the prefix counts of DuckDB's GROUP BY
queries; :func:`release_tree` runs the whole algorithm from the leaves in memory (the reference
the SQL release must reproduce exactly under a seed, and a release for other engines).

Noise is addressed, not streamed: the child with code ``j`` of the parent with id ``p`` at a
level with ``m`` children per parent has cell id ``p * m + j``, and level ``k`` draws from
``source.derive(k)``. A release therefore gives the same result on any split into blocks.
Parent ids are ranks of the parents in lexicographic code order within their level.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from . import memory
from .accounting import BudgetPlan
from .errors import InftdaError, InternalError, bad_argument
from .intopt import intopt, intopt_ragged
from .noise import DiscreteGaussian
from .randomness import RandomSource

IntArray = npt.NDArray[np.int64]
Sizes = list[int] | tuple[int, ...]

CancelHook = Callable[[], bool]
"""``cancel()``: asked before each block of a level; True stops the release (:class:`Cancelled`).
(The smallest form of wp-core's hook, same names: its release_below replaces this loop.)"""


class Cancelled(InftdaError):
    """The release stopped between two blocks because its cancel hook asked it to."""


def _stop_if(cancel: CancelHook | None) -> None:
    if cancel is not None and cancel():
        raise Cancelled("the release was cancelled between two blocks of a level")


MAX_KEY_SPAN = 1 << 62
"""Mixed-radix keys of prefixes stay below this (int64 with room): the SQL sends keys only for
domains whose product is below it; :func:`_keys` re-ranks before passing it."""

DENSE_CELLS = 1 << 22
"""Cells densified at once (zero children filled in): bounds the level's memory to ~40 MB."""
BLOCK_CELLS = 1 << 16
"""Cells noised and optimised per block: cache-sized temporaries. Measured on the 2-core VM of
benchmarks/RESULTS.md (the 240k-cell level 4 of bench_release, one thread): 53 ms in blocks of
2^20 cells, 33 ms in blocks of 2^16 (large fresh temporaries fault their pages in again)."""


class LevelOutput(NamedTuple):
    """Released children of a batch of parents: row ``p`` is ``codes[offsets[p]:offsets[p+1]]``."""

    offsets: IntArray
    codes: IntArray
    counts: IntArray


def release_level(
    parent_ids: npt.ArrayLike,
    totals: npt.ArrayLike,
    true_rows: npt.ArrayLike,
    true_codes: npt.ArrayLike,
    true_counts: npt.ArrayLike,
    domain_size: int,
    sigma2: object,
    source: RandomSource,
    allowed_offsets: npt.ArrayLike | None = None,
    allowed_codes: npt.ArrayLike | None = None,
    cancel: CancelHook | None = None,
) -> LevelOutput:
    """Algorithm 1, lines 4-9, for a batch of parents of one level.

    ``totals[p]`` is parent p's released count c; its true children are the sparse triples
    ``(true_rows, true_codes, true_counts)`` with ``true_rows == p`` (any order, zeros
    implied). Every child in the domain (``domain_size`` codes, or for a nested level the
    parent's ``allowed_codes`` row) gets N_Z(0, sigma2) noise (line 5), IntOpt against c (line
    6), and the children released > 0 are returned with their codes ascending (lines 7-9).
    """
    pid = np.asarray(parent_ids, dtype=np.int64)
    c = np.asarray(totals, dtype=np.int64)
    t_rows, t_codes = _index(true_rows), _index(true_codes)
    t_counts = np.asarray(true_counts, dtype=np.int64)
    m = int(domain_size)
    noise = sigma2 if isinstance(sigma2, DiscreteGaussian) else DiscreteGaussian(sigma2)
    n_par = pid.shape[0]
    if n_par == 0:
        empty = np.zeros(0, np.int64)
        return LevelOutput(np.zeros(1, np.int64), empty, empty)
    if not t_rows.shape == t_codes.shape == t_counts.shape or c.shape != pid.shape:
        raise InternalError("release_level got arrays of mismatched lengths")
    if c.min() < 0 or (t_codes.size and (t_codes.min() < 0 or t_codes.max() >= m)):
        raise InternalError("release_level got a negative total or a child code outside 0..m-1")
    if t_rows.size and (t_rows.min() < 0 or t_rows.max() >= n_par):
        raise InternalError("release_level got a true child of no parent in the batch")
    if (int(pid.max()) + 1) * m > 1 << 64 or pid.min() < 0:
        # ids are ranks of released parents, so pid < #parents and pid * m + j fits 64 bits
        raise InternalError(f"cell ids overflow 64 bits (parent id {int(pid.max())} x {m})")
    if t_counts.size and t_counts.min() < 0:
        raise bad_argument("true_counts", int(t_counts.min()), "must be >= 0",
                           "pass the true (non-negative) child counts")
    _stop_if(cancel)
    if allowed_offsets is None:
        return _dense(pid, c, t_rows, t_codes, t_counts, m, noise, source, cancel)
    a_off = np.asarray(allowed_offsets, dtype=np.int64)
    a_codes = np.asarray(allowed_codes, dtype=np.int64)
    return _ragged(pid, c, t_rows, t_codes, t_counts, m, noise, source, a_off, a_codes, cancel)


def _index(a: npt.ArrayLike) -> np.ndarray:
    """An index array as int32 or int64 as given (no copy: fresh memory costs page faults)."""
    arr = np.asarray(a)
    return arr if arr.dtype in (np.int32, np.int64) else arr.astype(np.int64)


def _repeated_child() -> InftdaError:
    # a repeated (parent, code) pair would keep one count and drop the other: unbounded
    # sensitivity for a caller that passes non-aggregated pairs
    return bad_argument(
        "true_codes", "a child code repeated under one parent",
        "must list each child of a parent at most once",
        "aggregate the true counts by (parent, child) before calling release_level",
    )


def _dense(
    pid: IntArray,
    c: IntArray,
    t_rows: np.ndarray,
    t_codes: np.ndarray,
    t_counts: IntArray,
    m: int,
    noise: DiscreteGaussian,
    source: RandomSource,
    cancel: CancelHook | None = None,
) -> LevelOutput:
    n_par = pid.shape[0]
    span = max(1, DENSE_CELLS // max(m, 1))  # parents densified at once (bounded memory)
    if n_par > span:  # several spans: group the true children by span
        grp = t_rows // span
        # a stable sort of small integers is a radix sort: O(n)
        order = np.argsort(grp.astype(np.uint16) if n_par // span < 1 << 16 else grp,
                           kind="stable")
        t_rows, t_codes, t_counts = t_rows[order], t_codes[order], t_counts[order]
        bounds = np.searchsorted(t_rows, np.arange(0, n_par + span, span))
    else:
        bounds = np.array([0, t_rows.shape[0]])
    step = max(1, BLOCK_CELLS // max(m, 1))
    cells = np.arange(m, dtype=np.uint64)
    # consecutive parent ids (release_children's): a block's cell ids are one range
    ranged = bool(n_par == 1 or (np.diff(pid) == 1).all())
    code_of = np.broadcast_to(np.arange(m, dtype=np.int32), (min(span, n_par), m))
    parts = []
    for s0 in range(0, n_par, span):
        s1 = min(s0 + span, n_par)
        x = memory.zeros((s1 - s0, m), np.int64)  # densify: zero children are implied
        a, b = bounds[s0 // span], bounds[s0 // span + 1]
        # by flat position: ~3x faster than a 2-D scatter
        flat = (t_rows[a:b] - s0).astype(_small(x.size), copy=False)
        flat *= m
        flat += t_codes[a:b]
        x.reshape(-1)[flat] = t_counts[a:b]
        if int(x.sum()) != int(t_counts[a:b].sum()):  # a pair repeated with a count > 0
            raise _repeated_child()
        for lo in range(0, s1 - s0, step):  # cache-sized blocks, in place
            _stop_if(cancel)
            hi = min(lo + step, s1 - s0)
            if ranged:
                ids = np.arange(int(pid[s0 + lo]) * m, (int(pid[s0 + hi - 1]) + 1) * m,
                                dtype=np.uint64)
            else:
                ids = (pid[s0 + lo:s0 + hi].astype(np.uint64)[:, None] * np.uint64(m)
                       + cells).ravel()
            block = x[lo:hi]
            block += noise.sample(source, ids).reshape(block.shape)  # line 5
            block[...] = intopt(block, c[s0 + lo:s0 + hi])  # line 6
        # row reductions by einsum: ~4x faster than sum(axis=1) on short rows
        _check(np.einsum("ij->i", x), c[s0:s1], x)
        keep = x > 0  # lines 7-8, row-major: codes ascending per parent
        kids = np.einsum("ij->i", keep, dtype=np.int64)  # children kept per parent
        released = memory.empty(int(kids.sum()), np.int64)
        np.compress(keep.ravel(), x.ravel(), out=released)
        parts.append((kids, code_of[: s1 - s0][keep], released))
    per_row, codes, counts = zip(*parts, strict=True)
    return _pack(list(per_row), list(codes), list(counts))


def _ragged(
    pid: IntArray,
    c: IntArray,
    t_rows: np.ndarray,
    t_codes: np.ndarray,
    t_counts: IntArray,
    m: int,
    noise: DiscreteGaussian,
    source: RandomSource,
    a_off: IntArray,
    a_codes: IntArray,
    cancel: CancelHook | None = None,
) -> LevelOutput:
    lengths = np.diff(a_off)
    if lengths.shape[0] != pid.shape[0] or (lengths == 0).any():
        raise InternalError("a parent of a nested level has no allowed children")
    a_rows = np.repeat(np.arange(pid.shape[0]), lengths)
    a_key = a_rows * m + a_codes  # ascending: rows ascending, codes ascending within a row
    values = np.zeros(a_codes.shape[0], dtype=np.int64)
    t_key = t_rows.astype(np.int64) * m + t_codes
    pos = np.searchsorted(a_key, t_key)
    if t_key.size and (pos.max() >= a_key.shape[0] or (a_key[pos] != t_key).any()):
        raise InternalError("a true child of a nested level is not among the allowed children")
    values[pos] = t_counts
    if int(values.sum()) != int(t_counts.sum()):  # a pair repeated with a count > 0
        raise _repeated_child()
    ids = pid[a_rows].astype(np.uint64) * np.uint64(m) + a_codes.astype(np.uint64)
    values += noise.sample(source, ids)  # line 5
    _stop_if(cancel)  # a nested level is one sweep: asked between its phases only
    y = intopt_ragged(values, a_off, c)  # line 6
    _check(np.add.reduceat(y, a_off[:-1]) if y.size else np.zeros(0, np.int64), c, y)
    keep = y > 0  # lines 7-8
    per_row = np.bincount(a_rows[keep], minlength=pid.shape[0])
    return _pack([per_row], [a_codes[keep]], [y[keep]])


def _check(sums: IntArray, c: IntArray, y: IntArray) -> None:
    if not np.array_equal(sums, c) or (y.size and y.min() < 0):
        raise InternalError("IntOpt returned children that do not sum to the parent or are < 0")


def _pack(per_row: list[IntArray], codes: list[IntArray], counts: list[IntArray]) -> LevelOutput:
    """LevelOutput from consecutive parts: children per parent, their codes and counts."""
    def cat(parts: list[IntArray]) -> IntArray:
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    sizes = cat(per_row)
    offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return LevelOutput(offsets, cat(codes), cat(counts))


def release_root(n: int, plan: BudgetPlan, source: RandomSource) -> int:
    """Algorithm 1, line 1: the root is n (substitute: n is public); add_remove noises it."""
    if plan.root_sigma2 is None:
        return int(n)
    z = DiscreteGaussian(plan.root_sigma2).sample(source.derive(0), np.zeros(1, np.uint64))
    return max(0, int(n) + int(z[0]))


class Nodes(NamedTuple):
    """The nodes released at one level, in lexicographic code order: node ``i`` has the codes
    ``codes[:, i]`` (one row per level so far: levels are rows, so a level's codes are one
    contiguous array) and the released count ``counts[i]`` (> 0, the root excepted). A node's
    index is its id: the address of its children's noise."""

    codes: npt.NDArray[np.int32]
    counts: IntArray
    noised: int = 0  #: cells noised to release this level (every child of every parent)

    @classmethod
    def root(cls, count: int) -> Nodes:
        return cls(np.zeros((0, 1), np.int32), np.array([count], np.int64))


class Allowed(NamedTuple):
    """A nested level's public children: ``codes[-1]`` may follow a parent whose codes at the
    levels ``levels`` (0-based) are ``codes[:-1]`` (one row per level; columns are the rows of
    a public domain table)."""

    levels: tuple[int, ...]
    codes: IntArray


def release_children(
    parents: Nodes,
    true_codes: npt.ArrayLike,
    true_counts: npt.ArrayLike,
    sizes: Sizes,
    sigma2: object,
    source: RandomSource,
    allowed: Allowed | None = None,
    cancel: CancelHook | None = None,
) -> Nodes:
    """Algorithm 1, lines 3-9, for a whole level k = ``len(sizes)``.

    ``true_codes`` (k, N) (one row per level) and ``true_counts`` (N,) are the true counts of
    the level's prefixes (the non-zero ones suffice, in any order, each once); when the product
    of ``sizes`` is below 2**62 the prefixes may come as their mixed-radix keys (N,) instead
    (``((c1 * s2 + c2) * s3 + c3)...``, the lexicographic order of the codes); ``parents`` are
    the nodes released at level k-1. Parents released 0 are pruned with their branch (line 3);
    the children of the others are noised, optimised and kept when > 0 by
    :func:`release_level`, whose parent ids are the parents' indices (with the zero-count
    parents left out).
    """
    k = len(sizes)
    keep = parents.counts > 0
    if not keep.all():
        parents = Nodes(parents.codes[:, keep], parents.counts[keep])
    codes = np.asarray(true_codes)
    counts = np.asarray(true_counts, dtype=np.int64)
    n_par = parents.counts.shape[0]
    if codes.ndim == 1 and k > 1:  # mixed-radix keys
        if math.prod(int(m) for m in sizes) >= MAX_KEY_SPAN:
            raise InternalError("prefix keys for domains whose product passes 2**62")
        keys, m = codes.astype(np.int64, copy=False), int(sizes[-1])
        own, _, span = _keys(parents.codes, parents.codes[:, :0], sizes[:-1])
        # int32 where it fits: half the fresh memory (page faults) of int64
        parent_keys = np.floor_divide(keys, m, out=memory.empty(keys.shape, _small(span)),
                                      casting="unsafe")
        # keys - parent * m: half the time of np.remainder (an integer modulo)
        last = np.subtract(keys, np.multiply(parent_keys, m, dtype=np.int64),
                           out=memory.empty(keys.shape, np.int32), casting="unsafe")
        rows = _lookup(own, parent_keys, span)
    else:
        codes = codes.reshape(k, -1)
        last = codes[-1]
        rows = _find_rows(parents.codes, codes[:-1], sizes[:-1])
    found = rows >= 0  # true children of pruned parents are not noised
    a_off: IntArray | None = None
    a_codes: IntArray | None = None
    noised = n_par * int(sizes[-1])
    if allowed is not None:
        a_off, a_codes = _allowed_children(parents.codes, allowed, sizes)
        noised = int(a_off[-1])
    if not found.all():
        rows, last, counts = rows[found], last[found], counts[found]
    out = release_level(
        np.arange(n_par), parents.counts, rows, last, counts, int(sizes[-1]), sigma2, source,
        a_off, a_codes, cancel,
    )
    child_codes = memory.empty((k, out.codes.shape[0]), np.int32)
    parent_rows = np.repeat(np.arange(n_par, dtype=_small(n_par)), np.diff(out.offsets))
    np.take(parents.codes, parent_rows, axis=1, out=child_codes[:-1])
    child_codes[-1] = out.codes
    return Nodes(child_codes, out.counts, noised)


def check_total(nodes: Nodes, root: int, level: int) -> None:
    """The invariant of every level: its released counts add up to the root's."""
    total = int(nodes.counts.sum())
    if total != root:
        raise InternalError(f"level {level} released {total} records, not the root's {root}")


def _keys(a: np.ndarray, b: np.ndarray, sizes: Sizes) -> tuple[IntArray, IntArray, int]:
    """Order-preserving int64 keys of the columns of two code matrices (one row per level), and
    their span: mixed radix over the domain sizes, re-ranked (jointly) before it would overflow."""
    ka = np.zeros(a.shape[1], np.int64)
    kb = np.zeros(b.shape[1], np.int64)
    span = 1
    for j, m in enumerate(sizes):
        if span * int(m) >= MAX_KEY_SPAN:  # deep trees with big domains: rank the keys so far
            u, inv = np.unique(np.concatenate([ka, kb]), return_inverse=True)
            ka, kb, span = inv[: ka.shape[0]], inv[ka.shape[0] :], u.shape[0]
        ka *= int(m)  # in place: fresh temporaries cost page faults
        ka += a[j]
        kb *= int(m)
        kb += b[j]
        span *= int(m)
    return ka, kb, span


def _find_rows(sorted_codes: np.ndarray, codes: np.ndarray, sizes: Sizes) -> IntArray:
    """Index of each column of ``codes`` among the columns of ``sorted_codes`` (distinct, in
    lexicographic order; one row per level), -1 where absent."""
    return _lookup(*_keys(sorted_codes, codes, sizes))


def _small(bound: int) -> type[np.signedinteger]:
    """int32 for values below ``bound`` if it fits, else int64."""
    return np.int32 if bound < 1 << 31 else np.int64


def _lookup(keys: IntArray, wanted: np.ndarray, span: int) -> np.ndarray:
    """Index of each of ``wanted`` in the ascending distinct ``keys`` (all in [0, span)), -1
    where absent."""
    if keys.shape[0] == 0:
        return np.full(wanted.shape[0], -1, np.int64)
    if wanted.size and (int(wanted.min()) < 0 or int(wanted.max()) >= span):
        raise InternalError("a prefix key outside its domain")
    if span <= 8 * (keys.shape[0] + wanted.shape[0]) + 1024:  # a lookup table: O(n)
        table = np.full(span, -1, _small(keys.shape[0]))
        table[keys] = np.arange(keys.shape[0])
        return table[wanted]
    rows = np.searchsorted(keys, wanted)
    rows[rows == keys.shape[0]] = 0
    return np.where(keys[rows] == wanted, rows, -1)


def _allowed_children(parent_codes: np.ndarray, allowed: Allowed,
                      sizes: Sizes) -> tuple[IntArray, IntArray]:
    """(offsets, codes) of each parent's allowed children, codes ascending."""
    lv = list(allowed.levels)
    table = np.asarray(allowed.codes, dtype=np.int64).reshape(len(lv) + 1, -1)
    key_sizes = [sizes[i] for i in lv]
    t_keys, p_keys, _ = _keys(table[:-1], parent_codes[lv], key_sizes)
    order = np.lexsort((table[-1], t_keys))
    t_keys, children = t_keys[order], table[-1, order]
    lo = np.searchsorted(t_keys, p_keys, side="left")
    hi = np.searchsorted(t_keys, p_keys, side="right")
    offsets = np.zeros(p_keys.shape[0] + 1, np.int64)
    np.cumsum(hi - lo, out=offsets[1:])
    # positions lo..hi-1 of every parent, concatenated
    pos = np.arange(offsets[-1]) - np.repeat(offsets[:-1] - lo, hi - lo)
    return offsets, children[pos]


def release_tree(
    leaf_codes: npt.ArrayLike,
    leaf_counts: npt.ArrayLike,
    domain_sizes: Sizes,
    plan: BudgetPlan,
    source: RandomSource,
    allowed: dict[int, Allowed] | None = None,
) -> tuple[IntArray, IntArray]:
    """The whole of Algorithm 1 in memory: returns the released leaves (codes (M, d), counts).

    ``leaf_codes`` (N, d) are the codes of the non-zero leaves (any order, no repeats) and
    ``leaf_counts`` their true counts; ``allowed[k]`` lists the public children of a nested
    level k (0-based). The result lists the released leaves in code order (codes (M, d), one
    row per leaf) and equals the DuckDB release with the same source (same ids, same level keys).
    """
    d = len(domain_sizes)
    codes = np.asarray(leaf_codes, dtype=np.int64).reshape(-1, d)
    counts = np.asarray(leaf_counts, dtype=np.int64)
    root = release_root(int(counts.sum()), plan, source)
    nodes = Nodes.root(root)
    for k in range(1, d + 1):
        # true counts of the level's prefixes (what the SQL gets from its GROUP BY queries)
        pref, inv = np.unique(codes[:, :k], axis=0, return_inverse=True)
        pref_n = np.bincount(inv.ravel(), weights=counts, minlength=pref.shape[0])
        nodes = release_children(
            nodes, pref.T, pref_n.astype(np.int64), list(domain_sizes[:k]),
            plan.level_sigma2[k - 1], source.derive(k), (allowed or {}).get(k - 1),
        )
        check_total(nodes, root, k)
    return nodes.codes.T.astype(np.int64), nodes.counts
