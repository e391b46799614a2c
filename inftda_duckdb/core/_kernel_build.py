"""Building the compiled kernel ahead of time: ``inftda-duckdb build-kernel`` (:func:`build`)
and its ``--check`` (:func:`status`). Never run at import, at install or on a release's path.

:func:`build` (needs numba, setuptools and a C/C++ compiler; ~10-15 s, ~250 MB) compiles
:mod:`._kernel_numba`'s functions with ``numba.pycc``, for the signatures of
:data:`.kernel.EXPORTS` and this machine's CPU (``target_cpu="host"``), into the extension module
:mod:`._kernel_aot` loads, its wrappers releasing the GIL (see :func:`_releasing_gil`). The new
module is checked (it releases the GIL, loads, and computes what the numpy path does on a few
fixed blocks) before it is renamed into place. The key of :mod:`._kernel_aot` hashes this file
too: a change of how the kernel is built makes a new build.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._kernel_aot import (
    ENV_DIR,
    PREFIX,
    default_dir,
    dir_refusal,
    key,
    load,
    loaded,
    module_path,
    untrusted,
)
from .errors import InputError, bad_argument
from .kernel import ENV, EXPORTS

_GIL_MARK = b"PyEval_SaveThread"  # referenced only by wrappers that release the GIL
_FIX_FAST = "pip install 'inftda-duckdb[fast]'"
_NOT_NEEDED = "releases work without a build (the same outputs, on numba's JIT or numpy)"


def _agrees(functions: dict[str, Any]) -> str | None:
    """Why ``functions`` do not compute what the numpy path does on a few small fixed blocks
    (the sorted, histogram and step-5 rows, a densify, a strided lookup with its searches and a
    tie, addresses, radix sorts, a level up sorted pairs), or None."""
    from .intopt import intopt_positive

    rng = np.random.default_rng(20261127)
    for width, low, high in ((1, -5, 6), (3, -5, 6), (40, -5, 6), (40, 900, 1100),
                             (7, -10**6, 10**6)):
        x = rng.integers(low, high, 4 * width)
        c = rng.integers(0, 3 * width * max(high, 1), 4)
        pos = np.arange(0, 4 * width, 3)
        add = np.ones(pos.size, np.int64)
        flat, vals = np.empty(4 * width, np.int64), np.empty(4 * width, np.int64)
        sums, scratch = np.empty(4, np.int64), np.empty(8 * width + 1024, np.int64)
        y = x.copy()
        y[pos] += add
        want = intopt_positive(y.reshape(4, width).copy(), c)  # (it may write its rows)
        z = x.copy()
        n = functions["solve_block"](x, width, c, pos, add, flat, vals, sums, scratch)
        if not (np.array_equal(x, y) and np.array_equal(flat[:n], want[0])
                and np.array_equal(vals[:n], want[1]) and np.array_equal(sums, want[2])):
            return f"solve_block computes another IntOpt than numpy's (width {width})"
        lo = np.searchsorted(pos, np.arange(4) * width)  # the same truth as sorted leaves:
        ends = np.append(lo[1:], pos.size)  # key = flat position (its code: key % width)
        n = functions["solve_pairs"](z, width, c, lo, ends, pos << 3 | add, 3, flat, vals,
                                     sums, scratch)
        if not (np.array_equal(z, y) and np.array_equal(flat[:n], want[0])
                and np.array_equal(vals[:n], want[1]) and np.array_equal(sums, want[2])):
            return f"solve_pairs computes another IntOpt than numpy's (width {width})"
    words = rng.integers(0, 2**64 - 1, (4096, 2), dtype=np.uint64, endpoint=True)
    b3, b9 = 3 << 57, 9 << 57  # words in the searched buckets 3, 9, 70 and 127: ties too
    words[:8, 0] = [b3 + 5, b3 + 4, b3 + 6, 2**63 | b9 + 1, 2**63 | b9, 2**64 - 1, 0, b9 + 2]
    cdf = np.array([1, b3 + 5, b3 + 5, b9 + 1, 2**63 - 1], np.uint64)  # T_a, 63-bit u
    table = np.arange(-64, 64, dtype=np.int64)
    table[[3, 9, 70, 127]] = np.iinfo(np.int64).min  # the search marker: searched buckets
    out = np.empty(4096, np.int64)
    n = functions["lookup"](words[:, 0], table, np.uint64(57), cdf, np.uint64(0),
                            np.uint64(2**63 - 1), out)
    want = table[words[:, 0] >> np.uint64(57)]
    at = np.flatnonzero(want == table[3])
    u = words[at, 0] & np.uint64(2**63 - 1)
    a = np.searchsorted(cdf, u)
    want[at] = np.where(words[at, 0] >> np.uint64(63) == 1, -a, a)
    tie = at[cdf[a] == u]
    want[tie] = table[3]
    if not (np.array_equal(out, want) and n == tie.size):
        return "lookup computes another lookup than numpy's"
    rows, kids = words[:64, 0].copy(), words[64:104, 1].copy()
    functions["spread"](rows, kids, words[:2560, 1])
    if not np.array_equal(words[:2560, 1], (rows[:, None] + kids).ravel()):
        return "spread computes other addresses than numpy's"
    for hi in (13, 40):  # two passes (sorted in place) and five (in the scratch)
        a = (rng.choice(2 ** 20, 4096, replace=False) << (hi - 20)) | rng.integers(0, 8, 4096)
        b, tmp = a.copy(), np.empty_like(a)
        passes = functions["radix_sort"](b, tmp, hi - 20, hi)
        if not np.array_equal(tmp if passes % 2 else b, np.sort(a)):
            return "radix_sort sorts otherwise than numpy"
    keys = np.sort(rng.choice(4000, 1000, replace=False))
    pairs = keys << 3 | rng.integers(1, 8, 1000)
    starts, parents, sums = np.empty(1001, np.int32), np.empty(1000, np.int64), np.empty_like(keys)
    n = functions["up_pairs"](pairs, 3, 7, starts, parents, sums)
    first = np.flatnonzero(np.diff(keys // 7, prepend=-1))
    if not (n == first.size and np.array_equal(starts[:n + 1], np.append(first, 1000))
            and np.array_equal(parents[:n], keys[first] // 7)
            and np.array_equal(sums[:n], np.add.reduceat(pairs & 7, first))):
        return "up_pairs sums otherwise than numpy"
    return None


@dataclass(frozen=True)
class Built:
    """What :func:`build` did: the module's ``path``, its ``key``, the ``seconds`` taken and
    whether it was compiled now (``fresh``) or already there."""

    path: Path
    key: str
    seconds: float
    fresh: bool


def _needs(module: str, rule: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise InputError(f"building the kernel needs {module} ({rule}), which is not installed."
                         f" Fix: {_FIX_FAST}; {_NOT_NEEDED}")


def _compiler() -> str:
    """The C compiler pycc will call (``$CC``, else Python's own), refused early if absent."""
    import sysconfig

    command = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    if not command or shutil.which(command[0]) is None:
        raise bad_argument("CC", " ".join(command), "must name a C and C++ compiler on PATH to "
                           "build the kernel", "install one (e.g. apt-get install gcc g++, or "
                           f"xcode-select --install), or set CC; {_NOT_NEEDED}")
    return command[0]


def _releasing_gil() -> tuple[Any, type]:
    """pycc compiles its exports with ``Flags()`` whose ``release_gil`` is False: its CPython
    wrappers hold the GIL through the call. A Flags subclass with it True, patched into
    ``numba.pycc.compiler`` for the build only, makes them release it around the call (numba's
    own ``nogil`` wrapper). This relies on numba internals: :func:`build` refuses a module
    whose wrappers do not release the GIL, and the tests check a build."""
    from numba.core.compiler import Flags
    from numba.pycc import compiler

    if not hasattr(compiler, "Flags") or not hasattr(Flags, "release_gil"):
        raise InputError("this numba's pycc cannot build a kernel that releases the GIL "
                         f"(numba.pycc.compiler.Flags). Fix: {_FIX_FAST} (a tested numba); "
                         f"{_NOT_NEEDED}")

    class ReleasingFlags(Flags):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            setattr(self, "release_gil", True)  # noqa: B010 (an Option descriptor)

    return compiler, ReleasingFlags


@contextmanager
def _pycc() -> Iterator[Any]:
    """numba.pycc, its pending-deprecation warning silenced and its Flags patched, for the
    build only."""
    import warnings

    import numba

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numba.NumbaPendingDeprecationWarning)
        try:
            import numba.pycc
            from numba.pycc.platform import external_compiler_works
        except ImportError as exc:
            raise InputError(f"this numba ({numba.__version__}) has no working numba.pycc "
                             f"({exc}). Fix: {_FIX_FAST} (a tested numba); {_NOT_NEEDED}") from None
        if not external_compiler_works():
            raise bad_argument("CC", _compiler(), "must compile C and C++ for numba.pycc (its "
                               "test compile failed)", "install gcc and g++ (or clang), or set "
                               "CC; " + _NOT_NEEDED)
        compiler, releasing = _releasing_gil()
        saved = compiler.Flags
        compiler.Flags = releasing
        try:
            yield numba.pycc
        finally:
            compiler.Flags = saved


