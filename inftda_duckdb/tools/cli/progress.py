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

from ...core.topdown import LevelProgress
from ...duckdb.progress import ScanProgress, scan_text


class Progress:
    """Progress on stderr from the first second: a line per stage with the elapsed time, DuckDB's
    own progress of the running statement while the data are scanned (the release's
    :class:`~inftda_duckdb.duckdb.progress.ScanProgress`), then one line per level (a bar
    redrawn in place on a terminal)."""

    EVERY = 5.0  # seconds between scan lines when stderr is not a terminal (the first at 1 s)

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self._bar = False  # a progress bar is drawn on the current terminal line
        self._levels = False  # the level loop reported: the scan is over
        self._lock = threading.Lock()
        self._last: float | None = None  # when the last scan line was written (not a terminal)
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

    def report(self, p: ScanProgress | LevelProgress) -> None:
        """The release's progress hook: DuckDB's share of the scan (redrawn on a terminal, else
        a line every few seconds), then a level's line once it is done."""
        if isinstance(p, ScanProgress):
            self.scan(scan_text(p))
        elif p.cells_done == p.cells_planned:
            self.level(p.level, p.depth, p.parents, p.cells_planned, p.seconds)

    def scan(self, done: str, what: str = "reading the data") -> None:
        if self.quiet or self._levels:
            return
        now = time.perf_counter()
        if self.tty:
            self._write(f"{what}: {done}", redraw=True)
        elif self._last is None or now - self._last >= self.EVERY:
            self._write(f"{what}: {done}")
            self._last = now

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
