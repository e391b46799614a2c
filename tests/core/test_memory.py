"""memory: numpy arrays from Arrow's pool for large sizes, numpy's own for small ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from inftda_duckdb.core import memory
from inftda_duckdb.core.errors import InternalError


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


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.float64])
def test_view_and_arrow_round_trip_without_copies(dtype):
    a = np.arange(1, 11).astype(dtype)
    arr = memory.arrow(a)
    assert arr.type == pa.from_numpy_dtype(np.dtype(dtype)) and arr.to_pylist() == a.tolist()
    assert memory.view(arr).ctypes.data == a.ctypes.data  # the same memory both ways
    sliced = arr.slice(3, 4)  # an offset into the buffer
    assert memory.view(sliced).tolist() == a[3:7].tolist()
    assert memory.arrow(a[::2]).to_pylist() == a[::2].tolist()  # strided: copied, same values
    assert memory.view(memory.arrow(a[:0])).size == 0


def test_view_refuses_nulls_and_variable_width_values():
    for bad in (pa.array([1, None, 3], pa.int64()), pa.array(["x"]), pa.array([True])):
        with pytest.raises(InternalError, match="fixed-width values without nulls"):
            memory.view(bad)


def test_strings():
    s = memory.strings(["a", "", "räk"])
    assert s.type == pa.string() and s.to_pylist() == ["a", "", "räk"]
    assert memory.strings([]).to_pylist() == []


@pytest.mark.parametrize("large", [False, True])
def test_values_are_flattens_values_without_pyarrow_compute(large):
    make = pa.large_list if large else pa.list_
    lists = pa.array([[1, 2], [], [3, None, 4], [5]], make(pa.int64()))
    for arr in (lists, lists.slice(1), lists.slice(2, 1), lists.slice(1, 1), lists.slice(4)):
        got = memory.values(arr)
        assert got.type == arr.flatten().type and got.to_pylist() == arr.flatten().to_pylist()
    item = pa.struct([("k", make(pa.int32()))])
    structs = pa.array([[None, {"k": [1]}], [{"k": None}]], make(item))
    assert memory.values(structs).to_pylist() == structs.flatten().to_pylist()
    # a NULL row's range may hold values flatten leaves out: flatten itself then
    offsets = pa.array([0, 2, 3, 4], pa.int32() if not large else pa.int64())
    cls = pa.LargeListArray if large else pa.ListArray
    nulls = cls.from_arrays(offsets, pa.array([1, 2, 3, 4]), mask=pa.array([False, True, False]))
    assert memory.values(nulls).to_pylist() == nulls.flatten().to_pylist() == [1, 2, 4]
