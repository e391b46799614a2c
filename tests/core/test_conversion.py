"""zCDP <-> (epsilon, delta): the conversion in force never overstates privacy (issue 19).

The reference below is independent of inftda_duckdb.core.conversion: it uses CKS's delta form,
``delta(a) = exp((a - 1)(a rho - eps)) / (a - 1) * (1 - 1/a)**a`` (Canonne, Kamath, Steinke 2020,
Cor. 13), minimised at the root of its derivative ``(2a - 1) rho - eps + ln(1 - 1/a)`` (found by
float bisection, then Newton steps in 80-digit decimal arithmetic). ``(eps, delta)``-DP follows
from ``rho``-zCDP whenever ``delta(a) <= delta`` for some ``a``; the implementation instead bounds
the epsilon form at a rational order with enclosed logarithms.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from inftda_duckdb.core import conversion
from inftda_duckdb.core.accounting import (
    CONVERSION,
    CONVERSIONS,
    epsilon_from_rho,
    rho_from_epsilon_delta,
)
from inftda_duckdb.core.errors import InputError

BS = "bun-steinke-2016"
PREC = 80
EPSILONS = [Fraction(m) * Fraction(10) ** e for e in range(-3, 2) for m in (1, 2, 5)] + [
    Fraction(100)
]
DELTAS = [Fraction(1, 10**e) for e in (1, 2, 3, 4, 5, 6, 8, 10, 12, 15)] + [Fraction(1, 2)]
RHOS = [Fraction(m) * Fraction(10) ** e for e in range(-5, 2) for m in (1, 3)] + [Fraction(50)]


def dec(x: Fraction) -> Decimal:
    return Decimal(x.numerator) / Decimal(x.denominator)


def _order(rho: Fraction, eps: Fraction) -> Decimal:
    """The order a minimising CKS's delta(a): the root of (2a - 1) rho - eps + ln(1 - 1/a)."""
    r, e = float(rho), float(eps)

    def slope(log_x: float) -> float:  # a = 1 + x
        x = math.exp(log_x)
        return (2 * x + 1) * r - e - math.log1p(1 / x)

    lo, hi = -700.0, 700.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
    a = 1 + Decimal(math.exp((lo + hi) / 2))
    rd, ed = dec(rho), dec(eps)
    for _ in range(8):  # Newton in decimal: f = (2a - 1) rho - eps + ln(1 - 1/a)
        f = (2 * a - 1) * rd - ed + (1 - 1 / a).ln()
        a -= f / (2 * rd + 1 / (a * (a - 1)))
    return a


def cks_delta(rho: Fraction, eps: Fraction) -> Decimal:
    """The smallest delta CKS gives for rho-zCDP at eps (80 digits)."""
    with localcontext() as ctx:
        ctx.prec = PREC
        a = _order(rho, eps)
        rd, ed = dec(rho), dec(eps)
        return ((a - 1) * (a * rd - ed) + a * (1 - 1 / a).ln() - (a - 1).ln()).exp()


def holds(rho: Fraction, eps: Fraction, delta: Fraction) -> bool:
    """rho-zCDP implies (eps, delta)-DP by CKS (checked to 80 digits)."""
    with localcontext() as ctx:
        ctx.prec = PREC
        return cks_delta(rho, eps) <= dec(delta)


def bs_rho(eps: Fraction, delta: Fraction) -> Decimal:
    """Bun-Steinke's exact rho = (sqrt(L + eps) - sqrt(L))**2, 80 digits."""
    with localcontext() as ctx:
        ctx.prec = PREC
        big_l = (1 / dec(delta)).ln()
        return ((big_l + dec(eps)).sqrt() - big_l.sqrt()) ** 2


def non_decreasing(values: list[Fraction] | list[float]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(values))


# ---------------------------------------------------------------------------------------------
# the reference itself


