"""``inftda-duckdb intervals`` and ``inftda-duckdb plan``: error bars of a release, and the rho
a target error needs (their grammar is in :mod:`.grammar`).

``intervals`` prints every k-prefix of a release with its count and proven interval (or,
with ``--bounds``, each level's bound), from a table in ``--db`` or a file the command line
wrote; ``plan`` prints the smallest rho whose Theorem 1 bound meets ``--max-error`` and its split,
reading only public sizes and spending nothing (the public-facing mode's rules with
``--public``)."""

from __future__ import annotations

import argparse

from ...core.errors import bad_argument
from ...core.planning import check_beta
from ..output import emit
from ..status import EXIT_OK
from .arguments import name_list, release_options
from .database import open_database, public_mode, source_of


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


__all__ = ["cmd_intervals", "cmd_plan"]
