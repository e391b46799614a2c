"""IntOpt on the release path (paper, Algorithm 1, line 6): one block of a level's parents.

:func:`intopt_positive` (parents with the same number of children) and
:func:`intopt_positive_runs` (runs of parents of several widths, a nested level's block) return
only the entries of IntOpt's result that are > 0 (Algorithm 1, lines 7-9 keep them), in flat
order, with every row's sum; the integers are :func:`.intopt`'s, row for row. Sparse rows (mostly
noise) are solved from their :data:`TOP` largest values where those decide the row (step 6 of
:mod:`.intopt`'s docstring), the others by the closed form of :mod:`.intopt_closed_form`. The
temporaries of a block are this thread's reused arrays (:func:`buffer`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from . import memory
from .intopt_closed_form import (
    BLOCK_CELLS,
    INT32_LIMIT,
    ceil_div,
    dense_block,
    general,
    intopt_ragged,
    ragged_block,
    solve_dense,
    sums_fit,
)

IntArray = npt.NDArray[np.int64]

TOP = 8
"""Sparse rows are solved from their ``TOP`` largest keys when those decide the row (step 6)."""

_SOLO_CELLS = 1 << 12
"""A block's runs of this many cells or more that its shared calls do not serve (dense rows,
rows narrower than :data:`TOP`) get :func:`intopt_positive` each; smaller ones go together to
:func:`ragged_block`."""


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
    if sums_fit(xmax, xmin, cmax, m):
        dt = np.int32 if sums_fit(xmax, xmin, cmax, m, INT32_LIMIT) and x.size < 1 << 30 \
            else np.int64
        b = max(1, (m - 1).bit_length())
        keys = np.left_shift(x, b, out=buffer("keys", (n_rows, m), dt), casting="unsafe")
        keys |= np.arange(m, dtype=dt)
        keys.sort(axis=1)
        target = (c - np.einsum("ij->i", x)).astype(dt)
        t_hat = np.maximum(ceil_div(target, m), -(target // m))
        if 2 * int(np.count_nonzero(keys[:, 0] >> b < t_hat)) >= n_rows:  # sparse rows
            found = _sparse_rows(keys, b, c, target)
            if found is not None:
                return found
            # most rows have many counts above the noise: steps 1-4 on every row, in place (the
            # kept entries come out in order: no gather of them from the sorted keys, no sort)
            general(keys, b, c.astype(dt), x, buffer)
            return _kept(x)
    dense_block(x, c, x, buffer)  # dense data, or values too large for int64 sums: all of it
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
    the rows their top keys leave undecided through one ragged :func:`solve_dense` (their keys are
    sorted already). Dense runs and runs narrower than :data:`TOP` keep :func:`intopt_positive`
    (small ones, and values too large for int64 sums, go to :func:`ragged_block` together).
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
    safe = sums_fit(xmax, xmin, cmax, int(ms.max()))
    flats: list[IntArray] = []  # kept entries, in any order
    vals: list[IntArray] = []
    solo_flats: list[IntArray] = []  # those of the runs solved alone: ascending already
    solo_vals: list[IntArray] = []
    sums = np.zeros(n_rows, np.int64)
    rest = np.zeros(n_rows, np.bool_)  # rows for ragged_block
    if safe:
        dt = np.int32 if sums_fit(xmax, xmin, cmax, int(ms.max()), INT32_LIMIT) \
            and x.size < 1 << 30 else np.int64
        b = max(1, (int(ms.max()) - 1).bit_length())
        keys = buffer("keys", (x.shape[0],), dt)  # (the same buffer as intopt_positive's)
        for s in np.flatnonzero(wide).tolist():  # each wide run's rows sorted (line 4)
            a, e = int(cell0[s]), int(cell0[s]) + int(counts[s] * ms[s])
            part = np.left_shift(x[a:e], b, out=keys[a:e], casting="unsafe")
            part = part.reshape(int(counts[s]), int(ms[s]))
            part |= np.arange(ms[s], dtype=dt)
            part.sort(axis=1)
        target = c - np.add.reduceat(x, start)  # T
        least = keys[start].astype(np.int64) >> b
        t_hat = np.maximum(ceil_div(target, width), -(target // width))
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
                xs = np.right_shift(part, b, out=buffer("xs", part.shape, dt))
                xs *= real  # 0: no effect on the sums, and no capacity (solve_dense)
                y = solve_dense(xs, c[u].astype(dt), buffer, wu, real)
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
        cells = ranges(start[r], width[r])
        y = ragged_block(x[cells], width[r], c[r])
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


def ranges(starts: IntArray, lengths: IntArray) -> IntArray:
    """``starts[i] .. starts[i] + lengths[i] - 1`` for every i, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)


def _kept(x: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The entries of the solved block ``x`` that are > 0 (flat positions, values) and its
    row sums."""
    flat = np.flatnonzero(np.greater(x, 0, out=buffer("keep", x.shape, np.bool_)))
    return flat, x.reshape(-1)[flat], np.einsum("ij->i", x)


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
        xs = np.right_shift(part.T, b, out=buffer("xs", (m, rest.shape[0]), keys.dtype))
        y = solve_dense(xs, c[rest].astype(keys.dtype), buffer)
        # the kept entries only: sorted rank j of row p, back to the child's index from its key
        at = np.flatnonzero(np.greater(y, 0, out=buffer("keep", y.shape, np.bool_)))
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
    q = ceil_div(target, m)  # line 2
    t0 = np.maximum(np.maximum(q, -least), -np.maximum(q, -v[-1]))  # line 3
    suffix = _suffix_sum(v, np.empty_like(v))  # sum of v_i for i >= j
    h = np.multiply(v, np.arange(top, 0, -1)[:, None])
    np.subtract(suffix, h, out=h)  # H(v_j)
    j_star = np.add.reduce(np.greater(h, c).view(np.int8), axis=0, dtype=np.int64)
    t_g = ceil_div(suffix[np.minimum(j_star, top - 1), np.arange(v.shape[1])] - c,
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


def _suffix_sum(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[j] = a[j] + a[j + 1] + ...`` along the first (short) axis, row after row."""
    out[-1] = a[-1]
    for j in range(a.shape[0] - 2, -1, -1):
        np.add(out[j + 1], a[j], out=out[j])
    return out


def buffer(name: str, shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """This thread's reusable array ``name`` of at least ``shape`` (uninitialised)."""
    return memory.scratch("intopt." + name, shape, dtype, BLOCK_CELLS)
