"""The kinds of error a user can meet.

- :class:`InputError`: the caller asked for something invalid. The message names the argument,
  the offending value, the rule it breaks and how to fix it. Nothing was charged or written.
- :class:`BudgetExceededError`: the release would overspend a privacy budget. The message gives
  the requested, remaining and missing budget. Nothing was charged or written.
- :class:`InternalError`: an invariant of the mechanism failed. This is a bug; nothing is
  returned.
- :class:`ReleaseAbortedError`: a release too large for the cell limit, found only after the
  charge (the noised total decides it). Its budget WAS spent; nothing is returned.
- :class:`ReleaseInterrupted` (a ``KeyboardInterrupt``): Ctrl-C or ``interrupt()`` stopped a
  release; the message and ``charged`` say whether its budget was spent.
"""

from __future__ import annotations

from typing import Any


class InftdaError(Exception):
    """Base class of every error raised on purpose by inftda_duckdb."""


class InputError(InftdaError, ValueError):
    """Invalid input from the caller (argument, table, column or data)."""


class BudgetExceededError(InftdaError):
    """A release was refused because it would exceed a privacy budget."""


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


class ReleaseAbortedError(InftdaError):
    """A release stopped after its budget was charged, before returning anything: under
    ``add_remove`` (or a privacy unit with a noised total) whether it fits the cell limit can
    only be decided from the noised total, which is drawn after the charge."""

    charged = True


class ReleaseInterrupted(KeyboardInterrupt):
    """Ctrl-C or :func:`inftda_duckdb.interrupt` stopped a release; ``charged`` says whether
    its budget had been spent (``None``: interrupted while the charge was being recorded).
    A :class:`KeyboardInterrupt`, so code that handles Ctrl-C handles it too."""

    def __init__(self, message: str, charged: bool | None) -> None:
        super().__init__(message)
        self.charged = charged
