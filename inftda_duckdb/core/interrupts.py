"""Stopping a release: Ctrl-C stops it within a block, and the error says whether its budget was
spent (:class:`~inftda_duckdb.core.errors.ReleaseInterrupted`, a ``KeyboardInterrupt``).

An engine cannot stop Python code it runs: DuckDB's ``con.interrupt()`` sets a flag DuckDB reads
between its own tasks, and Ctrl-C reaches Python only in the main thread, when it runs Python
code (duckdb-python checks for signals between tasks, holding the GIL; a UDF on another thread
runs to completion). A release's Python work is therefore asked to stop by the release itself:
a cancel flag per release, read by the level loop between blocks of up to 2**18 cells. What sets it:

- :func:`interruptible`: the Python API and the command line run a release on a helper thread
  and wait in Python, so Ctrl-C reaches the caller at once and ``stop()`` cancels the release
  (and interrupts the engine's own work); the helper stops at its next block;
- ``inftda_duckdb.interrupt(con)`` from another thread: the same for every release of ``con``;
- a ``KeyboardInterrupt`` that lands inside the release's own code (the engine ran it on the
  thread Ctrl-C went to) is turned into the same error by the release.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ReleaseInterrupted

T = TypeVar("T")

GRACE = 10.0
"""Seconds :func:`interruptible` waits for a cancelled release to stop before giving up on it (a
block takes milliseconds; an engine's own work stops when interrupted)."""


def stopped(charged: str | None, *, recording: bool = False) -> ReleaseInterrupted:
    """The error of an interrupted release: ``charged`` says what it had spent (e.g. ``'rho 1/2
    on memory.main.t'``), None when the interrupt came before the charge; ``recording``: while
    the charge was being written (it may or may not be in the ledger)."""
    if recording:
        return ReleaseInterrupted(
            "the release was interrupted while its charge was being recorded: the ledger says "
            "whether its budget was spent (its last row); nothing was returned", None)
    if charged is None:
        return ReleaseInterrupted(
            "the release was interrupted before its budget was charged: nothing was spent and "
            "nothing was returned", False)
    return ReleaseInterrupted(
        f"the release was interrupted after its budget was charged ({charged} is spent, as the "
        "ledger records); nothing was returned", True)


def interruptible(run: Callable[[], T], stop: Callable[[], Any],
                  stopped_error: Callable[[], BaseException], grace: float = GRACE) -> T:
    """``run()`` on a helper thread while this thread waits in Python: a ``KeyboardInterrupt``
    here (Ctrl-C) calls ``stop()``, waits up to ``grace`` seconds for ``run`` to end, and raises
    what ``run`` raised if it is a :class:`ReleaseInterrupted`, else ``stopped_error()``. A
    second Ctrl-C while waiting raises at once."""
    box: dict[str, Any] = {}
    done = threading.Event()  # not Thread.join: a join that Ctrl-C cut short leaves the thread
    context = contextvars.copy_context()  # marked dead (is_alive() False); the caller's settings

    def target() -> None:
        try:
            box["value"] = context.run(run)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    try:
        # inside the try: a Ctrl-C during start() finds the worker running too
        threading.Thread(target=target, name="inftda-release", daemon=True).start()
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        stop()
        done.wait(grace)
        error = box.get("error")
        if isinstance(error, ReleaseInterrupted):
            raise error.with_traceback(None) from None
        raise stopped_error() from error
    if "error" in box:
        raise box["error"]
    return box["value"]


__all__ = ["GRACE", "ReleaseInterrupted", "interruptible", "stopped"]
