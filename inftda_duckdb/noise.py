"""Exact discrete Gaussian noise N_Z(0, sigma2), vectorised and counter-addressed.

Algorithm 1, line 5 adds N_Z(0, d/rho) to every child count; the privacy proof needs that
distribution *exactly*. We use Canonne, Kamath and Steinke (2020), Algorithm 3: with
``t = floor(sigma) + 1`` propose ``Y`` from the discrete Laplace ``P(y) ~ exp(-|y|/t)`` and accept
it with probability ``exp(-(|Y| - sigma2/t)**2 / (2 sigma2))``; otherwise try again.

Every random decision is ``U < exp(-g)`` for an exact rational ``g`` and a uniform ``U`` in [0, 1)
whose binary digits are PRF words (:mod:`inftda_duckdb.randomness`), b = 63 bits per word. Table
setup computes ``T = floor(exp(-g) * 2**b)`` exactly with Python integers (interval arithmetic,
precision raised until the floor is certain); the hot path compares one word ``u`` with ``T``:
``u < T`` is true, ``u > T`` false, and on ``u == T`` (probability 2**-63) further words of the same
sample refine both sides exactly. One trial of round ``r`` uses one AES block (counter ``r << 15``):

- word 0, top 63 bits: magnitude ``X = #{x in 1..L : U < exp(-x/t)}``, so ``P(X >= x) = exp(-x/t)``
  (looked up by the top K bits, searched only if a threshold falls in that bucket); if ``X = L``
  the rest is a fresh geometric (memorylessness), drawn at counters ``r << 15 | j``, j >= 1;
- word 0, bit 0: the sign; ``(X = 0, negative)`` is rejected, so ``Y`` is discrete Laplace;
- word 1, top 63 bits: acceptance of ``|Y|`` (thresholds are 0 past the table, where
  ``exp(-g) < 2**-63``).

Refinement word ``k >= 1`` of primary word ``w`` is word ``2 k + w`` of the same counter.
Rounds run over the still-pending samples of a block; once few are pending, a round draws the
next k trials of each at once (trial j is round r + j, the first accepted one is kept: the same
sample as one trial per round, in fewer numpy calls). The number of trials of a rejection sampler
is independent of the value it returns, and every pending sample does the same work per round
(the refinement and overflow paths, probability < 1e-6 per sample, excepted).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from math import isqrt

import numpy as np

from .errors import InternalError, bad_argument
from .exact import to_positive_fraction
from .randomness import MAX_WIDTH, RandomSource, _as_ids

MAX_SIGMA2 = Fraction(10**8)  #: larger variances are refused (a noise scale beyond 10**4)
_STAGE_BITS = 15  # counter = round << 15 | stage (stage 0: a trial; j >= 1: magnitude overflow j)
_WORDS = 2  # words per trial (one AES block): magnitude (+ sign in its low bit), acceptance
_BITS = 63  # decision bits per word: the top 63 bits; bit 0 of word 0 is the sign
_BUCKET_BITS = (10, 16)  # the magnitude is looked up by the top K bits of its word, K in this range
_SPAN = 16  # the magnitude table covers x < 16 t: overflow probability exp(-16) per trial
_CHUNK = 1 << 16  # samples per internal batch (cache-sized temporaries)
_TRIAL_WORK = 1 << 12  # trials per round at least, once few samples are pending (see below)
_MAX_TRIALS = 64  # trials per pending sample per round at most
_INT64_MAX = (1 << 63) - 1
_NOISE_BOUND = 1 << 40  # add_noise refuses counts within this of the int64 limits

Counter = int | np.ndarray  # one counter for a batch of words, or one per word (uint64)


def _at(counter: Counter, i: int | np.integer) -> int:
    return counter if isinstance(counter, int) else int(counter[i])


def _sub(counter: Counter, idx: np.ndarray) -> Counter:
    return counter if isinstance(counter, int) else counter[idx]


def _exp_interval(g: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= exp(-g) * 2**prec <= hi`` for a rational ``g`` (any sign)."""
    if g < 0:
        lo, hi = _exp_interval(-g, prec)
        if lo == 0:
            raise InternalError("exp interval too coarse for a reciprocal")
        one = 1 << (2 * prec)
        return one // hi, -(-one // lo)
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


