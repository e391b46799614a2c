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
block, whatever its size; an error if neither a build nor numba loads) or ``auto`` (the default:
blocks of at least :data:`MIN_CELLS` cells). The kernel comes from an ahead-of-time build when
one exists for this machine and these sources (``inftda-duckdb build-kernel``,
:mod:`._kernel_aot`: loaded synchronously at the process's first block that wants it, a few ms,
without importing numba), else from numba's JIT: with ``auto``, loaded in a background thread
when a flat level plans at least :data:`FIRST_LOAD_CELLS` cells, or at least :data:`LOAD_CELLS`
cells in a process that has already seen a level that large; never at package import, so small
releases never pay for it. A missing, refused or broken build is silently the JIT/numpy path.
Outputs are identical either way; blocks whose sums could pass int64 (see intopt's docstring)
take numpy's exact path. Which path runs depends only on the build's presence and the planned
cells (public), never on the data.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from . import memory
from .errors import InternalError, bad_argument
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
EXPORTS = {
    "solve_block": "int64(int64[::1], int64, int64[::1], int64[:], int64[:], int64[::1], "
                   "int64[::1], int64[::1], int64[::1])",
    "solve_pairs": "int64(int64[::1], int64, int64[::1], int64[::1], int64[::1], int64[::1], "
                   "int64, int64[::1], int64[::1], int64[::1], int64[::1])",
    "lookup": "int64(uint64[:], int64[::1], uint64, uint64[::1], uint64, uint64, int64[::1])",
    "spread": "int64(uint64[::1], uint64[::1], uint64[:])",
    "radix_sort": "int64(int64[::1], int64[::1], int64, int64)",
    "up_pairs": "int64(int64[::1], int64, int64, int32[::1], int64[::1], int64[::1])",
}
"""The kernel's functions (:mod:`._kernel_numba`'s names) and the signatures they are called
with: the ahead-of-time build compiles exactly these, and every call is checked against them
(``[::1]``: C-contiguous; ``[:]``: any stride; pycc's wrappers check neither dtype nor layout)."""

_LOCK = threading.Lock()
_COMPILED: dict[str, Any] = {}
_BUILT: list[str] = []  # the outcome of this process's one attempt at loading a build
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
    for numba: until :func:`warm_up` has loaded it (or a build has), blocks take the numpy path
    (same outputs)."""
    choice = _choice()
    if choice == "numpy" or (choice == "auto" and cells < MIN_CELLS):
        return False
    if _COMPILED:
        return True
    if choice == "auto":
        return _built()
    _load()
    if _MISSING:
        raise bad_argument(ENV, choice, f"needs numba, which did not import ({_MISSING[0]}), "
                           f"or a build of the kernel ({(_BUILT or ['not tried'])[0]})",
                           "pip install 'inftda-duckdb[fast]', or unset " + ENV)
    return True


def check() -> None:
    """Raise now what :func:`wanted` would raise at a release's first block (a bad
    ``INFTDA_KERNEL``, or ``numba`` without numba or a build): engines call it before the
    charge. ``auto`` loads nothing here (small releases never pay for the kernel)."""
    if _choice() == "numba":
        wanted(MIN_CELLS)


def warm_up(cells: int) -> None:
    """Start loading the kernel in a background thread (``auto``) for a flat level of
    ``cells`` noised cells: at least :data:`FIRST_LOAD_CELLS`, or at least :data:`LOAD_CELLS`
    after an earlier level of the process that was that large (unless a build loads now)."""
    if _COMPILED or _MISSING or _STARTED or cells < LOAD_CELLS or _choice() != "auto":
        return
    if _built():  # (numba would otherwise load in the background: a huge first level)
        return
    with _LOCK:
        _LARGE.append(cells)
        if _STARTED or (len(_LARGE) == 1 and cells < FIRST_LOAD_CELLS):
            return
        _STARTED.append(threading.Thread(target=_load, name="inftda-kernel-load", daemon=True))
    _STARTED[0].start()


def _built() -> bool:
    """Whether the kernel is loaded, after loading this machine's ahead-of-time build if there
    is one (once per process, synchronously: a few ms; never raises: a missing, refused or
    broken build leaves the JIT/numpy path, and :func:`._kernel_aot.load` says why)."""
    if _COMPILED or _BUILT:
        return bool(_COMPILED)
    with _LOCK:
        if not _COMPILED and not _BUILT:
            try:
                from . import _kernel_aot

                functions, why = _kernel_aot.load()  # (never raises)
            except Exception as exc:  # a broken install: the JIT/numpy path all the same
                functions, why = {}, f"not usable: {type(exc).__name__}: {exc}"
            _BUILT.append(why)
            _COMPILED.update(functions)
    return bool(_COMPILED)


def _load() -> None:
    if _built():
        return
    with _LOCK:
        if _COMPILED or _MISSING:
            return
        try:
            from . import _kernel_numba
        except ImportError as exc:  # numba absent (or broken): the numpy path
            _MISSING.append(str(exc))
            return
        _kernel_numba.warm()  # compiled, or loaded from numba's cache
        _COMPILED.update({name: getattr(_kernel_numba, name) for name in EXPORTS})


def _arrays(signature: str) -> list[tuple[np.dtype[Any], int, bool] | None]:
    """Per argument of ``signature``: (dtype, ndim, C-contiguous) of an array, None a scalar."""
    args = signature[signature.index("(") + 1: -1]
    out: list[tuple[np.dtype[Any], int, bool] | None] = []
    for dtype, dims in re.findall(r"(\w+)(?:\[([^\]]*)\])?", args):
        out.append((np.dtype(dtype), dims.count(":") - dims.count("::"), dims.endswith("::1"))
                   if dims else None)
    return out


_ARGS = {name: _arrays(signature) for name, signature in EXPORTS.items()}


def _call(name: str, *args: Any) -> int:
    """The kernel's ``name`` on ``args``, each array checked against :data:`EXPORTS` first (an
    ahead-of-time build would silently misread another dtype, shape or stride)."""
    for i, (a, want) in enumerate(zip(args, _ARGS[name], strict=True)):
        if want is not None and (a.dtype != want[0] or a.ndim != want[1]
                                 or (want[2] and not a.flags.c_contiguous)):
            raise InternalError(f"kernel {name}'s argument {i} is a {a.ndim}-d {a.dtype} array"
                                f" (C-contiguous: {a.flags.c_contiguous}); {EXPORTS[name]}")
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
                 np.uint64((1 << bits) - 1), out)


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
    return _solved("solve_block", x, width, c, pos, add)


def intopt_pairs(x: IntArray, width: int, c: IntArray, lo: IntArray, hi: IntArray,
                 pairs: IntArray, bits: int) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`intopt_kept` with row ``r``'s true children read from the sorted leaves
    ``pairs[lo[r]:hi[r]]`` (``(key << bits) | count``, code ``key % width``): no per-child
    arrays. ``lo``, ``hi``, ``pairs``: C-contiguous int64."""
    return _solved("solve_pairs", x, width, c, lo, hi, pairs, bits)


