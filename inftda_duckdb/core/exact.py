"""Exact numbers: user-supplied budgets and variances as :class:`fractions.Fraction`.

A privacy budget must never be rounded through floating point on its way to the noise scale or the
ledger. Python floats are converted through their shortest decimal representation (``0.37`` becomes
``37/100``, the number the user typed); strings may be decimals (``"0.37"``, ``"1e-3"``) or
ratios of decimals (``"1/3"``, ``"8/0.37"``).
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from numbers import Rational

from .errors import bad_argument

Number = int | float | str | Decimal | Fraction


def to_fraction(value: object, name: str, fix: str) -> Fraction:
    """Convert ``value`` exactly to a finite Fraction, or raise an InputError naming ``name``."""
    rule = "must be a finite number (int, float, decimal string or 'p/q')"
    if isinstance(value, bool) or value is None:
        raise bad_argument(name, value, rule, fix)
    if isinstance(value, int):
        return Fraction(int(value))
    if isinstance(value, Fraction):
        return value
    if isinstance(value, Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise bad_argument(name, value, rule, fix)
        return Fraction(repr(float(value)))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise bad_argument(name, value, rule, fix)
        return Fraction(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            if "/" in text:
                num, _, den = text.partition("/")
                result = _decimal_fraction(num) / _decimal_fraction(den)
            else:
                result = _decimal_fraction(text)
        except (InvalidOperation, ValueError, ZeroDivisionError):
            raise bad_argument(name, value, rule, fix) from None
        return result
    # numpy scalars and other number-likes: go through their exact integer or float value.
    if hasattr(value, "dtype"):
        kind = value.dtype.kind
        if kind in "iu":
            return Fraction(int(value))  # type: ignore[call-overload]
        if kind == "f":
            return to_fraction(float(value), name, fix)  # type: ignore[arg-type]
    raise bad_argument(name, value, rule, fix)


def to_positive_fraction(value: object, name: str, fix: str) -> Fraction:
    """Like :func:`to_fraction`, and the result must be > 0."""
    result = to_fraction(value, name, fix)
    if result <= 0:
        raise bad_argument(name, value, "must be a positive finite number", fix)
    return result


def _decimal_fraction(text: str) -> Fraction:
    d = Decimal(text.strip())
    if not d.is_finite():
        raise ValueError(text)
    return Fraction(d)
