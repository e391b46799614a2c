"""Arrow memory as numpy arrays: large working arrays from Arrow's pool, and numpy views of Arrow
arrays and back without copies.

glibc hands freed blocks above ~128 kB back to the operating system, so every new large numpy
array page-faults its memory in again: ~2.5 us per 4 kB page inside DuckDB on the 2-core VM of
benchmarks/RESULTS.md. Arrow's pool (mimalloc or jemalloc) keeps freed pages for reuse. The arrays
a level allocates explicitly (the dense level matrix, AES blocks and output, noise, IntOpt output,
child codes and keys, kept counts) come from here: the four levels of bench_release's 10M-row
release took 26.5-27.2 ms inside DuckDB instead of 30.1-30.9 ms (best of 9 runs, two processes
each). The arrays are ordinary writable numpy arrays; an array keeps its Arrow buffer alive.

:func:`view` and :func:`arrow` convert through the buffers, never ``Array.to_numpy`` or
``pa.array``: those import pandas on their first use when it is installed (0.25-0.35 s of CPU that
every process's first release paid, with no DataFrame involved).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from .errors import InternalError

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


_LOCAL = threading.local()


def scratch(name: str, shape: int | tuple[int, ...], dtype: npt.DTypeLike,
            least: int = 0) -> np.ndarray:
    """This thread's reusable array ``name`` of ``shape`` (uninitialised; its buffer holds at
    least ``least`` elements): a block's temporaries reused from block to block fault in no
    fresh pages. Arrays alive at the same time need distinct names."""
    dims = (shape,) if isinstance(shape, int) else shape
    size = dims[0] * dims[1] if len(dims) == 2 else math.prod(dims)
    try:
        pool = _LOCAL.pool
    except AttributeError:
        pool = _LOCAL.pool = {}
    buf = pool.get((name, dtype))
    if buf is None or buf.size < size:
        buf = pool[(name, dtype)] = np.empty(max(size, least), dtype)
    return buf[:size].reshape(dims)


def zeros(shape: int | tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """Like ``numpy.zeros`` (C order); large arrays live in an Arrow buffer."""
    out = empty(shape, dtype)
    out.fill(0)
    return out


def view(values: pa.Array) -> np.ndarray:
    """A read-only numpy view of a fixed-width Arrow array without nulls (no copy)."""
    if values.null_count or not pa.types.is_primitive(values.type) or \
            pa.types.is_boolean(values.type):
        raise InternalError(f"expected fixed-width values without nulls, got {values.type} "
                            f"with {values.null_count} nulls")
    dt = np.dtype(values.type.to_pandas_dtype())
    return np.frombuffer(values.buffers()[1], dt, len(values), values.offset * dt.itemsize)


def values(lists: pa.Array) -> pa.Array:
    """``lists.flatten()``, the values of a list array's rows one after the other, without
    pyarrow.compute, which ``flatten`` imports (40-90 ms of a process's first release on the VM
    of benchmarks/RESULTS.md) and calls (a kernel dispatch each time): the child values between
    the first and the last offset. A NULL row's range may hold values ``flatten`` leaves out:
    with NULL rows, ``flatten`` itself."""
    if lists.null_count:
        return lists.flatten()
    offsets = lists.offsets
    start = offsets[0].as_py()
    return lists.values.slice(start, offsets[len(lists)].as_py() - start)


def arrow(values: np.ndarray) -> pa.Array:
    """A 1-d numpy array as an Arrow array over the same memory (no copy when contiguous)."""
    a = np.ascontiguousarray(values).reshape(-1)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), a.size, [None, pa.py_buffer(a)])


def strings(values: list[str]) -> pa.Array:
    """Python strings as an Arrow string array."""
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(data),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


__all__ = ["MIN_BYTES", "arrow", "empty", "strings", "values", "view", "zeros"]
