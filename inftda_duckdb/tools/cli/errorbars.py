"""``inftda-duckdb intervals`` and ``inftda-duckdb plan``: error bars of a release, and the rho
a target error needs.

The commands' grammar and behaviour both live here (one module, one line each in the command
table): ``intervals`` prints every k-prefix of a release with its count and proven interval (or,
with ``--bounds``, each level's bound), from a table in ``--db`` or a file the command line
wrote; ``plan`` prints the smallest rho whose Theorem 1 bound meets ``--max-error`` and its split,
reading only public sizes and spending nothing (the public-facing mode's rules with
``--public``)."""

from __future__ import annotations

import argparse
from typing import Any

from ...core import options as table
from ...core.errors import bad_argument
from ...core.planning import check_beta
from ..output import emit
from ..status import EXIT_OK
from .arguments import name_list, release_options
from .database import open_database, public_mode, source_of
from .flags import add_table_options


def add_parsers(sub: Any) -> None:
    """The ``intervals`` and ``plan`` subcommands, on the subparsers ``sub``."""
    from .grammar import (
        add_format_option,
        add_ledger_option,
        add_public_options,
        add_source_options,
    )

    p = sub.add_parser("intervals", help="every released count of a level with its proven "
                       "interval", description="Print every k-prefix of RELEASED (a table in "
                       "--db, or a .parquet/.csv file the command line wrote) with its released "
                       "count and [lower, upper]: with probability at least 1 - beta every "
                       "k-prefix's true count lies in its interval, all at once (Theorem 1, "
                       "two-sided). A prefix absent from the table was released as 0; its "
                       "interval is [0, half_width] (--bounds). Reads only the release; charges "
                       "nothing.")
    p.add_argument("released", metavar="RELEASED", help="a released table in --db, or a "
                   "released .parquet/.csv file")
    p.add_argument("--db", metavar="DATABASE", help="the DuckDB file holding RELEASED")
    add_ledger_option(p)
    p.add_argument("--level", metavar="K", help="the prefix level: its number (1 = the first "
                   "column) or its column's name (required unless --bounds)")
    p.add_argument("--beta", type=float, default=0.05, metavar="B",
                   help="the intervals hold together with probability at least 1 - B "
                   "(default 0.05)")
    p.add_argument("--joint", metavar="K", help="one event for levels 1..K: intervals of these "
                   "levels printed with the same --joint and --beta hold together")
    p.add_argument("--release", type=int, metavar="ID", help="the release's ledger id, for a "
                   "table without provenance (made by CREATE TABLE ... AS SELECT * FROM "
                   "inftda_release(...))")
    p.add_argument("--bounds", action="store_true", help="print each level's bound and "
                   "integer half-width instead")
    add_format_option(p)

    p = sub.add_parser("plan", help="the rho a target error needs (spends nothing)",
                       description="Print the smallest rho (exact) for which the Theorem 1 bound "
                       "at --level is at most --max-error with probability 1 - beta, under the "
                       "best split considered (--level-weights if given, else uniform and "
                       "auto), with each level's budget and bound at that rho. Reads only "
                       "public sizes, as preview does; draws no noise and charges nothing. "
                       "Release with --rho and --level-weights as printed.")
    add_source_options(p, need=True)
    add_table_options(p, table.PLAN)
    add_format_option(p)
    add_public_options(p)


def cmd_intervals(args: argparse.Namespace) -> int:
    """Print a release's intervals at --level (or its bounds)."""
    from ...duckdb.errorbars import bounds_table, intervals, locate

    con = open_database(args.db, must_exist=bool(args.db), ledger=args.ledger)
    try:
        if args.bounds:
            found = locate(con, con, args.released, args.release)
            joint = None if args.joint is None else found.plan.level(_level(args.joint),
                                                                      "--joint")
            result = bounds_table(found.plan, check_beta(args.beta), joint)
        else:
            if args.level is None:
                raise bad_argument("--level", None, "is required", "pass e.g. --level 1 (or "
                                   "--bounds for every level's bound)")
            result = intervals(con, args.released, _level(args.level), args.beta,
                               joint=None if args.joint is None else _level(args.joint),
                               release=args.release)
        emit(con, result, args.format)
    finally:
        con.close()
    return EXIT_OK


def _level(text: str) -> int | str:
    return int(text) if text.strip().isdigit() else text.strip()


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan for --max-error at --level."""
    from ...duckdb.extension import plan

    con = open_database(args.db, must_exist=args.table is not None)
    try:
        public_mode(con, args)
        source, _ = source_of(con, args)
        options = release_options(con, args)
        if args.delta is not None:
            options["delta"] = args.delta
        result = plan(con, source, name_list(args.columns), max_error=_targets(args.max_error),
                      level=None if args.level is None else _level(args.level),
                      beta=float(args.beta), **options)
        emit(con, result["rows"], args.format)
    finally:
        con.close()
    return EXIT_OK


def _targets(text: str | None) -> object:
    """``--max-error X`` or ``X1,X2,...`` (``-`` for a level without a target)."""
    if text is None:
        raise bad_argument("--max-error", None, "is required", "pass e.g. --max-error 50")
    parts = name_list(text, "--max-error")
    if len(parts) == 1:
        return parts[0]
    return [None if p == "-" else p for p in parts]


__all__ = ["add_parsers", "cmd_intervals", "cmd_plan"]
