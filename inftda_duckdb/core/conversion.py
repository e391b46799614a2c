"""zCDP <-> (epsilon, delta)-DP: bounds that never overstate privacy.

``rho``-zCDP implies ``(epsilon, delta)``-DP, with ``L = ln(1/delta)``, for every order ``a > 1``:

- ``"canonne-kamath-steinke-2020"`` (Canonne, Kamath, Steinke 2020, Cor. 13):
  ``epsilon = a rho + (L + (a - 1) ln(1 - 1/a) - ln a) / (a - 1)``;
- ``"bun-steinke-2016"`` (Bun, Steinke 2016, Prop. 1.3): ``epsilon = a rho + L / (a - 1)``, whose
  minimum over ``a`` (at ``a = 1 + sqrt(L / rho)``) is ``rho + 2 sqrt(rho L)``.

Both are ``epsilon = a rho + g(a)``: linear in ``rho`` at a fixed order, and *any* order gives a
valid bound. So the order is found in floating point (the root of the bound's derivative), and the
bound is then evaluated exactly at that order, a rational ``a = p/q``: each logarithm is the natural
log of an integer, enclosed between two rationals (``decimal``'s ``ln`` is correctly rounded, so
the neighbours of its result bracket the true value), and everything else is Fraction arithmetic.
Epsilon is rounded up and rho down; a poor search can only cost tightness, never soundness.
CKS's ``g`` is below Bun-Steinke's at every order (the extra terms are negative), and CKS also
tries Bun-Steinke's best order and keeps the better of the two bounds: never worse than
Bun-Steinke.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

CKS = "canonne-kamath-steinke-2020"
BUN_STEINKE = "bun-steinke-2016"
CONVERSIONS = (CKS, BUN_STEINKE)

_GUARD = 50  # decimal digits carried beyond the magnitude of the integers whose logs are taken
_ORDER_DIGITS = 20  # significant digits of a - 1 at the chosen order


# ---------------------------------------------------------------------------------------------
# exact bounds at one order


@functools.lru_cache(maxsize=256)
def _ln_bounds(n: int, digits: int) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= ln(n) <= hi`` (``n >= 1``): the correctly rounded ``ln`` at ``digits``
    significant digits and its two neighbours."""
    if n == 1:
        return Fraction(0), Fraction(0)
    with localcontext() as ctx:
        ctx.prec = digits
        r = Decimal(n).ln()
        return Fraction(r.next_minus()), Fraction(r.next_plus())


def _logs(terms: dict[int, Fraction], upper: bool) -> Fraction:
    """An upper (or lower) bound of ``sum(c * ln(n) for n, c in terms.items())``."""
    digits = _GUARD + max(len(str(n)) for n in terms)
    total = Fraction(0)
    for n, c in terms.items():
        lo, hi = _ln_bounds(n, digits)
        total += c * (hi if (c > 0) == upper else lo)
    return total


def _g_upper(alpha: Fraction, delta: Fraction, conversion: str) -> Fraction:
    """An upper bound of ``g(alpha)``, so that ``alpha rho + g`` bounds epsilon from above.

    With ``alpha = p/q``, ``delta = N/D``: ``L = ln D - ln N``, ``1/(alpha - 1) = q/(p - q)``,
    ``ln(1 - 1/alpha) = ln(p - q) - ln p``, ``ln alpha = ln p - ln q``, so
    ``g_BS = c (ln D - ln N)`` and ``g_CKS = c (ln D - ln N - ln p + ln q) + ln(p - q) - ln p``
    with ``c = q/(p - q)``.
    """
    p, q = alpha.numerator, alpha.denominator
    big_d, big_n = delta.denominator, delta.numerator
    c = Fraction(q, p - q)
    terms: dict[int, Fraction] = {}

    def add(n: int, coef: Fraction) -> None:
        terms[n] = terms.get(n, Fraction(0)) + coef

    add(big_d, c)
    add(big_n, -c)
    if conversion == CKS:
        add(p, -c - 1)
        add(q, c)
        add(p - q, Fraction(1))
    return _logs(terms, upper=True)


# ---------------------------------------------------------------------------------------------
# the order (floating point: any order is valid, the search only buys tightness)
#
# With ``x = a - 1`` and ``c = 1`` for CKS (0 for Bun-Steinke), ``g = (L - c ln a) / x -
# c ln(1 + 1/x)`` and ``g' = -(L - c ln a) / x**2``. The best order for a given rho solves
# ``rho x**2 = L - c ln(1 + x)``; putting that rho back in, the order that is best for epsilon
# solves ``epsilon = (L - c ln(1 + x)) (1 + 2 x) / x**2 - c ln(1 + 1/x)``. Both sides are
# monotone in x, so each is a bisection over ``log x``.


