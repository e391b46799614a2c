"""How the command line and the shell report failure: exit statuses and one-line messages.

The statuses (:data:`EXIT_STATUS`, printed by every ``--help``) say what happened, for scripts:
2 input error, 3 budget refused, 1 internal error, 130 interrupted; 0 is success. A message is
one line, ``Error: ...``: DuckDB's wrapper around a UDF's exception removed, a misspelled
parameter of a package macro named with the valid ones, an interrupted release saying whether
it was charged.
"""

from __future__ import annotations

import re

import duckdb

from ..core.errors import (
    BudgetExceededError,
    InftdaError,
    InternalError,
    ReleaseAbortedError,
    ReleaseInterrupted,
    duckdb_hint,
)

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_REFUSED, EXIT_CHARGED, EXIT_INTERRUPTED = (
    0, 1, 2, 3, 4, 130)
EXIT_STATUS = """\
exit status:
  0    success
  1    internal error (a bug in inftda-duckdb: please report it)
  2    input error (option, argument, file or data): nothing was charged or written
  3    budget refused (the release would overspend): nothing was charged or written
  4    failed after the release was charged: its budget IS spent (the message gives the
       ledger id), nothing was written
  130  interrupted (Ctrl-C): the message says whether the release was charged
"""

_UDF_WRAPPER = re.compile(
    r"^.*?Python exception occurred while executing the UDF[^:]*:\s*"
    r"(?:[A-Za-z_.]*(?:InputError|LedgerError|BudgetExceededError|InternalError|InftdaError):"
    r"\s*)?",
    re.S,
)


class Interrupted(Exception):
    """Ctrl-C during a command: the message says what was charged and written."""


class ChargedFailure(Exception):
    """A command failed after its release was charged (exit status 4): the budget is spent,
    nothing was written; the message says what was charged and why it failed."""


def charged_failure(error: BaseException, spent: str | None, ledger_id: object) -> ChargedFailure:
    """``error``, raised after a release charged ``spent`` (ledger row ``ledger_id``)."""
    what = spent or "the release"
    where = f", ledger id {ledger_id}" if ledger_id not in (None, "") else ""
    cause = clean_message(error)
    if isinstance(error, ReleaseAbortedError):
        return ChargedFailure(f"{cause} (its budget is spent{where})")
    return ChargedFailure(
        f"{what} was charged{where} (that budget is spent) but nothing was written: {cause}. "
        "Fix: remove the cause and release again (a new release, charged again)")


def charged_text(error: BaseException) -> str:
    """What an interrupted release left in the ledger: the ledger row run_release noted, else
    the release's own account (:class:`ReleaseInterrupted` says whether it was charged)."""
    ledger_id = getattr(error, "inftda_ledger_id", None)
    if ledger_id is None and isinstance(error, ReleaseInterrupted):
        return str(error)
    if ledger_id is None:
        return "nothing was charged and nothing was written"
    return (f"the release had been charged (ledger id {ledger_id}: its budget is spent) but "
            "nothing was written")


def clean_message(error: BaseException, sql: str | None = None) -> str:
    """The user-facing text of an error: DuckDB's UDF wrapper prefix and our class name removed;
    DuckDB's own errors about the package's SQL explained (:func:`duckdb_hint`: a forgotten
    load(), a misspelled parameter named from the statement ``sql``)."""
    text = str(error).strip()
    stripped = _UDF_WRAPPER.sub("", text, count=1) or text
    if stripped != text:  # our message: one line (DuckDB appends the statement's LINE context,
        # and DuckDB 1.5 the UDF's Python stack after "At:")
        stripped = re.sub(r"\s*\n\s*(LINE \d+:|At:\n).*$", "", stripped, flags=re.S)
    return duckdb_hint(stripped, sql) or stripped


def is_interrupt(error: BaseException) -> bool:
    """Ctrl-C: in Python, in DuckDB, or inside a UDF (DuckDB wraps it in its own error)."""
    if isinstance(error, Interrupted | KeyboardInterrupt | duckdb.InterruptException):
        return True
    return isinstance(error, duckdb.Error) and "KeyboardInterrupt" in str(error)


def exit_status(error: BaseException) -> int:
    """The exit status for ``error`` (see :data:`EXIT_STATUS`)."""
    if is_interrupt(error):
        return EXIT_INTERRUPTED
    if isinstance(error, ChargedFailure | ReleaseAbortedError):
        return EXIT_CHARGED
    text = str(error)
    if isinstance(error, InternalError) or "InternalError:" in text:
        return EXIT_INTERNAL
    if isinstance(error, BudgetExceededError) or "BudgetExceededError:" in text:
        return EXIT_REFUSED
    if isinstance(error, InftdaError | duckdb.Error | OSError):
        return EXIT_INPUT
    return EXIT_INTERNAL


def error_text(error: BaseException, sql: str | None = None) -> str:
    """The one line printed for ``error`` (without ``Error: ``)."""
    if isinstance(error, ChargedFailure):
        return str(error)
    if isinstance(error, Interrupted):
        return f"interrupted (Ctrl-C): {error}"
    if is_interrupt(error):
        return f"interrupted (Ctrl-C): {charged_text(error)}"
    if exit_status(error) == EXIT_INTERNAL and not isinstance(error, InftdaError):
        return (f"internal error, this is a bug in inftda-duckdb (please report it): "
                f"{type(error).__name__}: {clean_message(error, sql)}")
    return clean_message(error, sql)


__all__ = ["EXIT_CHARGED", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK",
           "EXIT_REFUSED", "EXIT_STATUS", "ChargedFailure", "Interrupted", "charged_failure",
           "charged_text", "clean_message", "error_text", "exit_status", "is_interrupt"]
