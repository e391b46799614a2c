"""Exact numbers: user-supplied budgets and variances as :class:`fractions.Fraction`.

A privacy budget must never be rounded through floating point on its way to the noise scale or the
ledger. Python floats are converted through their shortest decimal representation (``0.37`` becomes
``37/100``, the number the user typed); strings may be decimals (``"0.37"``, ``"1e-3"``) or
ratios of decimals (``"1/3"``, ``"8/0.37"``).

Parsing is bounded: a number is at most ``MAX_TEXT`` characters of text with ``MAX_DIGITS``
significant digits, and its magnitude, unless it is 0, lies in ``[10**-MAX_EXPONENT,
10**MAX_EXPONENT]``. The limits are checked before any big integer is built, so
``'1e-99999999'`` is refused in microseconds instead of computing ``10**99999999`` (minutes).
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from numbers import Rational

from .errors import InputError, bad_argument

Number = int | float | str | Decimal | Fraction

MAX_EXPONENT = 100  #: nonzero numbers lie in [1e-100, 1e100] in absolute value
MAX_DIGITS = 100  #: significant decimal digits of one number
MAX_TEXT = 400  #: characters of a number written as text
_MAX_BITS = 4 * MAX_DIGITS * 4  # numerator / denominator of a Fraction passed in: ~480 digits
_TOP = 10**MAX_EXPONENT
_RULE = "must be a finite number (int, float, decimal string or 'p/q')"
_SIZE = (
    f"must be 0 or between 1e-{MAX_EXPONENT} and 1e{MAX_EXPONENT} in absolute value, with at "
    f"most {MAX_DIGITS} significant digits"
)


def to_fraction(value: object, name: str, fix: str) -> Fraction:
    """Convert ``value`` exactly to a finite Fraction, or raise an InputError naming ``name``."""
    if isinstance(value, bool) or value is None:
        raise bad_argument(name, value, _RULE, fix)
    if isinstance(value, int):
        if value.bit_length() > _MAX_BITS:  # O(1): never print or compare a huge int
            raise _too_big(name, value, fix)
        return _in_range(Fraction(int(value)), name, value, fix)
    if isinstance(value, Fraction | Rational):
        num, den = int(value.numerator), int(value.denominator)
        if max(num.bit_length(), den.bit_length()) > _MAX_BITS:
            raise _too_big(name, value, fix)
        return _in_range(Fraction(num, den), name, value, fix)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise bad_argument(name, value, _RULE, fix)
        return _in_range(Fraction(repr(float(value))), name, value, fix)
    if isinstance(value, Decimal):
        return _in_range(_decimal_fraction(value, name, fix, value), name, value, fix)
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_TEXT:
            raise _too_big(name, value, fix)
        top, slash, bottom = text.partition("/")
        try:
            if slash:
                result = _decimal_fraction(_decimal(top), name, fix, value) / _decimal_fraction(
                    _decimal(bottom), name, fix, value)
            else:
                result = _decimal_fraction(_decimal(text), name, fix, value)
        except InputError:
            raise
        except (InvalidOperation, ValueError, ZeroDivisionError):
            raise bad_argument(name, value, _RULE, fix) from None
        return _in_range(result, name, value, fix)
    # numpy scalars and other number-likes: go through their exact integer or float value.
    if hasattr(value, "dtype"):
        kind = value.dtype.kind
        if kind in "iu":
            return to_fraction(int(value), name, fix)  # type: ignore[call-overload]
        if kind == "f":
            return to_fraction(float(value), name, fix)  # type: ignore[arg-type]
    raise bad_argument(name, value, _RULE, fix)


def to_positive_fraction(value: object, name: str, fix: str) -> Fraction:
    """Like :func:`to_fraction`, and the result must be > 0."""
    result = to_fraction(value, name, fix)
    if result <= 0:
        raise bad_argument(name, value, "must be a positive finite number", fix)
    return result


def _decimal(text: str) -> Decimal:
    d = Decimal(text.strip())  # O(len(text)): the exponent is stored, never expanded
    if not d.is_finite():
        raise ValueError(text)
    return d


def _decimal_fraction(d: Decimal, name: str, fix: str, value: object) -> Fraction:
    """``d`` (parsed from ``value``) as a Fraction, refused before the conversion would build
    ``10**exponent``."""
    if not d.is_finite():
        raise bad_argument(name, value, _RULE, fix)
    if d and (len(d.as_tuple().digits) > MAX_DIGITS or abs(d.adjusted()) > MAX_EXPONENT):
        raise _too_big(name, value, fix)
    return Fraction(d)


def _in_range(result: Fraction, name: str, value: object, fix: str) -> Fraction:
    if result and not Fraction(1, _TOP) <= abs(result) <= _TOP:
        raise _too_big(name, value, fix)
    return result


def _too_big(name: str, value: object, fix: str) -> InputError:
    """The size rule's error; a long value is shown by its ends (never converted in full)."""
    if isinstance(value, int):
        shown: object = f"an integer of {value.bit_length()} bits"
    elif isinstance(value, Fraction | Rational):
        num, den = int(value.numerator), int(value.denominator)
        shown = f"a fraction of {num.bit_length()} / {den.bit_length()} bits"
    else:
        text = str(value)
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-12:]} ({len(text)} chars)"
    return bad_argument(name, shown, _SIZE, fix)
