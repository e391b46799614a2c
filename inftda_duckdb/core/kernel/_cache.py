"""Compiling the kernel with numba, through numba's on-disk cache, checked before numba reads it.

numba keeps a function compiled with ``cache=True`` as files beside its source (``__pycache__``),
in ``NUMBA_CACHE_DIR``, or in a per-user cache: an index (``.nbi``) and data (``.nbc``, pickled
machine code), and loads whatever it finds there whose source and target match. A file cut short
makes numba raise; a file whose bytes changed in place can load and then crash the process when
it runs. So before numba reads them, every such file of the kernel's module must match the
SHA-256 recorded (in :data:`RECORD`, beside them) when this process or an earlier one saw numba
write it; a file that does not, or that no record covers, is deleted, and numba compiles that
function again and writes it anew. The record guards against damage (a disk, a copy, a crash),
not against someone who can write the folder (who could rewrite the record, or the source).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

RECORD = "inftda-kernel.sha256.json"
_KINDS = (".nbi", ".nbc")  # numba's index and data files


def compiled(module: ModuleType, signatures: Mapping[str, str], *,
             on_disk: bool = True) -> dict[str, Any]:
    """``module``'s functions named in ``signatures``, each compiled by numba for its signature
    only (numba then refuses other argument types instead of compiling again), ``nogil``;
    through numba's on-disk cache, checked first, if ``on_disk``, else in memory only. Raises
    what numba raises (no folder numba can cache in, a file it cannot read), and refuses to run
    with numba's JIT disabled (``NUMBA_DISABLE_JIT``: the functions would run as Python)."""
    from numba import config, njit

    if getattr(config, "DISABLE_JIT", False):  # (set from the environment at import)
        raise RuntimeError("numba's JIT is disabled (NUMBA_DISABLE_JIT)")
    if not on_disk:
        return {name: njit(signature, nogil=True)(getattr(module, name))
                for name, signature in signatures.items()}
    kernels = {name: njit(nogil=True, cache=True)(getattr(module, name)) for name in signatures}
    where = next(iter(kernels.values())).stats.cache_path
    if not where:
        raise RuntimeError("numba names no folder for its cache")
    folder = Path(where)
    prefix = Path(str(module.__file__)).stem + "."
    recorded = _recorded(folder)
    for name, digest in _files(folder, prefix).items():
        if recorded.get(name) != digest:  # damaged, or of unknown origin: numba writes it anew
            (folder / name).unlink(missing_ok=True)
    for name, kernel in kernels.items():
        kernel.compile(signatures[name])
        kernel.disable_compile()
    if any(kernel.stats.cache_misses for kernel in kernels.values()):  # numba wrote files
        with contextlib.suppress(OSError):  # (unrecorded: the next process compiles again)
            _record(folder, _files(folder, prefix))
    return kernels


def _files(folder: Path, prefix: str) -> dict[str, str]:
    """The SHA-256 of each of numba's cache files for the module (names from ``prefix``)."""
    found = {}
    for entry in os.scandir(folder):
        if entry.name.startswith(prefix) and entry.name.endswith(_KINDS) and entry.is_file():
            with contextlib.suppress(FileNotFoundError):  # (another process replacing it)
                found[entry.name] = hashlib.sha256(Path(entry.path).read_bytes()).hexdigest()
    return found


def _recorded(folder: Path) -> dict[str, str]:
    try:
        record = json.loads((folder / RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    ok = isinstance(record, dict) and all(isinstance(v, str) for v in record.values())
    return record if ok else {}


def _record(folder: Path, digests: dict[str, str]) -> None:
    """Write the record whole or not at all (a temporary file renamed over it)."""
    temporary = folder / f"{RECORD}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        temporary.write_text(json.dumps(digests, sort_keys=True, indent=0), "utf-8")
        os.replace(temporary, folder / RECORD)
    finally:
        temporary.unlink(missing_ok=True)


__all__ = ["RECORD", "compiled"]
