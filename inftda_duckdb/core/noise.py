"""Exact discrete Gaussian noise N_Z(0, sigma2), vectorised and counter-addressed.

Algorithm 1, line 5 adds N_Z(0, d/rho) to every child count; the privacy proof needs that
distribution *exactly*. We sample it by inversion: ``Y = S * A`` with the magnitude ``A = |Y|``,
``P(A = 0) = 1/Z``, ``P(A = a) = 2 w(a) / Z`` for ``a >= 1``, ``w(a) = exp(-a**2 / (2 sigma2))``,
``Z = sum of w(y) over all integers y``, and an independent uniform sign ``S`` (so
``P(Y = y) = w(y) / Z``). With ``F`` the distribution function of ``A`` and ``U`` uniform in
[0, 1), ``A = #{a >= 0 : F(a) <= U}`` has ``P(A <= a) = P(U < F(a)) = F(a)``.

``U``'s binary digits are PRF words (:mod:`inftda_duckdb.randomness`), b = 63 bits per word: the
low 63 bits of word 0 of the sample's (id, counter 0), then the top 63 bits of words 1, 2, ...
when needed; the top bit of word 0 is the sign. Table setup computes ``T_a = floor(F(a) * 2**b)``
exactly with Python integers (interval sums of ``w``, a rigorous bound on the tail of ``Z``;
precision raised until the floor is certain), up to the first ``a`` with ``T_a = 2**b - 1``. The
hot path reads one word: its top K + 1 bits (the sign and the top K bits of ``u``) index a table
of signed magnitudes ``S * #{a : T_a < u}``, exact wherever the K bits decide it (a binary search
only in the buckets holding a threshold: under 1% of the words up to sigma2 = 10**4, a third at
10**8). On ``u == T_a`` (probability below 2**-46 per sample) more words refine ``U`` and
``F(a), F(a + 1), ...`` exactly until ``U < F(a)`` is decided.

One AES block per sample and no rejection: every sample does the same work (the bucket search
and tie paths excepted), and a sample depends only on the source and its id.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from . import kernel, memory
from .errors import InternalError, bad_argument
from .exact import to_positive_fraction
from .kernel.contract import SEARCH as _SEARCH
from .randomness import MAX_WIDTH, RandomSource, _as_ids

MAX_SIGMA2 = Fraction(10**8)  #: larger variances are refused (a noise scale beyond 10**4)
_BITS = 63  # bits of U per word: the top 63; bit 0 of word 0 is the sign
_BUCKET_BITS = (10, 16)  # the magnitude is looked up by the top K bits of its word, K in this range
_GUARD = 80  # guard bits of the interval sums (plus 2 per bit of sigma2): floors decided at once
_TAIL = 1 << 48  # the sums stop when the tail bound is this many units of 2**-prec: more precision
# (a larger guard) shrinks the tail with the rounding errors, so a doubled guard can decide a floor
_MAX_PREC = 1 << 15  # F(a) * 2**bits undecided at this precision: give up (never seen)
_CHUNK = 1 << 16  # samples per internal batch (cache-sized temporaries)
_INT64_MAX = (1 << 63) - 1
_NOISE_BOUND = 1 << 40  # add_noise refuses counts within this of the int64 limits


def _exp_interval(g: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= exp(-g) * 2**prec <= hi`` for a rational ``g >= 0``."""
    s = max(0, (2 * g).__ceil__().bit_length())  # argument reduction: x = g / 2**s <= 1/2
    x = g / (1 << s)
    q = prec + s + 16
    a, b = x.numerator, x.denominator
    term, total, k = 1 << q, 1 << q, 0
    while term:  # alternating Taylor series; each computed term is within 2 units below the truth
        k += 1
        term = term * a // (b * k)
        total += -term if k % 2 else term
    err = 2 * k + 3
    lo, hi = max(total - err, 0), total + err
    for _ in range(s):  # exp(-g) = exp(-x) ** (2**s)
        lo, hi = (lo * lo) >> q, -((-hi * hi) >> q)
    return lo >> (q - prec), -((-hi) >> (q - prec))


