"""Progress of a running statement from the first second: DuckDB's own progress while it reads
the data (:class:`ScanProgress`, from ``con.query_progress()`` polled by a helper thread:
:func:`watching`), then the release's levels (:class:`~inftda_duckdb.core.topdown.LevelProgress`).
:class:`TextProgress` prints both as plain lines, the default display of a release in a notebook.

DuckDB tracks a statement's progress only with ``enable_progress_bar`` on; :func:`watching`
turns it on for the statement (without DuckDB's own printing) and puts both settings back after.
Only the share of the work done is reported, never a count of rows: it is DuckDB's estimate of
the scan, the same whatever the rows hold.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TextIO

import duckdb

from ..core.topdown import LevelProgress


class ScanProgress(NamedTuple):
    """DuckDB's progress of the statement running a release, while it reads the data (before
    the levels): ``percent`` of its work done (DuckDB's estimate; None where DuckDB gives none
    for this statement: some of its operators cannot tell), ``seconds`` since the release
    began."""

    percent: float | None
    seconds: float


FIRST = 1.0  #: seconds before the first report (a quick statement reports nothing)
EVERY = 0.5  #: seconds between looks at DuckDB's progress


@contextlib.contextmanager
def watching(con: Any, report: Callable[[ScanProgress], None], *, first: float | None = None,
             every: float | None = None, until: threading.Event | None = None
             ) -> Iterator[threading.Event]:
    """While the block runs a statement on ``con``: ``report(ScanProgress)`` from a helper
    thread, ``first`` seconds in and then every ``every`` seconds while DuckDB's progress moves,
    until the event ``until`` (yielded) is set (the levels began: their own reports take over)
    or the block ends. An error of ``report`` stops the reports, never the statement."""
    first = FIRST if first is None else first  # read now: a test may lower them
    every = EVERY if every is None else every
    done = until if until is not None else threading.Event()
    saved = _enable(con)
    start = time.perf_counter()

    def run() -> None:
        if done.wait(first):
            return
        while not done.is_set():
            try:
                percent = con.query_progress()
            except Exception:  # the statement ended meanwhile, or the connection closed
                return
            known = percent is not None and percent > 0  # 0: DuckDB cannot tell yet
            try:
                report(ScanProgress(float(percent) if known else None,
                                    time.perf_counter() - start))
            except Exception:
                return
            done.wait(every)

    thread = threading.Thread(target=run, name="inftda-progress", daemon=True)
    thread.start()
    try:
        yield done
    finally:
        done.set()
        thread.join()
        _restore(con, saved)


_SETTINGS = ("enable_progress_bar", "enable_progress_bar_print")


def _enable(con: Any) -> list[tuple[str, Any]] | None:
    try:
        saved = [(name, con.execute(
            f"SELECT system.main.current_setting('{name}')").fetchall()[0][0])
                 for name in _SETTINGS]
        con.execute("SET enable_progress_bar = true")
        con.execute("SET enable_progress_bar_print = false")
    except duckdb.Error:  # an aborted transaction, say: no progress, the statement still runs
        return None
    return saved


def _restore(con: Any, saved: list[tuple[str, Any]] | None) -> None:
    for name, value in saved or []:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET {name} = {'true' if value else 'false'}")


class TextProgress:
    """A release's progress as plain text lines on ``out`` (default stderr): DuckDB's share of
    the scan, then one line per level once it is done. The default ``progress`` of a release
    in a notebook."""

    EVERY = 5.0  #: seconds between two lines while the data are read

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out
        self._last: float | None = None
        self.start = time.perf_counter()
        self._lock = threading.Lock()

    def __call__(self, p: ScanProgress | LevelProgress) -> None:
        if isinstance(p, ScanProgress):
            if self._last is None or p.seconds - self._last >= self.EVERY:
                self._last = p.seconds
                self.say(f"reading the data: {scan_text(p)}")
        elif p.cells_done == p.cells_planned:
            self.say(f"level {p.level}/{p.depth}: {p.parents:,} parents, {p.cells_planned:,} "
                     f"noised cells ({p.seconds:.2f} s)")

    def say(self, text: str) -> None:
        with self._lock:
            out = self.out or sys.stderr
            out.write(f"[{time.perf_counter() - self.start:7.2f} s] {text}\n")
            out.flush()


def scan_text(p: ScanProgress) -> str:
    """``'42% (DuckDB's estimate)'``, or the time so far where DuckDB gives no estimate."""
    if p.percent is None:
        return f"{p.seconds:.0f} s so far"
    return f"{p.percent:.0f}%"


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel, already imported)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


__all__ = ["EVERY", "FIRST", "ScanProgress", "TextProgress", "in_notebook", "scan_text",
           "watching"]
