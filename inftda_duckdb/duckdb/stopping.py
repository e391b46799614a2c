"""Stopping DuckDB releases: by the Python call's token, by connection, or with Ctrl-C.

A release inside one of our UDFs stops on its own cancel flag, between two blocks of a level,
and raises :class:`~inftda_duckdb.core.errors.ReleaseInterrupted` saying whether it was charged;
DuckDB is never interrupted under it (it would return while the UDF still runs). A release still
in DuckDB's own work (reading the data) is stopped by DuckDB's interrupt, before any charge.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import duckdb

from ..core.errors import ReleaseInterrupted
from ..core.interrupts import interruptible, stopped
from .registry import RELEASES

T = TypeVar("T")


def cancel(token: str | None = None, owner: object = None) -> int:
    """Ask running releases to stop between two blocks: the one a Python call started under
    ``token``, those of connection ``owner``, or all of them; they raise
    :class:`ReleaseInterrupted` saying whether they were charged. Returns how many (a release
    still before its charge counts, and is never charged)."""
    return RELEASES.cancel(token, owner)


def interrupt(con: Any) -> int:
    """Stop the releases running on ``con`` (call it from another thread, as
    ``con.interrupt()``): each stops within a block of its level and raises
    :class:`ReleaseInterrupted` saying whether it was charged. A release still in DuckDB's own
    work (reading the data) is stopped by ``con.interrupt()``, before any charge. Returns how
    many releases were asked to stop."""
    return stop(con, owner=con)


def stop(con: Any, token: str | None = None, owner: object = None) -> int:
    """Cancel the matching releases (:func:`cancel`); when none of them is in or between our
    UDFs, interrupt DuckDB's own work on ``con`` too. Returns how many were asked to stop."""
    ours = RELEASES.running(token, owner)
    n = cancel(token, owner)
    if not ours:  # DuckDB's own work (reading the data): its interrupt is the fast way
        con.interrupt()
    return n


@contextlib.contextmanager
def planning_interrupts() -> Iterator[None]:
    """Ctrl-C while a release is planned (DuckDB reports it as 'Query interrupted'): nothing
    was charged, and the error says so."""
    try:
        yield
    except ReleaseInterrupted:
        raise
    except (KeyboardInterrupt, RuntimeError, duckdb.InterruptException) as exc:
        if isinstance(exc, RuntimeError) and str(exc) != "Query interrupted":
            raise
        raise stopped(None) from None


def statement(con: Any, run: Callable[[], T]) -> T:
    """Run one SQL statement's work (``run``, on ``con``) so that Ctrl-C stops a release in it
    within a block: on a helper thread, Ctrl-C here calling :func:`interrupt`. A release it
    stopped raises :class:`ReleaseInterrupted` (charged or not); other statements raise
    ``KeyboardInterrupt`` as usual. For shells and notebooks that run raw SQL."""

    def unwrapped() -> T:
        try:
            return run()
        except duckdb.Error as exc:
            m = re.search(r"\bReleaseInterrupted: (.*)", str(exc), re.S)
            if m is None:
                raise
            text = m[1].strip()
            raise ReleaseInterrupted(text, "after its budget was charged" in text) from None

    return interruptible(unwrapped, lambda: interrupt(con), KeyboardInterrupt)


def is_interrupt(exc: BaseException) -> bool:
    """DuckDB's own interrupt, or a Ctrl-C it caught inside a UDF (it wraps the text)."""
    return isinstance(exc, duckdb.InterruptException) or "KeyboardInterrupt" in str(exc)
