"""A compiled per-block kernel (optional, numba): densify, IntOpt and keep fused, GIL-free.

The same integers as the numpy path (:func:`~inftda_duckdb.core.intopt.intopt_positive`, the
noise table lookup of :mod:`~inftda_duckdb.core.noise`), computed row by row in one pass over a
block instead of ~25 numpy passes: a block of parents with ``width`` children each gets its true
children's counts added to its noise (Algorithm 1, line 5), every row is solved by IntOpt's closed
form (line 6; :mod:`~inftda_duckdb.core.intopt`'s docstring, steps 1-5, ties in index order) and
only the children > 0 are emitted (lines 7-9). A row whose values span a short range (noisy
sparse rows) is solved from a histogram of its values, without sorting; step 5 (every child well
above the noise) needs only the ``r``-th smallest key ``m x_i + i`` (a selection); other rows
sort their keys.

Selected by the environment variable ``INFTDA_KERNEL``: ``numpy`` (never), ``numba`` (every
block, whatever its size; an error if numba is missing) or ``auto`` (the default: blocks of at
least :data:`MIN_CELLS` cells, once numba is loaded: in a background thread, when a flat level
plans at least :data:`FIRST_LOAD_CELLS` cells, or at least :data:`LOAD_CELLS` cells in a process
that has already seen a level that large; never at package import, so small releases never pay
for it). :mod:`.topdown` keeps nested levels on numpy. Outputs are identical either
way; blocks whose sums could pass int64 (see intopt's docstring) take numpy's exact path.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import bad_argument
from .intopt import _buffer, intopt_positive

IntArray = npt.NDArray[np.int64]

MIN_CELLS = 1 << 15
"""With ``INFTDA_KERNEL=auto``, smaller blocks stay on the numpy path (numba's import and cache
load, ~0.5 s once per process, would outweigh them)."""
LOAD_CELLS = 1 << 25
"""With ``auto``, numba is loaded (in the background, once per process) when a flat level plans
at least this many noised cells and an earlier level of the process did too (decided per level,
from its parents' released counts: a bound over the whole tree multiplied by nested domains and
loaded it for releases that never use it): its import and cache load hold the GIL for ~0.3-1 s,
which the kernel wins back (~10-15 ns per cell on one thread) only on levels this large."""
FIRST_LOAD_CELLS = 1 << 28
"""With ``auto``, a flat level this large loads numba even if it is the process's first large
one. Below it, a process's first large level stays on numpy: in a fresh process the load (held
GIL, ~140-165 MB more memory) cost as much as the kernel saved on a level of ~1e8 cells (the
wide benchmark's first release: no faster, peak RSS 1280 -> 1120 MB without it); a long-lived
process (shell, notebook, ETL) loads it at its second large level."""
ENV = "INFTDA_KERNEL"
CHOICES = ("auto", "numba", "numpy")

_LOCK = threading.Lock()
_COMPILED: dict[str, Any] = {}
_MISSING: list[str] = []
_STARTED: list[threading.Thread] = []
_LARGE: list[int] = []  # the planned cells of this process's levels of >= LOAD_CELLS cells


def _choice() -> str:
    choice = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise bad_argument(ENV, choice, f"must be one of {', '.join(CHOICES)}",
                           f"unset {ENV}, or set it to numpy or numba")
    return choice


def wanted(cells: int) -> bool:
    """Whether a block of ``cells`` cells runs in the compiled kernel. ``auto`` never waits
    for it: until :func:`warm_up` has loaded it, blocks take the numpy path (same outputs)."""
    choice = _choice()
    if choice == "numpy" or (choice == "auto" and (cells < MIN_CELLS or not _COMPILED)):
        return False
    if _COMPILED:
        return True
    _load()
    if _MISSING:
        raise bad_argument(ENV, choice, f"needs numba, which did not import ({_MISSING[0]})",
                           "pip install 'inftda-duckdb[fast]', or unset " + ENV)
    return True


def check() -> None:
    """Raise now what :func:`wanted` would raise at a release's first block (a bad
    ``INFTDA_KERNEL``, or ``numba`` without numba): engines call it before the charge."""
    wanted(MIN_CELLS)


def warm_up(cells: int) -> None:
    """Start loading the kernel in a background thread (``auto``) for a flat level of
    ``cells`` noised cells: at least :data:`FIRST_LOAD_CELLS`, or at least :data:`LOAD_CELLS`
    after an earlier level of the process that was that large."""
    if _COMPILED or _MISSING or _STARTED or cells < LOAD_CELLS or _choice() != "auto":
        return
    with _LOCK:
        _LARGE.append(cells)
        if _STARTED or (len(_LARGE) == 1 and cells < FIRST_LOAD_CELLS):
            return
        _STARTED.append(threading.Thread(target=_load, name="inftda-kernel-load", daemon=True))
    _STARTED[0].start()


def _load() -> None:
    with _LOCK:
        if _COMPILED or _MISSING:
            return
        try:
            from . import _kernel_numba
        except ImportError as exc:  # numba absent (or broken): the numpy path
            _MISSING.append(str(exc))
            return
        _kernel_numba.warm()  # compiled, or loaded from numba's cache
        _COMPILED.update(solve=_kernel_numba.solve_block, lookup=_kernel_numba.lookup)


def lookup(words: np.ndarray, table: IntArray, shift: int, out: IntArray) -> int:
    """``out[i] = table[words[i] >> shift]`` (the noise's signed-magnitude table); returns how
    many entries hold the table's search marker (its minimum, int64's)."""
    return int(_COMPILED["lookup"](words, table, np.uint64(shift), out))


def intopt_kept(x: IntArray, width: int, c: IntArray, pos: IntArray,
                add: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """``x[pos] += add`` (the densify), then what ``intopt_positive(x.reshape(-1, width), c)``
    returns: the kept entries' flat positions (ascending), their values, every row's sum.

    ``x``: C-contiguous int64 (rows x width, flat), overwritten; ``c`` int64 >= 0; ``pos``
    ascending, unique. A block whose sums could pass int64 goes to the numpy path (exact)."""
    n_rows = c.shape[0]
    flat = _buffer("kept_flat", (x.shape[0],), np.int64)  # this thread's, reused
    vals = _buffer("kept_vals", (x.shape[0],), np.int64)
    scratch = _buffer("kept_scratch", (8 * width + 1024,), np.int64)
    sums = np.empty(n_rows, np.int64)
    kept = int(_COMPILED["solve"](x, width, c, pos, add, flat, vals, sums, scratch))
    if kept < 0:  # values too large for int64 sums: densified already, solve exactly
        return intopt_positive(x.reshape(n_rows, width), c)
    return flat[:kept].copy(), vals[:kept].copy(), sums


__all__ = ["CHOICES", "ENV", "FIRST_LOAD_CELLS", "LOAD_CELLS", "MIN_CELLS", "check",
           "intopt_kept", "lookup", "wanted", "warm_up"]
