"""The true counts below a batch of subtrees (``q_C(u)``, Algorithm 1, line 5): a sorted forest.

:class:`Truth` holds, for each level from the batch's cut down to the level the counts are given
at, the prefixes with a non-zero true count in code order (:class:`TruthLevel`), and where each
prefix's children start at the level below: a block reads its parents' true children as runs. It
is built bottom up from one sort of the given prefixes (:func:`.kernel.sort` of the pairs ``(key
<< bits) | count`` when they fit one int64) and passes of cache-sized chunks, with no temporary of
a level's size; domains whose product passes 2**62 are sorted by their code columns instead. A
prefix listed twice is refused: a caller's repeated count would have unbounded sensitivity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .. import kernel, memory
from ..errors import InftdaError, InternalError, bad_argument
from ..tree import MAX_KEY_SPAN, find_columns, lookup, mixed_radix

IntArray = npt.NDArray[np.int64]
Sizes = list[int] | tuple[int, ...]


class TruthLevel(NamedTuple):
    """One level of the truth, in code order: the last code and the count of each prefix, as
    arrays, or (the leaves) as the sorted pairs ``(key << bits) | count`` they were sorted as
    (the codes and counts are read from them block by block: no level-sized copies)."""

    codes: np.ndarray | None
    counts: IntArray
    bits: int = 0
    m: int = 0

    def __call__(self, groups: IntArray) -> tuple[np.ndarray, IntArray]:
        """The codes and counts of the prefixes ``groups``."""
        if self.codes is not None:
            return self.codes[groups], self.counts[groups]
        pairs = self.counts[groups]
        keys = pairs >> self.bits
        return keys - keys // self.m * self.m, pairs & ((1 << self.bits) - 1)


class Truth:
    """True counts of the prefixes of levels ``top..upto``, each level sorted in code order:
    ``levels[j]`` gives the last codes and the counts of level ``top + j``'s prefixes, and
    ``first[j]``: prefix ``i`` of level ``top + j`` has the children ``first[j][i]`` to
    ``first[j][i + 1] - 1`` at the level below."""

    def __init__(self, top: int, levels: list[TruthLevel], first: list[IntArray],
                 top_keys: IntArray | None, top_codes: np.ndarray, sizes: Sizes) -> None:
        self.top, self.levels, self.first = top, levels, first
        self._keys, self._codes, self._sizes = top_keys, top_codes, sizes

    @classmethod
    def build(cls, truth: np.ndarray, counts: IntArray | None, sizes: Sizes, top: int,
              radix: int | None = None, overwrite: bool = False) -> Truth:
        """``overwrite``: prefix pairs (``radix``) in a writable int64 ``truth`` are sorted in
        place (see :func:`~inftda_duckdb.core.topdown.release_below`)."""
        u = len(sizes)
        if radix is not None:  # one int64 per prefix: key * radix + count
            if truth.ndim != 1 or radix < 1 or math.prod(sizes) * radix >= MAX_KEY_SPAN:
                raise InternalError("prefix pairs need keys and counts within 2**62")
            pairs = truth.astype(np.int64, copy=False)
            own = overwrite and pairs.flags.writeable and pairs.flags.c_contiguous
            return cls._from_keys(pairs, None, sizes, top, radix, own)
        assert counts is not None
        if truth.ndim == 1 and u > 1:  # mixed-radix keys
            if math.prod(sizes) >= MAX_KEY_SPAN:
                raise InternalError("prefix keys for domains whose product passes 2**62")
            keys = truth.astype(np.int64, copy=False)
        else:
            codes = truth.reshape(u, -1)
            if codes.size and (codes.min() < 0 or (codes.max(axis=1) >= sizes).any()):
                raise InternalError("a true prefix has a code outside its domain")
            if math.prod(sizes) >= MAX_KEY_SPAN:
                return cls._from_codes(codes, counts, sizes, top)
            keys = mixed_radix(codes, sizes, np.int64)
        if keys.shape != counts.shape:
            raise InternalError("different numbers of true prefixes and counts")
        return cls._from_keys(keys, counts, sizes, top)

    @classmethod
    def _from_keys(cls, keys: IntArray, counts: IntArray | None, sizes: Sizes, top: int,
                   radix: int = 1, overwrite: bool = False) -> Truth:
        span, u = math.prod(sizes), len(sizes)
        if keys.size and (int(keys.min()) < 0 or int(keys.max()) >= span * radix):
            raise InternalError("a prefix key outside its domain")
        if counts is None:  # pairs key * radix + count
            pairs, bits, sorted_counts = _sort_pairs(keys, radix, span, overwrite)
        else:
            if counts.size and not counts.all():
                keys, counts = keys[counts > 0], counts[counts > 0]
            pairs, bits, sorted_counts = _sort_by_key(keys, counts, span)
        n = pairs.shape[0]
        chunk: Callable[[int, int], tuple[IntArray, IntArray]]
        leaves: TruthLevel | None = None
        current: IntArray | None = sorted_counts
        if bits:  # the leaves stay packed (key << bits) | count, read block by block
            mask = (1 << bits) - 1
            leaves = TruthLevel(None, pairs, bits, int(sizes[-1]) if u else 1)
            chunk = lambda a, b: (pairs[a:b] >> bits, pairs[a:b] & mask)  # noqa: E731
            if top == u:  # nothing to release below: the leaves' keys and counts for matching
                keys, current = pairs >> bits, pairs & mask
        else:
            keys = pairs
            assert sorted_counts is not None
            chunk = _slicer(pairs, sorted_counts)
        levels: list[TruthLevel] = []
        first: list[IntArray] = []
        for k in range(u, top, -1):  # bottom up: a level's prefixes from the one below
            if k == u and bits:
                code, starts, keys, up = _up_pairs(pairs, bits, int(sizes[k - 1]), chunk)
            else:
                code, starts, keys, up = _up(n, chunk, int(sizes[k - 1]), code_dtype(sizes),
                                             check=k == u, keep=leaves is None)
            if leaves is None:
                assert current is not None
                leaves = TruthLevel(code, current)
            levels.append(leaves)
            leaves, current = None, up
            first.append(starts)
            n = keys.shape[0]
            chunk = _slicer(keys, up)
        assert current is not None
        levels.append(TruthLevel(None, current))
        return cls(top, levels[::-1], first[::-1], keys, np.zeros((0, 0), np.int32), sizes)

    @classmethod
    def _from_codes(cls, codes: np.ndarray, counts: IntArray, sizes: Sizes, top: int) -> Truth:
        """Domains too wide for int64 keys: sort the code columns, find each level's prefixes
        where a code changes."""
        keep = counts > 0
        codes, counts = codes[:, keep], counts[keep]
        order = np.lexsort(codes[::-1])
        codes, counts = codes[:, order], counts[order]
        n, u = codes.shape[1], len(sizes)
        change = np.zeros(n, bool)
        change[:1] = True
        starts = [np.flatnonzero(change)]
        for k in range(1, u + 1):
            change[1:] |= codes[k - 1][1:] != codes[k - 1][:-1]
            starts.append(np.flatnonzero(change))
        if starts[u].shape[0] != n:
            raise _repeated_child()
        level_counts = [np.add.reduceat(counts, s) if n else counts[:0] for s in starts[top:]]
        level_codes = [None] + [codes[k - 1][starts[k]].astype(code_dtype(sizes))
                                for k in range(top + 1, u + 1)]
        level_first = [np.append(np.searchsorted(starts[k + 1], starts[k]), starts[k + 1].size)
                       for k in range(top, u)]
        return cls(top, [TruthLevel(c, n_)
                         for c, n_ in zip(level_codes, level_counts, strict=True)],
                   level_first, None, codes[:top, starts[top]], sizes)

    def done(self, k: int) -> None:
        """Level ``k`` is released: its prefixes and the links to them are no longer needed."""
        j = k - self.top
        self.levels[j] = TruthLevel(None, np.zeros(0, np.int64))
        self.first[j - 1] = np.zeros(0, np.int64)

    def match(self, node_codes: np.ndarray) -> IntArray:
        """Index of each node (columns of ``node_codes``, level ``top``) among the true
        prefixes of that level, -1 where it has none."""
        if self._keys is None:
            return find_columns(self._codes, node_codes, self._sizes[: self.top])
        keys = mixed_radix(node_codes, self._sizes[: self.top], np.int64)
        return lookup(self._keys, keys)


_CHUNK = 1 << 16  # elements per pass over a sorted truth level (cache-sized temporaries)


def _sort_pairs(pairs: IntArray, radix: int, span: int,
                overwrite: bool = False) -> tuple[IntArray, int, IntArray | None]:
    """:func:`_sort_by_key` of prefixes given as ``key * radix + count`` (one array, as an
    engine sends them: half the memory of keys and counts): repacked as ``(key << bits) |
    count`` (already so for a power-of-two ``radix``, as DuckDB sends them) into the one array
    that is sorted (:func:`.kernel.sort`; ``pairs`` itself with ``overwrite``), zero counts
    dropped."""
    n = pairs.shape[0]
    bits, kbits = max(1, (radix - 1).bit_length()), max(1, (span - 1).bit_length())
    if kbits + bits > 62:  # too wide to repack: keys and counts
        keys = pairs // radix
        counts = pairs - keys * radix
        return _sort_by_key(keys[counts > 0], counts[counts > 0], span)
    packed = pairs if overwrite else memory.empty(n, np.int64)
    zeros, shifted = False, radix == 1 << bits  # shifted: key * radix + count is (key << bits)
    for a in range(0, n, _CHUNK):  # | count already, no division (DuckDB's @leaf_pairs)
        b = min(a + _CHUNK, n)
        if shifted:
            if packed is not pairs:
                packed[a:b] = pairs[a:b]
            zeros = zeros or not np.bitwise_and(pairs[a:b], radix - 1).all()
            continue
        count = np.remainder(pairs[a:b], radix)  # read before packed (maybe pairs) is written
        key = np.floor_divide(pairs[a:b], radix, out=packed[a:b])
        zeros = zeros or not count.all()
        key <<= bits
        key |= count
    if zeros:
        packed = packed[packed & ((1 << bits) - 1) > 0]
    kernel.sort(packed, bits, kbits + bits)
    return packed, bits, None


def _sort_by_key(keys: IntArray, counts: IntArray,
                 span: int) -> tuple[IntArray, int, IntArray | None]:
    """Keys (distinct, in [0, span)) sorted with their counts: ``(pairs, bits, None)`` with the
    sorted pairs ``(key << bits) | count`` when both fit one int64 (one :func:`.kernel.sort`:
    nothing else of the level's size), else ``(keys, 0, counts)`` sorted (packed with
    positions)."""
    n = keys.shape[0]
    kbits = max(1, (span - 1).bit_length())
    cbits = max(1, int(counts.max()).bit_length()) if n else 1
    lbits = cbits if kbits + cbits <= 62 else max(1, n.bit_length())
    if kbits + lbits > 62:  # too wide to pack: an argsort
        order = np.argsort(keys, kind="stable")
        return keys[order], 0, counts[order]
    packed = memory.empty(n, np.int64)
    for a in range(0, n, _CHUNK):  # (key << lbits) | count (or position)
        b = min(a + _CHUNK, n)
        np.left_shift(keys[a:b], lbits, out=packed[a:b])
        packed[a:b] |= counts[a:b] if lbits == cbits else np.arange(a, b, dtype=np.int64)
    kernel.sort(packed, lbits, kbits + lbits)
    if lbits == cbits:
        return packed, cbits, None
    out_counts = memory.empty(n, np.int64)
    mask = (1 << lbits) - 1
    for a in range(0, n, _CHUNK):  # unpacked in place: the keys overwrite the packed pairs
        b = min(a + _CHUNK, n)
        part = packed[a:b]
        np.take(counts, part & mask, out=out_counts[a:b])
        np.right_shift(part, lbits, out=part)
    return packed, 0, out_counts


def _slicer(keys: IntArray, counts: IntArray) -> Callable[[int, int], tuple[IntArray, IntArray]]:
    return lambda a, b: (keys[a:b], counts[a:b])


def _up(n: int, chunk: Callable[[int, int], tuple[IntArray, IntArray]], m: int,
        code_type: type[np.signedinteger], check: bool,
        keep: bool) -> tuple[np.ndarray | None, IntArray, IntArray, IntArray]:
    """One level up a sorted truth level of ``n`` prefixes (read by ``chunk(a, b)``: keys
    ascending and distinct, counts): each key's last code (if ``keep``), where each parent's
    run of children starts (and ``n`` after the last), the parents' keys and their counts. In
    cache-sized chunks, written into buffers of ``n`` entries whose untouched tail costs no
    memory: no temporary of the level's size."""
    codes = memory.empty(n, code_type) if keep else None
    starts = memory.empty(n + 1, index_dtype(n + 1))
    parents, sums = memory.empty(n + 1, np.int64), memory.empty(n + 1, np.int64)
    filled, last = 0, None
    for a in range(0, n, _CHUNK):
        b = min(a + _CHUNK, n)
        part, cnt = chunk(a, b)
        parent = part // m
        if codes is not None:
            np.subtract(part, parent * m, out=codes[a:b], casting="unsafe")
        if check and (not (part[1:] > part[:-1]).all() or (last is not None and last >= part[0])):
            raise _repeated_child()
        last = part[-1]
        new = np.flatnonzero(parent[1:] != parent[:-1])
        new += 1
        segments = np.concatenate([[0], new])
        total = np.add.reduceat(cnt, segments)
        if filled and parent[0] == parents[filled - 1]:  # continues the last chunk's parent
            sums[filled - 1] += total[0]
            segments, total = new, total[1:]
        f = filled + segments.shape[0]
        np.add(segments, a, out=starts[filled:f], casting="unsafe")
        parents[filled:f] = parent[segments]
        sums[filled:f] = total
        filled = f
    starts[filled] = n
    return codes, starts[: filled + 1], parents[:filled], sums[:filled]


