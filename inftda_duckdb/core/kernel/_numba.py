"""The kernel's functions, in the subset of Python numba compiles (imported only by
:mod:`~inftda_duckdb.core.kernel`, lazily).

:mod:`._cache` compiles those named in :data:`.contract.SIGNATURES` for exactly those
signatures, ``nogil`` (worker threads run blocks truly in parallel), through numba's on-disk
cache. That cache is keyed on this file's source and each function's bytecode only, so this
module imports nothing of the package: every value that lives elsewhere (the noise's search
marker, the int64 guard) is an argument; the constants below are this file's own. All
arithmetic is int64 and the same as :mod:`..intopt`'s closed form, guarded by the same bound
(blocks past it are refused here and solved exactly by the caller).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

_DIGIT = 9  # bits per pass of radix_sort: 512 buckets, whose write positions stay in L1
_SIGN = np.uint64(1 << 63)  # a noise word with this bit set gives a negative sample
_NARROW = 4  # rows whose values span under _NARROW * m + 64 are solved without a sort


def lookup(words: Any, table: Any, shift: Any, cdf: Any, ushift: Any, umask: Any, search: int,
           out: Any) -> int:  # pragma: no cover (compiled)
    """``out[i] = table[words[i] >> shift]``; where that is ``search`` (the marker of a bucket
    holding a threshold), the magnitude ``#{a : cdf[a] < u}`` of
    ``u = (words[i] >> ushift) & umask`` (binary search; ``cdf[-1] >= u``), negative if the
    word's top bit is set, unless ``u`` equals a threshold: that entry keeps the marker, for
    the exact refinement. Returns the number of markers kept."""
    unsure = 0
    top = cdf.shape[0] - 1
    for i in range(out.shape[0]):
        w = words[i]
        v = table[w >> shift]
        if v == search:
            u = (w >> ushift) & umask
            lo, hi = 0, top
            while lo < hi:
                mid = (lo + hi) >> 1
                if cdf[mid] < u:
                    lo = mid + 1
                else:
                    hi = mid
            if cdf[lo] == u:
                unsure += 1
            else:
                v = -lo if w >= _SIGN else lo
        out[i] = v
    return unsure


def spread(rows: Any, kids: Any, out: Any) -> int:  # pragma: no cover (compiled)
    """``out[p * w + j] = rows[p] + kids[j]``, ``w = len(kids)``: a block's cell addresses
    (every child of every parent) written into the AES input (any stride); returns 0."""
    w = kids.shape[0]
    for p in range(rows.shape[0]):
        base, at = rows[p], p * w
        for j in range(w):
            out[at + j] = base + kids[j]
    return 0


@njit(inline="always")
def _select(a: Any, n: int, k: int) -> int:  # pragma: no cover (compiled)
    """The ``k``-th smallest (0-based) of the unique ``a[:n]`` (reorders ``a[:n]``)."""
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        p1, p2, p3 = a[lo], a[mid], a[hi]  # median of three
        pivot = max(min(p1, p2), min(max(p1, p2), p3))
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


@njit(inline="always")
def _ceil_div(a: int, b: int) -> int:  # pragma: no cover (compiled)
    return -((-a) // b)


@njit(inline="always")
def _easy_row(x: Any, base: int, m: int, q: int, t_hat: int, target: int, keys: Any,
              y: Any) -> None:  # pragma: no cover (compiled)
    """Step 5 of intopt's docstring: every child at least ``t^``; the excess ``D = m q - T``
    takes ``cap = q + t^`` from the ``r = D // cap`` smallest keys, the rest from the next."""
    cap = q + t_hat
    excess = m * q - target
    if excess == 0:
        for i in range(m):
            y[i] = x[base + i] + q
        return
    r = excess // cap
    rem = excess - r * cap
    for i in range(m):
        keys[i] = x[base + i] * m + i
    nth = _select(keys, m, r)
    for i in range(m):
        key = x[base + i] * m + i
        v = x[base + i] + q
        if key < nth:
            v -= cap
        elif key == nth:
            v -= rem
        y[i] = v