def _cdf_sums(sigma2: Fraction, prec: int, tail_units: int,
              upto: int = 0) -> tuple[list[int], list[int], int, int]:
    """Intervals, in units of 2**-prec, of ``C(a) = 1 + 2 (w(1) + ... + w(a))`` for a = 0..N
    (``clo``, ``chi``) and of ``Z = lim C(a)`` (``zlo``, ``zhi``); N >= ``upto`` is where the
    bound on the tail ``sum_{y > N} w(y)`` falls to ``tail_units``. ``F(a) = C(a) / Z``."""
    p, q = sigma2.numerator, sigma2.denominator
    one = 1 << prec
    wlo = whi = one  # w(0) = 1
    # w(y + 1) = w(y) m(y), m(y) = exp(-(2 y + 1) / (2 sigma2)), m(y + 1) = m(y) exp(-1 / sigma2)
    mlo, mhi = _exp_interval(1 / (2 * sigma2), prec)
    elo, ehi = _exp_interval(1 / sigma2, prec)
    clo, chi = [one], [one]
    y, tail = 0, one
    while tail > tail_units or y < upto:
        wlo, whi = (wlo * mlo) >> prec, -((-whi * mhi) >> prec)
        mlo, mhi = (mlo * elo) >> prec, -((-mhi * ehi) >> prec)
        y += 1
        clo.append(clo[-1] + 2 * wlo)
        chi.append(chi[-1] + 2 * whi)
        # sum_{k > y} w(k) <= w(y + 1) / (1 - r), r = w(y + 2) / w(y + 1) = e**-x,
        # x = (2 y + 3) / (2 sigma2) (the ratios decrease), and 1 / (1 - e**-x) <= 1 + 1 / x
        d = q * (2 * y + 3)
        tail = -((-whi * (d + 2 * p)) // d)  # w(y + 1) <= w(y) <= whi
    return clo, chi, clo[-1], chi[-1] + 2 * tail


def _guard(sigma2: Fraction) -> int:
    # rounding errors of the sums grow like sigma**3 units: 2 guard bits per bit of sigma2
    return _GUARD + 2 * (sigma2.numerator // sigma2.denominator).bit_length()


def _floor(clo: int, chi: int, zlo: int, zhi: int, bits: int) -> int | None:
    """floor(F * 2**bits) for F in [clo / zhi, chi / zlo], if that interval decides it; F < 1
    (every w(y) > 0), so the floor is at most 2**bits - 1 (tiny sigma2: F(0) = 1 - 2**-240000)."""
    lo = (clo << bits) // zhi
    return lo if lo == min((chi << bits) // zlo, (1 << bits) - 1) else None


@lru_cache(maxsize=1 << 12)
def cdf_floor(sigma2: Fraction, a: int, bits: int) -> int:
    """``floor(F(a) * 2**bits)`` exactly, F the distribution function of ``|N_Z(0, sigma2)|``."""
    guard = _guard(sigma2)
    while bits + guard <= _MAX_PREC:
        clo, chi, zlo, zhi = _cdf_sums(sigma2, bits + guard, _TAIL, a)
        v = _floor(clo[a], chi[a], zlo, zhi, bits)
        if v is not None:
            return v
        guard *= 2
    raise InternalError(f"F({a}) * 2**{bits} undecided at {_MAX_PREC} bits")


@dataclass(frozen=True)
class _Tables:
    cdf: np.ndarray  # uint64 non-decreasing: cdf[a] = floor(F(a) * 2**bits); cdf[-1] = 2**bits - 1
    bucket: np.ndarray  # int64 (2**K,): the magnitude of words with these top K bits; -1: search
    kbits: int  # K
    signed: np.ndarray  # int64 (2**(K+1),): [sign bit | K bits] -> +-magnitude, or _SEARCH
    small: np.ndarray  # ``signed`` in the narrowest integer type holding every magnitude (int8
    # for sigma2 up to ~10**3: 16 kB at sigma2 = 5, so it stays in cache while a block's AES output
    # streams through), its search marker that type's minimum


@lru_cache(maxsize=64)
def _tables(sigma2: Fraction, bits: int) -> _Tables:
    """The exact thresholds for one sigma2 (interval floors; the exact fallback if unsure)."""
    guard = _guard(sigma2)
    clo, chi, zlo, zhi = _cdf_sums(sigma2, bits + guard, _TAIL)
    cdf: list[int] = []
    while not cdf or cdf[-1] < (1 << bits) - 1:  # F(a) < 1: the floors end at 2**bits - 1
        a = len(cdf)
        v = _floor(clo[a], chi[a], zlo, zhi, bits) if a < len(clo) else None
        cdf.append(cdf_floor(sigma2, a, bits) if v is None else v)
    table = np.array(cdf, dtype=np.uint64)
    k = min(max(_BUCKET_BITS[0], table.size.bit_length() + 8), _BUCKET_BITS[1], bits)
    low = np.arange(1 << k, dtype=np.uint64) << np.uint64(bits - k)  # first word of each bucket
    bucket = np.searchsorted(table, low, side="left").astype(np.int64)  # #{a : T_a < low}
    bucket[(table >> np.uint64(bits - k)).astype(np.intp)] = -1  # a threshold inside: search
    signed = np.concatenate([bucket, -bucket])
    signed[np.concatenate([bucket, bucket]) < 0] = _SEARCH
    small_type = next(t for t in (np.int8, np.int16, np.int32, np.int64)
                      if int(bucket.max()) < np.iinfo(t).max)
    small = signed.astype(small_type)
    small[signed == _SEARCH] = np.iinfo(small_type).min
    return _Tables(table, bucket, k, signed, small)


class DiscreteGaussian:
    """Exact N_Z(0, sigma2); ``sample(source, ids)``: one value per id (Algorithm 1, line 5)."""

    def __init__(self, sigma2: object, *, _word_bits: int = _BITS) -> None:
        # an exact Fraction (the budget plan's) is taken as it is: user numbers were bounded
        # when parsed, and a derived variance may legitimately fall outside exact.py's range
        value = sigma2 if isinstance(sigma2, Fraction) and sigma2 > 0 else to_positive_fraction(
            sigma2, "sigma2", "pass a positive number such as 4, Fraction(800, 37) or '8/0.37'")
        if value > MAX_SIGMA2:
            raise bad_argument("sigma2", sigma2, f"must be at most {MAX_SIGMA2}",
                               "use a larger privacy budget (noise scale beyond 10**4 per count)")
        if not 8 <= _word_bits <= _BITS:
            raise ValueError("_word_bits must be in [8, 63]")
        self.sigma2 = value
        self._tab = _tables(value, _word_bits)
        self._bits = _word_bits

    def __repr__(self) -> str:
        return f"DiscreteGaussian(sigma2={self.sigma2})"

    def sample(self, source: RandomSource, ids: np.ndarray,
               out: np.ndarray | None = None) -> np.ndarray:
        """int64 (len(ids),): the sample addressed by each id (same source and id: same value).

        ``ids``: 64-bit addresses (1-D), or wide addresses (2-D, one row of uint64 limbs each:
        :mod:`~inftda_duckdb.core.randomness`). ``out``: a C-contiguous int64 array of
        ``len(ids)`` to write into (and return) instead of a new one.
        """
        if not isinstance(source, RandomSource):
            raise bad_argument("source", source, "must be a RandomSource",
                               "use RandomSource.secure()")
        u_ids = _as_ids(ids)
        n = u_ids.shape[0]
        if out is None:
            out = memory.empty(n, np.int64)
        elif out.shape != (n,) or out.dtype != np.int64 or not out.flags.c_contiguous:
            raise bad_argument("out", f"array of dtype {out.dtype}, shape {out.shape}",
                               f"must be a C-contiguous int64 array of shape ({n},)",
                               "pass numpy.empty(len(ids), numpy.int64)")
        for start in range(0, n, _CHUNK):  # ids address samples: any split works
            stop = min(start + _CHUNK, n)
            chunk = u_ids[start:stop]
            if chunk.ndim == 2:  # wide addresses: the CBC-MAC words
                self._decode(source, chunk, source._pairs(chunk, 0, 0, 1)[:, 0], out[start:stop])
            else:
                address_buffer(stop - start)[:] = chunk
                self._addressed(source, stop - start, out[start:stop])
        return out

    def sample_addressed(self, source: RandomSource, n: int, out: np.ndarray) -> np.ndarray:
        """The hot path: the samples of the ``n`` 64-bit addresses just written into
        :func:`address_buffer` (this thread's), into ``out`` (int64, C-contiguous, ``n``)."""
        return self._addressed(source, n, out)

    def _addressed(self, source: RandomSource, n: int, out: np.ndarray) -> np.ndarray:
        blocks, words, _ = _buffers(n)
        w0 = source._encrypt(blocks[:n], words)[:n, 0]
        self._decode(source, w0, w0, out)
        return out

    def _decode(self, source: RandomSource, ids: np.ndarray, w0: np.ndarray,
                out: np.ndarray) -> None:
        """Samples from their first words ``w0`` (``ids``: their addresses, for the rare paths)."""
        tab = self._tab
        index = _buffers(w0.shape[0])[2][: w0.shape[0]]
        search = _SEARCH
        if kernel.wanted(out.shape[0]):  # one compiled pass: same table, same values, the
            # bucket searches included (only ties with a threshold are left to refine below)
            unsure = kernel.lookup(w0, tab.signed, 63 - tab.kbits, tab.cdf, self._bits, out) > 0
        else:
            np.right_shift(w0, np.uint64(63 - tab.kbits), out=index)  # sign, top K bits of U
            looked = memory.scratch("noise.looked", out.shape[0], tab.small.dtype, _CHUNK)
            # +-|Y|, or the marker; the K + 1 bits always index the table, so no bounds
            # check (mode='raise' checks each index: ~2x the lookup's time)
            np.take(tab.small, index.view(np.int64), out=looked, mode="clip")
            np.copyto(out, looked)
            search = int(np.iinfo(tab.small.dtype).min)
            unsure = bool(out.shape[0]) and bool(looked.min() == search)
        if unsure:  # (the index scratch, done, holds the mask)
            mask = np.equal(out, search, out=index.view(np.bool_)[: out.shape[0]])
            at = np.flatnonzero(mask)
            word = w0[at]
            if ids is w0:  # the hot path's ids are the AES input's low halves
                ids = _buffers(w0.shape[0])[0][: w0.shape[0], 0]
            magnitude = self._search(source, ids[at], word).astype(np.int64)
            out[at] = np.where(word >> np.uint64(63) == 1, -magnitude, magnitude)

    def _search(self, source: RandomSource, ids: np.ndarray, w0: np.ndarray) -> np.ndarray:
        """``#{a : T_a < u}`` by binary search; exact refinement where ``u`` equals a ``T_a``."""
        table = self._tab.cdf
        u = (w0 >> np.uint64(63 - self._bits)) & np.uint64((1 << self._bits) - 1)
        a = np.searchsorted(table, u, side="left")  # < table.size: table[-1] = 2**bits - 1 >= u
        for i in np.flatnonzero(table[a] == u):  # probability table.size / 2**bits per sample
            a[i] = self._refine(source, int(ids[i]), int(u[i]), int(a[i]))
        return a

    def _refine(self, source: RandomSource, id_: int, u: int, a: int) -> int:
        """``A`` for a first word ``u == T_a``: the first ``a' >= a`` with ``U < F(a')``, each
        comparison decided on as many further words of ``U`` as it takes."""
        bits, table = self._bits, self._tab.cdf
        prefix, depth = u, 1  # U's first bits * depth bits
        while True:
            f = (int(table[min(a, table.size - 1)]) if depth == 1  # T_a = 2**bits - 1 past the end
                 else cdf_floor(self.sigma2, a, bits * depth))
            if prefix < f:  # U < (prefix + 1) / 2**(bits depth) <= F(a)
                return a
            if prefix > f:  # U >= prefix / 2**(bits depth) > F(a)
                a += 1
                continue
            if depth >= MAX_WIDTH:  # probability 2**(-bits * 2**17)
                raise InternalError("exact refinement ran out of words")
            prefix = (prefix << bits) | (source._word(id_, 0, depth) >> (64 - bits))
            depth += 1


_LOCAL = threading.local()


def _buffers(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This thread's AES input ((n, 2) uint64 blocks whose high halves stay 0: counter 0, word
    pair 0), AES output (one spare block) and index scratch, for at least ``n`` samples."""
    buf = getattr(_LOCAL, "buffers", None)
    if buf is None or buf[0].shape[0] < n:
        size = max(n, _CHUNK)
        buf = (np.zeros((size, 2), "<u8"), np.empty((size + 1, 2), "<u8"),
               np.empty(size, np.uint64))
        _LOCAL.buffers = buf
    return buf


def address_buffer(n: int) -> np.ndarray:
    """This thread's AES input for ``n`` samples: write their 64-bit addresses into it (a
    strided uint64 view), then call :meth:`DiscreteGaussian.sample_addressed` on this thread."""
    return _buffers(n)[0][:n, 0]


def sample(sigma2: object, n: int, source: RandomSource | None = None) -> np.ndarray:
    """n samples of N_Z(0, sigma2) with ids 0..n-1; a fresh secure source if none is given."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise bad_argument("n", n, "must be a non-negative integer", "pass e.g. n=1000")
    src = RandomSource.secure() if source is None else source
    return DiscreteGaussian(sigma2).sample(src, np.arange(int(n), dtype=np.uint64))


def add_noise(counts: np.ndarray, sigma2: object, source: RandomSource,
              ids: np.ndarray | None = None, block: int = 1 << 20) -> None:
    """Add N_Z(0, sigma2) to int64 ``counts`` in place, ``block`` values at a time.

    ``ids`` (default 0..n-1) address the noise of each count. Raises OverflowError, before
    touching ``counts``, when a count lies within 2**40 of the int64 limits.
    """
    if not isinstance(counts, np.ndarray) or counts.dtype != np.int64 or counts.ndim != 1:
        raise bad_argument("counts", type(counts).__name__ if not isinstance(counts, np.ndarray)
                           else f"array of dtype {counts.dtype}, shape {counts.shape}",
                           "must be a 1-D numpy int64 array", "convert with counts.astype('int64')")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise bad_argument("block", block, "must be a positive integer", "use e.g. 1 << 20")
    dist = DiscreteGaussian(sigma2)
    u_ids = None if ids is None else _as_ids(ids)
    if u_ids is not None and u_ids.size != counts.size:
        raise bad_argument("ids", f"{u_ids.size} ids", f"must match the {counts.size} counts",
                           "pass one id per count")
    if counts.size and (int(counts.max()) > _INT64_MAX - _NOISE_BOUND
                        or int(counts.min()) < -_INT64_MAX + _NOISE_BOUND):
        raise OverflowError("counts within 2**40 of the int64 limits could overflow when noised")
    for start in range(0, counts.size, block):
        stop = min(start + block, counts.size)
        bids = np.arange(start, stop, dtype=np.uint64) if u_ids is None else u_ids[start:stop]
        noise = dist.sample(source, bids)
        if noise.size and int(np.abs(noise).max()) >= _NOISE_BOUND:  # never at sigma2 <= 1e8
            raise OverflowError("noise beyond 2**40 could overflow int64 counts")
        counts[start:stop] += noise


__all__ = ["MAX_SIGMA2", "DiscreteGaussian", "add_noise", "address_buffer", "cdf_floor", "sample"]
