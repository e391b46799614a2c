"""``inftda-duckdb release|preview --engine spark``: the command line's Spark path, on the public
API of :mod:`inftda_duckdb.spark` (imported only with ``--engine spark``: the extra may be absent).

The options are the DuckDB path's (:mod:`.release`); the differences: ``--input``
takes Parquet/CSV files, folders or globs read by Spark, ``--table`` names a table in Spark's
catalog, ``--ledger`` (else ``--db``, else ``INFTDA_LEDGER``) is the ledger file on the driver
(required), and the result is written by Spark: ``--output x.parquet`` is a folder of part
files (Spark's format; written by its commit protocol, so a failed job leaves no output) with
the provenance record beside it (``x.parquet.provenance.json``; each column's metadata holds it
too), ``--into-table`` a table in Spark's catalog. The CLI uses the active session, else starts
one (stopped at the end) on ``--master``, else on the master ``spark-submit`` gives (a cluster:
``spark-submit --master yarn script.py release --engine spark ...``), else ``local[*]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from fractions import Fraction
from typing import Any

import duckdb
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from ...core.errors import bad_argument, number
from ...core.release import charged_text
from ...ledger.locate import LEDGER_VARIABLE
from ...ledger.sources import dataset
from ...spark import Run, preview, release, run_tagged, sessions, unpin
from ..output import emit, sidecar
from ..status import EXIT_OK, charged_failure, is_interrupt
from .arguments import FILE_KINDS, budget_of, name_list, output_kind, release_options
from .progress import Progress, relay_warnings


def session(master: str | None) -> tuple[SparkSession, bool]:
    """The active session, or a new one (and whether this call created it): on ``master`` when
    given, else on the master ``spark-submit`` (or ``spark-defaults.conf``) gives, which is
    ``local[*]`` when nothing does."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors: this interpreter
    builder = SparkSession.builder.appName("inftda-duckdb") \
        .config("spark.ui.showConsoleProgress", "false")
    if master is not None:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    if not sessions.is_connect(spark):  # failures reach the user as exceptions (Error: lines);
        spark.sparkContext.setLogLevel("OFF")  # a cancelled job's logs would print stack traces
    return spark, True


def _kind(path: str) -> str:
    kind = FILE_KINDS.get(os.path.splitext(path.rstrip("/"))[1].lower())
    if kind is None and os.path.isdir(path):
        return "parquet"  # a folder of part files
    if kind is None:
        raise bad_argument("--input", path, "must end in .parquet, .pq or .csv (or be a folder "
                           "of Parquet files)", "pass e.g. --input 'data/*.parquet'")
    return kind


def charged_as(args: argparse.Namespace) -> str | None:
    """The source ``--input`` is charged to: the one dataset its paths name
    (:func:`inftda_duckdb.ledger.sources.dataset`; a glob names the folder it searches), as the
    DuckDB path charges ``--input`` (None for ``--table``: Spark's catalog says)."""
    if args.input is None:
        return None
    found = sorted({dataset(_searched(os.path.abspath(p))) for p in args.input})
    if len(found) > 1:
        raise bad_argument("--input", args.input, f"names {len(found)} datasets "
                           f"({', '.join(found)}): a release is charged to one source",
                           "release one dataset at a time: one file, or one folder "
                           "(--input FOLDER, or a glob inside it)")
    return "file:" + found[0]


def _searched(path: str) -> str:
    """A glob's folder (the path up to its first component with a wildcard); else the path."""
    parts = path.split(os.sep)
    magic = [i for i, part in enumerate(parts) if any(c in part for c in "*?[")]
    return os.sep.join(parts[: magic[0]]) or os.sep if magic else path


def source(spark: SparkSession, args: argparse.Namespace) -> DataFrame | str:
    """--input files (one format) read by Spark, or the name of a --table in its catalog."""
    if (args.table is None) == (args.input is None):
        raise bad_argument("--table", args.table, "or --input is required (exactly one)",
                           "pass --input 'data/*.parquet', or --table T (in Spark's catalog)")
    if args.table is not None:
        return str(args.table)
    kinds = {_kind(p) for p in args.input}
    if len(kinds) > 1:
        raise bad_argument("--input", args.input, "must all be Parquet or all CSV",
                           "release one format at a time")
    paths = [os.path.abspath(p) for p in args.input]
    try:
        if kinds == {"csv"}:
            return spark.read.option("header", True).option("inferSchema", True).csv(paths)
        return spark.read.parquet(*paths)
    except AnalysisException as exc:
        raise bad_argument("--input", args.input, f"cannot be read by Spark ({exc.getMessage()})",
                           "check the paths") from None


