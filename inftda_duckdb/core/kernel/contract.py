"""What the compiled kernel and its callers agree on: its functions' signatures and the
constants both sides read.

Imports nothing of the package but IntOpt's closed form (for its int64 bound, defined there),
so :mod:`..noise` can import it without a circle. The compiled functions never read these
constants as globals: :mod:`.` passes them as arguments on every call, so numba's on-disk cache
(keyed on the source of :mod:`._numba` alone) cannot hold code built with an older value.
"""

from __future__ import annotations

import numpy as np

# SAFE_LIMIT: a block whose values ``x`` (children) and ``c`` (totals) of width ``m`` have
# ``(4 m + 4) (max(|x|, c) + 1) >= SAFE_LIMIT`` could take the int64 sums of IntOpt's closed form
# past int64: the kernel refuses it and the caller solves it exactly (numpy's int64 path has the
# same bound, for the same sums: one definition, in intopt_closed_form).
from ..intopt_closed_form import SAFE_LIMIT

SEARCH = int(np.iinfo(np.int64).min)
"""The noise's signed lookup table holds this in a bucket that contains a threshold, where the
magnitude needs a binary search (:mod:`..noise`)."""

SIGNATURES = {
    "solve_block": "int64(int64[::1], int64, int64[::1], int64[:], int64[:], float64, "
                   "int64[::1], int64[::1], int64[::1], int64[::1])",
    "solve_pairs": "int64(int64[::1], int64, int64[::1], int64[::1], int64[::1], int64[::1], "
                   "int64, float64, int64[::1], int64[::1], int64[::1], int64[::1])",
    "lookup": "int64(uint64[:], int64[::1], uint64, uint64[::1], uint64, uint64, int64, "
              "int64[::1])",
    "spread": "int64(uint64[::1], uint64[::1], uint64[:])",
    "radix_sort": "int64(int64[::1], int64[::1], int64, int64)",
    "up_pairs": "int64(int64[::1], int64, int64, int32[::1], int64[::1], int64[::1])",
}
"""The kernel's functions (:mod:`._numba`'s names) and the only signatures they are compiled
for, in numba's notation (``[::1]``: C-contiguous, ``[:]``: any stride): numba compiles or loads
all of them at once, and refuses a call with other types (a ``TypeError`` before the function
runs) instead of compiling again."""

__all__ = ["SAFE_LIMIT", "SEARCH", "SIGNATURES"]
