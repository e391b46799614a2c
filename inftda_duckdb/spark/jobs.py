"""Stopping a Spark release: Ctrl-C cancels the release's own Spark jobs, and the error says
whether its budget was spent (:class:`~inftda_duckdb.core.errors.ReleaseInterrupted`, as on
DuckDB: :mod:`inftda_duckdb.core.interrupts`).

A release (and the command line's write of its result) runs its Spark work on a helper thread
under a job tag of its own (``inftda-<random hex>``, ``interruptOnCancel``), with the caller's
local properties (job group, scheduler pool, description, tags) copied to it, while the calling
thread waits in Python. A ``KeyboardInterrupt`` there (Ctrl-C, ``_thread.interrupt_main()``)
cancels the jobs carrying the tag, and only those (``cancelJobsWithTag``; PySpark's own SIGINT
handler, installed when the SparkContext was made on the main thread, cancels every job of the
context before that), waits until none of them is active, and raises ``ReleaseInterrupted``:
before the charge nothing was spent (the charge is skipped once cancelled), after it the budget
is spent and nothing was returned.

On a Spark Connect session the tag is the session's operation tag (``addTag`` on the helper
thread, whose operations then carry it) and Ctrl-C interrupts the operations carrying it
(``interruptTag``) on the server.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark import SparkContext
from pyspark.sql import SparkSession

from ..core.errors import ReleaseInterrupted
from ..core.interrupts import GRACE, interruptible, stopped
from .sessions import is_connect

T = TypeVar("T")


@dataclass
class Run:
    """One release's cancellation state: its job tag, what it has charged (``'rho 1/2 on
    file:/data/trips.parquet'``, ``None`` before the charge) and the ledger row."""

    tag: str = field(default_factory=lambda: f"inftda-{secrets.token_hex(8)}")
    charged: str | None = None
    ledger_id: int | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def before_charge(self) -> None:
        """Raise (nothing spent) if the release was cancelled: called just before the charge."""
        if self.cancelled.is_set():
            raise stopped(None)

    def error(self) -> ReleaseInterrupted:
        """The error of this release, interrupted now."""
        exc = stopped(self.charged)
        if self.ledger_id is not None:  # the command line names the ledger row
            exc.inftda_ledger_id = self.ledger_id  # type: ignore[attr-defined]
        return exc


def active_jobs(sc: SparkContext, tag: str) -> list[int]:
    """The ids of the jobs carrying ``tag`` that are still running, or whose tasks still run (a
    cancelled job ends at once, while its tasks are still being killed: a killed write task may
    still add files to the output folder)."""
    tracker = sc._jsc.sc().statusTracker()
    running = []
    for job in tracker.getJobIdsForTag(tag):
        info = tracker.getJobInfo(job)
        if not info.isDefined():
            continue
        stages = [tracker.getStageInfo(s) for s in info.get().stageIds()]
        if str(info.get().status()) == "RUNNING" or any(
                s.isDefined() and s.get().numActiveTasks() > 0 for s in stages):
            running.append(int(job))
    return running


def run_tagged(spark: SparkSession, work: Callable[[Run], T], run: Run | None = None) -> T:
    """``work(run)`` under ``run``'s job tag on a helper thread (``spark`` its active session);
    Ctrl-C cancels its jobs, waits for them to end, and raises ``run.error()`` (see the module
    docstring)."""
    run = run or Run()
    if is_connect(spark):
        return _run_connect(spark, work, run)
    sc = spark.sparkContext
    jsc: Any = sc._jsc.sc()
    properties = jsc.getLocalProperties().clone()  # the caller's, as InheritableThread does

    def body() -> T:
        jsc.setLocalProperties(properties)
        sc._jvm.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[union-attr]
        sc.addJobTag(run.tag)
        sc.setInterruptOnCancel(True)
        try:
            return work(run)
        finally:
            sc.removeJobTag(run.tag)

    def stop() -> None:
        run.cancelled.set()
        sc.cancelJobsWithTag(run.tag)
        deadline = time.monotonic() + GRACE
        while active_jobs(sc, run.tag) and time.monotonic() < deadline:
            time.sleep(0.05)

    return interruptible(body, stop, run.error)


def _run_connect(spark: Any, work: Callable[[Run], T], run: Run) -> T:
    """:func:`run_tagged` on a Spark Connect session: the operations of the helper thread carry
    the tag; Ctrl-C interrupts them on the server (each then ends the call waiting on it)."""

    def body() -> T:
        spark.addTag(run.tag)
        try:
            return work(run)
        finally:
            spark.removeTag(run.tag)

    def stop() -> None:
        run.cancelled.set()
        spark.interruptTag(run.tag)

    return interruptible(body, stop, run.error)


__all__ = ["Run", "active_jobs", "run_tagged"]
