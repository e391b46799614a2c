"""``estimator := 'least_squares'``: InfTDA's integer pass on least-squares estimates.

InfTDA (paper, Algorithm 1) noises the children of every released parent and fits them to the
parent with IntOpt. This estimator first noises EVERY public cell of EVERY level (each level one
full histogram, with the plan's per-level ``sigma_l**2``, each cell at its tree address: a cell
InfTDA noises draws the same value), estimates every node by weighted least squares from all
levels' noisy counts (the two-pass tree estimator of :mod:`.passes`, linear time; the root fixed
to n when n is public), and then runs InfTDA's top-down integer pass on those estimates: each
released parent's children estimates, rounded to integers, go to IntOpt with the parent's
released integer, and the children > 0 are kept (:mod:`~inftda_duckdb.core.topdown`, unchanged:
the rounded estimates stand where Algorithm 1, line 5 puts the noisy counts). The output keeps
every promise of the default: non-negative integers, consistent at every level, total n (or the
noised total, here the least-squares estimate of it, rounded).

Privacy: the same budget split, the same sigmas; each level is one full histogram (sensitivity
as in Theorem 1's proof), and everything after the noise is post-processing of the noisy counts
(see :mod:`.passes` for why computing it from the noise and the truth apart is the same
function of the noisy counts). Accuracy: Theorem 1 plus a rounding term of at most ``k (1 + 2
eta)`` at level k (:func:`~inftda_duckdb.core.accounting.error_bound`; proof in
docs/explanation/least-squares.md; ``eta``: :mod:`.arithmetic`).

The package, in the order a release runs it:

- :mod:`.arithmetic`: the fixed point and its certified error, from public numbers (refused
  before the charge if it cannot be certified);
- :mod:`.forest`: every public cell below a batch of roots, noised;
- :mod:`.passes`: the upward and downward passes;
- this module: the engines' entry points, :func:`whole` (one process: the whole tree),
  :func:`messages`, :func:`top` and :func:`below` (a tree split at a cut level: the subtrees'
  sums, the levels above the cut, each subtree's levels), :func:`band` (the levels between
  two cuts, below nodes whose errors the band above gave: the sums below the lower cut come
  from :func:`messages` of its cells, themselves summed cut by cut from the leaves' up), and
  :class:`Estimates`, which the integer pass reads in place of the noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..accounting import BudgetPlan
from ..errors import InternalError
from ..noise import DiscreteGaussian
from ..randomness import RandomSource
from ..tree import Levels
from .arithmetic import ETA, Arithmetic
from .forest import Forest, Stop
from .passes import Passes, Variances, combine, rounded

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

NAME = "least_squares"


def arithmetic_of(plan: BudgetPlan, sizes: Sequence[int], nested: Sequence[bool]) -> Arithmetic:
    """The release's fixed point and its certified error (public: refuse with ``.check()``
    before anything is charged)."""
    return Arithmetic.of(plan.level_sigma2, sizes, nested, plan.root_sigma2)


def root_noise(plan: BudgetPlan, source: RandomSource) -> int | None:
    """The noise of a noised root (the draw InfTDA's root takes, Algorithm 1, line 1), or None
    when n is public."""
    if plan.root_sigma2 is None:
        return None
    z = DiscreteGaussian(plan.root_sigma2).sample(source.derive(0), np.zeros(1, np.uint64))
    return int(z[0])


class Estimates:
    """Each public cell's rounded least-squares estimate minus its true count, ``round(x) - q``,
    for the levels of a forest: what the integer pass adds to the true children where InfTDA
    adds their noise (:func:`~inftda_duckdb.core.topdown.block.release_block`)."""

    def __init__(self, forest: Forest) -> None:
        self.forest = forest

    def cells(self, k: int, parent_codes: np.ndarray, rows: np.ndarray | None,
              kids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The values of level k's cells, laid out as the noise of the same cells would be
        (:meth:`~inftda_duckdb.core.tree.Addresser.cells`), into ``out``."""
        f = self.forest
        parents = f.index(k - 1, parent_codes)
        level = f.level(k)
        kids = np.asarray(kids).astype(np.int64, copy=False)
        if rows is None and level.width is not None and kids.ndim == 1:  # every parent's all
            idx = (parents[:, None] * level.width + kids[None, :]).ravel()
        else:
            idx = f.child(k, parents, parent_codes, rows, kids)
        result = out[: idx.shape[0]]
        if level.values.dtype == result.dtype:
            np.take(level.values, idx, out=result)
        else:  # the leaves (int32)
            result[:] = level.values[idx]
        return result


def whole(levels: Levels, arith: Arithmetic, n: int, z0: int | None,
          root_sigma2: Fraction | None, stop: Stop = None) -> tuple[Levels, int]:
    """The whole tree in one process: ``levels`` carrying the estimates of levels 1..d, and
    the released root (n, or the rounded estimate of the noised total ``n + z0``); ``stop()``
    is called between blocks of noised cells (it may raise to stop)."""
    forest = Forest.build(levels, 0, None, levels.depth, arith.cap_z, stop=stop)
    passes = Passes(forest, Variances(levels, root_sigma2), arith)
    t, vs = passes.upward()
    e0, root = _root(passes.v, arith, n, z0, int(t[0]), vs)
    passes.downward(np.array([e0], np.int64))
    return levels.with_estimates(Estimates(forest)), root


Sums = tuple[np.ndarray, IntArray, FloatArray]
"""The sums below some cells of a level: their codes (one row per level), ``t`` and ``vs``
(:func:`messages`), in any order."""


def messages(levels: Levels, arith: Arithmetic, top: int, roots: np.ndarray,
             stop: Stop = None, *, upto: int | None = None,
             sums: Sums | None = None) -> tuple[IntArray, FloatArray]:
    """The sums below cells of level ``top`` (codes, one row per level, distinct, in any order;
    the sums in the same order): the children's upward estimates (fixed point) and variances;
    noise only, no data. ``upto`` < d: the levels top+1..upto only, from the ``sums`` below
    every public cell of level ``upto`` under the roots (from calls with ``top = upto``)."""
    _, _, order, t, vs = _upward(levels, arith, top, roots, upto, sums, None, stop=stop)
    back = np.empty_like(order)
    back[order] = np.arange(order.shape[0])
    return t[back], (vs[back] if vs.size else np.zeros(t.shape[0]))


def top(levels: Levels, arith: Arithmetic, n: int, z0: int | None,
        root_sigma2: Fraction | None, cut: int, cut_codes: np.ndarray, t: IntArray,
        vs: FloatArray) -> tuple[Levels, int, np.ndarray, IntArray]:
    """The levels 1..``cut`` of a tree split at ``cut``, from the sums below every public cell
    of level ``cut`` (``cut_codes``, ``t``, ``vs`` in any order: :func:`messages`). Returns
    ``levels`` carrying the estimates of levels 1..cut, the released root, and the codes and
    the errors ``e`` (fixed point) of level ``cut``'s cells, in code order, where each subtree
    continues (:func:`band`, :func:`below`)."""
    if cut == 0:  # the subtree is the whole tree: its sums are the root's
        e0, root = _root(Variances(levels, root_sigma2), arith, n, z0, int(t[0]), vs)
        return levels, root, np.zeros((0, 1), np.int64), np.array([e0], np.int64)
    forest, passes, _, t_root, vs_root = _upward(levels, arith, 0, None, cut, (cut_codes, t, vs),
                                                 root_sigma2, keep_codes=True)
    e0, root = _root(passes.v, arith, n, z0, int(t_root[0]), vs_root)
    e_cut = passes.downward(np.array([e0], np.int64), keep_last=True)
    assert forest.last_codes is not None and e_cut is not None
    return levels.with_estimates(Estimates(forest)), root, forest.last_codes, e_cut


def band(levels: Levels, arith: Arithmetic, top: int, roots: np.ndarray, e_roots: IntArray,
         upto: int, sums: Sums, stop: Stop = None) -> tuple[Levels, np.ndarray, IntArray]:
    """The levels top+1..``upto`` (< d) of the subtrees below cells of level ``top`` (codes, one
    row per level, distinct, in any order) whose errors ``e`` are ``e_roots`` (:func:`top`, or
    the band above), from the ``sums`` below every public cell of level ``upto`` under them
    (:func:`messages`): what :func:`top` does below the root, below any nodes. Returns
    ``levels`` carrying the estimates of levels top+1..upto, and the codes and errors ``e`` of
    level ``upto``'s cells, in code order, where the next band continues."""
    forest, passes, order, _, _ = _upward(levels, arith, top, roots, upto, sums, None,
                                          keep_codes=True, stop=stop)
    e = passes.downward(np.asarray(e_roots, np.int64)[order], keep_last=True)
    assert forest.last_codes is not None and e is not None
    return levels.with_estimates(Estimates(forest)), forest.last_codes, e


def below(levels: Levels, arith: Arithmetic, top: int, roots: np.ndarray,
          e_roots: IntArray, stop: Stop = None) -> Levels:
    """``levels`` carrying the estimates of the subtrees below cells of level ``top`` (codes,
    one row per level, distinct, in any order) whose errors ``e`` :func:`top` (or :func:`band`)
    gave."""
    _, passes, order, _, _ = _upward(levels, arith, top, roots, None, None, None, stop=stop)
    passes.downward(np.asarray(e_roots, np.int64)[order])
    return levels.with_estimates(Estimates(passes.forest))


def _upward(levels: Levels, arith: Arithmetic, top: int, roots: np.ndarray | None,
            upto: int | None, sums: Sums | None, root_sigma2: Fraction | None, *,
            keep_codes: bool = False, stop: Stop = None
            ) -> tuple[Forest, Passes, IntArray, IntArray, FloatArray]:
    """Every public cell of levels top+1..``upto`` (default: the leaves) below ``roots``, noised,
    and the upward pass over them, from the ``sums`` below every cell of level ``upto`` when it
    is not the leaves (each once). Returns the forest (its roots in code order: the roots'
    ``order``), its passes and the sums at its roots, in that order."""
    codes = _codes(roots, top)
    order = np.lexsort(codes[::-1]) if top else np.arange(codes.shape[1])
    upto = levels.depth if upto is None else upto
    forest = Forest.build(levels, top, codes[:, order], upto, arith.cap_z,
                          keep_codes=keep_codes, stop=stop)
    given = None
    if sums is not None:
        at = forest.index(upto, np.asarray(sums[0]))
        count = forest.level(upto).count
        if not np.array_equal(np.sort(at), np.arange(count)):
            raise InternalError(f"the sums below level {upto} do not cover its cells once each")
        given = (np.empty(count, np.int64), np.empty(count))
        given[0][at], given[1][at] = sums[1], sums[2]
    passes = Passes(forest, Variances(levels, root_sigma2), arith)
    t, vs = passes.upward(given)
    return forest, passes, order, t, vs


@dataclass(frozen=True)
class LeastSquares:
    """A charged least-squares release as its engine drives it: the certified arithmetic, the
    rows kept ``n`` (the true root), the root's noise ``z0`` and variance (None: n is public).
    Holds ``z0`` (secret): never log it or ship it to another process."""

    arith: Arithmetic
    n: int
    z0: int | None = field(repr=False)
    root_sigma2: Fraction | None

    def whole(self, levels: Levels, stop: Stop = None) -> tuple[Levels, int]:
        """:func:`whole` for this release."""
        return whole(levels, self.arith, self.n, self.z0, self.root_sigma2, stop)

    def top(self, levels: Levels, cut: int, cut_codes: np.ndarray, t: IntArray,
            vs: FloatArray) -> tuple[Levels, int, np.ndarray, IntArray]:
        """:func:`top` for this release."""
        return top(levels, self.arith, self.n, self.z0, self.root_sigma2, cut, cut_codes, t, vs)

    def split(self, levels: Levels, cut: int,
              stop: Stop = None) -> tuple[Levels, int, np.ndarray, IntArray]:
        """:meth:`top` in one process: the sums below every public cell of level ``cut``
        (:func:`messages`, a run of subtrees of about :data:`CHUNK` cells at a time), then the
        levels above."""
        codes = cut_cells(levels, cut)
        per = max(1, CHUNK // math.prod(levels.sizes[cut:]))
        parts = [messages(levels, self.arith, cut, codes[:, a:a + per], stop)
                 for a in range(0, codes.shape[1], per)]
        t = np.concatenate([p[0] for p in parts])
        vs = np.concatenate([p[1] for p in parts])
        return self.top(levels, cut, codes, t, vs)


CHUNK = 1 << 22
"""Cells (public, below the cut) a one-process split handles at once."""


def cut_cells(levels: Levels, cut: int, top: int = 0, roots: np.ndarray | None = None
              ) -> np.ndarray:
    """The codes of every public cell of level ``cut`` (one row per level, code order) below
    the cells ``roots`` of level ``top`` (codes, distinct, code order; default: the root)."""
    forest = Forest.build(levels, top, roots, cut, None, keep_codes=True)
    assert forest.last_codes is not None
    return forest.last_codes


def _codes(roots: np.ndarray | None, top: int) -> np.ndarray:
    """Codes of level-``top`` cells as a (top, N) matrix (the root: (0, 1))."""
    if top == 0:
        return np.zeros((0, 1), np.int64)
    return np.asarray(roots, dtype=np.int64).reshape(top, -1)


def _root(variances: Variances, arith: Arithmetic, n: int, z0: int | None, t: int,
          vs: FloatArray) -> tuple[int, int]:
    """The root's error ``e`` (fixed point) and its released count."""
    if z0 is None:
        return 0, int(n)
    e0 = combine(z0, t, float(vs[0]) if vs.size else 0.0, variances, arith)
    return e0, max(0, int(n) + rounded(e0, arith.bits))


__all__ = ["ETA", "NAME", "Arithmetic", "Estimates", "LeastSquares", "Sums", "arithmetic_of",
           "band", "below", "cut_cells", "messages", "root_noise", "top", "whole"]
