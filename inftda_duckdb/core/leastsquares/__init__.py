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
  sums, the levels above the cut, each subtree's levels), and :class:`Estimates`, which the
  integer pass reads in place of the noise.
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


def messages(levels: Levels, arith: Arithmetic, top: int, roots: np.ndarray,
             stop: Stop = None) -> tuple[IntArray, FloatArray]:
    """The sums below cells of level ``top`` (codes, one row per level, distinct, in any order;
    the sums in the same order): the children's upward estimates (fixed point) and variances;
    noise only, no data."""
    roots = _codes(roots, top)
    order = np.lexsort(roots[::-1]) if top else np.arange(roots.shape[1])
    forest = Forest.build(levels, top, roots[:, order], levels.depth, arith.cap_z, stop=stop)
    t, vs = Passes(forest, Variances(levels, None), arith).upward()
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
    continues (:func:`below`)."""
    if cut == 0:  # the subtree is the whole tree: its sums are the root's
        e0, root = _root(Variances(levels, root_sigma2), arith, n, z0, int(t[0]), vs)
        return levels, root, np.zeros((0, 1), np.int64), np.array([e0], np.int64)
    forest = Forest.build(levels, 0, None, cut, arith.cap_z, keep_codes=True)
    at = forest.index(cut, np.asarray(cut_codes))
    count = forest.level(cut).count
    if not np.array_equal(np.sort(at), np.arange(count)):
        raise InternalError("the sums below the cut do not cover its cells once each")
    t_all, vs_all = np.empty(count, np.int64), np.empty(count)
    t_all[at], vs_all[at] = t, vs
    passes = Passes(forest, Variances(levels, root_sigma2), arith)
    t_root, vs_root = passes.upward((t_all, vs_all))
    e0, root = _root(passes.v, arith, n, z0, int(t_root[0]), vs_root)
    e_cut = passes.downward(np.array([e0], np.int64), keep_last=True)
    assert forest.last_codes is not None and e_cut is not None
    return levels.with_estimates(Estimates(forest)), root, forest.last_codes, e_cut


def below(levels: Levels, arith: Arithmetic, top: int, roots: np.ndarray,
          e_roots: IntArray, stop: Stop = None) -> Levels:
    """``levels`` carrying the estimates of the subtrees below cells of level ``top`` (codes,
    one row per level, distinct, in any order) whose errors ``e`` :func:`top` gave."""
    roots = _codes(roots, top)
    order = np.lexsort(roots[::-1]) if top else np.arange(roots.shape[1])
    forest = Forest.build(levels, top, roots[:, order], levels.depth, arith.cap_z, stop=stop)
    passes = Passes(forest, Variances(levels, None), arith)
    passes.upward()
    passes.downward(np.asarray(e_roots, np.int64)[order])
    return levels.with_estimates(Estimates(forest))


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


def cut_cells(levels: Levels, cut: int) -> np.ndarray:
    """The codes of every public cell of level ``cut`` (one row per level, code order)."""
    forest = Forest.build(levels, 0, None, cut, None, keep_codes=True)
    assert forest.last_codes is not None
    return forest.last_codes


def _codes(roots: np.ndarray, top: int) -> np.ndarray:
    """Codes of level-``top`` cells as a (top, N) matrix (the root: (0, 1))."""
    roots = np.asarray(roots, dtype=np.int64)
    if top == 0:
        return np.zeros((0, 1), np.int64)
    return roots.reshape(top, -1)


def _root(variances: Variances, arith: Arithmetic, n: int, z0: int | None, t: int,
          vs: FloatArray) -> tuple[int, int]:
    """The root's error ``e`` (fixed point) and its released count."""
    if z0 is None:
        return 0, int(n)
    e0 = combine(z0, t, float(vs[0]) if vs.size else 0.0, variances, arith)
    return e0, max(0, int(n) + rounded(e0, arith.bits))


__all__ = ["ETA", "NAME", "Arithmetic", "Estimates", "LeastSquares", "arithmetic_of", "below",
           "cut_cells", "messages", "root_noise", "top", "whole"]