def _up_pairs(pairs: IntArray, bits: int, m: int,
              chunk: Callable[[int, int], tuple[IntArray, IntArray]]
              ) -> tuple[None, IntArray, IntArray, IntArray]:
    """:func:`_up` of the leaves as sorted pairs ``(key << bits) | count`` (checked, no codes
    kept): in one compiled pass (:func:`.kernel.up_pairs`) when the kernel is wanted, else in
    numpy's chunks (``chunk`` reads the pairs as keys and counts)."""
    n = pairs.shape[0]
    if index_dtype(n + 1) is not np.int32 or not kernel.wanted(n):  # (the kernel's starts)
        _, starts, parents, sums = _up(n, chunk, m, np.int8, check=True, keep=False)
        return None, starts, parents, sums
    starts = memory.empty(n + 1, np.int32)  # (untouched tails cost no memory)
    parents, sums = memory.empty(n, np.int64), memory.empty(n, np.int64)
    filled = kernel.up_pairs(pairs, bits, m, starts, parents, sums)
    if filled < 0:
        raise _repeated_child()
    return None, starts[: filled + 1], parents[:filled], sums[:filled]


def _repeated_child() -> InftdaError:
    # a repeated prefix would keep one count and drop the other: unbounded sensitivity for a
    # caller that passes non-aggregated counts
    return bad_argument(
        "truth", "a prefix listed twice", "must list each prefix at most once",
        "aggregate the true counts by prefix before calling release_below",
    )


def index_dtype(n: int) -> type[np.signedinteger]:
    """Positions among ``n`` entries (and -1) are int32 (half the memory) below 2**31."""
    return np.int32 if n < 1 << 31 else np.int64


def code_dtype(sizes: Sizes) -> type[np.signedinteger]:
    """Codes are int32 (half the memory) unless a domain has 2**31 values or more."""
    return np.int32 if max(sizes, default=0) < 1 << 31 else np.int64
