"""Arrow in and out of the levels UDF: the true leaves and allowed children DuckDB passes in,
the released leaves it gets back.

In: a ``STRUCT(k INTEGER[], key BIGINT[], n BIGINT[])`` row (:data:`.sqlgen.PREFIXES`) holds
prefixes as mixed-radix keys (``key``), or as codes column after column (``k``), with their
counts (``n``); all-ENUM leaves come as ``key`` alone, each ``(key << b) | count``. Out: one row
per released part, ``STRUCT(rid VARCHAR, k INTEGER[][], n BIGINT[])``. Nothing here copies the
leaves when a view will do.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pyarrow as pa

from ..core import memory
from ..core.errors import InternalError
from ..core.noise import DiscreteGaussian
from ..core.randomness import RandomSource
from ..core.tree import Allowed, Levels, Nodes

Level = tuple[RandomSource, DiscreteGaussian, int, tuple[int, ...] | None]
"""A level of a release: its random source, its noise, its domain size, and for a nested level
the earlier levels keying its allowed children (else None)."""


def plain(arr: Any) -> Any:
    """``arr`` as one Arrow array (a chunked array's chunks combined)."""
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def prefixes(arr: Any, width: int) -> np.ndarray:
    """The true prefixes in a STRUCT(k INTEGER[], key BIGINT[], n BIGINT[]) row: their
    mixed-radix keys (N,) when ``key`` is set, else (width, N) codes (``k`` holds the codes
    column after column, so each level's codes are one contiguous row; NULL: none)."""
    row = plain(arr)
    key = row.field("key")
    if key.null_count == 0:
        return memory.view(memory.values(key))
    codes = memory.view(memory.values(row.field("k")))
    if codes.shape[0] % max(width, 1):
        raise InternalError("a level got prefixes of the wrong length")
    return codes.reshape(width, -1)


def own_pairs(arr: Any) -> np.ndarray:
    """The leaf pairs (``key`` of @leaf_pairs) as a WRITABLE int64 view of the levels call's
    own Arrow input (no copy): DuckDB exports the call's arguments into fresh Arrow buffers
    that it frees after the call and never reads back (its list, and any table or CTE it came
    from, keep their own memory: tests/duckdb/test_levels.py checks it on both shapes), so
    the core may sort the leaves in them (``release_below(overwrite=True)``) instead of in a
    new array of their size. pyarrow marks imported buffers read-only, hence the view through
    their address; it keeps the buffer alive."""
    values = memory.values(plain(arr).field("key"))
    view = memory.view(values)  # int64, no nulls: checked
    if view.dtype != np.int64 or view.shape[0] == 0:
        return view
    buf = values.buffers()[1]
    raw = (ctypes.c_int64 * view.shape[0]).from_address(buf.address + values.offset * 8)
    raw._arrow = buf  # the Arrow buffer lives as long as the view
    return np.frombuffer(raw, np.int64)


def prefix_counts(arr: Any) -> np.ndarray:
    """The counts (``n``) of a prefixes row, as a view."""
    return memory.view(memory.values(plain(arr).field("n")))


def rows(parts: list[Nodes], rids: list[str] | None = None, d: int = 0) -> pa.Array:
    """One row per released part: STRUCT(rid VARCHAR, k INTEGER[][] (a list per column),
    n BIGINT[]); ``rids`` (one row each, no leaves) for the call that releases the cut."""
    if rids is not None:
        none = memory.arrow(np.zeros(len(rids) + 1, np.int64))  # empty lists' offsets
        empty = pa.LargeListArray.from_arrays(
            none, pa.LargeListArray.from_arrays(none[:1], pa.nulls(0, pa.int32())))
        return pa.StructArray.from_arrays(
            [memory.strings(rids), empty,
             pa.LargeListArray.from_arrays(none, pa.nulls(0, pa.int64()))],
            names=["rid", "k", "n"])
    d = parts[0].codes.shape[0] if parts else d
    sizes = np.array([p.counts.shape[0] for p in parts], np.int64)
    # 64-bit offsets: d x m codes in one list may pass 2**31 (DuckDB reads them as LIST)
    lists = pa.LargeListArray.from_arrays
    inner = np.zeros(len(parts) * d + 1, np.int64)
    np.cumsum(np.repeat(sizes, d), out=inner[1:])
    codes = _cat32([p.codes.astype(np.int32, copy=False).ravel() for p in parts])
    columns = lists(memory.arrow(inner), memory.arrow(codes))
    outer = memory.arrow(np.arange(len(parts) + 1, dtype=np.int64) * d)
    n_off = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(sizes, out=n_off[1:])
    counts = _cat32([p.counts for p in parts], np.int64)
    return pa.StructArray.from_arrays(
        [pa.nulls(len(parts), pa.string()), lists(outer, columns),
         lists(memory.arrow(n_off), memory.arrow(counts))],
        names=["rid", "k", "n"],
    )


def _cat32(arrays: list[np.ndarray], dtype: type = np.int32) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays) if arrays \
        else np.zeros(0, dtype)


def levels_of(levels: list[Level], allowed: Any) -> Levels:
    """A release's :class:`Levels` from its per-level (keys, noise, domain size, nest) and
    each nested level's allowed children (``allowed[k - 1]``; NULL when level k is not
    nested)."""
    if len(allowed) != len(levels):
        raise InternalError(f"a release of {len(levels)} levels got {len(allowed)} "
                            "levels of allowed children")
    rules = [
        None if nest is None else Allowed(nest, prefixes(allowed.slice(k, 1), len(nest) + 1))
        for k, (_, _, _, nest) in enumerate(levels)
    ]
    return Levels(
        tuple(size for _, _, size, _ in levels),
        tuple(dist for _, dist, _, _ in levels),
        tuple(src for src, _, _, _ in levels),
        tuple(rules),
    )
