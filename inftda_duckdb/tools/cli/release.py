"""``inftda-duckdb release`` and ``preview`` on the DuckDB engine (``--engine spark``: the
:mod:`.spark` module, imported only then: the Spark extra may be absent).

A release writes nothing when it fails: a file is written under a temporary name in the same
folder and renamed at the end (with its provenance: Parquet metadata or a CSV sidecar); a table
is created in one transaction with its provenance as ``COMMENT ON TABLE``; a database file the
failed run created is removed. Progress goes to stderr from the first second."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import duckdb
import pyarrow as pa

from ...core.errors import ReleaseAbortedError, bad_argument, number
from ...core.identifiers import literal, parse_qualified, quote_qualified
from ...core.provenance import comment
from ..output import emit, write_release
from ..status import EXIT_OK, Interrupted, charged_failure, charged_text, is_interrupt
from .arguments import budget_of, name_list, output_kind, release_options
from .database import (
    charged_as,
    exists,
    open_database,
    public_mode,
    refuse_public_on_spark,
    source_of,
)
from .progress import Progress, relay_warnings


def cmd_release(args: argparse.Namespace) -> int:
    """Release --columns of the source into --into-table or --output."""
    from ...duckdb.api import naming
    from ...duckdb.extension import run_release

    if args.engine == "spark":
        refuse_public_on_spark(args)  # before Spark is imported (the extra may be absent)
        from .spark import spark_release

        return spark_release(args)
    if (args.into_table is None) == (args.output is None):
        raise bad_argument("--output", args.output, "or --into-table is required (exactly one)",
                           "pass --output FILE.parquet, or --into-table NAME with --db")
    budget = budget_of(args)
    columns = name_list(args.columns)
    if args.into_table is not None:
        if not args.db:
            raise bad_argument("--into-table", args.into_table, "needs --db",
                               "pass --db DATABASE (the table is created there)")
        target = quote_qualified(parse_qualified(args.into_table, "--into-table"))
    else:
        kind = output_kind(args)
    created = bool(args.db) and not os.path.exists(args.db)
    con = open_database(args.db, must_exist=args.table is not None, ledger=args.ledger)
    progress = Progress(args.quiet)
    done = None  # the release, once run: its budget is spent
    try:
        public_mode(con, args)
        if args.into_table is not None and not args.overwrite and exists(con, target):
            raise bad_argument("--into-table", args.into_table, "already exists",
                               "pass --overwrite, or choose another name")
        source, label = source_of(con, args)
        options = release_options(con, args)
        if args.seed is not None:
            sys.stderr.write(
                "WARNING: --seed makes this release NOT PRIVATE: anyone who knows the seed can "
                "reproduce the noise and remove it. Use it for tests and demos only.\n")
            options["seed"] = args.seed
        options.update(budget, output=args.output_kind, unknown=args.unknown)
        progress.say(f"release of {label} ({', '.join(columns)}) started: one pass over the "
                     "data, then the levels")
        statement: Callable[[str], str] | None = None
        if args.into_table is not None:  # the table keeps the source's types (ENUMs included)
            verb = "CREATE OR REPLACE TABLE" if args.overwrite else "CREATE TABLE"
            con.execute("BEGIN TRANSACTION")

            def statement(sql: str) -> str:
                return f"{verb} {target} AS {sql}"
        with relay_warnings(skip="seed"), naming(label):
            done = run_release(con, source, columns, options, source_name=charged_as(args),
                               progress=progress.report, origin="cli", statement=statement)
        record = done.provenance
        verdict = "" if record["private"] == "true" else " (NOT PRIVATE)"
        if args.into_table is not None:
            con.execute(f"COMMENT ON TABLE {target} IS {literal(comment(record))}")
            con.execute("COMMIT")
            rows = con.execute(f"SELECT count(*) FROM {target}").fetchall()[0][0]
            where = f"table {args.into_table} in {args.db} (provenance: its COMMENT)"
        else:
            rows = done.result.num_rows
            written = write_release(con, done.result, args.output, kind, record)
            where = " and ".join(written) + (" (provenance: Parquet key-value metadata)"
                                             if kind == "parquet" else "")
        progress.say(f"released {rows} rows{verdict}: charged rho "
                     f"{number(Fraction(record['rho']))} on {record['source']}, ledger id "
                     f"{record['ledger_id']}")
    except BaseException as error:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        con.close()
        if created and done is None and getattr(error, "inftda_ledger_id", None) is None:
            for path in (args.db, args.db + ".wal"):  # a database this failed run created
                with contextlib.suppress(FileNotFoundError):  # (and holding no charge)
                    os.remove(path)
        if done is not None:  # charged: the ledger row it wrote says so, whatever failed
            with contextlib.suppress(AttributeError):
                error.inftda_ledger_id = done.provenance["ledger_id"]  # type: ignore[attr-defined]
        if is_interrupt(error):
            raise Interrupted(charged_text(error)) from None
        ledger_id = getattr(error, "inftda_ledger_id", None)
        if ledger_id is not None or isinstance(error, ReleaseAbortedError):
            spent = None if done is None else (
                f"rho {number(Fraction(done.provenance['rho']))} on "
                f"{done.provenance['source']}")
            raise charged_failure(error, spent, ledger_id) from None
        raise
    con.close()
    progress.say(f"wrote {where}")
    return EXIT_OK


def cmd_preview(args: argparse.Namespace) -> int:
    """Print per-level rho_k, sigma_k and the Theorem 1 bound."""
    budget = budget_of(args, delta_default=True)
    if budget.get("delta") is None and "epsilon" in budget:
        budget["delta"] = Fraction(1, 10**6)
    if args.domain_sizes is not None:
        if args.table or args.input or args.columns:
            raise bad_argument("--domain-sizes", args.domain_sizes,
                               "cannot be combined with --table/--input/--columns",
                               "give either the sizes or a table")
        table = preview_sizes(args, budget)
        con = duckdb.connect()
    elif args.engine == "spark":
        refuse_public_on_spark(args)  # before Spark is imported (the extra may be absent)
        from .spark import spark_preview

        return spark_preview(args)
    else:
        from ...duckdb.api import naming
        from ...duckdb.extension import preview

        if not args.columns:
            raise bad_argument("--columns", None, "is required with a table",
                               "pass --columns A,B,C, or --domain-sizes N1,N2,...")
        con = open_database(args.db, must_exist=True)
        public_mode(con, args)
        source, label = source_of(con, args)
        with relay_warnings(), naming(label):
            table = preview(con, source, name_list(args.columns), **budget, beta=float(args.beta),
                            **release_options(con, args))
    try:
        emit(con, table, args.format)
    finally:
        con.close()
    return EXIT_OK


def preview_sizes(args: argparse.Namespace, budget: dict[str, Any]) -> pa.Table:
    """Per-level plan and bound from domain sizes alone (no data needed)."""
    from ...core.accounting import plan_budget
    from ...core.planning import level_table

    sizes = []
    for text in name_list(args.domain_sizes, "--domain-sizes"):
        if not text.isdigit() or int(text) < 1:
            raise bad_argument("--domain-sizes", args.domain_sizes, "must be positive integers",
                               "pass e.g. --domain-sizes 50,20,24")
        sizes.append(int(text))
    options = release_options(duckdb.connect(), args)
    target = options.get("auto_target")
    plan = plan_budget(len(sizes), **budget, level_weights=options.get("level_weights"),
                       neighbours=args.neighbours or "substitute",
                       max_rows_per_unit=options.get("max_rows_per_unit", 1),
                       auto_target=target.lower() if isinstance(target, str) else target,
                       nodes=[math.prod(sizes[:k]) for k in range(1, len(sizes) + 1)])
    delta = float(budget.get("delta") or Fraction(1, 10**6))
    rows = level_table(sizes, plan, float(args.beta), delta,
                       estimator=options.get("estimator") or "inftda")
    shown = [{key: str(value) if isinstance(value, Fraction) else value
              for key, value in row.items()} for row in rows]
    return pa.Table.from_pylist(shown)


__all__ = ["cmd_preview", "cmd_release", "preview_sizes"]