def _options(args: argparse.Namespace) -> dict[str, Any]:
    with duckdb.connect() as con:  # --domain-file: public files, read by DuckDB as usual
        return release_options(con, args)


def spark_release(args: argparse.Namespace) -> int:
    """Release with Spark and write the result once (Spark's writer evaluates it once)."""
    if (args.into_table is None) == (args.output is None):
        raise bad_argument("--output", args.output, "or --into-table is required (exactly one)",
                           "pass --output FOLDER.parquet, or --into-table NAME")
    ledger = getattr(args, "ledger", None) or args.db or os.environ.get(LEDGER_VARIABLE)
    if not ledger:
        raise bad_argument("--ledger", None, "is required with --engine spark (the ledger file "
                           "every release is charged to)",
                           f"pass --ledger budget.duckdb, or set {LEDGER_VARIABLE}")
    budget = budget_of(args)
    columns = name_list(args.columns)
    kind = output_kind(args, folder_ok=True) if args.output is not None else ""
    options = _options(args)
    charged_to = charged_as(args)
    if args.seed is not None:
        sys.stderr.write(
            "WARNING: --seed makes this release NOT PRIVATE: anyone who knows the seed can "
            "reproduce the noise and remove it. Use it for tests and demos only.\n")
        options["seed"] = args.seed
    progress = Progress(args.quiet)
    spark, created = session(args.master)
    try:
        frame = source(spark, args)
        progress.say(f"release of {args.table or ', '.join(args.input)} ({', '.join(columns)}) "
                     f"on Spark ({sessions.master(spark)}) started")
        with relay_warnings(skip="seed"):
            result = release(frame, columns, **budget, **options, output=args.output_kind,
                             unknown=args.unknown, ledger=ledger, origin="cli",
                             source_name=charged_to)
        record = json.loads(result.schema[0].metadata["inftda"])
        progress.say(f"charged rho {number(Fraction(record['rho']))} to the ledger in "
                     f"{ledger} (id {record['ledger_id']}); releasing the subtrees")
        spent = charged_text(Fraction(record["rho"]), record["source"])
        try:
            where = _write(spark, args, kind, result, record)
        except Exception as error:  # after the charge: its budget is spent, whatever failed
            if is_interrupt(error):
                raise
            raise charged_failure(error, spent, int(record["ledger_id"])) from None
        finally:
            unpin(result)  # the pinned leaves: freed once written (or not)
    finally:
        if created:
            spark.stop()
    verdict = "" if record["private"] == "true" else " (NOT PRIVATE)"
    progress.say(f"wrote {where}{verdict}")
    return EXIT_OK


def _write(spark: SparkSession, args: argparse.Namespace, kind: str, result: DataFrame,
           record: dict[str, Any]) -> str:
    """Write the released DataFrame once (Spark evaluates it: the subtree job); Ctrl-C cancels
    it (the budget is spent: exit 130 says so). Returns where it went."""
    mode = "overwrite" if args.overwrite else "errorifexists"
    charged = Run(charged=charged_text(Fraction(record["rho"]), record["source"]),
                  ledger_id=int(record["ledger_id"]))
    if args.into_table is not None:
        run_tagged(spark, lambda _: result.write.mode(mode).saveAsTable(args.into_table), charged)
        return f"table {args.into_table} (provenance: its columns' metadata)"
    folder = os.path.abspath(args.output)
    existed = os.path.exists(folder)
    writer = result.write.mode(mode)
    try:
        if kind == "csv":
            run_tagged(spark, lambda _: writer.option("header", True).csv(folder), charged)
        else:
            run_tagged(spark, lambda _: writer.parquet(folder), charged)
    except BaseException:
        if not existed and os.path.isdir(folder):  # what the failed write left
            shutil.rmtree(folder, ignore_errors=True)
        raise
    with open(sidecar(args.output), "w") as f:
        json.dump(record, f, indent=1)
    return f"{args.output} and {sidecar(args.output)}"


def spark_preview(args: argparse.Namespace) -> int:
    """Print the per-level plan and bound for a Spark source (spends nothing)."""
    budget = budget_of(args, delta_default=True)
    if "epsilon" in budget and budget.get("delta") is None:
        budget["delta"] = 1e-6
    if not args.columns:
        raise bad_argument("--columns", None, "is required with a source",
                           "pass --columns A,B,C, or --domain-sizes N1,N2,...")
    options = _options(args)
    spark, created = session(args.master)
    try:
        with relay_warnings():
            table = preview(source(spark, args), name_list(args.columns), **budget,
                            beta=float(args.beta), **options)
    finally:
        if created:
            spark.stop()
    with duckdb.connect() as con:
        emit(con, table, args.format)
    return EXIT_OK
