"""The two passes of the least-squares tree estimator, over the noise alone, in fixed point.

With a node's own noisy count ``y_v`` (variance ``s_v**2``) and ``S``, ``VS`` the sums of its
children's upward estimates and variances (Hay et al. 2010; any tree):

- upward: ``z_v = (y_v / s_v**2 + S / VS) / (1 / s_v**2 + 1 / VS)``, ``V_v = 1 / (1 / s_v**2 +
  1 / VS)``; at a leaf ``z = y``, ``V = s**2``. Written ``z_v = S + alpha_v (y_v - S)`` with
  ``alpha_v = V_v / s_v**2``;
- downward: ``x_c = z_c + (V_c / VS_p) (x_p - S_p)`` from the root's ``x`` (n when n is public).

The pass runs on the noise ``Z = y - q`` of every cell (q: the true counts) and gives ``e = x -
q``: a noisy count enters only through the integer differences ``y_v - S`` and ``x_p - S_p``, in
which the true counts cancel exactly (they add up level by level), so the integers computed from
``(Z, q)`` are those the same arithmetic computes from ``y`` (post-processing of the noisy counts
alone) and no true count, large or small, widens the fixed-point range. Values are int64 in units
of ``2**-bits`` (:mod:`.arithmetic`): sums of children are exact integer sums; a product is one
float64 multiplication and one ``rint``. The variances are public: exact fractions on a level
with no nested level below it (every node of it has the same subtree shape), else float64 per
node, added child after child in code order (:meth:`.forest.Cells.sequential_sums`). So every
integer is the same in any batch of subtrees, on any engine.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import InternalError
from ..tree import Levels
from .arithmetic import Arithmetic
from .forest import Forest

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Variances:
    """The public variances of a release's tree: per level ``k = 0..d`` whether it is uniform
    (no nested level below it: every node has the same subtree shape) and, if so, its exact
    upward variance ``V_k`` (level 0: the noised root's, when there is one)."""

    def __init__(self, levels: Levels, root_sigma2: Fraction | None) -> None:
        d = levels.depth
        self.sigma2 = (root_sigma2, *(n.sigma2 for n in levels.noise))
        nested = [a is not None for a in levels.allowed]
        self.uniform = [not any(nested[k:]) for k in range(d + 1)]
        self.exact: list[Fraction | None] = [None] * (d + 1)
        below: Fraction | None = None
        for k in range(d, -1, -1):
            s2 = self.sigma2[k]
            if not self.uniform[k] or s2 is None:
                break
            self.exact[k] = s2 if below is None else 1 / (1 / s2 + 1 / (levels.sizes[k] * below))
            below = self.exact[k]
        self.sizes = levels.sizes

    def alpha(self, k: int, vs: FloatArray | None) -> FloatArray | float:
        """``alpha_v = V_v / sigma_k**2`` of level-k nodes whose children's variances sum to
        ``vs`` (unused on a uniform level)."""
        s2 = self.sigma2[k]
        assert s2 is not None
        exact = self.exact[k]
        if exact is not None:
            return float(exact / s2)
        assert vs is not None
        return self.variance(k, vs) / float(s2)

    def variance(self, k: int, vs: FloatArray) -> FloatArray:
        """``V_v = 1 / (1 / sigma_k**2 + 1 / VS_v)`` (float64, per node)."""
        s2 = self.sigma2[k]
        assert s2 is not None
        return 1.0 / (1.0 / float(s2) + 1.0 / vs)

    def child_variances(self, k: int, var: FloatArray | None) -> FloatArray | float:
        """The variances of level k's nodes: exact (one float) or per node."""
        exact = self.exact[k]
        if exact is not None:
            return float(exact)
        assert var is not None
        return var


class Passes:
    """The upward and downward passes over a :class:`.forest.Forest` (its ``values`` rewritten
    in place: noise, upward estimates, then the estimates' errors ``e``, rounded at the end)."""

    def __init__(self, forest: Forest, variances: Variances, arith: Arithmetic) -> None:
        self.forest, self.v, self.a = forest, variances, arith
        self.var: dict[int, FloatArray | None] = {}  # per level: per-node variances (or None)
        self.vs: dict[int, FloatArray | None] = {}  # per level: children's summed variances

    def upward(self, given: tuple[IntArray, FloatArray] | None = None
               ) -> tuple[IntArray, FloatArray]:
        """The upward pass; ``given``: the sums ``(T, VS)`` below each cell of the forest's
        last level when it is not the leaves (from the subtrees below it). Returns the same
        sums at the forest's roots."""
        f, one = self.forest, self.a.one
        depth = f.levels.depth
        for k in range(f.upto, f.top, -1):
            cells = f.level(k)
            z = cells.values
            if k == depth:  # a leaf's estimate is its noise (exact: kept as it is, int32)
                self.var[k] = None
                continue
            if k == f.upto:
                if given is None:
                    raise InternalError("a least-squares forest above the leaves without sums")
                t, vs = given
            else:
                t, vs = self._sums(k)
            self._within(t, self.a.cap_t[k], k, "children's sum")
            alpha = self.v.alpha(k, None if self.v.exact[k] is not None else vs)
            diff = z * one - t  # y - S: the true counts cancel (exact)
            z[:] = t + np.rint(alpha * diff.astype(np.float64)).astype(np.int64)
            self.var[k] = None if self.v.exact[k] is not None else self.v.variance(k, vs)
            self.vs[k] = vs
        self.vs[f.top] = (sums := self._sums(f.top))[1]
        return sums

    def _sums(self, k: int) -> tuple[IntArray, FloatArray]:
        """(T, VS) of level k's cells: their children's estimates and variances, summed."""
        children = self.forest.level(k + 1)
        t = children.child_sums(children.values)
        if k + 1 == self.forest.levels.depth:  # the leaves' noise, in fixed point
            t <<= self.a.bits
        if self.v.exact[k] is not None:
            return t, np.zeros(0)
        return t, children.sequential_sums(self.v.child_variances(k + 1, self.var[k + 1]))

    def downward(self, e_roots: IntArray, rounding: bool = True,
                 keep_last: bool = False) -> IntArray | None:
        """The downward pass from the roots' errors ``e`` (fixed point), every level's ``e``
        rounded to the nearest integer (halves up) as soon as the level below is done:
        ``round(x) - q`` (``rounding=False``, for tests: the levels above the leaves keep their
        fixed point, the leaves their noise). Returns the last level's ``e`` before its rounding
        when ``keep_last`` (where the levels below continue), else None. Each level is done a
        block of parents at a time: no temporary of a level's size."""
        f, a = self.forest, self.a
        depth, half = f.levels.depth, 1 << (a.bits - 1)
        above = np.asarray(e_roots, dtype=np.int64)
        last = None
        for k in range(f.top + 1, f.upto + 1):
            cells = f.level(k)
            t = cells.child_sums(cells.values)
            if k == depth:
                t <<= a.bits
            diff = above - t
            self._within(diff, a.cap_d[k], k, "downward difference")
            gamma: float | None = None
            kids: FloatArray | float = 0.0
            vs: FloatArray | None = None
            if self.v.uniform[k - 1]:
                gamma = float(Fraction(1, f.levels.sizes[k - 1]))
            else:
                kids, vs = self.v.child_variances(k, self.var[k]), self.vs[k - 1]
                assert vs is not None
            if keep_last and k == f.upto:
                last = np.empty(cells.count, np.int64)
            values = cells.values
            for p0, p1, c0, c1 in cells.blocks():
                if gamma is None:
                    assert vs is not None
                    own = kids[c0:c1] if isinstance(kids, np.ndarray) else kids
                    g = own / cells.parent_of(vs[p0:p1], p0, p1)
                else:
                    g = gamma
                step = np.rint(g * cells.parent_of(diff[p0:p1], p0, p1).astype(np.float64)
                               ).astype(np.int64)
                if k == depth:  # e = 2**bits Z + step: round(x) - q = Z + round(step)
                    if last is not None:
                        last[c0:c1] = (values[c0:c1].astype(np.int64) << a.bits) + step
                    if rounding:
                        values[c0:c1] += ((step + half) >> a.bits).astype(values.dtype)
                else:
                    values[c0:c1] += step
                    if last is not None:
                        last[c0:c1] = values[c0:c1]
            if k - 1 > f.top and rounding:
                _round(above, a.bits)
            above = values
        if f.top < f.upto < depth and rounding:
            _round(above, a.bits)
        return last

    def _within(self, x: IntArray, cap: int, k: int, what: str) -> None:
        if x.size and int(np.abs(x).max()) > (cap + 1) * self.a.one:
            raise InternalError(f"least-squares {what} at level {k} beyond its cap {cap} "
                                "(probability below 2**-60)")


def combine(z: int, t: int, vs: float, variances: Variances, arith: Arithmetic) -> int:
    """A noised root's estimate (its ``e``, fixed point) from its noise ``z`` and the sums ``t``,
    ``vs`` below it."""
    alpha = variances.alpha(0, None if variances.exact[0] is not None else np.array([vs]))
    diff = np.array([z * arith.one - t], np.int64)
    if abs(int(diff[0])) > (arith.cap_z[0] + arith.cap_t[0] + 1) * arith.one:
        raise InternalError("least-squares root beyond its cap (probability below 2**-60)")
    return int(t + np.rint(np.asarray(alpha) * diff.astype(np.float64)).astype(np.int64)[0])


def rounded(e: int, bits: int) -> int:
    """``e`` (fixed point) rounded to the nearest integer, halves up."""
    return (e + (1 << (bits - 1))) >> bits


def _round(x: IntArray, bits: int) -> None:
    x += 1 << (bits - 1)
    np.right_shift(x, bits, out=x)


__all__ = ["Passes", "Variances", "combine", "rounded"]