@lru_cache(maxsize=1 << 16)
def exp_floor(g: Fraction, bits: int) -> int:
    """``floor(exp(-g) * 2**bits)`` exactly, for a rational ``g >= 0``."""
    if g == 0:
        return 1 << bits
    prec = bits + 32
    while True:  # exp(-g) is irrational for rational g != 0, so this ends
        lo, hi = _exp_interval(g, prec)
        if lo >> (prec - bits) == hi >> (prec - bits):
            return lo >> (prec - bits)
        prec *= 2


def _threshold(g: Fraction, bits: int) -> int:
    return min(exp_floor(g, bits), (1 << bits) - 1)


@dataclass(frozen=True)
class _Tables:
    sigma2: Fraction
    t: int
    bits: int
    geom: np.ndarray  # uint64 ascending: geom[i] = T(exp(-(L - i)/t)), i.e. x = L..1
    bucket: np.ndarray  # int64 (2**K,): the magnitude for words with these top K bits; -1: search
    kbits: int  # K
    acc: np.ndarray  # uint64: acc[y] = T(exp(-(y - c)**2 / (2 sigma2))); acc[-1] == 0 = its tail

    @property
    def c(self) -> Fraction:
        return self.sigma2 / self.t

    def acc_g(self, y: int) -> Fraction:
        return (y - self.c) ** 2 / (2 * self.sigma2)


def _interval_floor(lo: int, hi: int, shift: int) -> int | None:
    a = lo >> shift
    return a if a == hi >> shift else None


