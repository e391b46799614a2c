"""memory: numpy arrays from Arrow's pool for large sizes, numpy's own for small ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from inftda_duckdb.core import memory


@pytest.mark.parametrize("shape", [0, 7, (3, 5), memory.MIN_BYTES // 8, (4, 1 << 16)])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, "<u8"])
def test_empty_and_zeros_are_ordinary_writable_arrays(shape, dtype):
    a = memory.zeros(shape, dtype)
    dims = (shape,) if isinstance(shape, int) else shape
    assert a.shape == dims and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
    assert a.flags.writeable and not a.any()
    a[...] = 3
    assert (a == 3).all() and memory.empty(shape, dtype).shape == dims
    owner = a
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    large = a.nbytes >= memory.MIN_BYTES
    assert isinstance(owner, pa.Buffer) == large  # large: Arrow memory, kept alive by the array
    if large:
        assert a.ctypes.data % 64 == 0  # Arrow buffers are 64-byte aligned
