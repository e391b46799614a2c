"""The three kinds of error a user can meet.

- :class:`InputError`: the caller asked for something invalid. The message names the argument,
  the offending value, the rule it breaks and how to fix it. Nothing was charged or written.
- :class:`BudgetExceededError`: the release would overspend a privacy budget. The message gives
  the requested, remaining and missing budget. Nothing was charged or written.
- :class:`LedgerError`: the privacy ledger cannot be trusted or reached (edited rows, a missing
  head, a wrong key, a read-only or locked file): every release is refused until it is fixed.
  Nothing was charged or written.
- :class:`InternalError`: an invariant of the mechanism failed. This is a bug; nothing is
  returned.
"""

from __future__ import annotations

from typing import Any


class InftdaError(Exception):
    """Base class of every error raised on purpose by inftda_duckdb."""


class InputError(InftdaError, ValueError):
    """Invalid input from the caller (argument, table, column or data)."""


class BudgetExceededError(InftdaError):
    """A release was refused because it would exceed a privacy budget."""


class LedgerError(InputError):
    """The ledger is broken, unreachable or cannot record a charge durably: nothing is released."""


class InternalError(InftdaError, AssertionError):
    """An invariant of the mechanism failed: this is a bug in inftda_duckdb."""

    def __init__(self, message: str) -> None:
        super().__init__(
            f"{message} (this is a bug in inftda_duckdb: nothing was returned; please report it)"
        )


def bad_argument(name: str, value: Any, rule: str, fix: str) -> InputError:
    """Build the standard user-error message: argument, value, rule and fix.

    >>> str(bad_argument("rho", -1, "must be a positive finite number", "pass e.g. rho := 0.5"))
    'rho must be a positive finite number; got -1. Fix: pass e.g. rho := 0.5'
    """
    return InputError(f"{name} {rule}; got {value!r}. Fix: {fix}")