def test_reference_agrees_with_the_closed_forms_it_must_dominate() -> None:
    # CKS's delta at Bun-Steinke's rho is below delta (CKS is tighter), and BS's own tail bound
    # exp(-(eps - rho)**2 / (4 rho)) at that rho equals delta.
    eps, delta = Fraction(1), Fraction(1, 10**6)
    rho = Fraction(bs_rho(eps, delta))
    assert cks_delta(rho, eps) < dec(delta) / 10
    tail = math.exp(-((1 - float(rho)) ** 2) / (4 * float(rho)))
    assert tail == pytest.approx(1e-6, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# epsilon -> rho


def test_rho_never_overstates_privacy_and_is_tight_on_a_dense_grid() -> None:
    """Every (eps, delta) of the grid: the rho returned satisfies CKS at (eps, delta) (checked
    independently); a rho larger by 1e-9 (the negative control: a conversion off in the 9th
    digit) does not, so the returned rho is also within 1e-9 of the best CKS allows."""
    for eps, delta in itertools.product(EPSILONS, DELTAS):
        rho = rho_from_epsilon_delta(eps, delta)
        assert holds(rho, eps, delta), (eps, delta, rho)
        assert not holds(rho * (1 + Fraction(1, 10**9)), eps, delta), (eps, delta, rho)


def test_rho_is_monotone_in_epsilon_and_delta() -> None:
    table = {(e, d): rho_from_epsilon_delta(e, d) for e in EPSILONS for d in DELTAS}
    for d in DELTAS:
        assert non_decreasing([table[e, d] for e in EPSILONS])
    by_delta = sorted(DELTAS)
    for e in EPSILONS:
        assert non_decreasing([table[e, d] for d in by_delta])
    # negative control: a conversion that reads delta upside down (1 - delta) is caught
    assert not non_decreasing([rho_from_epsilon_delta(1, 1 - d) for d in by_delta])


def test_rho_is_at_least_bun_steinke_everywhere() -> None:
    for eps, delta in itertools.product(EPSILONS, DELTAS):
        cks, bs = rho_from_epsilon_delta(eps, delta), rho_from_epsilon_delta(eps, delta, BS)
        assert cks >= bs
        assert dec(cks) > bs_rho(eps, delta)  # strictly better than the exact closed form
    # negative control: Bun-Steinke's own rho is not above its exact value
    one = Fraction(1, 10**6)
    assert not dec(rho_from_epsilon_delta(1, one, BS)) > bs_rho(1, one)


@pytest.mark.parametrize(
    ("eps", "delta", "gain"), [(10, "1e-10", 1.105), (1, "1e-6", 1.394), ("0.1", "1e-3", 3.290)]
)
def test_gain_over_bun_steinke_is_the_issues(eps: object, delta: str, gain: float) -> None:
    ratio = rho_from_epsilon_delta(eps, delta) / rho_from_epsilon_delta(eps, delta, BS)
    assert float(ratio) == pytest.approx(gain, abs=5e-4)


def test_bun_steinke_by_name_is_the_closed_form() -> None:
    for eps, delta in itertools.product(EPSILONS, DELTAS):
        rho = rho_from_epsilon_delta(eps, delta, BS)
        exact = bs_rho(eps, delta)
        assert dec(rho) <= exact and dec(rho) >= exact * (1 - Decimal("1e-18"))


# ---------------------------------------------------------------------------------------------
# rho -> epsilon


def test_epsilon_never_overstates_privacy_and_is_tight_on_a_dense_grid() -> None:
    """The epsilon reported for rho at delta satisfies CKS (checked independently); an epsilon
    smaller by 1e-9 (negative control) does not, unless the bound is 0 (then (0, delta)-DP
    holds)."""
    for rho, delta in itertools.product(RHOS, DELTAS):
        eps = epsilon_from_rho(rho, delta)
        assert holds(rho, Fraction(eps), delta), (rho, delta, eps)
        if eps > 0:
            assert not holds(rho, Fraction(eps) * (1 - Fraction(1, 10**9)), delta), (rho, delta)
        assert eps <= epsilon_from_rho(rho, delta, BS)


def test_epsilon_is_monotone_in_rho_and_delta() -> None:
    table = {(r, d): epsilon_from_rho(r, d) for r in RHOS for d in DELTAS}
    for d in DELTAS:
        assert non_decreasing([table[r, d] for r in RHOS])
    for r in RHOS:
        assert non_decreasing([table[r, d] for d in sorted(DELTAS, reverse=True)])
    assert not non_decreasing([epsilon_from_rho(1, d) for d in sorted(DELTAS)])  # control


def test_a_small_rho_with_a_large_delta_is_epsilon_zero() -> None:
    """CKS's bound can fall below 0: then (0, delta)-DP holds, and 0.0 is reported."""
    assert epsilon_from_rho(Fraction(1, 10**5), Fraction(1, 2)) == 0.0
    assert holds(Fraction(1, 10**5), Fraction(0), Fraction(1, 2))
    # control: not for any rho (at rho = 2 the total variation distance alone exceeds 1/2)
    assert not holds(Fraction(2), Fraction(0), Fraction(1, 2))


# ---------------------------------------------------------------------------------------------
# round trips, names, errors


@pytest.mark.parametrize("name", CONVERSIONS)
def test_round_trips_lose_at_most_a_rounding(name: str) -> None:
    for eps, delta in itertools.product(EPSILONS, DELTAS):
        back = Fraction(epsilon_from_rho(rho_from_epsilon_delta(eps, delta, name), delta, name))
        assert back <= eps * (1 + Fraction(1, 2**52))  # the float above eps at most
        assert back >= eps * (1 - Fraction(1, 10**12))
    for rho, delta in itertools.product(RHOS, DELTAS):
        eps = epsilon_from_rho(rho, delta, name)
        if eps > 0:
            again = rho_from_epsilon_delta(eps, delta, name)
            assert rho * (1 - Fraction(1, 10**12)) <= again <= rho * (1 + Fraction(1, 10**12))
    # negative control: rho by CKS read back with Bun-Steinke overstates epsilon
    assert epsilon_from_rho(rho_from_epsilon_delta(1, 1e-6), 1e-6, BS) > 1.0


def test_the_conversion_in_force_is_cks() -> None:
    assert CONVERSION == "canonne-kamath-steinke-2020"
    assert rho_from_epsilon_delta(1, 1e-6) == rho_from_epsilon_delta(1, 1e-6, CONVERSION)
    assert rho_from_epsilon_delta(1, 1e-6) > rho_from_epsilon_delta(1, 1e-6, BS)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: rho_from_epsilon_delta(1, 1e-6, "renyi"), "conversion must be one of"),
        (lambda: epsilon_from_rho(1, 1e-6, "renyi"), "conversion must be one of"),
        # the parser refuses these first (issue 15: bounded effort), naming the argument
        (lambda: epsilon_from_rho("1e-400", 1e-6), "rho must be 0 or between 1e-100 and 1e100"),
        (lambda: rho_from_epsilon_delta("1e400", 1e-6),
         "epsilon must be 0 or between 1e-100 and 1e100"),
    ],
)
def test_conversion_errors_name_the_argument(call: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        call()  # type: ignore[operator]


# ---------------------------------------------------------------------------------------------
# the exact evaluation at one order


def test_log_enclosures_contain_the_logarithm() -> None:
    for n in (2, 3, 10**6, 2**64 + 1, 10**40 + 7):
        lo, hi = conversion._ln_bounds(n, 60)
        with localcontext() as ctx:
            ctx.prec = 120
            assert dec(lo) < Decimal(n).ln() < dec(hi)
        assert hi - lo < Fraction(1, 10**55)


def test_any_order_gives_an_upper_bound_of_g() -> None:
    """At arbitrary orders (not only searched ones) the exact g bounds the true one from above
    and closely; Bun-Steinke's g is above CKS's at every order (the extra terms are negative)."""
    delta = Fraction(1, 10**7)
    for alpha in (Fraction(1001, 1000), Fraction(3, 2), Fraction(7), Fraction(10**9 + 1, 3)):
        with localcontext() as ctx:
            ctx.prec = PREC
            a, big_l = dec(alpha), (1 / dec(delta)).ln()
            true = (big_l + (a - 1) * (1 - 1 / a).ln() - a.ln()) / (a - 1)
            upper = dec(conversion._g_upper(alpha, delta, conversion.CKS))
            assert true <= upper <= true + abs(true) * Decimal("1e-45")
        assert conversion._g_upper(alpha, delta, BS) > conversion._g_upper(
            alpha, delta, conversion.CKS
        )
