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

Where the code is: :mod:`.intopt_closed_form` holds the public :func:`intopt` and
:func:`intopt_ragged` (every row of a matrix, or ragged rows: steps 1-5, with their input
checks), :mod:`.intopt_blocks` the block solvers of the release path (Algorithm 1, line 6, on
one block of a level's parents: only the entries > 0, step 6 for sparse rows, on this thread's
reused buffers). Both are re-exported here.
"""

from __future__ import annotations

from .intopt_blocks import intopt_positive, intopt_positive_runs
from .intopt_closed_form import intopt, intopt_ragged

__all__ = ["intopt", "intopt_positive", "intopt_positive_runs", "intopt_ragged"]
