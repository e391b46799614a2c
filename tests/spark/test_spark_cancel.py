"""Ctrl-C during a Spark release: the release's jobs are cancelled (their tasks stop), the error
says whether the budget was spent, and the command line's status is 130.

The interrupt is ``_thread.interrupt_main()`` from a timer thread once a job of the release is
running (a slow Python UDF in the source's lineage: each row writes a file, then sleeps). The
test runs with Python's default SIGINT handler instead of PySpark's (which would cancel every job
of the context itself): what stops the jobs here is the release's own job tag."""

from __future__ import annotations

import _thread
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

from inftda_duckdb.core.errors import ReleaseInterrupted
from inftda_duckdb.ledger import Ledger
from inftda_duckdb.spark import release
from inftda_duckdb.spark.jobs import Run, run_tagged
from inftda_duckdb.tools.status import EXIT_INTERRUPTED, error_text, exit_status

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

ROWS = 40
SLEEP = 0.5  # seconds per row: 2 tasks of 20 rows, ~10 s each if nothing stopped them


@pytest.fixture
def default_sigint() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def slow_source(spark: Any, marks: Path) -> Any:
    folder = str(marks)

    def value(i: int) -> str:
        import os
        import time

        with open(os.path.join(folder, f"row-{i}"), "w"):
            pass
        time.sleep(SLEEP)
        return f"v{i % 3}"

    slow = F.udf(value, "string", useArrow=False)
    return spark.range(0, ROWS, numPartitions=2).select(slow(F.col("id")).alias("c"))


def interrupt_when_running(spark: Any) -> threading.Thread:
    """Ctrl-C in the main thread as soon as a Spark job is running (at most 60 s from now)."""
    tracker = spark.sparkContext.statusTracker()

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not tracker.getActiveJobsIds() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # a few rows into the tasks
        _thread.interrupt_main()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def assert_stopped(spark: Any, marks: Path) -> None:
    """No job is active, and the tasks stopped: no row is started after a pause."""
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    time.sleep(4 * SLEEP + 3)  # a task being killed finishes its row (Python workers: <= 2 s)
    started = len(list(marks.iterdir()))
    time.sleep(4 * SLEEP)
    assert len(list(marks.iterdir())) == started < ROWS


def test_ctrl_c_before_the_charge_cancels_the_release_and_spends_nothing(
    spark: Any, tmp_path: Path, default_sigint: None
) -> None:
    marks = tmp_path / "rows"
    marks.mkdir()
    ledger = Ledger.open(str(tmp_path / "budget.duckdb"))
    frame = slow_source(spark, marks)
    watcher = interrupt_when_running(spark)
    with pytest.raises(ReleaseInterrupted) as stopped:
        release(frame, ["c"], rho=1, domains={"c": ["v0", "v1", "v2"]}, ledger=ledger,
                source_name="slow", seed=1)
    watcher.join()
    assert stopped.value.charged is False
    assert "before its budget was charged: nothing was spent" in str(stopped.value)
    assert ledger.rows().num_rows == 0
    assert_stopped(spark, marks)
    # the session still works, and the interrupted release left no tag on this thread
    assert spark.range(3).count() == 3
    assert not any(t.startswith("inftda-") for t in spark.sparkContext.getJobTags())


def test_ctrl_c_after_the_charge_says_the_budget_is_spent(
    spark: Any, tmp_path: Path, default_sigint: None
) -> None:
    """The command line's write of a released DataFrame (its subtree job) runs as this does."""
    marks = tmp_path / "rows"
    marks.mkdir()
    frame = slow_source(spark, marks)
    out = tmp_path / "out.parquet"
    spark.sparkContext.setJobGroup("user-group", "the caller's group")  # kept, not replaced
    try:
        watcher = interrupt_when_running(spark)
        with pytest.raises(ReleaseInterrupted) as stopped:
            run_tagged(spark, lambda _: frame.write.parquet(str(out)),
                       Run(charged="rho 1 on name:slow", ledger_id=7))
        watcher.join()
        assert stopped.value.charged is True
        assert "after its budget was charged (rho 1 on name:slow is spent" in str(stopped.value)
        assert exit_status(stopped.value) == EXIT_INTERRUPTED == 130
        assert "had been charged (ledger id 7: its budget is spent) but nothing was written" in \
            error_text(stopped.value)
        assert_stopped(spark, marks)
        assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") == "user-group"
    finally:
        spark.sparkContext._jsc.clearJobGroup()