def _bisect(f: Callable[[float], float]) -> float | None:
    """``log x`` where ``f`` changes sign from negative to positive (``f(log x)`` increasing)."""
    lo, hi = -300.0, 300.0  # x from 1e-130 to 1e130
    try:
        if not f(lo) < 0 < f(hi):
            return None
        for _ in range(2000):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    return (lo + hi) / 2


def _excess(x: float, big_l: float, c: int) -> float:
    """``L - c ln(1 + x)`` (the part of L the order leaves)."""
    return big_l - c * math.log1p(x)


def _order_for_rho(rho: float, big_l: float, c: int) -> float | None:
    return _bisect(lambda t: rho * math.exp(2 * t) - _excess(math.exp(t), big_l, c))


def _order_for_epsilon(eps: float, big_l: float, c: int) -> float | None:
    def gap(t: float) -> float:  # epsilon at which order 1 + e**t is best, minus the target
        x = math.exp(t)
        best = _excess(x, big_l, c) * (1 + 2 * x) / (x * x) - c * math.log1p(1 / x)
        return eps - best

    return _bisect(gap)


def _orders(
    conversion: str, search: Callable[[float, float, int], float | None], value: float,
    big_l: float,
) -> list[Fraction]:
    """Rational candidate orders ``1 + x`` (``x`` cut to 20 significant digits): Bun-Steinke's
    best, and for CKS its own."""
    out = []
    for name in _names(conversion):
        t = search(value, big_l, int(name == CKS))
        if t is None:
            continue
        step = Fraction(f"{math.exp(t):.{_ORDER_DIGITS - 1}e}")
        if step > 0:
            out.append(1 + step)
    return out


def _floats(*values: Fraction) -> list[float] | None:
    try:
        out = [float(v) for v in values]
    except OverflowError:
        return None
    return out if all(0 < v < math.inf for v in out) else None


# ---------------------------------------------------------------------------------------------
# the two directions


def epsilon_upper(rho: Fraction, delta: Fraction, conversion: str = CKS) -> Fraction:
    """An exact upper bound of the smallest epsilon that ``rho``-zCDP gives at ``delta``
    (the minimum over the candidate orders of ``a rho + g(a)``, at least 0)."""
    _check(conversion)
    fl = _floats(rho, delta)
    if fl is None:
        raise ValueError(f"rho = {rho} or delta = {delta} is out of the floating-point range")
    best: Fraction | None = None
    for alpha in _orders(conversion, _order_for_rho, fl[0], -math.log(fl[1])):
        for name in _names(conversion):
            bound = alpha * rho + _g_upper(alpha, delta, name)
            best = bound if best is None else min(best, bound)
    if best is None:
        raise ValueError(f"no order found for rho = {rho}, delta = {delta}")
    # a bound below 0 means (0, delta)-DP: the order's delta only falls as epsilon grows
    return max(best, Fraction(0))


def rho_lower(epsilon: Fraction, delta: Fraction, conversion: str = CKS) -> Fraction:
    """An exact lower bound of the largest rho whose ``conversion`` epsilon at ``delta`` is at
    most ``epsilon`` (the maximum over the candidate orders of ``(epsilon - g(a)) / a``);
    0 or less when none is found."""
    _check(conversion)
    fl = _floats(epsilon, delta)
    if fl is None:
        raise ValueError(f"epsilon = {epsilon} or delta = {delta} is out of range")
    best = Fraction(0)
    for alpha in _orders(conversion, _order_for_epsilon, fl[0], -math.log(fl[1])):
        for name in _names(conversion):
            best = max(best, (epsilon - _g_upper(alpha, delta, name)) / alpha)
    return best


def _names(conversion: str) -> tuple[str, ...]:
    """The bounds tried at each order: CKS keeps the better of its own and Bun-Steinke's."""
    return (BUN_STEINKE,) if conversion == BUN_STEINKE else (CKS, BUN_STEINKE)


def _check(conversion: str) -> None:
    if conversion not in CONVERSIONS:
        raise ValueError(f"unknown conversion {conversion!r}; known: {', '.join(CONVERSIONS)}")