def _solved(name: str, x: IntArray, width: int, c: IntArray,
            *truth: Any) -> tuple[IntArray, IntArray, IntArray]:
    n_rows = c.shape[0]
    flat = _buffer("kept_flat", (x.shape[0],), np.int64)  # this thread's, reused
    vals = _buffer("kept_vals", (x.shape[0],), np.int64)
    scratch = _buffer("kept_scratch", (8 * width + 1024,), np.int64)
    sums = np.empty(n_rows, np.int64)
    kept = _call(name, x, width, c, *truth, flat, vals, sums, scratch)
    if kept < 0:  # values too large for int64 sums: densified already, solve exactly
        return intopt_positive(x.reshape(n_rows, width), c)
    return flat[:kept].copy(), vals[:kept].copy(), sums


def sort(a: IntArray, lo: int, hi: int) -> None:
    """Sort ``a`` in place: C-contiguous int64 values in ``[0, 2**hi)`` that differ in their
    bits ``lo..hi - 1`` (distinct keys above ``lo`` bits of counts). By numpy, or by the
    kernel's radix sort on those bits through a scratch array of ``a``'s size, freed on return
    (~7 ns a value, where numpy's sort takes ~60 on 1e7 values). The same order either way."""
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


def build_kernel(directory: str | None = None, *, force: bool = False) -> Any:
    """Compile the kernel ahead of time for this machine (``inftda-duckdb build-kernel``; needs
    the fast extra and a C/C++ compiler, ~15 s): releases then load it in a few ms from a
    process's first large block, without numba. Into ``directory`` (default
    ``$INFTDA_KERNEL_DIR``, else ``$XDG_CACHE_HOME/inftda-duckdb`` or ``~/.cache/inftda-duckdb``),
    unless it is there already (``force``: compile anyway). Returns what was done (path, key,
    seconds, fresh). Outputs are identical with and without it."""
    from ._kernel_build import build

    return build(directory, force=force)


__all__ = ["CHOICES", "ENV", "EXPORTS", "FIRST_LOAD_CELLS", "LOAD_CELLS", "MIN_CELLS",
           "build_kernel", "check", "intopt_kept", "intopt_pairs", "lookup", "sort", "spread",
           "up_pairs", "wanted", "warm_up"]
