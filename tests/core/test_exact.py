from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.exact import to_fraction, to_positive_fraction

FIX = "pass e.g. rho=0.5"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, Fraction(3)),
        (0.37, Fraction(37, 100)),
        ("0.37", Fraction(37, 100)),
        ("8/0.37", Fraction(800, 37)),
        ("1/3", Fraction(1, 3)),
        ("1e-3", Fraction(1, 1000)),
        (Decimal("0.1"), Fraction(1, 10)),
        (Fraction(2, 3), Fraction(2, 3)),
        (np.int64(5), Fraction(5)),
        (np.float64(0.5), Fraction(1, 2)),
    ],
)
def test_exact_conversion(value: object, expected: Fraction) -> None:
    assert to_fraction(value, "rho", FIX) == expected


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), "abc", "1/0", None, True, "inf", [1], "NaN"]
)
def test_rejects_non_numbers_naming_the_value(value: object) -> None:
    with pytest.raises(InputError) as info:
        to_fraction(value, "rho", FIX)
    message = str(info.value)
    assert message.startswith("rho must be a finite number")
    assert repr(value) in message
    assert "Fix: pass e.g. rho=0.5" in message


@pytest.mark.parametrize("value", [0, -1, "-0.5", 0.0])
def test_positive_rejects_zero_and_negative(value: object) -> None:
    with pytest.raises(InputError, match="must be a positive finite number"):
        to_positive_fraction(value, "rho", FIX)


def _id(value: object) -> str:
    return value if isinstance(value, str) and len(value) < 30 else type(value).__name__


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("1e-99999999", "'1e-99999999'"),  # issue 15: > 300 s before (10**99999999 built)
        ("1e99999999", "'1e99999999'"),
        ("1e-10000000", "'1e-10000000'"),  # 6-9 s before
        ("1e+5000", "'1e+5000'"),  # a raw ValueError about digit limits before
        (1e300, "1e+300"),  # decimal.InvalidOperation in the (epsilon, delta) conversion before
        (5e-324, "5e-324"),
        ("1e50/1e-60", "'1e50/1e-60'"),
        ("0." + "1" * 150, "(152 chars)"),
        ("1" * 5000, "(5000 chars)"),
        (10**100000, "an integer of 332193 bits"),
        (Fraction(1, 3**100000), "a fraction of 1 / 158497 bits"),
        (Decimal("1e-999999"), "1E-999999"),
        (np.float64(1e-200), "1e-200"),
    ],
    ids=lambda v: _id(v),
)
def test_huge_and_tiny_numbers_are_refused_without_building_them(
    value: object, shown: str
) -> None:
    """Each is refused in microseconds, before a big integer is built (issue 15)."""
    with pytest.raises(InputError) as info:
        to_fraction(value, "rho", FIX)
    message = str(info.value)
    assert message.startswith("rho must be 0 or between 1e-100 and 1e100 in absolute value")
    assert shown in message and "Fix: pass e.g. rho=0.5" in message


@pytest.mark.parametrize(
    "value", ["1e-100", "1e100", -1e-100, "9" * 100, "0.000", 10**100, "1/3"], ids=_id
)
def test_numbers_at_the_limits_are_accepted(value: object) -> None:
    expected = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    assert to_fraction(value, "rho", FIX) == expected
