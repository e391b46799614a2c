"""Discrete Gaussian: validation, exact tables, addressing, add_noise (laws: statistical/)."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core import noise
from inftda_duckdb.core.errors import InputError, shown
from inftda_duckdb.core.noise import DiscreteGaussian, add_noise, sample
from inftda_duckdb.core.randomness import RandomSource

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


def decimal_cdf_floors(sigma2: Fraction, bits: int, count: int) -> list[int]:
    """floor(F(a) * 2**bits) for a < count, F the distribution function of |N_Z(0, sigma2)|, with
    the decimal module (correctly rounded exp; the terms left out weigh < 10**-digits)."""
    for digits in (60, 120, 400):
        with localcontext() as ctx:
            ctx.prec = digits + 10
            big = math.isqrt(int(5 * digits * sigma2) + 1) + count + 3
            w = [(Decimal(-y * y * sigma2.denominator) / Decimal(2 * sigma2.numerator)).exp()
                 for y in range(big + 1)]
            z = w[0] + 2 * sum(w[1:])
            out, c, scale = [], w[0], Decimal(2) ** bits
            for a in range(count):
                if a:
                    c += 2 * w[a]
                v = c / z * scale
                f = int(v)
                margin = Decimal(10) ** (len(str(f)) - digits + 5)
                if not ((f == 0 or v - f > margin) and f + 1 - v > margin):
                    break
                out.append(f)
            if len(out) == count:
                return out
    raise AssertionError("undecided")


@pytest.mark.parametrize("bad", [0, -1, Fraction(-1, 3), float("nan"), float("inf"), "-inf",
                                 "abc", None, True, [4], "0"])
def test_invalid_sigma2_is_refused_naming_the_value(bad):
    with pytest.raises(InputError, match="sigma2") as info:
        DiscreteGaussian(bad)
    assert shown(bad) in str(info.value)  # as a person writes it: -1/3, not Fraction(-1, 3)
    with pytest.raises(InputError, match="sigma2"):
        sample(bad, 3)


def test_sigma2_is_taken_exactly():
    assert DiscreteGaussian(0.37).sigma2 == Fraction(37, 100)
    assert DiscreteGaussian("8/0.37").sigma2 == Fraction(800, 37)
    assert DiscreteGaussian(Fraction(8) / Fraction("0.37")).sigma2 == Fraction(800, 37)
    with pytest.raises(InputError, match="at most"):
        DiscreteGaussian(10**8 + 1)


@pytest.mark.parametrize("g", [Fraction(0), Fraction(1, 3), Fraction(1, 1001), Fraction(355, 113),
                               Fraction(10**6 + 1, 7)])
@pytest.mark.parametrize("bits", [8, 63, 200])
def test_exp_interval_brackets_an_independent_decimal_computation(g, bits):
    lo, hi = noise._exp_interval(g, bits)
    exact = 2**bits if g == 0 else decimal_exp_floor(g, bits)
    assert lo <= exact <= hi <= lo + 8


@pytest.mark.parametrize("sigma2", [Fraction(1, 100), Fraction(1, 2), Fraction(4), Fraction(400),
                                    Fraction(10**6)])
def test_cdf_sums_bracket_z_and_c(sigma2):
    # the interval sums contain the decimal values of C(a) and Z, and are tight
    prec = 63 + noise._guard(sigma2)
    clo, chi, zlo, zhi = noise._cdf_sums(sigma2, prec, noise._TAIL)
    with localcontext() as ctx:
        ctx.prec = 80
        s = Decimal(sigma2.numerator) / Decimal(sigma2.denominator)
        big = math.isqrt(int(400 * sigma2) + 1) + 3
        w = [(Decimal(-y * y) / (2 * s)).exp() for y in range(big + 1)]
        scale = Decimal(2) ** prec  # exact: < 80 digits
        z = (w[0] + 2 * sum(w[1:])) * scale
        assert zlo <= z <= zhi and zhi - zlo < 2 ** (prec - 90)
        for a in {0, 1, len(clo) // 2, len(clo) - 1}:
            assert clo[a] <= (w[0] + 2 * sum(w[1:a + 1])) * scale <= chi[a]


@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(4), Fraction(400)])
def test_more_precision_narrows_z(sigma2):
    # the exact fallback doubles the guard bits when an interval cannot decide a floor: that
    # must narrow the interval of Z (tail bound included) by about as many bits
    widths = []
    for guard in (80, 160, 320):
        prec = 63 + guard
        _, _, zlo, zhi = noise._cdf_sums(sigma2, prec, noise._TAIL)
        widths.append(Fraction(zhi - zlo, 2**prec))
    assert widths[1] < widths[0] / 2**70 and widths[2] < widths[1] / 2**150


@pytest.mark.parametrize(("sigma2", "a"), [
    (Fraction(4), 0), (Fraction(4), 3), (Fraction(1, 100), 0), (Fraction(800, 37), 11),
    (Fraction(400), 150)])
@pytest.mark.parametrize("bits", [8, 63, 126, 200])
def test_cdf_floor_matches_an_independent_decimal_computation(sigma2, a, bits):
    assert noise.cdf_floor(sigma2, a, bits) == decimal_cdf_floors(sigma2, bits, a + 1)[a]


@pytest.mark.parametrize("sigma2", SIGMA2S)
@pytest.mark.parametrize("bits", [63, 12, 8])
def test_threshold_tables_match_exact_recomputation(sigma2, bits):
    if sigma2 == 10**6 and bits == 63:
        pytest.skip("covered by a sparse check below (a table of 9k entries)")
    s = Fraction(sigma2)
    tab = noise._tables(s, bits)
    cdf = [int(v) for v in tab.cdf]
    assert cdf == decimal_cdf_floors(s, bits, len(cdf))
    # the table ends at the first threshold 2**bits - 1 (all later ones equal it)
    assert cdf[-1] == 2**bits - 1 and (len(cdf) == 1 or cdf[-2] < 2**bits - 1)
    # bucket lookup: a bucket has a value only if every word in it has that magnitude
    k, table = tab.kbits, tab.cdf
    assert len(tab.bucket) == 2**k and np.all(tab.bucket < table.size)
    for h in np.flatnonzero(tab.bucket >= 0)[:: max(1, len(tab.bucket) // 4096)]:
        lo_word, hi_word = h << (bits - k), ((h + 1) << (bits - k)) - 1
        for word in (lo_word, hi_word):
            assert tab.bucket[h] == np.searchsorted(table, np.uint64(word), "left")
            assert word not in cdf  # no tie to refine
    assert np.all(tab.bucket[(table >> np.uint64(bits - k)).astype(np.intp)] == -1)
    # the hot path's table, indexed by [sign bit | K bits]: +magnitude, -magnitude, or search
    plus, minus = tab.signed[: 2**k], tab.signed[2**k :]
    assert np.array_equal(plus == noise._SEARCH, tab.bucket < 0)
    assert np.array_equal(minus == noise._SEARCH, tab.bucket < 0)
    assert np.array_equal(plus[tab.bucket >= 0], tab.bucket[tab.bucket >= 0])
    assert np.array_equal(minus[tab.bucket >= 0], -tab.bucket[tab.bucket >= 0])
    # the numpy path reads the same table in the narrowest integer type (int8 up to sigma2 ~
    # 10**3: in cache beside a block's AES output): the same values, the type's minimum where
    # it searches
    small, fits = tab.small, [t for t in (np.int8, np.int16, np.int32, np.int64)
                              if int(tab.bucket.max()) < np.iinfo(t).max]
    assert small.dtype == fits[0] and (sigma2 > 1000 or small.dtype == np.int8)
    marker = np.iinfo(small.dtype).min
    assert np.array_equal(small == marker, tab.signed == noise._SEARCH)
    assert np.array_equal(small[small != marker], tab.signed[tab.signed != noise._SEARCH])


def test_large_sigma2_table_matches_on_a_sample_of_entries():
    s = Fraction(10**6)
    table = noise._tables(s, 63).cdf
    exact = decimal_cdf_floors(s, 63, table.size)
    for a in (0, 1, 500, 1000, 5000, table.size - 2, table.size - 1):
        assert int(table[a]) == exact[a]
    assert int(table[-1]) == 2**63 - 1 > int(table[-2])


def test_tiny_sigma2_needs_no_huge_precision():
    # rho = 1e6 on 3 levels: F(0) = 1 - 2**-240000, whose floor is decided by F < 1 alone
    s = Fraction(3, 10**6)
    assert noise._tables(s, 63).cdf.tolist() == [2**63 - 1]
    assert noise.cdf_floor(s, 0, 200) == 2**200 - 1
    for bits in (63, 8):  # 8 bits: the word 255 (1 in 256) is refined on further words
        samples = DiscreteGaussian(s, _word_bits=bits).sample(RandomSource.from_seed(1),
                                                              np.arange(10**5))
        assert not samples.any()


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


@pytest.mark.parametrize("bits", [63, 8])
def test_hot_path_equals_sample_and_reads_sign_and_magnitude_from_the_word(bits):
    # the blocks of a release write addresses into the thread's AES input and sample them
    dist, source = DiscreteGaussian(Fraction(7, 2), _word_bits=bits), RandomSource.from_seed(6)
    ids = np.random.default_rng(2).choice(2**50, size=30_000, replace=False).astype(np.uint64)
    noise.address_buffer(ids.size)[:] = ids
    hot = dist.sample_addressed(source, ids.size, np.empty(ids.size, np.int64))
    assert np.array_equal(hot, dist.sample(source, ids))
    # the sign is the word's top bit, the magnitude's bits follow it
    w0 = source.words(ids, 0, 1)[:, 0]
    assert np.array_equal(np.sign(hot[hot != 0]), np.where(w0[hot != 0] >> np.uint64(63), -1, 1))
    u = (w0 >> np.uint64(63 - bits)) & np.uint64(2**bits - 1)
    table = dist._tab.cdf
    simple = table[np.minimum(np.searchsorted(table, u), table.size - 1)] != u  # no tie
    magnitude = np.searchsorted(table, u, side="left")
    assert np.array_equal(np.abs(hot)[simple], magnitude[simple])


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