def _compile(staging: Path, name: str) -> Path:
    """Compile the exports into ``staging``/``name``'s extension module."""
    from . import _kernel_numba as source

    with _pycc() as pycc:
        cc = pycc.CC(name, source_module=source)
        cc.output_dir = str(staging)
        cc.use_nrt = True  # (x.max() and the sort allocate)
        cc.target_cpu = "host"
        for export, signature in EXPORTS.items():
            cc.export(export, signature)(getattr(source, export).py_func)
        before = set(Path(tempfile.gettempdir()).glob(f"pycc-build-{name}-*"))
        try:
            cc.compile()
        finally:  # pycc removes its build folder only when it succeeds
            for leftover in set(Path(tempfile.gettempdir()).glob(f"pycc-build-{name}-*")) - before:
                shutil.rmtree(leftover, ignore_errors=True)
    return staging / cc.output_file


def _directory(directory: str | Path | None) -> Path:
    """The build's directory, created 0700 if missing, refused if others could write it."""
    directory = Path(os.path.abspath(directory or default_dir()))
    parent = Path(os.path.realpath(directory.parent))
    refused = untrusted(parent, "dir", follow=True) if parent.exists() else None
    try:
        if not refused:  # (never creates a directory in one others could write)
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise bad_argument("directory", str(directory), f"must be a directory you can create "
                           f"({exc.strerror})", f"pass another --dir (or {ENV_DIR})") from None
    refused = refused or dir_refusal(directory)
    if refused:
        raise bad_argument("directory", str(directory), "must be a directory only you (or root) "
                           f"can write, and so must its parent: {refused}", "chmod go-w it, or "
                           f"pass another --dir (or {ENV_DIR})")
    return directory


