"""The small commands: ``shell`` (the SQL shell), ``demo`` and ``sample``."""

from __future__ import annotations

import argparse
import os
import sys

from ...core.errors import bad_argument
from ..status import EXIT_OK
from .database import exists, open_database, public_mode


def cmd_shell(args: argparse.Namespace) -> int:
    """Run the interactive shell (or -c statements)."""
    from ..shell import main as shell_main

    return shell_main(args.database, commands=args.commands, mode=args.format,
                      ledger=args.ledger, prepare=lambda con: public_mode(con, args))


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job."""
    from ..demo import run_demo

    run_demo(rows=args.rows, rho=args.rho, out=sys.stdout)
    return EXIT_OK


def cmd_sample(args: argparse.Namespace) -> int:
    """Write sample data: the trips into --db, or the real flights files into --folder."""
    from ..demo import load_sample, write_flights

    if args.dataset == "trips":
        if not args.db:
            raise bad_argument("--db", None, "is required for the trips sample",
                               "pass e.g. --db trips.duckdb")
        con = open_database(args.db, must_exist=False)
        try:
            if exists(con, "trips"):
                raise bad_argument("--db", args.db, "already has a table trips",
                                   "choose another database file")
            load_sample(con, "trips", args.rows)
        finally:
            con.close()
        sys.stderr.write(f"wrote table trips ({args.rows:,} rows) to {args.db}\n")
        return EXIT_OK
    if not os.path.isdir(args.folder):
        raise bad_argument("--folder", args.folder, "must be an existing folder",
                           "create it first")
    for path in write_flights(args.folder):
        sys.stderr.write(f"wrote {path}\n")
    return EXIT_OK


__all__ = ["cmd_demo", "cmd_sample", "cmd_shell"]
