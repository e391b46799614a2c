"""InfTDA's top-down loop (paper, Algorithm 1, left column) over batches of parents.

Engine-agnostic: numpy only (no DuckDB). :func:`release_level` runs lines 4-9 for a batch of
released parents of one level; the DuckDB extension calls it from an Arrow UDF on each batch,
and :func:`release_tree` runs the whole algorithm in memory (the reference the SQL release must
reproduce exactly under a seed, and a release for other engines).

Noise is addressed, not streamed: the child with code ``j`` of the parent with id ``p`` at a
level with ``m`` children per parent has cell id ``p * m + j``, and level ``k`` draws from
``source.derive(k)``. A release therefore gives the same result on any batching of parents.
Parent ids are ranks of the parents in lexicographic code order within their level.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .accounting import BudgetPlan
from .errors import InternalError, bad_argument
from .intopt import intopt, intopt_ragged
from .noise import DiscreteGaussian
from .randomness import RandomSource

IntArray = npt.NDArray[np.int64]

BLOCK_CELLS = 1 << 20
"""Cells noised and optimised per block: bounds the temporary memory to ~100 MB."""


class LevelNoise:
    """The noise of a level's cells ``0..cells-1``, drawn in one call (e.g. in a background
    thread while the engine prepares the level) and gathered by cell id.

    Values are those of ``dist.sample(source, ids)`` (counter-addressed noise), so using the
    table changes nothing but the time; ids past the table are drawn on demand.
    """

    def __init__(self, dist: DiscreteGaussian, source: RandomSource, cells: int) -> None:
        self.dist, self.source, self.cells = dist, source, int(cells)
        self.sigma2 = dist.sigma2
        self._table: IntArray | None = None
        self._ready = threading.Event()

    def fill(self) -> None:
        """Draw the whole table (call once)."""
        try:
            self._table = self.dist.sample(self.source, np.arange(self.cells, dtype=np.uint64))
        except Exception:  # sample() then draws directly (and raises in the caller's thread)
            self._table = None
        finally:
            self._ready.set()

    def sample(self, source: RandomSource, ids: np.ndarray) -> IntArray:
        if source is self.source and ids.size:
            self._ready.wait()
            table = self._table
            if table is not None and int(ids.max()) < self.cells:
                return table[ids.astype(np.intp, copy=False)]
        return self.dist.sample(source, ids)


class LevelOutput(NamedTuple):
    """Released children of a batch of parents: row ``p`` is ``codes[offsets[p]:offsets[p+1]]``."""

    offsets: IntArray
    codes: IntArray
    counts: IntArray


def release_level(
    parent_ids: npt.ArrayLike,
    totals: npt.ArrayLike,
    true_offsets: npt.ArrayLike,
    true_codes: npt.ArrayLike,
    true_counts: npt.ArrayLike,
    domain_size: int,
    sigma2: object,
    source: RandomSource,
    allowed_offsets: npt.ArrayLike | None = None,
    allowed_codes: npt.ArrayLike | None = None,
) -> LevelOutput:
    """Algorithm 1, lines 4-9, for a batch of parents of one level.

    ``totals[p]`` is parent p's released count c; its true children are the sparse pairs
    ``(true_codes, true_counts)[true_offsets[p]:true_offsets[p+1]]`` (codes in any order, zeros
    implied). Every child in the domain (``domain_size`` codes, or for a nested level the
    parent's ``allowed_codes`` row) gets N_Z(0, sigma2) noise (line 5), IntOpt against c (line
    6), and the children released > 0 are returned with their codes ascending (lines 7-9).
    """
    pid = np.asarray(parent_ids, dtype=np.int64)
    c = np.asarray(totals, dtype=np.int64)
    t_off = np.asarray(true_offsets, dtype=np.int64)
    t_codes = np.asarray(true_codes, dtype=np.int64)
    t_counts = np.asarray(true_counts, dtype=np.int64)
    m = int(domain_size)
    noise = sigma2 if isinstance(sigma2, DiscreteGaussian | LevelNoise) else None
    noise = noise or DiscreteGaussian(sigma2)
    n_par = pid.shape[0]
    if n_par == 0:
        empty = np.zeros(0, np.int64)
        return LevelOutput(np.zeros(1, np.int64), empty, empty)
    if c.min() < 0 or (t_codes.size and (t_codes.min() < 0 or t_codes.max() >= m)):
        raise InternalError("release_level got a negative total or a child code outside 0..m-1")
    if (int(pid.max()) + 1) * m > 1 << 64 or pid.min() < 0:
        # ids are ranks of released parents, so pid < #parents and pid * m + j fits 64 bits
        raise InternalError(f"cell ids overflow 64 bits (parent id {int(pid.max())} x {m})")
    t_rows = np.repeat(np.arange(n_par), np.diff(t_off))
    keys = t_rows * m + t_codes
    if keys.size > 1 and not (np.diff(keys) > 0).all() and np.unique(keys).size != keys.size:
        # a repeated (parent, code) pair would keep one count and drop the other: unbounded
        # sensitivity for a caller that passes non-aggregated pairs
        raise bad_argument(
            "true_codes", "a child code repeated under one parent",
            "must list each child of a parent at most once",
            "aggregate the true counts by (parent, child) before calling release_level",
        )
    if t_counts.size and t_counts.min() < 0:
        raise bad_argument("true_counts", int(t_counts.min()), "must be >= 0",
                           "pass the true (non-negative) child counts")
    if allowed_offsets is None:
        return _dense(pid, c, t_rows, t_codes, t_counts, m, noise, source)
    a_off = np.asarray(allowed_offsets, dtype=np.int64)
    a_codes = np.asarray(allowed_codes, dtype=np.int64)
    return _ragged(pid, c, t_rows, t_codes, t_counts, m, noise, source, a_off, a_codes)


def _dense(
    pid: IntArray,
    c: IntArray,
    t_rows: IntArray,
    t_codes: IntArray,
    t_counts: IntArray,
    m: int,
    noise: DiscreteGaussian | LevelNoise,
    source: RandomSource,
) -> LevelOutput:
    rows_out: list[IntArray] = []
    codes_out: list[IntArray] = []
    counts_out: list[IntArray] = []
    step = max(1, BLOCK_CELLS // max(m, 1))
    bounds = np.searchsorted(t_rows, np.arange(0, pid.shape[0] + step, step))
    cells = np.arange(m, dtype=np.uint64)
    for b, lo in enumerate(range(0, pid.shape[0], step)):
        hi = min(lo + step, pid.shape[0])
        x = np.zeros((hi - lo, m), dtype=np.int64)  # densify: zero children are implied
        s, e = bounds[b], bounds[b + 1]
        x[t_rows[s:e] - lo, t_codes[s:e]] = t_counts[s:e]
        ids = (pid[lo:hi].astype(np.uint64)[:, None] * np.uint64(m) + cells).ravel()
        x += noise.sample(source, ids).reshape(x.shape)  # line 5
        y = intopt(x, c[lo:hi])  # line 6
        _check(y.sum(axis=1), c[lo:hi], y)
        r, j = np.nonzero(y > 0)  # lines 7-8, row-major: codes ascending per parent
        rows_out.append(r + lo)
        codes_out.append(j.astype(np.int64))
        counts_out.append(y[r, j])
    return _pack(pid.shape[0], rows_out, codes_out, counts_out)


def _ragged(
    pid: IntArray,
    c: IntArray,
    t_rows: IntArray,
    t_codes: IntArray,
    t_counts: IntArray,
    m: int,
    noise: DiscreteGaussian | LevelNoise,
    source: RandomSource,
    a_off: IntArray,
    a_codes: IntArray,
) -> LevelOutput:
    lengths = np.diff(a_off)
    if lengths.shape[0] != pid.shape[0] or (lengths == 0).any():
        raise InternalError("a parent of a nested level has no allowed children")
    a_rows = np.repeat(np.arange(pid.shape[0]), lengths)
    a_key = a_rows * m + a_codes  # ascending: rows ascending, codes ascending within a row
    values = np.zeros(a_codes.shape[0], dtype=np.int64)
    t_key = t_rows * m + t_codes
    pos = np.searchsorted(a_key, t_key)
    if t_key.size and (pos.max() >= a_key.shape[0] or (a_key[pos] != t_key).any()):
        raise InternalError("a true child of a nested level is not among the allowed children")
    values[pos] = t_counts
    ids = pid[a_rows].astype(np.uint64) * np.uint64(m) + a_codes.astype(np.uint64)
    values += noise.sample(source, ids)  # line 5
    y = intopt_ragged(values, a_off, c)  # line 6
    _check(np.add.reduceat(y, a_off[:-1]) if y.size else np.zeros(0, np.int64), c, y)
    keep = y > 0  # lines 7-8
    return _pack(pid.shape[0], [a_rows[keep]], [a_codes[keep]], [y[keep]])


def _check(sums: IntArray, c: IntArray, y: IntArray) -> None:
    if not np.array_equal(sums, c) or (y.size and y.min() < 0):
        raise InternalError("IntOpt returned children that do not sum to the parent or are < 0")


def _pack(
    n_par: int, rows: list[IntArray], codes: list[IntArray], counts: list[IntArray]
) -> LevelOutput:
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    offsets = np.zeros(n_par + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n_par), out=offsets[1:])
    return LevelOutput(
        offsets,
        np.concatenate(codes) if codes else np.zeros(0, np.int64),
        np.concatenate(counts) if counts else np.zeros(0, np.int64),
    )


def release_root(n: int, plan: BudgetPlan, source: RandomSource) -> int:
    """Algorithm 1, line 1: the root is n (substitute: n is public); add_remove noises it."""
    if plan.root_sigma2 is None:
        return int(n)
    z = DiscreteGaussian(plan.root_sigma2).sample(source.derive(0), np.zeros(1, np.uint64))
    return max(0, int(n) + int(z[0]))


def release_tree(
    leaf_codes: npt.ArrayLike,
    leaf_counts: npt.ArrayLike,
    domain_sizes: list[int] | tuple[int, ...],
    plan: BudgetPlan,
    source: RandomSource,
) -> tuple[IntArray, IntArray]:
    """The whole of Algorithm 1 in memory over a product domain: returns (codes (M, d), counts).

    ``leaf_codes`` (N, d) are the codes of the non-zero leaves (any order, no repeats) and
    ``leaf_counts`` their true counts. The result lists the released leaves in code order and
    equals the DuckDB release with the same source (same ids, same level keys).
    """
    codes = np.asarray(leaf_codes, dtype=np.int64).reshape(-1, len(domain_sizes))
    counts = np.asarray(leaf_counts, dtype=np.int64)
    d = len(domain_sizes)
    order = np.lexsort(codes.T[::-1]) if codes.shape[0] else np.zeros(0, np.int64)
    codes, counts = codes[order], counts[order]
    rel_codes = np.zeros((1, 0), dtype=np.int64)  # level 0: the root
    root = release_root(int(counts.sum()), plan, source)
    rel_n = np.array([root], dtype=np.int64)
    for k in range(1, d + 1):
        keep = rel_n > 0  # parents released 0 are pruned with their branch
        rel_codes, rel_n = rel_codes[keep], rel_n[keep]
        # true children of each released parent at level k (prefix counts from the leaves)
        pref, inv = np.unique(codes[:, :k], axis=0, return_inverse=True)
        pref_n = np.bincount(inv.ravel(), weights=counts, minlength=pref.shape[0]).astype(np.int64)
        m = int(domain_sizes[k - 1])
        # ranks of the parents' prefixes in lexicographic order (no overflow on deep trees)
        _, rank = np.unique(np.vstack([rel_codes, pref[:, : k - 1]]), axis=0, return_inverse=True)
        rank = rank.ravel()
        par_key, child_par = rank[: rel_n.shape[0]], rank[rel_n.shape[0] :]
        row = np.searchsorted(par_key, child_par)
        found = row < par_key.shape[0]
        found[found] = par_key[row[found]] == child_par[found]
        row, pref, pref_n = row[found], pref[found], pref_n[found]
        t_off = np.zeros(rel_n.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(row, minlength=rel_n.shape[0]), out=t_off[1:])
        out = release_level(
            np.arange(rel_n.shape[0]),
            rel_n,
            t_off,
            pref[:, k - 1],
            pref_n,
            m,
            plan.level_sigma2[k - 1],
            source.derive(k),
        )
        parent_rows = np.repeat(np.arange(rel_n.shape[0]), np.diff(out.offsets))
        rel_codes = np.column_stack([rel_codes[parent_rows], out.codes])
        rel_n = out.counts
        if int(rel_n.sum()) != root:
            raise InternalError(f"level {k} released {int(rel_n.sum())} records, not {root}")
    return rel_codes, rel_n
