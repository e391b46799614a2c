"""Goodness of fit of the noise against the exact discrete Gaussian law, rare paths forced too.

The reference laws are computed here, independently of inftda_duckdb.core.noise, with the
decimal module (50 significant digits, correctly rounded exp). Chi-square p-values come from a
small regularised incomplete-gamma routine checked below against closed forms (no scipy).

Significance: every goodness-of-fit test rejects at ALPHA = 1e-4, so with a fresh seed each test
would fail falsely with probability 1e-4; the seeds are fixed, so the outcomes are reproducible.
Each test family has a negative control (a deliberately wrong sampler) that must fail the same test.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from inftda_duckdb.core.noise import DiscreteGaussian
from inftda_duckdb.core.randomness import RandomSource

ALPHA = 1e-4  # per-test false-failure rate of every goodness-of-fit test in this file
Z_BOUND = 4.42  # two-sided normal quantile for 1e-5: mean/variance checks
SIGMA2S = [Fraction(1, 2), Fraction(2, 3), Fraction(4), Fraction(6), Fraction(40), Fraction(400),
           Fraction(8) / Fraction("0.37")]


def chi2_sf(x: float, dof: int) -> float:
    """P(chi2_dof > x) = Q(dof/2, x/2) (series / continued fraction, Numerical Recipes 6.2)."""
    a, z = dof / 2, x / 2
    if z <= 0:
        return 1.0
    log_front = -z + a * math.log(z) - math.lgamma(a)
    if z < a + 1:
        term = total = 1 / a
        k = a
        while term > total * 1e-17:
            k += 1
            term *= z / k
            total += term
        return max(0.0, 1 - total * math.exp(log_front))
    tiny = 1e-300
    b, c, d = z + 1 - a, 1 / tiny, 1 / (z + 1 - a)
    h = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = d if abs(d) > tiny else tiny
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(log_front) * h


@cache
def gaussian_pmf(sigma2: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """Values -Y..Y and exact N_Z(0, sigma2) probabilities (mass beyond Y < e**-100)."""
    big = math.isqrt(int(sigma2 * 200)) + 3
    with localcontext() as ctx:
        ctx.prec = 50
        w = [(Decimal(-y * y * sigma2.denominator) / Decimal(2 * sigma2.numerator)).exp()
             for y in range(big + 1)]
        z = w[0] + 2 * sum(w[1:])
        p = [float(v / z) for v in w]
    values = np.arange(-big, big + 1)
    return values, np.array([p[abs(int(y))] for y in values])


def chi_square(samples: np.ndarray, values: np.ndarray,
               probs: np.ndarray) -> tuple[float, int, float]:
    """Statistic, degrees of freedom and p-value; the tails are merged so every bin expects >= 5."""
    n = samples.size
    expected = n * probs
    ok = np.flatnonzero(expected >= 5)
    lo, hi = int(ok[0]), int(ok[-1])
    assert ok.size == hi - lo + 1  # unimodal laws: the well-filled values are contiguous
    bins = expected[lo:hi + 1].copy()
    bins[0] += expected[:lo].sum()
    bins[-1] += expected[hi + 1:].sum()
    shifted = np.clip(samples, values[lo], values[hi]) - values[lo]
    observed = np.bincount(shifted, minlength=bins.size)
    stat = float(((observed - bins) ** 2 / bins).sum())
    return stat, bins.size - 1, chi2_sf(stat, bins.size - 1)


def fits(samples: np.ndarray, sigma2: Fraction) -> bool:
    return chi_square(samples, *gaussian_pmf(sigma2))[2] > ALPHA


def draw(sigma2: Fraction, n: int, seed: int, **private: int) -> np.ndarray:
    return DiscreteGaussian(sigma2, **private).sample(RandomSource.from_seed(seed), np.arange(n))


# --- the p-value routine -------------------------------------------------------------------------
def test_chi2_sf_matches_closed_forms():
    for dof in range(2, 301, 2):  # even dof: Q(m, z) = exp(-z) sum_{j<m} z**j / j!
        for x in (0.5, dof * 0.8, dof, dof * 1.5 + 10, dof * 3.0 + 40):
            m, z = dof // 2, x / 2
            exact = math.fsum(math.exp(-z + j * math.log(z) - math.lgamma(j + 1)) for j in range(m))
            assert chi2_sf(x, dof) == pytest.approx(exact, rel=1e-9, abs=1e-300)
    for x in (0.1, 1.0, 3.84, 10.0, 30.0):
        assert chi2_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-9)
        assert chi2_sf(x, 3) == pytest.approx(
            math.erfc(math.sqrt(x / 2)) + math.sqrt(2 * x / math.pi) * math.exp(-x / 2), rel=1e-9)
    assert chi2_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-9)


# --- the whole sampler ---------------------------------------------------------------------------
@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", SIGMA2S, ids=str)
def test_discrete_gaussian_fits_exact_pmf_1e6(sigma2):
    assert fits(draw(sigma2, 10**6, seed=1), sigma2)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", SIGMA2S, ids=str)
def test_discrete_gaussian_fits_exact_pmf_1e7(sigma2):
    assert fits(draw(sigma2, 10**7, seed=2), sigma2)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(4), Fraction(40), Fraction(400)],
                         ids=str)
def test_negative_control_sigma_off_by_ten_percent_fails(sigma2):
    wrong = draw(sigma2 * Fraction(121, 100), 10**6, seed=1)  # sigma * 1.1
    assert fits(draw(sigma2, 10**6, seed=1), sigma2) and not fits(wrong, sigma2)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(4), Fraction(6)], ids=str)
def test_negative_control_rounded_continuous_normal_fails(sigma2):
    rounded = np.rint(np.random.default_rng(0).normal(0, math.sqrt(sigma2), 10**6)).astype(np.int64)
    assert not fits(rounded, sigma2)


@pytest.mark.slow
@pytest.mark.statistical
def test_negative_control_rounded_continuous_normal_fails_at_1e7():
    # rint(normal) has variance sigma2 + 1/12: at 1e7 draws visible up to sigma2 ~ 20; use 10.
    rounded = np.rint(np.random.default_rng(0).normal(0, math.sqrt(10), 10**7)).astype(np.int64)
    assert not fits(rounded, Fraction(10))


def _moments(sigma2: Fraction) -> tuple[float, float]:
    values, probs = gaussian_pmf(sigma2)
    v = values.astype(float)
    return float((probs * v**2).sum()), float((probs * v**4).sum())


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [Fraction(1, 100), Fraction(1, 2), Fraction(4), Fraction(40),
                                    Fraction(800, 37), Fraction(10**6)], ids=str)
def test_mean_zero_and_exact_variance(sigma2):
    # |mean| and |variance - Var| within 4.42 standard errors: false-failure rate 1e-5 each.
    n = 10**6
    var, m4 = _moments(sigma2)
    assert var <= sigma2  # the discrete Gaussian's variance is below sigma2

    def ok(x: np.ndarray) -> bool:
        x = x.astype(float)
        mean_ok = abs(x.mean()) <= Z_BOUND * math.sqrt(var / n) + 1e-12
        var_ok = abs((x**2).mean() - var) <= Z_BOUND * math.sqrt((m4 - var**2) / n) + 1e-12
        return mean_ok and var_ok

    assert ok(draw(sigma2, n, seed=3))
    assert not ok(draw(sigma2 * Fraction(121, 100), n, seed=3)) or sigma2 < Fraction(1, 10)
    if sigma2 <= 4:  # variance sigma2 + 1/12: detectable at 1e6 draws for small sigma2
        rounded = np.rint(np.random.default_rng(1).normal(0, math.sqrt(sigma2), n))
        assert not ok(rounded) or sigma2 < Fraction(1, 10)


# --- rare paths forced: 8- and 12-bit words make ties and the end of the table common ----------
@pytest.mark.statistical
@pytest.mark.parametrize(("sigma2", "bits", "n"), [
    (Fraction(1, 2), 8, 200_000), (Fraction(4), 8, 200_000), (Fraction(40), 8, 200_000),
    (Fraction(6), 12, 400_000), (Fraction(800, 37), 12, 400_000)], ids=str)
def test_short_words_take_the_rare_paths_and_stay_exact(sigma2, bits, n, monkeypatch):
    calls = {"refine": 0, "end": 0}
    refine = DiscreteGaussian._refine

    def counting_refine(self, source, id_, u, a):
        calls["refine"] += 1
        calls["end"] += u == 2**bits - 1  # a word past the table's last threshold
        return refine(self, source, id_, u, a)

    monkeypatch.setattr(DiscreteGaussian, "_refine", counting_refine)
    samples = draw(sigma2, n, seed=5, _word_bits=bits)
    # each of the table's distinct thresholds is hit with probability 2**-bits per sample: the
    # counts are Poisson with means >= 97, so half the mean is missed with probability < 1e-6
    distinct = np.unique(DiscreteGaussian(sigma2, _word_bits=bits)._tab.cdf).size
    assert calls["refine"] > n * distinct / 2**bits / 2 and calls["end"] > n / 2**bits / 2
    assert fits(samples, sigma2)


@pytest.mark.statistical
def test_negative_control_short_words_without_exact_ties_fail(monkeypatch):
    # Resolving every 8-bit tie as "U < F(a)" (i.e. using the truncated thresholds as if exact)
    # biases the law: the same test must reject it.
    monkeypatch.setattr(DiscreteGaussian, "_refine", lambda self, source, id_, u, a: a)
    assert not fits(draw(Fraction(4), 10**6, seed=5, _word_bits=8), Fraction(4))
