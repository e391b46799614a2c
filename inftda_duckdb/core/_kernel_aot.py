"""The compiled kernel built ahead of time (``inftda-duckdb build-kernel``, :mod:`._kernel_build`):
found and loaded in a few ms, without numba.

The build is a CPython extension module in a per-user cache directory (:func:`default_dir`) whose
file name carries a key (:func:`key`): a hash of everything its machine code depends on (the
kernel's source and the constants it imports, the build's options, the export signatures,
numba's, numpy's and Python's versions, the platform and the CPU's features), so a stale build is
simply not found. :func:`load` imports it by path after checking that nobody else could have
written it (:func:`refusal`); it never raises and never warns: a missing, refused or broken build
leaves :mod:`.kernel` on the JIT/numpy path (the same outputs), and ``build-kernel --check`` says
why.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import stat
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .kernel import EXPORTS

ENV_DIR = "INFTDA_KERNEL_DIR"
PREFIX = "_inftda_kernel_"
_HERE = Path(__file__).resolve().parent
_SOURCES = ("_kernel_numba.py", "_kernel_build.py")  # the kernel, and how it is built
_CONSTANTS = {"intopt": ("_SAFE_LIMIT",), "noise": ("_SEARCH",)}  # what _kernel_numba imports


def default_dir() -> Path:
    """``$INFTDA_KERNEL_DIR``, else ``$XDG_CACHE_HOME/inftda-duckdb``, else
    ``~/.cache/inftda-duckdb``."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(os.path.abspath(os.path.expanduser(env)))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "inftda-duckdb"


def _cpu() -> str:
    """This CPU's features (/proc/cpuinfo's flags, without importing llvm): builds target the
    host CPU, so a cache shared by different CPUs (a network home) never loads a foreign ISA."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def _numba_version() -> str:
    """The installed numba's distribution (its dist-info's name), without importing numba
    (or importlib.metadata: ~30 ms); ``-`` when there is none."""
    spec = importlib.util.find_spec("numba")
    if spec is None or not spec.origin:
        return "-"
    site = Path(spec.origin).parent.parent
    names = sorted(e.name for e in os.scandir(site)
                   if e.name.startswith("numba-") and e.name.endswith((".dist-info", ".egg-info")))
    return ",".join(names) or str(site)


def key() -> str:
    """The hash naming this machine's build of these sources (16 hex digits)."""
    h = hashlib.sha256()
    for name in _SOURCES:
        h.update((_HERE / name).read_bytes())
    for module, names in _CONSTANTS.items():
        values = vars(importlib.import_module(f"{__package__}.{module}"))
        h.update(repr([values[n] for n in names]).encode())
    uname = os.uname()
    for part in (repr(sorted(EXPORTS.items())), _numba_version(), np.__version__, sys.version,
                 importlib.machinery.EXTENSION_SUFFIXES[0], uname.sysname, uname.machine,
                 _cpu()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def module_path(directory: Path, k: str) -> Path:
    """Where the build of key ``k`` lives in ``directory``."""
    return directory / f"{PREFIX}{k}{importlib.machinery.EXTENSION_SUFFIXES[0]}"


# ------------------------------------------------------------------------------ trust


def untrusted(path: Path, kind: str, follow: bool = False) -> str | None:
    """Why ``path`` (``kind``: 'dir' or 'file') cannot be trusted, or None: it must exist, not
    be a symlink (unless ``follow``), belong to this user or root, and not be writable by group
    or others (whoever can write a module this process imports runs code in it)."""
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symlink"
    if not (stat.S_ISDIR(st.st_mode) if kind == "dir" else stat.S_ISREG(st.st_mode)):
        return f"{path} is not a {'directory' if kind == 'dir' else 'regular file'}"
    if st.st_uid not in (os.getuid(), 0):
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others than its owner (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def dir_refusal(directory: Path) -> str | None:
    """Why ``directory`` cannot hold trusted builds: it, and its parent (whoever can write the
    parent can swap the directory; followed through symlinks: a symlinked ``~/.cache`` is
    fine)."""
    return (untrusted(Path(os.path.realpath(directory.parent)), "dir", follow=True)
            or untrusted(directory, "dir"))


def refusal(path: Path) -> str | None:
    """Why the build at ``path`` cannot be trusted (its directory's, or its own), or None."""
    return dir_refusal(path.parent) or untrusted(path, "file")


# ------------------------------------------------------------------------------ loading


def _import(path: Path) -> ModuleType:
    name = path.name.split(".", 1)[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loaded(path: Path) -> tuple[dict[str, Any], str]:
    """The functions of the build at ``path`` (or none) and what happened."""
    refused = refusal(path)
    if refused:
        return {}, f"refused: {refused}"
    try:
        module = _import(path)
        return {name: getattr(module, name) for name in EXPORTS}, f"loaded {path}"
    except Exception as exc:  # a corrupt or foreign file: the JIT/numpy path
        return {}, f"does not load: {type(exc).__name__}: {exc}"


def load(directory: Path | None = None) -> tuple[dict[str, Any], str]:
    """The kernel's functions (:data:`.kernel.EXPORTS`' names) from the build for this machine
    and these sources, or none; and why (never raises, never warns: a release's fallback)."""
    try:
        path = module_path(Path(directory or default_dir()), key())
        if not os.path.lexists(path):
            return {}, f"not built ({path} does not exist)"
        return loaded(path)
    except Exception as exc:  # (no home directory, an unreadable source, ...)
        return {}, f"not usable: {type(exc).__name__}: {exc}"


__all__ = ["ENV_DIR", "default_dir", "dir_refusal", "key", "load", "loaded", "module_path",
           "refusal", "untrusted"]
