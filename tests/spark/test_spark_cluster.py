"""Cluster-ready: the command line keeps the master ``spark-submit`` gives, the pinned leaves are
freed once the result is written (by the command line) or on request (``unpin``), and Ctrl-C
after the charge prints one clean message, no JVM stack traces."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

pytest.importorskip("pyspark")

import pyspark
from pyspark.sql import functions as F

from inftda_duckdb import spark as inftda_spark
from inftda_duckdb.ledger import Ledger
from inftda_duckdb.tools import cli

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "from inftda_duckdb.tools.cli import main\nraise SystemExit(main())\n"


def deep_parquet(path: Path, rows: int) -> None:
    """5 levels of 40 integer values: about ``rows`` leaves to release."""
    columns = ", ".join(f"(hash(i, {k}) % 40)::INT AS c{k}" for k in range(5))
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT {columns} FROM range({rows}) t(i)) TO '{path}'")


def release_args(data: Path, out: Path, book: Path) -> list[str]:
    domains = [x for k in range(5) for x in ("--domain", f"c{k}=0..39")]
    return ["release", "--engine", "spark", "--input", str(data), "--columns",
            "c0,c1,c2,c3,c4", "--rho", "1", *domains, "--ledger", str(book), "--output",
            str(out)]


def environment() -> dict[str, str]:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=os.path.dirname(
        pyspark.__file__), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get(
            "PYTHONPATH", "")]))


def persistent(spark: Any) -> set[int]:
    """The ids of the session's persisted RDDs (other tests' results may be freed meanwhile by
    Spark's cleaner, so the test follows ids, not a count)."""
    return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keySet().toArray()}


def test_the_command_line_keeps_the_master_spark_submit_gives(tmp_path: Path) -> None:
    """Was: the command line forced local[*] (its --master default) over spark-submit's."""
    deep_parquet(tmp_path / "data.parquet", 2000)
    (tmp_path / "release.py").write_text(SCRIPT)
    submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    done = subprocess.run(
        [submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         str(tmp_path / "release.py"),
         *release_args(tmp_path / "data.parquet", tmp_path / "out.parquet",
                       tmp_path / "budget.duckdb"), "--seed", "1"],
        env=environment(), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on Spark (local[1]) started" in done.stdout  # spark-submit: the driver's stderr
    assert Ledger.open(str(tmp_path / "budget.duckdb")).rows().num_rows == 1


def test_ctrl_c_after_the_charge_prints_one_clean_message(tmp_path: Path) -> None:
    """SIGINT while Spark writes the result (its commit folder exists): exit 130 and the
    message; nothing on stderr after the charge but the message (was: Spark's ERROR lines with
    JVM stack traces, from the cancelled write and the stopped context)."""
    deep_parquet(tmp_path / "data.parquet", 600_000)
    out = tmp_path / "out.parquet"
    with open(tmp_path / "err.log", "w") as err:
        command = subprocess.Popen(
            [sys.executable, "-m", "inftda_duckdb.tools.cli",
             *release_args(tmp_path / "data.parquet", out, tmp_path / "budget.duckdb"),
             "--master", "local[2]"],
            env=environment(), stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
    deadline = time.monotonic() + 600
    while not (out / "_temporary").exists() and command.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    command.send_signal(signal.SIGINT)
    assert command.wait(120) == 130
    text = (tmp_path / "err.log").read_text()
    after = text[text.index("charged rho 1"):].splitlines()[1:]
    assert len(after) == 1 and after[0].startswith("Error: interrupted (Ctrl-C): the release "
                                                   "had been charged (ledger id 1"), text[-3000:]
    assert not out.exists()


def test_unpin_frees_the_pinned_leaves_and_the_command_line_does_once_written(
    spark: Any, tmp_path: Path
) -> None:
    deep_parquet(tmp_path / "data.parquet", 3000)
    book = Ledger.open(str(tmp_path / "budget.duckdb"))
    domains = {f"c{k}": range(40) for k in range(5)}
    before = persistent(spark)
    result = inftda_spark.release(spark.read.parquet(str(tmp_path / "data.parquet")),
                                  [f"c{k}" for k in range(5)], rho=1, domains=domains,
                                  ledger=book)
    result.write.parquet(str(tmp_path / "api.parquet"))
    pinned = persistent(spark) - before
    assert len(pinned) == 1  # the pinned leaves, in executor storage
    assert inftda_spark.unpin(result) == 1 and not pinned & persistent(spark)
    assert inftda_spark.unpin(result) == 0
    with pytest.raises(Exception, match="CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND"):
        result.count()
    # the command line (on this active session) frees them once the result is written
    assert cli.main([*release_args(tmp_path / "data.parquet", tmp_path / "cli.parquet",
                                   tmp_path / "budget.duckdb"), "--quiet"]) == 0
    assert persistent(spark) <= before  # nothing of its own left pinned
    assert spark.read.parquet(str(tmp_path / "cli.parquet")).agg(F.sum("count")).collect()[0][0] \
        == 3000
    # with a checkpoint directory the leaves are checkpoint files: unpin deletes them
    sc, folder = spark.sparkContext, tmp_path / "checkpoints"
    sc.setCheckpointDir(str(folder))
    try:
        result = inftda_spark.release(spark.read.parquet(str(tmp_path / "data.parquet")),
                                      ["c0", "c1"], rho=1, ledger=book,
                                      domains={"c0": range(40), "c1": range(40)})
        files = [p for p in folder.rglob("part-*")]
        assert files and all(p.exists() for p in files)
        assert inftda_spark.unpin(result) == 1
        assert not any(p.exists() for p in files)
    finally:
        getattr(sc._jsc.sc(), "checkpointDir_$eq")(sc._jvm.scala.Option.apply(None))
    assert sc.getCheckpointDir() is None
