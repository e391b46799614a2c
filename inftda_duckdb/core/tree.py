"""The tree a release descends: its public shape, its level keys, and the address of every cell.

Level ``k`` (1..d) of a release over columns with public domain sizes ``s_1..s_d`` holds the
``k``-prefixes ``(c_1..c_k)``; a nested level only allows the children a public domain table lists
under the parent's codes at some earlier levels (:class:`Allowed`). :class:`Levels` holds what
every worker needs to release any subtree: the sizes, the nested levels' allowed children, and per
level the noise N_Z(0, sigma_k^2) and the level's key (``source.derive(k)``).

**Noise is addressed by the tree.** The cell ``(c_1..c_k)`` of level ``k`` draws its noise from
the level's key at the address

- ``((c_1 s_2 + c_2) s_3 + ...) s_k + c_k``, the cell's mixed-radix position in the product of the
  public domains, when that product ``P_k = s_1 ... s_k`` is at most 2**64 (one uint64);
- else a row of uint64 *limbs*: the levels ``1..k`` cut greedily, from level 1, into runs whose
  sizes multiply to at most 2**64, each run's codes in mixed radix. Limbs go through the
  prefix-free AES-CBC-MAC of :mod:`~inftda_duckdb.core.randomness` (``L/2 + 2`` AES blocks per
  word instead of one).

Both are injective on the public domain (nested levels included: a nested child's address is its
position in the full product), depend only on the release key, the level and the cell's own codes,
and never on ranks, batches, blocks, workers or order: any subtree released alone, anywhere, draws
the same noise as inside the whole release.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from . import kernel
from .accounting import BudgetPlan
from .errors import InternalError, bad_argument
from .noise import DiscreteGaussian
from .randomness import RandomSource

IntArray = npt.NDArray[np.int64]
NARROW = 1 << 64
"""Levels whose domain product is at most this address a cell by one uint64."""
MAX_KEY_SPAN = 1 << 62
"""Mixed-radix keys of prefixes stay below this (int64 with room): the SQL sends a level's
prefixes as keys only for domains whose product is below it."""


class Allowed(NamedTuple):
    """A nested level's public children: ``codes[-1]`` may follow a parent whose codes at the
    levels ``levels`` (0-based) are ``codes[:-1]`` (one row per level; columns are the rows of
    a public domain table)."""

    levels: tuple[int, ...]
    codes: IntArray


class Nodes(NamedTuple):
    """Released nodes of one level, in lexicographic code order: node ``i`` has the codes
    ``codes[:, i]`` (one row per level so far: levels are rows, so a level's codes are one
    contiguous array) and the released count ``counts[i]`` (> 0, the root excepted)."""

    codes: npt.NDArray[np.signedinteger]  # int32 (int64 when a domain has 2**31 values or more)
    counts: IntArray
    noised: int = 0  #: cells noised to release this level (every child of every parent)

    @classmethod
    def root(cls, count: int) -> Nodes:
        return cls(np.zeros((0, 1), np.int32), np.array([count], np.int64))


def _runs(sizes: Sequence[int]) -> list[int]:
    """Number of levels in each limb: levels 1..k cut greedily into runs of product <= 2**64."""
    runs, prod = [], NARROW + 1
    for s in sizes:
        if s > NARROW:
            raise InternalError(f"a domain of {s} values (more than 2**64)")
        if prod * s > NARROW:
            runs.append(0)
            prod = 1
        runs[-1] += 1
        prod *= s
    return runs


def mixed_radix(codes: np.ndarray, sizes: Sequence[int], dtype: npt.DTypeLike = np.uint64
                ) -> np.ndarray:
    """``((c_1 s_2 + c_2) s_3 + ...)``: the columns of ``codes`` (one row per level) in mixed
    radix over ``sizes`` (the caller keeps the product within ``dtype``)."""
    out = np.zeros(codes.shape[1], dtype)
    for row, s in zip(codes, sizes, strict=True):
        out *= s
        out += row.astype(dtype, copy=False)
    return out


class Addresser:
    """The cell addresses of one level ``k``: ``cells(parent_codes, child_codes)``."""

    def __init__(self, sizes: Sequence[int]) -> None:
        self.sizes = [int(s) for s in sizes]  # s_1..s_k
        runs = _runs(self.sizes)
        self.narrow = len(runs) == 1
        bounds = np.cumsum([0, *runs]).tolist()
        self.limbs = [(bounds[i], bounds[i + 1]) for i in range(len(runs))]

    def cells(self, parents: np.ndarray, rows: np.ndarray | None, codes: np.ndarray,
              out: np.ndarray | None = None) -> np.ndarray:
        """Addresses of children, row-major: with ``rows`` None, every parent (columns of
        ``parents``, one row per level 1..k-1) times the codes of the 1-D ``codes`` (the same
        for every parent) or of row p of the 2-D ``codes`` (parent p's own); else child ``i``
        is ``codes[i]`` under parent ``rows[i]``. uint64 (n,) when narrow (written into ``out``
        if given), else (n, L) limbs."""
        m = np.uint64(self.sizes[-1])
        a, b = self.limbs[-1]
        last = mixed_radix(parents[a:], self.sizes[a:b - 1]) * m  # the run holding level k
        kids = codes.astype(np.uint64, copy=False)
        if rows is None:
            if out is not None and self.narrow:
                if kids.ndim == 1 and kernel.wanted(out.shape[0]):  # one compiled pass
                    kernel.spread(last, np.ascontiguousarray(kids), out)
                else:  # (numpy's inner loop per parent: ~1.4 ns a cell at 40 children)
                    np.add(last[:, None], kids, out=out.reshape(last.shape[0], -1))
                return out
            rows = np.repeat(np.arange(last.shape[0]), kids.shape[-1])
            last = (last[:, None] + kids).ravel()
        else:
            last = last[rows] + kids
        if self.narrow:
            if out is not None:
                out[:] = last
                return out
            return last
        limbs = np.empty((last.shape[0], len(self.limbs)), np.uint64)
        limbs[:, -1] = last
        for j, (lo, hi) in enumerate(self.limbs[:-1]):
            limbs[:, j] = mixed_radix(parents[lo:hi], self.sizes[lo:hi])[rows]
        return limbs


class Children:
    """A nested level's allowed children, looked up by the parents' codes at the keying levels."""

    def __init__(self, allowed: Allowed, sizes: Sequence[int]) -> None:
        lv = list(allowed.levels)
        table = np.asarray(allowed.codes, dtype=np.int64).reshape(len(lv) + 1, -1)
        key_sizes = [int(sizes[i]) for i in lv]
        if table.size and (table.min() < 0 or (table.max(axis=1) >= [*key_sizes, sizes[-1]]).any()):
            raise InternalError("a nested level's allowed children lie outside their domains")
        self.levels, self.key_sizes = lv, key_sizes
        self._wide = math.prod(key_sizes) >= MAX_KEY_SPAN
        if self._wide:  # keys too wide for int64: rank the distinct key tuples
            self._tuples, keys = np.unique(table[:-1], axis=1, return_inverse=True)
            keys = keys.reshape(-1)
        else:
            keys = mixed_radix(table[:-1], key_sizes, np.int64)
        order = np.lexsort((table[-1], keys))
        keys, children = keys[order], table[-1, order]
        distinct = np.ones(keys.shape[0], bool)
        distinct[1:] = (keys[1:] != keys[:-1]) | (children[1:] != children[:-1])
        self.keys, self.children = keys[distinct], children[distinct]
        # each entry as (its parent key's run, its child's rank among the table's children):
        # ascending, so a parent's true children are found among its allowed ones by one
        # search of the table (none of the cells)
        new_run = self.keys[1:] != self.keys[:-1]
        self._run = np.zeros(self.keys.shape[0], np.int64)
        if self.keys.size:
            np.cumsum(new_run, out=self._run[1:])
        # the distinct parent keys and where their runs start (one end more): a parent's run is
        # one search of these (110 at Italy-like's level 6, ~3x faster) instead of two of the
        # entries (8000)
        starts = np.flatnonzero(np.r_[True, new_run]) if self.keys.size \
            else np.zeros(0, np.int64)
        self._keys, self._bounds = self.keys[starts], np.append(starts, self.keys.shape[0])
        self._values = np.unique(self.children)
        self._windows: dict[int, np.ndarray] = {}  # rows(): a view of children per width
        self._ranked = self._run * max(1, self._values.shape[0]) + np.searchsorted(
            self._values, self.children)
        # a table listing each child once (a hierarchy): its offset in its run, by code
        self._offset: IntArray | None = None
        m = int(sizes[-1])
        if self._values.shape[0] == self.children.shape[0] and m <= 4 * self.children.size + 4096:
            self._offset = np.full(m, -1, np.int64)
            self._offset[self.children] = np.arange(self.children.shape[0]) - starts[self._run]

    def of(self, parents: np.ndarray) -> tuple[IntArray, IntArray]:
        """(first, last) positions in ``children`` of each parent's allowed children (columns of
        ``parents``, one row per level so far); a parent with none is an internal error."""
        if self._wide:
            keys = find_columns(self._tuples, parents[self.levels], self.key_sizes)
        else:
            keys = mixed_radix(parents[self.levels], self.key_sizes, np.int64)
        run = np.searchsorted(self._keys, keys)
        if run.size and (run.max() >= self._keys.shape[0] or (self._keys[run] != keys).any()):
            raise InternalError("a parent of a nested level has no allowed children")
        return self._bounds[run], self._bounds[run + 1]

    def rows(self, first: IntArray, width: int) -> np.ndarray:
        """The allowed children of parents whose runs start at ``first`` (``width`` each): a
        (parents, width) uint64 matrix (addresses add to it without a conversion)."""
        windows = self._windows.get(width)
        if windows is None:  # (sliding_window_view is Python, ~20 us holding the GIL: once)
            windows = self._windows[width] = np.lib.stride_tricks.sliding_window_view(
                self.children.view(np.uint64), width)
        return windows[first]

    def positions(self, first: IntArray, rows: IntArray, codes: np.ndarray) -> IntArray:
        """Where the children ``codes`` of the parents ``rows`` (whose runs start at ``first``)
        are among those parents' allowed children (offsets from ``first[rows]``)."""
        at = first[rows]
        if self._offset is not None:  # one lookup; the parent's run must hold the code
            offset = self._offset[codes]
            where = at + offset
            outside = (offset < 0) | (where >= self.children.shape[0])
            if (outside | (self.children[np.where(outside, 0, where)] != codes)).any():
                raise _not_allowed()
            return offset
        rank = np.minimum(np.searchsorted(self._values, codes), self._values.shape[0] - 1)
        wanted = self._run[at] * max(1, self._values.shape[0]) + rank
        found = np.minimum(np.searchsorted(self._ranked, wanted), self._ranked.shape[0] - 1)
        if found.size and ((self._values[rank] != codes) | (self._ranked[found] != wanted)).any():
            raise _not_allowed()
        return found - at