def build(directory: str | Path | None = None, *, force: bool = False,
          say: Callable[[str], object] | None = None) -> Built:
    """Compile the kernel ahead of time into ``directory`` (default: :func:`default_dir`),
    unless a sound build for the current key is there (``force``: compile anyway); ``say``
    hears when compiling starts. Written under a temporary name and renamed (concurrent builds
    are harmless); other builds are left alone (other environments may use them)."""
    start = time.perf_counter()
    _needs("numba", "it compiles the kernel")
    _needs("setuptools", "numba.pycc links with it")
    _compiler()
    directory = _directory(directory)
    k = key()
    path = module_path(directory, k)
    if not force and os.path.lexists(path) and not _flaw(path):
        return Built(path, k, time.perf_counter() - start, fresh=False)
    if say is not None:
        say(f"compiling the kernel into {directory} (~15 s)...")
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=directory))
    try:
        made = _compile(staging, path.name.split(".", 1)[0])
        made.chmod(0o644)
        flaw = _flaw(made)
        if flaw:
            raise InputError(f"the new build was not installed: {flaw}. Fix: report it; "
                             + _NOT_NEEDED)
        os.replace(made, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Built(path, k, time.perf_counter() - start, fresh=True)


# ------------------------------------------------------------------------------ --check


def _flaw(path: Path) -> str | None:
    """What is wrong with the build at ``path`` (its wrappers hold the GIL, it does not load,
    or it computes something else than the numpy path), or None."""
    if _GIL_MARK not in path.read_bytes():
        return ("its wrappers hold the GIL (this numba's pycc internals changed: "
                f"{_FIX_FAST} installs a tested numba)")
    functions, why = loaded(path)
    return (_agrees(functions) if functions else why)


def status(directory: str | Path | None = None) -> tuple[bool, list[str]]:
    """Whether the current build is there and sound (trusted, loads, releases the GIL, computes
    what the numpy path does), and lines saying why and what releases will use."""
    directory = Path(os.path.abspath(directory or default_dir()))
    k = key()
    path = module_path(directory, k)
    functions, why = load(directory)
    flaw = _flaw(path) if functions else None
    lines = [f"directory: {directory}", f"key: {k}", f"build: {why}"]
    refused = dir_refusal(directory) if os.path.lexists(directory) else None
    if refused and not why.startswith("refused"):
        lines.append(f"directory: refused ({refused}): builds there are never loaded")
    if flaw:
        lines.append(f"WARNING: releases use this build, but {flaw}: delete it, and run "
                     "inftda-duckdb build-kernel")
    elif functions:
        lines.append("releases: this build, for blocks of >= 2**15 cells from a process's first "
                     "release (numba is not imported)")
    elif importlib.util.find_spec("numba") is not None:
        lines.append("releases: numpy, then numba's JIT from a process's second large level "
                     "(run inftda-duckdb build-kernel to have the kernel from the first)")
    else:
        lines.append(f"releases: numpy (numba is not installed: {_FIX_FAST}, then "
                     "inftda-duckdb build-kernel)")
    if os.environ.get(ENV, "").strip().lower() == "numpy":
        lines.append(f"note: {ENV}=numpy: releases never use the kernel")
    if directory != default_dir():
        lines.append(f"note: releases look in {default_dir()} ({ENV_DIR}={directory} to use "
                     "this one)")
    others = [p for p in directory.glob(PREFIX + "*") if p != path] if directory.is_dir() else []
    if others:
        lines.append(f"other builds here (other sources, versions or environments; not used): "
                     f"{len(others)}, {sum(p.stat().st_size for p in others) / 1e6:.1f} MB")
    return bool(functions) and not flaw, lines


__all__ = ["Built", "build", "status"]