@lru_cache(maxsize=64)
def _tables(sigma2: Fraction, bits: int, span: int) -> _Tables:
    """Exact thresholds for one sigma2 (products of exp intervals; exact fallback if unsure)."""
    t = isqrt(sigma2.numerator // sigma2.denominator) + 1
    prec = bits + 96
    shift = prec - bits
    one = 1 << prec

    geom: list[int] = []
    rlo, rhi = _exp_interval(Fraction(1, t), prec)
    plo, phi = one, one
    for x in range(1, span * t + 1):  # magnitude: exp(-x/t) = r**x
        plo, phi = (plo * rlo) >> prec, -((-phi * rhi) >> prec)
        v = _interval_floor(plo, phi, shift)
        v = min(v if v is not None else exp_floor(Fraction(x, t), bits), (1 << bits) - 1)
        if v == 0:
            break
        geom.append(v)

    c = sigma2 / t
    acc: list[int] = []
    # a(y+1) = a(y) * m(y), m(y) = exp(-(2(y - c) + 1) / (2 sigma2)) = e0 * e1**y
    alo, ahi = _exp_interval(c * c / (2 * sigma2), prec)
    mlo, mhi = _exp_interval((1 - 2 * c) / (2 * sigma2), prec)
    e1lo, e1hi = _exp_interval(1 / sigma2, prec)
    y = 0
    while True:
        v = _interval_floor(alo, ahi, shift)
        v = min(v if v is not None else exp_floor((y - c) ** 2 / (2 * sigma2), bits),
                (1 << bits) - 1)
        acc.append(v)
        if v == 0 and y > c:  # decreasing from here on: every later threshold is 0
            break
        alo, ahi = (alo * mlo) >> prec, -((-ahi * mhi) >> prec)
        mlo, mhi = (mlo * e1lo) >> prec, -((-mhi * e1hi) >> prec)
        y += 1
    table = np.array(geom[::-1], dtype=np.uint64)
    k = min(max(_BUCKET_BITS[0], table.size.bit_length() + 8), _BUCKET_BITS[1], bits)
    low = np.arange(1 << k, dtype=np.uint64) << np.uint64(bits - k)  # first word of each bucket
    bucket = (table.size - np.searchsorted(table, low, side="right")).astype(np.int64)
    bucket[(table >> np.uint64(bits - k)).astype(np.intp)] = -1  # a threshold inside: search
    bucket[bucket == table.size] = -1  # overflow: handled on the searched path
    return _Tables(sigma2, t, bits, table, bucket, k, np.array(acc, dtype=np.uint64))


class DiscreteGaussian:
    """Exact N_Z(0, sigma2); ``sample(source, ids)``: one value per id (Algorithm 1, line 5)."""

    def __init__(self, sigma2: object, *, _word_bits: int = _BITS, _span: int = _SPAN) -> None:
        value = to_positive_fraction(
            sigma2, "sigma2", "pass a positive number such as 4, Fraction(800, 37) or '8/0.37'")
        if value > MAX_SIGMA2:
            raise bad_argument("sigma2", sigma2, f"must be at most {MAX_SIGMA2}",
                               "use a larger privacy budget (noise scale beyond 10**4 per count)")
        if not 8 <= _word_bits <= _BITS:
            raise ValueError("_word_bits must be in [8, 63]")
        self.sigma2 = value
        self._tab = _tables(value, _word_bits, _span)
        self._bits = _word_bits

    def __repr__(self) -> str:
        return f"DiscreteGaussian(sigma2={self.sigma2})"

    def sample(self, source: RandomSource, ids: np.ndarray) -> np.ndarray:
        """int64 (len(ids),): the sample addressed by each id (same source and id: same value)."""
        if not isinstance(source, RandomSource):
            raise bad_argument("source", source, "must be a RandomSource",
                               "use RandomSource.secure()")
        u_ids = _as_ids(ids)
        out = np.empty(u_ids.size, dtype=np.int64)
        for start in range(0, u_ids.size, _CHUNK):  # ids address samples: any split works
            out[start:start + _CHUNK] = self._sample_chunk(source, u_ids[start:start + _CHUNK])
        return out

    # --- stages ----------------------------------------------------------------------------
    def _top(self, words: np.ndarray) -> np.ndarray:
        return words >> np.uint64(64 - self._bits)

    def _refine(self, source: RandomSource, id_: int, counter: int, w: int, u: int,
                gs: list[Fraction]) -> int:
        """How many ``g`` in ``gs`` have ``U < exp(-g)`` when all tie with U's first word ``u``."""
        bits, count, prefix, depth = self._bits, 0, u, 1
        while gs:
            index = _WORDS * depth + w
            if index >= MAX_WIDTH:  # probability 2**(-bits * 32768)
                raise InternalError("exact refinement ran out of words")
            prefix = (prefix << bits) | (source._word(id_, counter, index) >> (64 - bits))
            depth += 1
            still = []
            for g in gs:
                f = exp_floor(g, bits * depth)
                if prefix < f:
                    count += 1
                elif prefix == f:
                    still.append(g)
            gs = still
        return count

    def _count(self, source: RandomSource, ids: np.ndarray, counter: Counter,
               u: np.ndarray) -> np.ndarray:
        """Geometric stage: ``#{x in 1..L : U < exp(-x/t)}`` for first words ``u``, exactly."""
        geom, t = self._tab.geom, self._tab.t
        size = geom.size
        right = np.searchsorted(geom, u, side="right")
        x = (size - right).astype(np.int64)
        tie = (right > 0) & (geom[np.maximum(right - 1, 0)] == u)
        for i in np.flatnonzero(tie):  # u equals T(x) for x in x[i]+1 .. x[i]+n_tied
            left = int(np.searchsorted(geom, u[i], side="left"))
            first = int(x[i]) + 1
            gs = [Fraction(v, t) for v in range(first, first + int(right[i]) - left)]
            x[i] += self._refine(source, int(ids[i]), _at(counter, i), 0, int(u[i]), gs)
        return x

    def _geometric(self, source: RandomSource, ids: np.ndarray, counter: Counter,
                   w0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Word -> ``#{x in 1..L : U < exp(-x/t)}`` (bucket lookup, exact search if unsure),
        and the indices where it is ``L`` (table overflow)."""
        tab = self._tab
        x = np.take(tab.bucket, (w0 >> np.uint64(64 - tab.kbits)).view(np.int64))
        unsure = np.flatnonzero(x < 0)
        if unsure.size:
            x[unsure] = found = self._count(source, ids[unsure], _sub(counter, unsure),
                                            self._top(w0[unsure]))
            return x, unsure[found == tab.geom.size]
        return x, unsure

    def _magnitude(self, source: RandomSource, ids: np.ndarray, base: Counter,
                   w0: np.ndarray) -> np.ndarray:
        """Geometric magnitude, P(X >= x) = exp(-x/t); table overflow continues memorylessly
        (``base``: the trials' counters, ``round << 15``)."""
        x, over = self._geometric(source, ids, base, w0)
        stage = 1
        while over.size:
            if stage >= 1 << _STAGE_BITS:
                raise InternalError("geometric overflow ran out of counters")
            sub = ids[over]
            counter = _sub(base, over) | stage
            more, again = self._geometric(source, sub, counter,
                                          source._pairs(sub, counter, 0, 1)[:, 0])
            x[over] += more
            over = over[again]
            stage += 1
        return x

    def _sample_chunk(self, source: RandomSource, ids: np.ndarray) -> np.ndarray:
        tab = self._tab
        out = np.empty(ids.size, dtype=np.int64)
        pending: np.ndarray | None = None  # indices into ids still pending (None: all)
        pids, rnd = ids, 0
        while pids.size:
            # k trials per pending sample at once (k > 1 once few are pending: fewer rounds of
            # numpy calls); trial j is round rnd + j, with that round's words and decisions, and
            # the first accepted trial is the sample: the one-trial-per-round result, exactly
            k = max(1, min(_MAX_TRIALS, _TRIAL_WORK // pids.size))
            if rnd + k >= 1 << 32:
                raise InternalError("discrete Gaussian sampler did not terminate")
            counter: Counter = rnd << _STAGE_BITS
            tid = pids
            if k > 1:
                tid = np.repeat(pids, k)
                rounds = np.arange(rnd, rnd + k, dtype=np.uint64) << np.uint64(_STAGE_BITS)
                counter = np.tile(rounds, pids.size)
            words = source._pairs(tid, counter, 0, 1)
            x = self._magnitude(source, tid, counter, words[:, 0])
            sign = (words[:, 0] & np.uint64(1)).view(np.int64)  # 1: negative
            a = self._top(words[:, 1])
            thr = np.take(tab.acc, x, mode="clip")  # thresholds are 0 past the table's end
            accept = a < thr
            rejected = x < sign  # x == 0 and negative: the discrete Laplace counts 0 once
            for i in np.flatnonzero(a == thr):  # probability 2**-63 each
                if not rejected[i]:
                    accept[i] = self._refine(source, int(tid[i]), _at(counter, i), 1, int(a[i]),
                                             [tab.acc_g(int(x[i]))]) == 1
            accept &= ~rejected
            if k == 1:
                done = pick = np.flatnonzero(accept)
                left = np.flatnonzero(~accept)
            else:
                trials = accept.reshape(pids.size, k)
                hit = trials.any(axis=1)
                done = np.flatnonzero(hit)
                pick = done * k + trials[done].argmax(axis=1)  # the first accepted trial
                left = np.flatnonzero(~hit)
            value, negative = x[pick], -sign[pick]
            value ^= negative
            value -= negative  # -value where negative
            out[done if pending is None else pending[done]] = value
            pending = left if pending is None else pending[left]
            pids = pids[left]
            rnd += k
        return out

    def _geometric_stage(self, source: RandomSource, ids: np.ndarray) -> np.ndarray:
        """The magnitude stage alone (round 0), for tests: P(X = x) = (1 - r) r**x, r = e**-1/t."""
        u_ids = _as_ids(ids)
        return self._magnitude(source, u_ids, 0, source._pairs(u_ids, 0, 0, 1)[:, 0])


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


__all__ = ["MAX_SIGMA2", "DiscreteGaussian", "add_noise", "exp_floor", "sample"]