@njit(inline="always")
def _narrow_row(x: Any, base: int, m: int, c: int, total: int, q: int, low: int, high: int,
                count: Any, flat: Any, vals: Any, kept: int) -> tuple[int, int]:
    """Steps 1-4 without sorting, for a row whose values span a short range: every quantity of
    the closed form depends on a child only through its value, so one histogram of the values
    gives ``t*`` (``G(t + 1) = G(t) + #{x_i > t}``) and the value ``v`` where the final cycle
    stops; the children below ``v`` keep their floor, those above their start, the ties at
    ``v`` are visited in index order. Emits the children > 0; returns (kept, row sum)."""
    span = high - low + 1
    cand = count[_NARROW * m + 64:]  # (the histogram's span is below that)
    count[:span] = 0
    for i in range(m):
        count[x[base + i] - low] += 1
    need = total - c
    t0 = max(max(q, -low), -max(q, -high))  # line 3
    t_star = t0  # step 2: t* = max(t0, tG), tG the smallest t with G(t) >= need
    if t0 < high:
        if t0 < low:
            g, t = m * t0, t0
            if m * low >= need:  # tG <= low: G(t) = m t up to there
                t_star = max(t0, _ceil_div(need, m))
                g = need  # (done)
            else:
                g, t = m * low, low
        else:
            g, t, below = 0, low, 0  # G(t) = sum_{v < t} v n_v + t #{x >= t}
            for v in range(low, t0):
                g += v * count[v - low]
                below += count[v - low]
            t = t0
            g += t * (m - below)
        if g < need:  # G(t + 1) = G(t) + #{x_i > t}
            above = 0
            for v in range(t + 1, high + 1):
                above += count[v - low]
            while g < need:
                g += above
                t += 1
                above -= count[t - low] if t <= high else 0
            t_star = t
    u = 1 - t_star if t_star != t0 else q  # the final cycle's start (step 2)
    excess = -c  # D = sum(hi) - c >= 0
    for v in range(low, high + 1):
        excess += count[v - low] * max(v + u, 0)
    run, stop = 0, high  # step 4: the value where D is absorbed, in sorted order
    for v in range(low, high + 1):
        cap_v = count[v - low] * (max(v + u, 0) - max(v - t_star, 0))
        if run + cap_v >= excess:
            stop = v
            break
        run += cap_v
    # a child at or below ``skip`` ends at 0 and leaves ``run`` alone: its floor and start
    # are both 0 (x <= t* and x + u <= 0), or it lies below the stop (x < v) at floor 0; only
    # the few above it (in a noisy sparse row) are visited, found without a branch
    skip = max(min(stop - 1, t_star), min(t_star, -u))
    n = 0
    for i in range(m):
        cand[n] = i
        n += x[base + i] > skip
    s = 0
    for j in range(n):  # (branch-free: the comparisons with v are unpredictable)
        i = cand[j]
        xv = x[base + i]
        lo = max(xv - t_star, 0)
        cap = max(xv + u, 0) - lo
        tie = xv == stop
        run += cap * tie
        v = lo + (cap if xv > stop else 0) + tie * min(max(run - excess, 0), cap)
        s += v
        flat[kept] = base + i
        vals[kept] = v
        kept += v > 0
    return kept, s


