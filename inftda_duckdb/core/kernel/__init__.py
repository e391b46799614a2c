"""A compiled per-block kernel (numba): densify, IntOpt and keep fused, GIL-free.

The same integers as the numpy path (:func:`~inftda_duckdb.core.intopt.intopt_positive`, the
noise table lookup of :mod:`~inftda_duckdb.core.noise`), computed row by row in one pass over a
block instead of numpy's many passes over it: a block of parents with ``width`` children each
gets its true children's counts added to its noise (Algorithm 1, line 5), every row is solved by
IntOpt's closed form (line 6; :mod:`~inftda_duckdb.core.intopt`'s docstring, steps 1-5, ties in
index order) and only the children > 0 are emitted (lines 7-9). A row whose values span a short
range (noisy sparse rows) is solved from a histogram of its values, without sorting; step 5
(every child well above the noise) needs only the ``r``-th smallest key ``m x_i + i`` (a
selection); other rows sort their keys.

Selected by the environment variable ``INFTDA_KERNEL``: ``numpy`` (never), ``numba`` (every
block, whatever its size; loaded by :func:`check` before the charge, refused there if it does
not load) or ``auto`` (the default: blocks of at least :data:`MIN_CELLS` cells, once loaded).
The kernel is numba's JIT (:mod:`._numba`), compiled for the signatures of
:data:`.contract.SIGNATURES` or loaded from numba's on-disk cache. With ``auto`` it is loaded in
a background thread when a flat level plans at least :data:`FIRST_LOAD_CELLS` cells, or at least
:data:`LOAD_CELLS` cells in a process that has already seen a level that large; never at
package import, so small releases never pay for it, and blocks never wait for it. Loading never
raises and never ends the process: numba missing or failing leaves the numpy path, and a cache
entry numba cannot read is compiled afresh in memory (the file is left alone). Outputs are
identical either way; blocks whose sums could pass int64 (see intopt's docstring) take numpy's
exact path. Which path runs depends only on the planned cells (public) and on whether numba
loads, never on the data.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import memory
from ..errors import InternalError, bad_argument
from ..intopt import intopt_positive
from ..intopt_blocks import buffer
from .contract import SAFE_LIMIT, SEARCH, SIGNATURES

IntArray = npt.NDArray[np.int64]

MIN_CELLS = 1 << 15
"""With ``INFTDA_KERNEL=auto``, smaller blocks stay on the numpy path (the compiled call's fixed
cost would outweigh them)."""
LOAD_CELLS = 1 << 25
"""With ``auto``, numba is loaded (in the background, once per process) when a flat level plans
at least this many noised cells and an earlier level of the process did too (decided per level,
from its parents' released counts, not from a bound over the whole tree): its import and cache
load hold the GIL and take memory, which the kernel wins back only on levels this large."""
FIRST_LOAD_CELLS = 1 << 28
"""With ``auto``, a flat level this large loads numba even if it is the process's first large
one. Below it, a process's first large level stays on numpy (in a fresh process the load cost
as much as the kernel saved on the wide benchmark's levels; benchmarks/RESULTS.md); a
long-lived process (shell, notebook, ETL) loads it at its second large level."""
ENV = "INFTDA_KERNEL"
CHOICES = ("auto", "numba", "numpy")
_LOCK = threading.Lock()
_COMPILED: dict[str, Any] = {}
_MISSING: list[str] = []  # why this process's one attempt at loading the kernel failed
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
    for numba: until :func:`warm_up` has loaded it, blocks take the numpy path (same outputs)."""
    choice = _choice()
    if choice == "numpy" or (choice == "auto" and cells < MIN_CELLS):
        return False
    if _COMPILED or choice == "auto":
        return bool(_COMPILED)
    _load()
    if _MISSING:
        raise bad_argument(ENV, choice, f"needs numba's compiled kernel, which did not load "
                           f"({_MISSING[0]})",
                           f"reinstall inftda-duckdb with its dependency numba, or unset {ENV} "
                           "(the numpy path: the same outputs)")
    return True


def check() -> None:
    """Raise now what :func:`wanted` would raise at a release's first block (a bad
    ``INFTDA_KERNEL``, or ``numba`` that does not load): engines call it before the charge,
    so ``numba`` loads (or compiles) the kernel here. ``auto`` loads nothing here (small
    releases never pay for the kernel)."""
    if _choice() == "numba":
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
    """Load the kernel once per process: import numba and compile :mod:`._numba`'s functions,
    or load them from numba's on-disk cache once :mod:`._cache` has checked its files. Never
    raises: what failed goes to ``_MISSING`` (the numpy path); a cache numba cannot use
    (unwritable, unreadable) is bypassed, the kernel compiled in memory."""
    with _LOCK:
        if _COMPILED or _MISSING:
            return
        try:
            from . import _cache, _numba
        except Exception as exc:  # numba absent or broken: the numpy path
            _MISSING.append(f"numba does not import: {type(exc).__name__}: {exc}")
            return
        try:
            functions = _cache.compiled(_numba, SIGNATURES)
        except Exception:  # the same kernel, compiled in memory (the files left to numba)
            try:
                functions = _cache.compiled(_numba, SIGNATURES, on_disk=False)
            except Exception as exc:
                _MISSING.append(f"numba does not compile it: {type(exc).__name__}: {exc}")
                return
        _COMPILED.update(functions)


def _call(name: str, *args: Any) -> int:
    """The kernel's ``name`` on ``args`` (numba checks them against its one signature)."""
    return int(_COMPILED[name](*args))


def lookup(words: np.ndarray, table: IntArray, shift: int, cdf: np.ndarray, bits: int,
           out: IntArray) -> int:
    """``out[i] = table[words[i] >> shift]`` (the noise's signed-magnitude table); where that
    is the search marker (int64's minimum), the signed ``#{a : cdf[a] < u}`` of the word's
    ``bits``-bit ``u`` (its bits ``62 .. 63 - bits``) instead, as the noise's binary search
    gives it, unless ``u`` equals a threshold. Returns how many entries keep the marker (those
    ties: the exact refinement's). ``words`` uint64 (any stride), ``table`` and ``out``
    C-contiguous int64, ``cdf`` C-contiguous uint64 (non-decreasing, its last >= every u)."""
    if words.shape[0] < out.shape[0]:  # (the compiled loop checks no bounds)
        raise InternalError(f"lookup: {words.shape[0]} words for {out.shape[0]} samples")
    return _call("lookup", words, table, np.uint64(shift), cdf, np.uint64(63 - bits),
                 np.uint64((1 << bits) - 1), SEARCH, out)


def spread(rows: np.ndarray, kids: np.ndarray, out: np.ndarray) -> None:
    """``out[p * len(kids) + j] = rows[p] + kids[j]``: the cell addresses of parents
    ``rows`` (C-contiguous uint64) times children ``kids`` (C-contiguous uint64), into
    ``out`` (uint64, any stride: the AES input's view), in one pass."""
    if out.shape[0] != rows.shape[0] * kids.shape[0]:  # (the compiled loop checks no bounds)
        raise InternalError(f"spread: {out.shape[0]} addresses for {rows.shape[0]} parents x "
                            f"{kids.shape[0]} children")
    _call("spread", rows, kids, out)


def intopt_kept(x: IntArray, width: int, c: IntArray, pos: IntArray,
                add: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """``x[pos] += add`` (the densify), then what ``intopt_positive(x.reshape(-1, width), c)``
    returns: the kept entries' flat positions (ascending), their values, every row's sum.

    ``x``: C-contiguous int64 (rows x width, flat), overwritten; ``c`` C-contiguous int64 >= 0;
    ``pos`` int64 ascending, unique; ``add`` int64 (any stride). A block whose sums could pass
    int64 goes to the numpy path (exact)."""
    return _solved("solve_block", x, width, c, pos, add, SAFE_LIMIT)


def intopt_pairs(x: IntArray, width: int, c: IntArray, lo: IntArray, hi: IntArray,
                 pairs: IntArray, bits: int) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`intopt_kept` with row ``r``'s true children read from the sorted leaves
    ``pairs[lo[r]:hi[r]]`` (``(key << bits) | count``, code ``key % width``): no per-child
    arrays. ``lo``, ``hi``, ``pairs``: C-contiguous int64."""
    return _solved("solve_pairs", x, width, c, lo, hi, pairs, bits, SAFE_LIMIT)


def _solved(name: str, x: IntArray, width: int, c: IntArray,
            *truth: Any) -> tuple[IntArray, IntArray, IntArray]:
    n_rows = c.shape[0]
    flat = buffer("kept_flat", (x.shape[0],), np.int64)  # this thread's, reused
    vals = buffer("kept_vals", (x.shape[0],), np.int64)
    scratch = buffer("kept_scratch", (8 * width + 1024,), np.int64)
    sums = np.empty(n_rows, np.int64)
    kept = _call(name, x, width, c, *truth, flat, vals, sums, scratch)
    if kept < 0:  # values too large for int64 sums: densified already, solve exactly
        return intopt_positive(x.reshape(n_rows, width), c)
    return flat[:kept].copy(), vals[:kept].copy(), sums


def sort(a: IntArray, lo: int, hi: int) -> None:
    """Sort ``a`` in place: C-contiguous int64 values in ``[0, 2**hi)`` that differ in their
    bits ``lo..hi - 1`` (distinct keys above ``lo`` bits of counts). By numpy, or by the
    kernel's radix sort on those bits through a scratch array of ``a``'s size, freed on return.
    The same order either way."""
    n = a.shape[0]
    if not wanted(n):
        a.sort()
        return
    tmp = memory.empty(n, np.int64)
    if _call("radix_sort", a, tmp, lo, max(hi, lo)) % 2:  # (its last pass wrote tmp)
        np.copyto(a, tmp)


def up_pairs(pairs: IntArray, bits: int, m: int, starts: np.ndarray,
             parents: IntArray, sums: IntArray) -> int:
    """One level up sorted pairs ``(key << bits) | count`` (keys ascending) in one pass:
    where each parent's run of children starts (and ``n`` after the last), the parents' keys
    (``key // m``) and their counts; returns the number of parents, or -1 if a key repeats.
    C-contiguous arrays: int64 ``pairs``, int32 ``starts`` (``n + 1`` entries), int64
    ``parents`` and ``sums`` (``n``)."""
    return _call("up_pairs", pairs, bits, m, starts, parents, sums)


__all__ = ["CHOICES", "ENV", "FIRST_LOAD_CELLS", "LOAD_CELLS", "MIN_CELLS", "check",
           "intopt_kept", "intopt_pairs", "lookup", "sort", "spread", "up_pairs", "wanted",
           "warm_up"]
