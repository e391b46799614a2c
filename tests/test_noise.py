"""Discrete Gaussian: validation, exact tables, addressing, add_noise (laws: statistical/)."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb import noise
from inftda_duckdb.errors import InputError
from inftda_duckdb.noise import DiscreteGaussian, add_noise, exp_floor, sample
from inftda_duckdb.randomness import RandomSource

SIGMA2S = [Fraction(1, 100), Fraction(1, 2), Fraction(2, 3), 4, 6, 40, 400, Fraction(800, 37),
           10**6]


def decimal_exp_floor(g: Fraction, bits: int) -> int:
    """floor(exp(-g) * 2**bits) with the decimal module (correctly rounded exp), independently."""
    for digits in (60, 120, 400):
        with localcontext() as ctx:
            ctx.prec = digits
            v = (Decimal(-g.numerator) / Decimal(g.denominator)).exp() * (Decimal(2) ** bits)
            f = int(v)  # v > 0: truncation is floor
            margin = Decimal(10) ** (len(str(f)) - digits + 5)
            if (f == 0 or v - f > margin) and f + 1 - v > margin:
                return f
    raise AssertionError("undecided")


def threshold(g: Fraction, bits: int) -> int:
    return min(decimal_exp_floor(g, bits), 2**bits - 1) if g else 2**bits - 1


@pytest.mark.parametrize("bad", [0, -1, Fraction(-1, 3), float("nan"), float("inf"), "-inf",
                                 "abc", None, True, [4], "0"])
def test_invalid_sigma2_is_refused_naming_the_value(bad):
    with pytest.raises(InputError, match="sigma2") as info:
        DiscreteGaussian(bad)
    assert repr(bad) in str(info.value)
    with pytest.raises(InputError, match="sigma2"):
        sample(bad, 3)


def test_sigma2_is_taken_exactly():
    assert DiscreteGaussian(0.37).sigma2 == Fraction(37, 100)
    assert DiscreteGaussian("8/0.37").sigma2 == Fraction(800, 37)
    assert DiscreteGaussian(Fraction(8) / Fraction("0.37")).sigma2 == Fraction(800, 37)
    with pytest.raises(InputError, match="at most"):
        DiscreteGaussian(10**8 + 1)


@pytest.mark.parametrize("g", [Fraction(0), Fraction(1, 3), Fraction(1, 1001), Fraction(355, 113),
                               Fraction(10**6 + 1, 7), Fraction(-1, 2)])
@pytest.mark.parametrize("bits", [8, 63, 200])
def test_exp_floor_matches_an_independent_decimal_computation(g, bits):
    if g < 0:  # exp(1/2) > 1: checks the reciprocal path of the interval code
        lo, hi = noise._exp_interval(g, bits)
        assert lo <= decimal_exp_floor(g, bits) <= hi <= lo + 8
        return
    expected = 2**bits if g == 0 else decimal_exp_floor(g, bits)
    assert exp_floor(g, bits) == expected


@pytest.mark.parametrize("sigma2", SIGMA2S)
@pytest.mark.parametrize("bits", [63, 12, 8])
def test_threshold_tables_match_exact_recomputation(sigma2, bits):
    if sigma2 == 10**6 and bits == 63:
        pytest.skip("covered by a sparse check below (table of 16k + 10k entries)")
    tab = noise._tables(Fraction(sigma2), bits, noise._SPAN)
    s = Fraction(sigma2)
    t = math.isqrt(s.numerator // s.denominator) + 1
    assert t == tab.t and t - 1 <= math.sqrt(s) < t
    geom = [int(v) for v in tab.geom[::-1]]  # x = 1..L
    assert geom == [threshold(Fraction(x, t), bits) for x in range(1, len(geom) + 1)]
    # the table ends at 16 t or where the next threshold would be 0 (then overflow restarts it)
    assert len(geom) == noise._SPAN * t or threshold(Fraction(len(geom) + 1, t), bits) == 0
    c = s / t
    acc = [int(v) for v in tab.acc]
    assert acc == [threshold((y - c) ** 2 / (2 * s), bits) for y in range(len(acc))]
    assert acc[-1] == 0 and len(acc) - 1 > c  # every later threshold is 0 too (decreasing)
    # bucket lookup: a bucket has a value only if every word in it has that magnitude
    k = tab.kbits
    table = tab.geom
    assert len(tab.bucket) == 2**k and np.all(tab.bucket < table.size)  # overflow: searched
    for h in np.flatnonzero(tab.bucket >= 0)[:: max(1, len(tab.bucket) // 4096)]:
        lo_word, hi_word = h << (bits - k), ((h + 1) << (bits - k)) - 1
        for word in (lo_word, hi_word):
            assert tab.bucket[h] == table.size - np.searchsorted(table, np.uint64(word), "right")
    assert np.all(tab.bucket[(table >> np.uint64(bits - k)).astype(np.intp)] == -1)


def test_large_sigma2_tables_match_on_a_sample_of_entries():
    s = Fraction(10**6)
    tab = noise._tables(s, 63, noise._SPAN)
    t, c = tab.t, s / tab.t
    size = tab.geom.size
    assert t == 1001 and size == noise._SPAN * t
    for x in (1, 2, 500, 1001, 7777, size):
        assert int(tab.geom[size - x]) == threshold(Fraction(x, t), 63)
    for y in (0, 1, 998, 999, 1000, 5000, tab.acc.size - 2, tab.acc.size - 1):
        assert int(tab.acc[y]) == threshold((y - c) ** 2 / (2 * s), 63)


@pytest.mark.parametrize("bits", [63, 8])
def test_same_seed_same_ids_same_samples_whatever_the_batching(bits, monkeypatch):
    dist = DiscreteGaussian(4, _word_bits=bits)
    ids = np.random.default_rng(0).choice(2**40, size=20_000, replace=False).astype(np.uint64)
    full = dist.sample(RandomSource.from_seed(11), ids)
    assert full.dtype == np.int64 and full.shape == ids.shape
    assert np.array_equal(dist.sample(RandomSource.from_seed(11), ids), full)
    source = RandomSource.from_seed(11)
    pieces = np.concatenate([dist.sample(source, part) for part in np.array_split(ids, 7)])
    assert np.array_equal(pieces, full)
    perm = np.random.default_rng(1).permutation(ids.size)
    assert np.array_equal(dist.sample(source, ids[perm]), full[perm])
    monkeypatch.setattr(noise, "_CHUNK", 999)  # internal chunks change nothing either
    assert np.array_equal(dist.sample(source, ids), full)
    assert not np.array_equal(dist.sample(RandomSource.from_seed(12), ids), full)


def test_sample_function_and_secure_default():
    a, b = sample(4, 1000), sample(4, 1000)
    assert a.dtype == np.int64 and a.shape == (1000,)
    assert not np.array_equal(a, b)  # two fresh secure sources
    seeded = RandomSource.from_seed(2)
    assert np.array_equal(sample(4, 50, seeded),
                          DiscreteGaussian(4).sample(seeded, np.arange(50)))
    assert sample(4, 0).shape == (0,)
    with pytest.raises(InputError, match="n "):
        sample(4, -1)
    with pytest.raises(InputError, match="source"):
        DiscreteGaussian(4).sample("seed", np.arange(3))  # type: ignore[arg-type]


@pytest.mark.parametrize("block", [1, 7, 1 << 20])
def test_add_noise_in_place_equals_counts_plus_addressed_samples(block):
    counts = np.arange(-50, 1000, dtype=np.int64)
    before = counts.copy()
    source = RandomSource.from_seed(3)
    add_noise(counts, Fraction(9, 2), source, block=block)
    expected = before + DiscreteGaussian(Fraction(9, 2)).sample(source, np.arange(before.size))
    assert np.array_equal(counts, expected)
    ids = np.arange(before.size, dtype=np.uint64) * 1000 + 17
    again = before.copy()
    add_noise(again, Fraction(9, 2), source, ids=ids, block=block)
    assert np.array_equal(again, before + DiscreteGaussian(Fraction(9, 2)).sample(source, ids))


def test_add_noise_refuses_bad_input_and_overflow_before_writing():
    source = RandomSource.from_seed(0)
    with pytest.raises(InputError, match="counts"):
        add_noise(np.zeros(3), 4, source)
    with pytest.raises(InputError, match="counts"):
        add_noise([1, 2], 4, source)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="ids"):
        add_noise(np.zeros(3, dtype=np.int64), 4, source, ids=np.arange(2))
    with pytest.raises(InputError, match="block"):
        add_noise(np.zeros(3, dtype=np.int64), 4, source, block=0)
    with pytest.raises(InputError, match="sigma2"):
        add_noise(np.zeros(3, dtype=np.int64), -4, source)
    for extreme in (np.iinfo(np.int64).max, np.iinfo(np.int64).min):
        counts = np.array([0, 5, extreme], dtype=np.int64)
        with pytest.raises(OverflowError):
            add_noise(counts, 4, source, block=1)
        assert counts.tolist() == [0, 5, extreme]  # nothing written


def test_distinct_ids_and_derived_sources_are_uncorrelated():
    # |corr| < 5 / sqrt(n) for independent samples (false-failure rate ~ 6e-7 per pair).
    # Negative control: the same source and ids give correlation 1.
    n = 200_000
    dist, source = DiscreteGaussian(40), RandomSource.from_seed(9)
    ids = np.arange(n, dtype=np.uint64)
    base = dist.sample(source, ids).astype(float)
    others = [dist.sample(source, ids + np.uint64(n)), dist.sample(source.derive(1), ids),
              dist.sample(source.derive(2), ids), dist.sample(source.derive(1, 0), ids)]
    for other in others:
        assert abs(np.corrcoef(base, other)[0, 1]) < 5 / math.sqrt(n)
    assert np.corrcoef(base, dist.sample(source, ids))[0, 1] == pytest.approx(1.0)
    # neighbouring ids (parent_id * |X_k| + child_code) are independent too
    assert abs(np.corrcoef(base[:-1], base[1:])[0, 1]) < 5 / math.sqrt(n)


def test_concurrent_threads_get_the_addressed_samples():
    # DuckDB calls UDFs from several threads: no shared cipher state, same values as serially.
    from concurrent.futures import ThreadPoolExecutor

    source, dist = RandomSource.from_seed(4), DiscreteGaussian(Fraction(8, 3))
    parts = np.array_split(np.arange(400_000, dtype=np.uint64), 16)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda p: dist.sample(source, p), parts))
    assert np.array_equal(np.concatenate(got), dist.sample(source, np.arange(400_000)))


@pytest.mark.parametrize("kw", [{}, {"_word_bits": 8}, {"_span": 1}])
def test_several_trials_per_round_give_the_one_trial_result(monkeypatch, kw):
    # once few samples are pending, a round draws k trials of each (trial j = round r + j) and
    # keeps the first accepted: exactly the one-trial-per-round sample, ties and overflows too
    dist = DiscreteGaussian(Fraction(800, 37), **kw)
    ids = np.arange(3000, dtype=np.uint64) * 7919
    runs = []
    for work in (0, noise._TRIAL_WORK, 1 << 30):  # k = 1 always; the default; k = 64 always
        monkeypatch.setattr(noise, "_TRIAL_WORK", work)
        runs.append(dist.sample(RandomSource.from_seed(5), ids))
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])
    assert not np.array_equal(runs[0], dist.sample(RandomSource.from_seed(6), ids))