@njit(inline="always")
def _general_row(x: Any, base: int, m: int, c: int, total: int, q: int, scratch: Any,
                 y: Any) -> None:  # pragma: no cover (compiled)
    """Steps 1-4 (intopt's ``_solve_dense``) on one row, in the order of its sorted unique keys
    ``m x_i + i`` (ascending x, ties in index order)."""
    order, keys = scratch[:m], scratch[m: 2 * m]
    for i in range(m):
        keys[i] = x[base + i] * m + i
    keys.sort()
    for j in range(m):
        order[j] = keys[j] - (keys[j] // m) * m
    need = total - c  # step 3: j*, the first sorted j with G(xs_j) = P_j + (m - j) xs_j >= need
    cum, j_star, prefix = 0, m - 1, 0
    for j in range(m):
        xv = x[base + order[j]]
        cum += xv
        if cum + (m - 1 - j) * xv >= need:
            j_star, prefix = j, cum - xv
            break
    first, last = x[base + order[0]], x[base + order[m - 1]]
    t0 = max(max(q, -first), -max(q, -last))  # line 3
    t_star = max(t0, _ceil_div(need - prefix, m - j_star))  # step 2
    u = 1 - t_star if t_star != t0 else q
    excess = -c  # D = sum(hi) - c
    for i in range(m):
        excess += max(x[base + i] + u, 0)
    run = 0
    for j in range(m):  # step 4: the first in sorted order drop to their floors
        i = order[j]
        xv = x[base + i]
        lo = max(xv - t_star, 0)
        cap = max(xv + u, 0) - lo
        run += cap
        y[i] = lo + min(max(run - excess, 0), cap)


def solve_block(x: Any, m: int, c: Any, pos: Any, add: Any, limit: float, flat: Any, vals: Any,
                sums: Any, scratch: Any) -> int:  # pragma: no cover (compiled)
    """``x[pos] += add``, then IntOpt of every row (``m`` wide) of ``x`` against ``c``: the
    entries > 0 into ``flat`` (positions, ascending) and ``vals``, row sums into ``sums``.
    Returns how many were kept, or -1 (``x`` densified, nothing solved) when the block's values
    could take int64 sums past ``limit`` (:data:`.contract.SAFE_LIMIT`)."""
    for k in range(pos.shape[0]):
        x[pos[k]] += add[k]
    return _solve_rows(x, m, c, limit, flat, vals, sums, scratch)


def solve_pairs(x: Any, m: int, c: Any, lo: Any, hi: Any, pairs: Any, bits: int, limit: float,
                flat: Any, vals: Any, sums: Any, scratch: Any) -> int:  # pragma: no cover
    """:func:`solve_block` with the true children read straight from the sorted leaves: row
    ``r``'s are ``pairs[lo[r]:hi[r]]``, each ``(key << bits) | count`` with code ``key % m``."""
    mask = (1 << bits) - 1
    for r in range(c.shape[0]):
        a, b = lo[r], hi[r]
        if a < b:  # the row's children share its key's parent: one division per row
            base = r * m - (pairs[a] >> bits) // m * m
            for t in range(a, b):
                v = pairs[t]
                x[base + (v >> bits)] += v & mask
    return _solve_rows(x, m, c, limit, flat, vals, sums, scratch)


@njit(inline="always")
def _solve_rows(x: Any, m: int, c: Any, limit: float, flat: Any, vals: Any, sums: Any,
                scratch: Any) -> int:  # pragma: no cover (compiled)
    """IntOpt of every (densified) row of ``x`` (see :func:`solve_block`)."""
    n_rows = c.shape[0]
    if n_rows == 0 or m == 0:
        sums[:] = 0
        return 0
    bound = max(float(x.max()), -float(x.min()), float(c.max()))
    if (4.0 * m + 4.0) * (bound + 1.0) >= limit:
        return -1
    y = scratch[:m]
    rest = scratch[m:]
    kept = 0
    for r in range(n_rows):
        base = r * m
        total, low, high = 0, x[base], x[base]
        for i in range(m):
            v = x[base + i]
            total += v
            low = min(low, v)
            high = max(high, v)
        target = c[r] - total  # T
        low_q = target // m  # (one division: q = ceil(T / m))
        q = low_q + (low_q * m != target)  # line 2
        t_hat = max(q, -low_q)
        if low < t_hat and high - low < _NARROW * m + 64:
            kept, sums[r] = _narrow_row(x, base, m, c[r], total, q, low, high, rest, flat,
                                        vals, kept)
            continue
        if low >= t_hat:
            _easy_row(x, base, m, q, t_hat, target, rest, y)
        else:
            _general_row(x, base, m, c[r], total, q, rest, y)
        s = 0
        for i in range(m):  # lines 7-9: the children > 0 (written always, counted if kept)
            v = y[i]
            s += v
            flat[kept] = base + i
            vals[kept] = v
            kept += v > 0
        sums[r] = s
    return kept


def radix_sort(a: Any, tmp: Any, lo: int, hi: int) -> int:  # pragma: no cover (compiled)
    """LSD radix sort of the non-negative ``a`` by bits ``lo..hi - 1`` (stable), in passes of
    at most ``_DIGIT`` bits between ``a`` and ``tmp`` (same size); returns the number of
    passes: the sorted values are in ``tmp`` if it is odd, else in ``a``."""
    n = a.shape[0]
    passes = max(1, -((lo - hi) // _DIGIT))
    digit = -((lo - hi) // passes)
    mask = (1 << digit) - 1
    starts = np.empty((1 << digit) + 1, np.int64)
    src, dst = a, tmp
    for p in range(passes):
        shift = lo + p * digit
        starts[:] = 0
        for i in range(n):
            starts[((src[i] >> shift) & mask) + 1] += 1
        for b in range(mask + 1):
            starts[b + 1] += starts[b]
        for i in range(n):
            v = src[i]
            b = (v >> shift) & mask
            dst[starts[b]] = v
            starts[b] += 1
        src, dst = dst, src
    return passes


def up_pairs(pairs: Any, bits: int, m: int, starts: Any, parents: Any,
             sums: Any) -> int:  # pragma: no cover (compiled)
    """One level up sorted pairs ``(key << bits) | count`` (keys ascending): where each
    parent's (``key // m``) run of children starts (and ``n`` after the last), its key and the
    sum of its children's counts; returns the number of parents, or -1 if a key repeats."""
    n = pairs.shape[0]
    mask = (1 << bits) - 1
    filled, last, bound = 0, -1, 0
    for i in range(n):
        v = pairs[i]
        key = v >> bits
        if key <= last:
            return -1
        last = key
        if key >= bound:  # a new parent (one division per parent, none per child)
            parent = key // m
            bound = (parent + 1) * m
            starts[filled] = i
            parents[filled] = parent
            sums[filled] = 0
            filled += 1
        sums[filled - 1] += v & mask
    starts[filled] = n
    return filled


__all__ = ["lookup", "radix_sort", "solve_block", "solve_pairs", "spread", "up_pairs"]
