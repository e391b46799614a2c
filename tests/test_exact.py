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
