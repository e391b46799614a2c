"""Large working arrays from Arrow's memory pool instead of numpy's (glibc) allocator.

glibc hands freed blocks above ~128 kB back to the operating system, so every new large numpy
array page-faults its memory in again: ~2.5 us per 4 kB page inside DuckDB on the 2-core VM of
benchmarks/RESULTS.md. Arrow's pool (mimalloc or jemalloc) keeps freed pages for reuse. The arrays
a level allocates explicitly (the dense level matrix, AES blocks and output, noise, IntOpt output,
child codes and keys, kept counts) come from here: the four levels of bench_release's 10M-row
release took 26.5-27.2 ms inside DuckDB instead of 30.1-30.9 ms (best of 9 runs, two processes
each). The arrays are ordinary writable numpy arrays; an array keeps its Arrow buffer alive.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pyarrow as pa

MIN_BYTES = 1 << 16
"""Smaller arrays come from numpy (glibc reuses small blocks without faulting)."""


def empty(shape: int | tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """Like ``numpy.empty`` (C order); large arrays live in an Arrow buffer."""
    dt = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = math.prod(dims) * dt.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(dims, dt)
    return np.frombuffer(pa.allocate_buffer(nbytes), dt).reshape(dims)


def zeros(shape: int | tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """Like ``numpy.zeros`` (C order); large arrays live in an Arrow buffer."""
    out = empty(shape, dtype)
    out.fill(0)
    return out


__all__ = ["MIN_BYTES", "empty", "zeros"]