def _not_allowed() -> InternalError:
    return InternalError("a true child of a nested level is not among the allowed children")


def order_keys(a: np.ndarray, b: np.ndarray, sizes: Sequence[int]) -> tuple[IntArray, IntArray]:
    """Order-preserving int64 keys of the columns of two code matrices (one row per level):
    mixed radix over the domain sizes, re-ranked (jointly) before it would overflow."""
    ka = np.zeros(a.shape[1], np.int64)
    kb = np.zeros(b.shape[1], np.int64)
    span = 1
    for j, m in enumerate(sizes):
        if span * int(m) >= MAX_KEY_SPAN:  # deep trees with big domains: rank the keys so far
            u, inv = np.unique(np.concatenate([ka, kb]), return_inverse=True)
            ka, kb, span = inv[: ka.shape[0]], inv[ka.shape[0] :], u.shape[0]
        ka *= int(m)
        ka += a[j]
        kb *= int(m)
        kb += b[j]
        span *= int(m)
    return ka, kb


def find_columns(sorted_codes: np.ndarray, codes: np.ndarray, sizes: Sequence[int]) -> IntArray:
    """Index of each column of ``codes`` among the columns of ``sorted_codes`` (distinct, in
    lexicographic order; one row per level), -1 where absent."""
    return lookup(*order_keys(sorted_codes, codes, sizes))


