"""What a command says while it runs, on stderr: progress lines from the first second
(:class:`Progress`) and the package's warnings as ``WARNING: ...`` lines
(:func:`relay_warnings`)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator

import duckdb

from ...core.topdown import LevelProgress


class Progress:
    """Progress on stderr from the first second: a line per stage with the elapsed time, DuckDB's
    own progress of the running statement while the data are scanned (:meth:`watch`), then one
    line per level (a bar redrawn in place on a terminal)."""

    INTERVAL = 0.5  # seconds between looks at DuckDB's progress
    EVERY = 5.0  # seconds between progress lines when stderr is not a terminal

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self._bar = False  # a progress bar is drawn on the current terminal line
        self._levels = False  # the level loop reported: the scan is over
        self._lock = threading.Lock()
        self.start = time.perf_counter()

    def _write(self, text: str, redraw: bool = False) -> None:
        with self._lock:
            elapsed = time.perf_counter() - self.start
            if redraw:
                sys.stderr.write(f"\r[{elapsed:7.2f} s] {text}\033[K")
            else:
                sys.stderr.write(("\n" if self._bar else "") + f"[{elapsed:7.2f} s] {text}\n")
            self._bar = redraw
            sys.stderr.flush()

    def say(self, text: str) -> None:
        if not self.quiet:
            self._write(text)

    def report(self, p: LevelProgress) -> None:
        """The release's progress hook: a level's line once it is done."""
        if p.cells_done == p.cells_planned:
            self.level(p.level, p.depth, p.parents, p.cells_planned, p.seconds)

    def level(self, level: int, depth: int, parents: int, cells: int, seconds: float) -> None:
        """A release's per-level report: a bar redrawn in place on a terminal, else a line."""
        self._levels = True
        if self.quiet:
            return
        text = (f"level {level}/{depth}: {parents:,} parents, {cells:,} noised cells "
                f"({seconds:.2f} s)")
        if not self.tty:
            self.say(text)
            return
        width = 20
        done = width * level // max(depth, 1)
        self._write(f"[{'#' * done}{'-' * (width - done)}] {text}", redraw=True)

    @contextlib.contextmanager
    def watch(self, con: duckdb.DuckDBPyConnection, what: str) -> Iterator[None]:
        """While the block runs a statement on ``con``: DuckDB's progress of it (percent of the
        scan), redrawn on a terminal, else a line every few seconds, until the levels report."""
        if self.quiet:
            yield
            return
        with contextlib.suppress(duckdb.Error):
            con.execute("SET enable_progress_bar = true")
            con.execute("SET enable_progress_bar_print = false")
        stop = threading.Event()

        def run() -> None:
            last = time.perf_counter()
            while not stop.wait(self.INTERVAL):
                try:
                    done = con.query_progress()
                except Exception:  # the statement ended meanwhile
                    return
                if self._levels or done is None or done < 0:
                    continue
                now = time.perf_counter()
                if self.tty:
                    self._write(f"{what}: {done:5.1f}%", redraw=True)
                elif now - last >= self.EVERY:
                    self._write(f"{what}: {done:.0f}%")
                    last = now

        thread = threading.Thread(target=run, name="inftda-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


@contextlib.contextmanager
def relay_warnings(skip: str | None = None) -> Iterator[None]:
    """Print the package's warnings as ``WARNING: ...`` lines on stderr (others are dropped)."""
    package = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # inftda_duckdb/
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        text = str(warning.message)
        if os.path.abspath(warning.filename).startswith(package) and not (skip and skip in text):
            sys.stderr.write(f"WARNING: {text}\n")


__all__ = ["Progress", "relay_warnings"]
