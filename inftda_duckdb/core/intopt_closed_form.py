"""IntOpt (paper, Algorithm 1, right column) in closed form on whole matrices and ragged rows.

The public :func:`intopt` (every row of a matrix) and :func:`intopt_ragged` (rows of different
lengths) with their input checks, and the solvers they share with the release path
(:mod:`.intopt_blocks`): :func:`dense_block` (step 5 of :mod:`.intopt`'s docstring, else
:func:`general`), :func:`general` and :func:`solve_dense` (steps 1-4 on sorted rows, transposed),
:func:`ragged_block` (steps 1-4 on ragged rows). Each returns exactly what the paper's procedure
returns, ties in ``x`` visited in index order. :func:`sums_fit` decides the integer width: rows
whose intermediate sums could reach :data:`SAFE_LIMIT` are solved in exact Python integers, blocks
whose sums stay below :data:`INT32_LIMIT` in int32, all others in int64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from . import memory
from .errors import bad_argument

IntArray = npt.NDArray[np.int64]

BLOCK_CELLS = 1 << 16
"""Default number of cells processed per block (512 kB per int64 temporary; smaller blocks make
more numpy calls per cell)."""

SAFE_LIMIT = float(1 << 62)
"""Rows whose bound ``(4 m + 4) (B + 1)`` on the intermediate sums (:mod:`.intopt`'s docstring,
Range) reaches this are solved in exact Python integers."""
INT32_LIMIT = float(1 << 31)
"""Blocks whose bound stays below this (and of fewer than 2**30 cells) are solved in int32."""


def fresh(name: str, shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """A new uninitialised array (an :data:`Alloc` whose temporaries nothing reuses)."""
    return np.empty(shape, dtype)


Alloc = Callable[[str, tuple[int, ...], npt.DTypeLike], np.ndarray]
"""Where a block's temporaries come from: :func:`.intopt_blocks.buffer` (this thread's, reused) or
:func:`fresh`."""


def intopt(x: npt.ArrayLike, c: npt.ArrayLike, *, block_cells: int = BLOCK_CELLS,
           out: IntArray | None = None) -> IntArray:
    """Apply IntOpt to every row of ``x``: row ``p`` becomes ``IntOpt(x[p], c[p])``.

    ``x`` is an integer matrix (parents x children), ``c`` the parents' released totals (>= 0).
    Returns an int64 matrix of the same shape (``out`` if given: C-contiguous int64, may be
    ``x`` itself), non-negative, each row summing to ``c[p]``, equal element for element to the
    paper's procedure. A row with no children needs ``c = 0``.
    """
    xv = _int_array(x, "x", 2)
    cv = _int_array(c, "c", 1)
    n_rows, m = xv.shape
    if cv.shape[0] != n_rows:
        raise bad_argument(
            "c", f"{cv.shape[0]} totals for {n_rows} rows of x", "must have one total per row of x",
            "pass c with shape (x.shape[0],)",
        )
    _check_totals(cv, np.full(n_rows, m, dtype=np.int64))
    if out is None:
        out = memory.empty((n_rows, m), np.int64)
    elif out.shape != xv.shape or out.dtype != np.int64 or not out.flags.c_contiguous:
        raise bad_argument("out", f"array of dtype {out.dtype}, shape {out.shape}",
                           "must be a C-contiguous int64 array shaped like x",
                           "leave out out, or pass numpy.empty_like(x)")
    if m == 0 or n_rows == 0:
        return out
    step = max(1, block_cells // m)
    for lo in range(0, n_rows, step):
        hi = min(lo + step, n_rows)
        dense_block(xv[lo:hi], cv[lo:hi], out[lo:hi])
    return out


def intopt_ragged(
    values: npt.ArrayLike,
    offsets: npt.ArrayLike,
    c: npt.ArrayLike,
    *,
    block_cells: int = BLOCK_CELLS,
) -> IntArray:
    """IntOpt for parents with different numbers of children (nested hierarchies).

    Row ``p`` is ``values[offsets[p]:offsets[p + 1]]`` with total ``c[p]``; ``offsets`` has
    ``P + 1`` non-decreasing entries from 0 to ``len(values)``. Returns the flat int64 result in
    the same layout, equal to :func:`intopt` row by row. An empty row needs ``c = 0``.
    """
    vals = _int_array(values, "values", 1)
    offs = _int_array(offsets, "offsets", 1)
    cv = _int_array(c, "c", 1)
    if offs.shape[0] != cv.shape[0] + 1 or offs[0] != 0 or offs[-1] != vals.shape[0]:
        raise bad_argument(
            "offsets",
            f"{offs.shape[0]} offsets for {cv.shape[0]} totals and {vals.shape[0]} values",
            "must have len(c) + 1 entries, start at 0 and end at len(values)",
            "build offsets as [0, cumsum(row lengths)]",
        )
    lengths = np.diff(offs)
    if lengths.size and lengths.min() < 0:
        raise bad_argument(
            "offsets", f"a decrease at row {int(np.argmax(lengths < 0))}",
            "must be non-decreasing", "build offsets as [0, cumsum(row lengths)]",
        )
    _check_totals(cv, lengths)
    out = np.empty(vals.shape[0], dtype=np.int64)
    keep = lengths > 0
    rows = np.flatnonzero(keep)
    lengths, cv, starts = lengths[keep], cv[keep], offs[:-1][keep]
    n_rows = rows.shape[0]
    lo = 0
    cum = np.cumsum(lengths)
    while lo < n_rows:  # one iteration per block of about block_cells cells
        base = int(cum[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(cum, base + block_cells, side="right")))
        s, e = int(starts[lo]), int(starts[hi - 1] + lengths[hi - 1])
        block = lengths[lo:hi]
        if block[0] == block.min() == block.max():  # equal lengths: the dense path
            shape = (hi - lo, int(block[0]))
            dense_block(vals[s:e].reshape(shape), cv[lo:hi], out[s:e].reshape(shape))
        else:
            out[s:e] = ragged_block(vals[s:e], block, cv[lo:hi])
        lo = hi
    return out


# ---------------------------------------------------------------------------------------------
# Blocks: sort each row, split the rare rows that need exact Python integers, solve.


def dense_block(x: IntArray, c: IntArray, out: IntArray, alloc: Alloc = fresh) -> None:
    """Write IntOpt of the rows of ``x`` into ``out`` (C-contiguous, same shape); temporaries
    of the block's size from ``alloc``."""
    m = x.shape[1]
    xmax, xmin, cmax = x.max(), x.min(), c.max()
    if not sums_fit(xmax, xmin, cmax, m):  # rare: split off the rows that need Python ints
        safe = sums_fit(x.max(axis=1), x.min(axis=1), c, m)
        big = ~safe
        out[big] = ragged_block(x[big].ravel(), np.full(int(big.sum()), m), c[big]).reshape(-1, m)
        if safe.any():
            part = np.empty((int(safe.sum()), m), dtype=np.int64)
            dense_block(x[safe], c[safe], part, alloc)
            out[safe] = part
        return
    # int32 when every intermediate sum fits (half the bytes, twice the SIMD lanes)
    dt = np.int32 if sums_fit(xmax, xmin, cmax, m, INT32_LIMIT) and x.size < 1 << 30 else np.int64
    # |x| 2m < 2**62 (or 2**31) here, so (x_i, i) packs into one unique key (x_i << b) | i:
    # any sort is stable, and shifts unpack it
    b = max(1, (m - 1).bit_length())
    keys = np.left_shift(x, b, out=alloc("dkeys", x.shape, dt), casting="unsafe")
    keys |= np.arange(m, dtype=dt)
    ranked = alloc("ranked", x.shape, dt)
    ranked[...] = keys
    ranked.sort(axis=1)
    target = (c - np.einsum("ij->i", x)).astype(dt)  # T
    q = ceil_div(target, m)
    t_star = np.maximum(q, -(target // m))
    easy = ranked[:, 0] >> b >= t_star  # step 5: min x >= t^
    hard = np.flatnonzero(~easy)
    cd = c.astype(dt)
    if 2 * hard.shape[0] >= easy.shape[0]:  # mostly sparse rows: all by the general form
        general(ranked, b, cd, out, alloc)
        return
    cap = q + t_star
    excess = m * q - target  # D
    r = excess // np.maximum(cap, 1)
    nth = np.take_along_axis(ranked, r[:, None], axis=1)  # the r-th smallest key
    np.add(x, q[:, None], out=out)
    mark, step = alloc("below", x.shape, np.bool_), alloc("run", x.shape, dt)
    out -= np.multiply(cap[:, None], np.less(keys, nth, out=mark), out=step)  # (faster than where=)
    out -= np.multiply((excess - r * cap)[:, None], np.equal(keys, nth, out=mark), out=step)
    if hard.shape[0]:
        part = np.empty((hard.shape[0], m), dtype=np.int64)
        general(ranked[hard], b, cd[hard], part)
        out[hard] = part


def general(ranked: np.ndarray, b: int, c: np.ndarray, out: IntArray,
             alloc: Alloc = fresh) -> None:
    """Steps 1-4 on rows of sorted keys ``(x_i << b) | i``, written into ``out``."""
    xs, pos = _transposed(ranked, b, alloc)
    out.reshape(-1)[pos] = solve_dense(xs, c, alloc)


def _transposed(ranked: np.ndarray, b: int, alloc: Alloc) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys unpacked into values and flat positions, transposed (children x parents):
    every per-parent value then broadcasts along long rows instead of paying numpy's per-row
    overhead on short ones."""
    n_rows, m = ranked.shape
    xs = np.right_shift(ranked.T, b, out=alloc("xs", (m, n_rows), ranked.dtype))
    pos = np.bitwise_and(ranked.T, (1 << b) - 1, out=alloc("pos", (m, n_rows), ranked.dtype))
    pos += m * np.arange(n_rows, dtype=ranked.dtype)  # the flat position of each element
    return xs, pos


def solve_dense(xs: np.ndarray, c: np.ndarray, alloc: Alloc, width: np.ndarray | None = None,
                 real: np.ndarray | None = None) -> np.ndarray:
    """:func:`_solve` (Algorithm 1, lines 2-12 in closed form) for parents with the same number
    of children, transposed: column ``p`` of ``xs`` is parent p's sorted children. Same
    arithmetic in fewer passes: with ``lo = max(x - t*, 0)`` (x at its floor), ``hi = max(x +
    u, 0)`` (x at the final cycle's start: ``u = 1 - t*`` after full cycles, else ``q``),
    ``cap = hi - lo``, ``C`` its running sum and ``D = sum(hi) - c`` the excess, step 4 leaves
    ``lo + clip(C - D, 0, cap)``. Temporaries come from ``alloc``; the result is the ``"run"``
    array. Columns of different widths: ``width`` (each column's m) and ``real`` (rank < m),
    the ranks past a column's width holding 0: they leave S, G's breakpoints below the last
    (G(xs_m-1) = S >= S - c, so j* < m) and every sum unchanged, lo = 0 there (t* >= 0), and
    their capacity is zeroed (so is their result)."""
    m, n_rows = xs.shape
    dt = xs.dtype.type
    cols = np.arange(n_rows)
    cum = _running_sum(xs, alloc("cum", xs.shape, dt))
    total = cum[-1]  # S
    target = c - total  # T
    q = ceil_div(target, m if width is None else width)  # line 2
    last = xs[-1] if width is None else xs[width - 1, cols]
    t0 = np.maximum(np.maximum(q, -xs[0]), -np.maximum(q, -last))  # line 3
    need = total - c  # step 3: tG, the smallest t with sum_i min(x_i, t) >= S - c
    # G(xs_j) = P_j + (m - j) xs_j
    after = np.arange(m - 1, -1, -1, dtype=dt)[:, None] if width is None \
        else width - np.arange(1, m + 1, dtype=dt)[:, None]
    g_break = np.multiply(xs, after, out=alloc("run", xs.shape, dt))
    g_break += cum
    below = np.less(g_break, need, out=alloc("below", xs.shape, np.bool_))
    j_star = np.add.reduce(below.view(np.int8), axis=0, dtype=np.int64)  # (faster than einsum)
    prefix = cum[j_star, cols] - xs[j_star, cols]  # P_j*, exclusive (j* < m: G(xs_m-1) = S)
    left = m - j_star if width is None else width - j_star
    t_star = np.maximum(t0, ceil_div(need - prefix, left).astype(dt))  # step 2
    u = np.where(t_star != t0, 1 - t_star, q)
    zero = dt(0)  # (a Python 0 costs numpy a conversion per call)
    lo = np.subtract(xs, t_star, out=alloc("lo", xs.shape, dt))
    np.maximum(lo, zero, out=lo)
    hi = np.add(xs, u, out=alloc("hi", xs.shape, dt))
    np.maximum(hi, zero, out=hi)
    hi -= lo  # cap
    if real is not None:
        hi *= real
    run = _running_sum(hi, alloc("run", xs.shape, dt))
    run -= run[-1] + np.einsum("ij->j", lo) - c  # C - D
    np.maximum(run, zero, out=run)
    np.minimum(run, hi, out=run)
    run += lo
    return run


def ragged_block(vals: IntArray, lengths: IntArray, c: IntArray) -> IntArray:
    n_rows = lengths.shape[0]
    row = np.repeat(np.arange(n_rows, dtype=np.int64), lengths)
    starts = np.cumsum(lengths) - lengths
    if sums_fit(vals.max(), vals.min(), c.max(), lengths.max()):
        safe = np.ones(n_rows, dtype=bool)
    else:
        xmax, xmin = np.maximum.reduceat(vals, starts), np.minimum.reduceat(vals, starts)
        safe = sums_fit(xmax, xmin, c, lengths)
    out = np.empty_like(vals)
    for mask, dtype in ((safe, np.int64), (~safe, object)):
        if not mask.any():
            continue
        cells = mask[row]
        sub_vals, sub_row = vals[cells], row[cells]
        order = _row_order(sub_vals, sub_row, n_rows)
        xs = sub_vals[order].astype(dtype)
        ys = _solve(xs, _Rows(int(mask.sum()), None, lengths[mask]), c[mask].astype(dtype))
        sub_out = np.empty(sub_vals.shape[0], dtype=np.int64)
        sub_out[order] = ys
        out[cells] = sub_out
    return out


def _row_order(vals: IntArray, row: IntArray, n_rows: int) -> IntArray:
    """Order sorting by (row, value, position): a stable ascending sort within each row."""
    if n_rows == 1 or vals.size == 0:
        return np.argsort(vals, kind="stable")
    low, span = int(vals.min()), int(vals.max()) - int(vals.min()) + 1
    if n_rows * span < 2**62:
        return np.argsort(row * span + (vals - low), kind="stable")
    return np.lexsort((vals, row))


def sums_fit(xmax: Any, xmin: Any, c: Any, m: Any, limit: float | None = None) -> Any:
    """Whether the intermediate sums stay below ``limit`` (default :data:`SAFE_LIMIT`, 2**62 in
    int64, read when called; see the module docstring; 2**31 for int32)."""
    limit = SAFE_LIMIT if limit is None else limit
    if not isinstance(xmax, np.ndarray) and not isinstance(c, np.ndarray) \
            and not isinstance(m, np.ndarray):  # one block: scalars
        bound = max(float(xmax), -float(xmin), float(c))
        return (4.0 * float(m) + 4.0) * (bound + 1.0) < limit

    def f(a: Any) -> Any:
        return np.asarray(a, dtype=np.float64)

    bound = np.maximum(np.maximum(f(xmax), -f(xmin)), f(c))
    return (4.0 * m + 4.0) * (bound + 1.0) < limit


# ---------------------------------------------------------------------------------------------
# The closed form (module docstring, steps 1-4) on rows sorted ascending, ties in index order.


class _Rows:
    """Row-wise reductions over either a dense (P, m) matrix or flat rows of given lengths."""

    def __init__(self, n_rows: int, m: int | None, lengths: Any) -> None:
        self.n_rows, self.m = n_rows, m
        if m is None:
            self.lengths = lengths
            ends = np.cumsum(lengths)
            self.starts = ends - lengths
            self.row = np.repeat(np.arange(n_rows), lengths)

    def count(self) -> Any:
        return self.m if self.m is not None else self.lengths

    def spread(self, v: Any) -> Any:
        return v[:, None] if self.m is not None else v[self.row]

    def sum(self, a: Any) -> Any:
        # einsum reduces short rows faster than sum(axis=1) (any dtype, object included)
        return np.einsum("ij->i", a) if self.m is not None else np.add.reduceat(a, self.starts)

    def count_true(self, a: Any) -> Any:
        if self.m is not None:
            return np.einsum("ij->i", a, dtype=np.int64)
        return np.add.reduceat(a.astype(np.int64), self.starts)

    def max(self, a: Any) -> Any:
        return a.max(axis=1) if self.m is not None else np.maximum.reduceat(a, self.starts)

    def cumsum(self, a: Any) -> Any:
        # one cumsum over all rows, minus what the rows before contributed (faster than
        # cumsum(axis=1) on short rows); int64 wrap-around cancels in the difference: each
        # row's true prefix sums fit in int64
        # (dtype kept: numpy would widen int32 to int64, much slower)
        total = np.cumsum(a.reshape(-1), dtype=a.dtype).reshape(a.shape)
        if self.m is not None:
            total -= total[:, :1] - a[:, :1]
            return total
        return total - (total - a)[self.starts][self.row]

    def remaining(self) -> Any:
        """m - j for the element at sorted position j of its row."""
        if self.m is not None:
            return np.arange(self.m, 0, -1, dtype=np.int64)
        ends = self.starts + self.lengths
        return ends[self.row] - np.arange(self.row.shape[0], dtype=np.int64)

    def first(self, a: Any) -> Any:
        return a[:, 0] if self.m is not None else a[self.starts]

    def last(self, a: Any) -> Any:
        return a[:, -1] if self.m is not None else a[self.starts + self.lengths - 1]

    def gather(self, a: Any, j: Any) -> Any:
        if self.m is not None:
            return np.take_along_axis(a, j[:, None], axis=1)[:, 0]
        return a[self.starts + j]


def _running_sum(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``cumsum(a, axis=0)`` into ``out``: row after row when the rows are long (numpy's
    accumulate along the first axis is slower than one add per row there; on short rows the
    calls' overhead wins)."""
    if a.shape[1] < 512:
        return np.cumsum(a, axis=0, dtype=a.dtype, out=out)
    out[0] = a[0]
    for j in range(1, a.shape[0]):
        np.add(out[j - 1], a[j], out=out[j])
    return out


def ceil_div(a: Any, b: Any) -> Any:
    return -((-a) // b)


def _solve(xs: Any, rows: _Rows, c: Any) -> Any:
    """IntOpt on sorted rows ``xs`` (int64 or object); returns ``x + z`` in the sorted order."""
    m = rows.count()
    cum_x = rows.cumsum(xs)
    total = rows.last(cum_x)  # S = sum(x)
    target = c - total  # T = c - sum(x)
    q = ceil_div(target, m)
    neg = -xs
    z0 = np.maximum(rows.spread(q), neg)  # line 2
    # line 3: max_i |max(q, -x_i)| from the row's smallest and largest x.
    t0 = np.maximum(np.maximum(q, -rows.first(xs)), -np.maximum(q, -rows.last(xs)))
    # Step 3: tG, the smallest t with sum_i min(x_i, t) >= S - c.
    need = total - c
    g_break = cum_x + (rows.remaining() - 1) * xs  # G(xs_j) = P_j + (m - j) xs_j
    j_star = rows.count_true(g_break < rows.spread(need))  # j*
    prefix = rows.gather(cum_x, j_star) - rows.gather(xs, j_star)  # P_j*, exclusive
    t_g = ceil_div(need - prefix, m - j_star)
    t_star = np.maximum(t0, t_g)  # step 2
    ts = rows.spread(t_star)
    floor = np.maximum(neg, -ts)
    later = t_star != t0
    start = z0 if not later.any() else np.where(rows.spread(later), np.maximum(neg, 1 - ts), z0)
    excess = rows.spread(rows.sum(start) - target)  # D at the start of the final cycle
    cap = start - floor
    cut = excess - (rows.cumsum(cap) - cap)  # D - E_p
    cut = np.minimum(np.maximum(cut, 0, out=cut), cap, out=cut)  # step 4, lines 7-8
    start += xs
    start -= cut
    return start


# ---------------------------------------------------------------------------------------------
# Input checks.


def _int_array(value: npt.ArrayLike, name: str, ndim: int) -> IntArray:
    arr = np.asarray(value)
    shape = "a matrix (parents x children)" if ndim == 2 else "a 1-D array"
    if arr.dtype.kind not in "iu":
        raise bad_argument(
            name, f"{arr.dtype} array of shape {arr.shape}",
            f"must be {shape} of integers (int64; float, NaN, bool and object are refused)",
            f"round the counts and pass np.asarray({name}, dtype=np.int64)",
        )
    if arr.ndim != ndim:
        raise bad_argument(
            name, f"array of shape {arr.shape}", f"must be {shape}", f"pass {name} with ndim={ndim}"
        )
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise bad_argument(
            name, int(arr.max()), "must fit in int64", "pass values below 2**63"
        )
    return np.ascontiguousarray(arr, dtype=np.int64)


def _check_totals(c: IntArray, lengths: IntArray) -> None:
    if c.size and c.min() < 0:
        row = int(np.argmax(c < 0))
        raise bad_argument(
            f"c[{row}]", int(c[row]), "must be >= 0 (a parent's released count)",
            "pass the parents' non-negative released counts",
        )
    bad = (lengths == 0) & (c > 0)
    if bad.any():
        row = int(np.argmax(bad))
        raise bad_argument(
            f"c[{row}]", int(c[row]), "must be 0 for a parent with no children",
            "give every parent with a positive total at least one child",
        )
