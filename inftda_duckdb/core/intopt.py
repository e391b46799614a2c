"""IntOpt (paper, Algorithm 1, right column), vectorised over every parent of a level.

``IntOpt(x, c)`` turns a parent's noisy child counts ``x`` (integers, possibly negative) and the
parent's released count ``c >= 0`` into non-negative integers summing to ``c`` at minimum Chebyshev
distance from ``x``. Chebyshev minimisation has many optima; the paper's procedure picks one on
purpose (it lowers the smallest counts first), and this module returns *exactly* what that
procedure returns on every input, ties in ``x`` visited in index order (a stable ascending sort).

The procedure, with ``T = c - sum(x)`` and ``floor_i(t) = max(-x_i, -t)``::

    line 2   z = max(ceil(T / m), -x)             line 3   t = max |z_i|
    line 4   I = stable ascending order of x      line 6   while sum(z) > T:
    line 7-8     z[I[j]] = max(z[I[j]] - (sum(z) - T), -x[I[j]], -t)
    line 9-11    j = (j + 1) mod m; after each full cycle t += 1
    line 12  return x + z

Closed form (no loop over visits, cycles or rows), proved here:

1. ``z_i >= floor_i(t)`` always: true at line 3 (``-x_i <= z_i`` and ``-t <= -|z_i| <= z_i``), each
   visit keeps it, and ``t`` only grows. So a visit lowers ``z_i`` by ``min(D, z_i - floor_i(t))``:
   within a cycle the visited elements drop to their floors, in sorted order, until the excess ``D``
   is used up, and the loop then stops (``D = 0``); the sum never falls below ``T``.
2. A cycle at level ``t`` that does not finish leaves ``z = floor(t)``, with sum
   ``F(t) = -sum_i min(x_i, t)``. So the loop finishes in the first cycle whose floors absorb the
   excess: ``t* = max(t0, tG)`` with ``tG`` the smallest integer with ``sum_i min(x_i, t) >= S - c``
   (``S = sum x``). It exists and ``tG <= max x``, since ``G(t) = sum_i min(x_i, t)`` reaches
   ``S >= S - c`` there. The final cycle starts from ``z0`` (line 2) if ``t* = t0``, else from
   ``floor(t* - 1)`` (the state after the full cycle ``t* - 1``).
3. ``G`` is piecewise linear with breakpoints at the sorted values ``xs``:
   ``G(xs_j) = P_j + (m - j) xs_j`` with ``P_j`` the sum of the ``j`` smallest. With ``j*`` the
   first ``j`` where ``G(xs_j) >= S - c``, ``tG = ceil((S - c - P_j*) / (m - j*))``.
4. In the final cycle, element ``i`` at sorted position ``p`` with capacity
   ``cap_i = start_i - floor_i(t*)`` and ``E_p`` the capacity of the elements before it is lowered
   by ``min(max(D - E_p, 0), cap_i)``: the elements before the stopping one reach their floors, the
   stopping one absorbs the rest of ``D``, the later ones are untouched.
5. The common case needs no prefix sums: rows whose smallest ``x_i`` is at least
   ``t^ = max(q, ceil(-T / m))`` (every child well above the noise). There ``z0 = q`` (line 2),
   ``t0 = |q|`` and ``G(t) = m t`` up to ``min x``, so ``t* = t^``; the final cycle starts from
   ``q`` in both branches of step 2 (``1 - t* = q`` when ``t* > t0``), every floor is ``-t*``, so
   every capacity is ``cap = q + t*`` (``2q`` if ``T > 0``, ``1`` if ``T < 0``, ``0`` when ``D =
   0``), and the excess ``D = m q - T < m`` takes ``cap`` from each of the ``r = D // cap``
   smallest elements and ``D mod cap`` from the next. Sorted positions are not needed, only a
   comparison of ``key_i = m x_i + i`` (unique) with the row's ``r``-th smallest key.
6. Sparse rows (mostly noise, a few counts above it) need only their largest values. With
   ``H(t) = sum_i max(x_i - t, 0) = S - G(t)``, ``tG`` is the smallest t with ``H(t) <= c``, and
   step 4 read from the largest element down leaves ``lo_i + clip(R - E_i, 0, cap_i)`` with
   ``R = c - sum(lo)`` and ``E_i`` the capacity of the elements after i. ``H(t)`` for t at
   least the k-th largest value ``v`` depends on the k largest only, so they decide ``t*`` when
   ``t0 >= v`` or ``H(v) > c``; every smaller element then has ``lo = 0`` and gets 0 when the
   k largest capacities cover ``R`` (rows with many counts above the noise take step 4).

Everything is a sort (plus prefix sums outside step 5) per row: ``O(m log m)`` per parent,
vectorised over blocks of rows (memory bounded by ``block_cells``).

Range: any int64 ``x`` and ``c``. The intermediate sums are bounded by ``(4 m + 4) (B + 1)`` with
``B = max(|x_i|, c)`` of the row; rows where that could exceed 2**62 are computed with exact Python
integers (numpy object arrays, same code, much slower), all other rows in int64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import memory
from .errors import bad_argument

__all__ = ["intopt", "intopt_positive", "intopt_positive_runs", "intopt_ragged"]

IntArray = npt.NDArray[np.int64]

BLOCK_CELLS = 1 << 16
"""Default number of cells processed per block (512 kB per int64 temporary; smaller blocks make
more numpy calls per cell)."""

_SAFE_LIMIT = float(1 << 62)
_INT32_LIMIT = float(1 << 31)


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
        _dense_block(xv[lo:hi], cv[lo:hi], out[lo:hi])
    return out


def intopt_positive(x: IntArray, c: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The entries of ``intopt(x, c)`` that are > 0, without writing the whole matrix: their
    flat positions (ascending), their values, and every row's sum (for the caller's check).

    For one cache-sized block (``x``: C-contiguous int64 (P, m), possibly overwritten; ``c``
    int64 (P,), >= 0, not checked). Rows solved by the general form never leave IntOpt's sorted
    order: only the kept entries (a few per row on sparse data) are put back in code order. The
    block's temporaries are this thread's reused buffers (fresh large arrays would fault their
    pages in again).
    """
    n_rows, m = x.shape
    if n_rows == 0 or m == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(n_rows, np.int64)
    xmax, xmin, cmax = x.max(), x.min(), c.max()
    if _safe(xmax, xmin, cmax, m):
        dt = np.int32 if _safe(xmax, xmin, cmax, m, _INT32_LIMIT) and x.size < 1 << 30 else np.int64
        b = max(1, (m - 1).bit_length())
        keys = np.left_shift(x, b, out=_buffer("keys", (n_rows, m), dt), casting="unsafe")
        keys |= np.arange(m, dtype=dt)
        keys.sort(axis=1)
        target = (c - np.einsum("ij->i", x)).astype(dt)
        t_hat = np.maximum(_ceil_div(target, m), -(target // m))
        if 2 * int(np.count_nonzero(keys[:, 0] >> b < t_hat)) >= n_rows:  # sparse rows
            found = _sparse_rows(keys, b, c, target)
            if found is not None:
                return found
            # most rows have many counts above the noise: steps 1-4 on every row, in place (the
            # kept entries come out in order: no gather of them from the sorted keys, no sort)
            _general(keys, b, c.astype(dt), x, _buffer)
            return _kept(x)
    _dense_block(x, c, x, _buffer)  # dense data, or values too large for int64 sums: all of it
    return _kept(x)


def intopt_positive_runs(x: IntArray, runs: Sequence[tuple[int, int]],
                         c: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`intopt_positive` for a block of rows of several widths (Algorithm 1, line 6, on
    each row): ``runs`` lists ``(rows, m)`` in order, ``x`` (int64, C-contiguous, possibly
    overwritten) holds their cells row after row (each run a dense (rows, m) matrix), ``c``
    (int64, >= 0, not checked) every row's total. Returns the entries > 0 (flat positions in
    ``x``, ascending; values) and every row's sum, equal to :func:`intopt_positive` run by run.

    The runs share the per-row work: each run's keys are sorted on their own (their ``b``
    depends on ``m``: here one ``b`` for all, from the widest), then the sparse runs' rows
    (most of them noise) go through one :func:`_top_keys` call (``m`` enters only per row), and
    the rows their top keys leave undecided through one ragged :func:`_solve` (their keys are
    sorted already). Dense runs and runs narrower than :data:`TOP` keep :func:`intopt_positive`
    (small ones, and values too large for int64 sums, go to :func:`_ragged_block` together).
    A nested level's block then makes a few dozen numpy calls, not a few dozen per width."""
    ms = np.array([m for r, m in runs if r], np.int64)
    counts = np.array([r for r, _ in runs if r], np.int64)
    n_rows = int(counts.sum())
    width = np.repeat(ms, counts)
    if n_rows == 0 or x.size == 0 or (width == 0).any():  # (a nested level has no such rows)
        y = intopt_ragged(x, np.append(0, np.cumsum(width)), c)
        flat = np.flatnonzero(y > 0)
        return flat, y[flat], _row_sums(y, width)
    start = np.cumsum(width) - width  # each row's first cell
    row0 = np.cumsum(counts) - counts
    cell0 = start[np.minimum(row0, n_rows - 1)]
    wide = ms >= TOP
    xmax, xmin, cmax = x.max(), x.min(), c.max()
    safe = _safe(xmax, xmin, cmax, int(ms.max()))
    flats: list[IntArray] = []  # kept entries, in any order
    vals: list[IntArray] = []
    solo_flats: list[IntArray] = []  # those of the runs solved alone: ascending already
    solo_vals: list[IntArray] = []
    sums = np.zeros(n_rows, np.int64)
    rest = np.zeros(n_rows, np.bool_)  # rows for _ragged_block
    if safe:
        dt = np.int32 if _safe(xmax, xmin, cmax, int(ms.max()), _INT32_LIMIT) \
            and x.size < 1 << 30 else np.int64
        b = max(1, (int(ms.max()) - 1).bit_length())
        keys = _buffer("keys", (x.shape[0],), dt)  # (the same buffer as intopt_positive's)
        for s in np.flatnonzero(wide).tolist():  # each wide run's rows sorted (line 4)
            a, e = int(cell0[s]), int(cell0[s]) + int(counts[s] * ms[s])
            part = np.left_shift(x[a:e], b, out=keys[a:e], casting="unsafe")
            part = part.reshape(int(counts[s]), int(ms[s]))
            part |= np.arange(ms[s], dtype=dt)
            part.sort(axis=1)
        target = c - np.add.reduceat(x, start)  # T
        least = keys[start].astype(np.int64) >> b
        t_hat = np.maximum(_ceil_div(target, width), -(target // width))
        low = np.add.reduceat((least < t_hat).view(np.int8), row0, dtype=np.int64)
        sparse = wide & (2 * low >= counts)
        solo = []
        for s in np.flatnonzero(~sparse).tolist():  # dense runs and narrow ones
            if counts[s] * ms[s] < _SOLO_CELLS:
                rest[row0[s]:row0[s] + counts[s]] = True
            else:
                solo.append(s)
        rows = np.flatnonzero(np.repeat(sparse, counts))
        if rows.size:
            w, first = width[rows], start[rows]
            at = first + w - TOP
            ends = keys[at[None, :] + np.arange(TOP)[:, None]].astype(np.int64)
            f, v, sm, undecided = _top_keys(ends, least[rows], b, c[rows], target[rows], w,
                                            first)
            flats.append(f)
            vals.append(v)
            sums[rows] = sm
            if undecided.size:  # steps 1-4 on the sorted keys of the rows left undecided
                u = rows[undecided]
                wu: np.ndarray = width[u].astype(dt)
                su = start[u]
                rank = np.arange(int(wu.max()))[:, None]
                real = np.less(rank, wu)  # (ranks, rows): ranks past a row's width: padding
                at = np.minimum(su + rank, x.shape[0] - 1)
                part = keys[at]
                xs = np.right_shift(part, b, out=_buffer("xs", part.shape, dt))
                xs *= real  # 0: no effect on the sums, and no capacity (_solve_dense)
                y = _solve_dense(xs, c[u].astype(dt), _buffer, wu, real)
                j, p = np.nonzero(y > 0)
                flats.append(su[p] + (part[j, p] & ((1 << b) - 1)))
                vals.append(y[j, p].astype(np.int64))
                sums[u] = np.einsum("ij->j", y, dtype=np.int64)
        for s in solo:  # (after the shared calls: intopt_positive reuses the keys' buffer)
            a, e = int(cell0[s]), int(cell0[s]) + int(counts[s] * ms[s])
            r0, r1 = int(row0[s]), int(row0[s] + counts[s])
            f, v, sm = intopt_positive(x[a:e].reshape(r1 - r0, int(ms[s])), c[r0:r1])
            solo_flats.append(f + a)
            solo_vals.append(v)
            sums[r0:r1] = sm
    else:
        rest[:] = True
    if rest.any():  # narrow runs, small dense runs, huge values: the ragged form (exact)
        r = np.flatnonzero(rest)
        cells = _ranges(start[r], width[r])
        y = _ragged_block(x[cells], width[r], c[r])
        kept = np.flatnonzero(y > 0)
        flats.append(cells[kept])
        vals.append(y[kept])
        sums[r] = _row_sums(y, width[r])
    empty = np.zeros(0, np.int64)
    flat, val, _ = _by_position(np.concatenate(flats) if flats else empty,
                                np.concatenate(vals) if vals else empty, sums, x.shape[0],
                                int(cmax))
    if not solo_flats:
        return flat, val, sums
    return (*_merged(np.concatenate(solo_flats), np.concatenate(solo_vals), flat, val), sums)


def _merged(fa: IntArray, va: IntArray, fb: IntArray,
            vb: IntArray) -> tuple[IntArray, IntArray]:
    """Two sets of kept entries (distinct positions ``f``, ascending in each; values ``v``)
    merged in position order: the solo runs' (often most of a block's) need no sort again."""
    if not fb.size:
        return fa, va
    at = np.searchsorted(fa, fb)
    at += np.arange(fb.shape[0])
    n = fa.shape[0] + fb.shape[0]
    rest = np.ones(n, np.bool_)
    rest[at] = False
    flat, val = np.empty(n, np.int64), np.empty(n, np.int64)
    flat[at], val[at] = fb, vb
    flat[rest], val[rest] = fa, va
    return flat, val


def _row_sums(y: IntArray, lengths: IntArray) -> IntArray:
    """The sums of consecutive rows of ``lengths`` (> 0 or not) cells of ``y``."""
    ends = np.cumsum(lengths)
    total = np.concatenate([[0], np.cumsum(y, dtype=np.int64)])
    return total[ends] - total[ends - lengths]


def _ranges(starts: IntArray, lengths: IntArray) -> IntArray:
    """``starts[i] .. starts[i] + lengths[i] - 1`` for every i, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)


def _kept(x: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The entries of the solved block ``x`` that are > 0 (flat positions, values) and its
    row sums."""
    flat = np.flatnonzero(np.greater(x, 0, out=_buffer("keep", x.shape, np.bool_)))
    return flat, x.reshape(-1)[flat], np.einsum("ij->i", x)


_SOLO_CELLS = 1 << 12
"""A block's runs of this many cells or more that its shared calls do not serve (dense rows,
rows narrower than :data:`TOP`) get :func:`intopt_positive` each; smaller ones go together to
:func:`_ragged_block`."""

TOP = 8
"""Sparse rows are solved from their ``TOP`` largest keys when those decide the row (step 6)."""


def _sparse_rows(keys: np.ndarray, b: int, c: IntArray,
                 target: np.ndarray) -> tuple[IntArray, IntArray, IntArray] | None:
    """:func:`intopt_positive` for rows of sorted keys ``(x_i << b) | i`` (``target``: T),
    most of them noise: step 6 of the module docstring on the rows its top keys decide, steps
    1-4 on the others (their keys are sorted already). None if the top keys leave most rows
    undecided (gathering and re-sorting their kept entries then costs more than solving them in
    place)."""
    m = keys.shape[1]
    top = min(TOP, m)
    ends = keys[:, m - top:].T.astype(np.int64, order="C")  # (top, P): the largest, ascending
    flat, vals, sums, rest = _top_keys(ends, keys[:, 0].astype(np.int64) >> b, b, c,
                                       target.astype(np.int64), m, np.arange(keys.shape[0]) * m)
    if 2 * rest.shape[0] > keys.shape[0]:
        return None
    if rest.shape[0]:
        part = keys[rest]
        xs = np.right_shift(part.T, b, out=_buffer("xs", (m, rest.shape[0]), keys.dtype))
        y = _solve_dense(xs, c[rest].astype(keys.dtype), _buffer)
        # the kept entries only: sorted rank j of row p, back to the child's index from its key
        at = np.flatnonzero(np.greater(y, 0, out=_buffer("keep", y.shape, np.bool_)))
        j, p = np.divmod(at, rest.shape[0])
        flat = np.concatenate([flat, rest[p] * m + (part[p, j] & ((1 << b) - 1))])
        vals = np.concatenate([vals, y.reshape(-1)[at].astype(np.int64)])
        sums[rest] = np.einsum("ij->j", y, dtype=np.int64)
    return _by_position(flat, vals, sums, keys.size, int(c.max()))


def _by_position(flat: IntArray, vals: IntArray, sums: IntArray, cells: int,
                 cmax: int) -> tuple[IntArray, IntArray, IntArray]:
    """The kept entries in flat order: one sort of ``(flat << bits) | value`` when both fit
    one int64 (values <= ``cmax``; faster than the stable argsort and two gathers, or than a
    quicksort argsort), else the argsort."""
    bits = max(1, cmax.bit_length())
    if max(1, cells.bit_length()) + bits <= 62:
        packed = np.left_shift(flat, bits)
        packed |= vals
        packed.sort()
        return packed >> bits, packed & ((1 << bits) - 1), sums
    order = np.argsort(flat, kind="stable")  # a few ascending runs: merged
    return flat[order], vals[order], sums


def _top_keys(ends: IntArray, least: IntArray, b: int, c: IntArray, target: IntArray,
              m: int | IntArray, base: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Step 6 of the module docstring (Algorithm 1, lines 2-11 in closed form) on every row
    that its ``top`` largest sorted keys ``ends`` (top, P; keys ``(x_i << b) | i``, ascending)
    decide: their kept entries (positions ``base[p] + i``, values), every row's sum (0 where
    undecided) and the undecided rows. ``least``: each row's smallest value; ``m``: its
    number of children (one for all, or one per row: rows of several widths share the call,
    since ``m`` enters only per row, in line 2's ``q = ceil(T / m)`` and ``top == m``).
    Arrays of ``top`` x rows (``j*``: the first of the top values ``v_j`` with
    ``H(v_j) <= c``; ``tG`` on the linear piece below it)."""
    top = ends.shape[0]
    v = ends >> b
    q = _ceil_div(target, m)  # line 2
    t0 = np.maximum(np.maximum(q, -least), -np.maximum(q, -v[-1]))  # line 3
    suffix = _suffix_sum(v, np.empty_like(v))  # sum of v_i for i >= j
    h = np.multiply(v, np.arange(top, 0, -1)[:, None])
    np.subtract(suffix, h, out=h)  # H(v_j)
    j_star = np.add.reduce(np.greater(h, c).view(np.int8), axis=0, dtype=np.int64)
    t_g = _ceil_div(suffix[np.minimum(j_star, top - 1), np.arange(v.shape[1])] - c,
                    top - j_star)
    t_star = np.maximum(t0, t_g)  # (j* = 0: t_g <= v_0, so t* = t0 wherever decided)
    u = np.where(t_star != t0, 1 - t_star, q)
    lo = np.subtract(v, t_star, out=h)
    np.maximum(lo, 0, out=lo)
    cap = np.add(v, u, out=v)
    np.maximum(cap, 0, out=cap)
    cap -= lo
    room = c - np.einsum("ij->j", lo)  # R
    caps = _suffix_sum(cap, suffix)  # the caps of this element and the ones after it
    decided = ((j_star > 0) | (t0 >= (ends[0] >> b)) | (top == m)) & (room <= caps[0])
    y = np.subtract(room, caps, out=caps)
    y += cap
    np.maximum(y, 0, out=y)
    np.minimum(y, cap, out=y)
    y += lo
    y *= decided
    j, p = np.nonzero(y > 0)
    flat = base[p] + (ends[j, p] & ((1 << b) - 1))
    return flat, y[j, p], np.einsum("ij->j", y), np.flatnonzero(~decided)


def _buffer(name: str, shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """This thread's reusable array ``name`` of at least ``shape`` (uninitialised)."""
    return memory.scratch("intopt." + name, shape, dtype, BLOCK_CELLS)


def _fresh(name: str, shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    return np.empty(shape, dtype)


Alloc = Callable[[str, tuple[int, ...], npt.DTypeLike], np.ndarray]
"""Where a block's temporaries come from: :func:`_buffer` (this thread's, reused) or
:func:`_fresh`."""


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
            _dense_block(vals[s:e].reshape(shape), cv[lo:hi], out[s:e].reshape(shape))
        else:
            out[s:e] = _ragged_block(vals[s:e], block, cv[lo:hi])
        lo = hi
    return out


# ---------------------------------------------------------------------------------------------
# Blocks: sort each row, split the rare rows that need exact Python integers, solve.


def _dense_block(x: IntArray, c: IntArray, out: IntArray, alloc: Alloc = _fresh) -> None:
    """Write IntOpt of the rows of ``x`` into ``out`` (C-contiguous, same shape); temporaries
    of the block's size from ``alloc``."""
    m = x.shape[1]
    xmax, xmin, cmax = x.max(), x.min(), c.max()
    if not _safe(xmax, xmin, cmax, m):  # rare: split off the rows that need Python ints
        safe = _safe(x.max(axis=1), x.min(axis=1), c, m)
        big = ~safe
        out[big] = _ragged_block(x[big].ravel(), np.full(int(big.sum()), m), c[big]).reshape(-1, m)
        if safe.any():
            part = np.empty((int(safe.sum()), m), dtype=np.int64)
            _dense_block(x[safe], c[safe], part, alloc)
            out[safe] = part
        return
    # int32 when every intermediate sum fits (half the bytes, twice the SIMD lanes)
    dt = np.int32 if _safe(xmax, xmin, cmax, m, _INT32_LIMIT) and x.size < 1 << 30 else np.int64
    # |x| 2m < 2**62 (or 2**31) here, so (x_i, i) packs into one unique key (x_i << b) | i:
    # any sort is stable, and shifts unpack it
    b = max(1, (m - 1).bit_length())
    keys = np.left_shift(x, b, out=alloc("dkeys", x.shape, dt), casting="unsafe")
    keys |= np.arange(m, dtype=dt)
    ranked = alloc("ranked", x.shape, dt)
    ranked[...] = keys
    ranked.sort(axis=1)
    target = (c - np.einsum("ij->i", x)).astype(dt)  # T
    q = _ceil_div(target, m)
    t_star = np.maximum(q, -(target // m))
    easy = ranked[:, 0] >> b >= t_star  # step 5: min x >= t^
    hard = np.flatnonzero(~easy)
    cd = c.astype(dt)
    if 2 * hard.shape[0] >= easy.shape[0]:  # mostly sparse rows: all by the general form
        _general(ranked, b, cd, out, alloc)
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
        _general(ranked[hard], b, cd[hard], part)
        out[hard] = part


def _general(ranked: np.ndarray, b: int, c: np.ndarray, out: IntArray,
             alloc: Alloc = _fresh) -> None:
    """Steps 1-4 on rows of sorted keys ``(x_i << b) | i``, written into ``out``."""
    xs, pos = _transposed(ranked, b, alloc)
    out.reshape(-1)[pos] = _solve_dense(xs, c, alloc)


def _transposed(ranked: np.ndarray, b: int, alloc: Alloc) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys unpacked into values and flat positions, transposed (children x parents):
    every per-parent value then broadcasts along long rows instead of paying numpy's per-row
    overhead on short ones."""
    n_rows, m = ranked.shape
    xs = np.right_shift(ranked.T, b, out=alloc("xs", (m, n_rows), ranked.dtype))
    pos = np.bitwise_and(ranked.T, (1 << b) - 1, out=alloc("pos", (m, n_rows), ranked.dtype))
    pos += m * np.arange(n_rows, dtype=ranked.dtype)  # the flat position of each element
    return xs, pos


def _solve_dense(xs: np.ndarray, c: np.ndarray, alloc: Alloc, width: np.ndarray | None = None,
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
    q = _ceil_div(target, m if width is None else width)  # line 2
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
    t_star = np.maximum(t0, _ceil_div(need - prefix, left).astype(dt))  # step 2
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


def _ragged_block(vals: IntArray, lengths: IntArray, c: IntArray) -> IntArray:
    n_rows = lengths.shape[0]
    row = np.repeat(np.arange(n_rows, dtype=np.int64), lengths)
    starts = np.cumsum(lengths) - lengths
    if _safe(vals.max(), vals.min(), c.max(), lengths.max()):
        safe = np.ones(n_rows, dtype=bool)
    else:
        xmax, xmin = np.maximum.reduceat(vals, starts), np.minimum.reduceat(vals, starts)
        safe = _safe(xmax, xmin, c, lengths)
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


def _safe(xmax: Any, xmin: Any, c: Any, m: Any, limit: float = _SAFE_LIMIT) -> Any:
    """Whether the intermediate sums stay below ``limit`` (2**62 in int64, see the module
    docstring; 2**31 for int32)."""
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


def _suffix_sum(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[j] = a[j] + a[j + 1] + ...`` along the first (short) axis, row after row."""
    out[-1] = a[-1]
    for j in range(a.shape[0] - 2, -1, -1):
        np.add(out[j + 1], a[j], out=out[j])
    return out


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


def _ceil_div(a: Any, b: Any) -> Any:
    return -((-a) // b)


def _solve(xs: Any, rows: _Rows, c: Any) -> Any:
    """IntOpt on sorted rows ``xs`` (int64 or object); returns ``x + z`` in the sorted order."""
    m = rows.count()
    cum_x = rows.cumsum(xs)
    total = rows.last(cum_x)  # S = sum(x)
    target = c - total  # T = c - sum(x)
    q = _ceil_div(target, m)
    neg = -xs
    z0 = np.maximum(rows.spread(q), neg)  # line 2
    # line 3: max_i |max(q, -x_i)| from the row's smallest and largest x.
    t0 = np.maximum(np.maximum(q, -rows.first(xs)), -np.maximum(q, -rows.last(xs)))
    # Step 3: tG, the smallest t with sum_i min(x_i, t) >= S - c.
    need = total - c
    g_break = cum_x + (rows.remaining() - 1) * xs  # G(xs_j) = P_j + (m - j) xs_j
    j_star = rows.count_true(g_break < rows.spread(need))  # j*
    prefix = rows.gather(cum_x, j_star) - rows.gather(xs, j_star)  # P_j*, exclusive
    t_g = _ceil_div(need - prefix, m - j_star)
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