def lookup(keys: IntArray, wanted: np.ndarray) -> IntArray:
    """Index of each of ``wanted`` in the ascending distinct ``keys``, -1 where absent."""
    if keys.shape[0] == 0:
        return np.full(wanted.shape[0], -1, np.int64)
    rows = np.searchsorted(keys, wanted)
    rows[rows == keys.shape[0]] = 0
    return np.where(keys[rows] == wanted, rows, -1)


@dataclass(frozen=True)
class Levels:
    """Everything a worker needs to release any subtree of one release: the public domain
    sizes, the nested levels' allowed children, and per level k = 1..d the noise
    N_Z(0, sigma_k^2) and the level's key. Holds secret keys: never log it; ship it to another
    process only through :meth:`export` over an encrypted channel. ``estimates``: with
    ``estimator := 'least_squares'``, what the integer pass reads in place of the noise (a
    :class:`~inftda_duckdb.core.leastsquares.Estimates`; never exported: each process computes
    its own)."""

    sizes: tuple[int, ...]
    noise: tuple[DiscreteGaussian, ...]
    sources: tuple[RandomSource, ...]
    allowed: tuple[Allowed | None, ...]
    estimates: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        d = len(self.sizes)
        if not len(self.noise) == len(self.sources) == len(self.allowed) == d:
            raise InternalError("Levels got different numbers of sizes, noises, keys and nestings")
        if any(int(s) < 1 for s in self.sizes):
            raise InternalError("a level with an empty domain")

    @classmethod
    def build(
        cls,
        sizes: Sequence[int],
        plan: BudgetPlan,
        source: RandomSource,
        allowed: Mapping[int, Allowed] | None = None,
    ) -> Levels:
        """The levels of a release: level k (1-based) noised with ``plan.level_sigma2[k-1]``
        under ``source.derive(k)``; ``allowed[k-1]`` for a nested level k."""
        d = len(sizes)
        if len(plan.level_sigma2) != d:
            raise bad_argument("plan", f"a plan for {len(plan.level_sigma2)} levels",
                               f"must match the {d} domain sizes", "plan the budget for d levels")
        return cls(
            tuple(int(s) for s in sizes),
            tuple(DiscreteGaussian(s2) for s2 in plan.level_sigma2),
            tuple(source.derive(k) for k in range(1, d + 1)),
            tuple((allowed or {}).get(k) for k in range(d)),
        )

    @property
    def depth(self) -> int:
        return len(self.sizes)

    def with_estimates(self, estimates: Any) -> Levels:
        """These levels, the integer pass reading ``estimates`` instead of drawing noise."""
        return replace(self, estimates=estimates)

    @cached_property
    def addressers(self) -> tuple[Addresser, ...]:
        return tuple(Addresser(self.sizes[:k]) for k in range(1, self.depth + 1))

    @cached_property
    def children(self) -> tuple[Children | None, ...]:
        return tuple(None if a is None else Children(a, self.sizes[: k + 1])
                     for k, a in enumerate(self.allowed))

    def export(self) -> dict[str, Any]:
        """A picklable copy for a worker process (contains the level keys: secret)."""
        return {
            "sizes": list(self.sizes),
            "sigma2": [str(n.sigma2) for n in self.noise],
            "keys": [s.export_key() for s in self.sources],
            "private": all(s.private for s in self.sources),
            "allowed": [None if a is None else (list(a.levels), np.asarray(a.codes))
                        for a in self.allowed],
        }

    @classmethod
    def from_export(cls, data: Mapping[str, Any]) -> Levels:
        """The :class:`Levels` that :meth:`export` copied (in a worker)."""
        return cls(
            tuple(int(s) for s in data["sizes"]),
            tuple(DiscreteGaussian(s2) for s2 in data["sigma2"]),
            tuple(RandomSource.from_exported_key(k, bool(data["private"]))
                  for k in data["keys"]),
            tuple(None if a is None else Allowed(tuple(a[0]), np.asarray(a[1], np.int64))
                  for a in data["allowed"]),
        )


__all__ = [
    "MAX_KEY_SPAN", "NARROW", "Addresser", "Allowed", "Children", "Levels", "Nodes",
    "find_columns", "lookup", "mixed_radix", "order_keys",
]
