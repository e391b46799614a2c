"""``inftda-duckdb ledger`` (list, verify, upgrade or move a ledger) and ``budget`` (show or
set budgets, switch ``--require-budget``)."""

from __future__ import annotations

import argparse
import os

import duckdb
import pyarrow as pa

from ...core.errors import LedgerError, bad_argument
from ..output import emit
from ..status import EXIT_OK
from .arguments import budget_of
from .database import open_database

LEDGER_COLUMNS = ("id", "started_at", "source", "columns", "neighbours", "privacy_unit",
                  "max_rows_per_unit", "rho", "rho_decimal", "epsilon", "delta", "output",
                  "private", "origin", "conversion")


BUDGET_COLUMNS = ("budget", "sources", "budget_rho_exact", "budget_rho", "spent_rho_exact",
                  "spent_rho", "remaining_rho_exact", "remaining_rho", "releases",
                  "non_private_releases", "delta", "budget_epsilon", "spent_epsilon",
                  "remaining_epsilon")


def _ledger_connection(args: argparse.Namespace, read_only: bool) -> duckdb.DuckDBPyConnection:
    """DATABASE (opened with the package loaded unless ``read_only``) and/or --ledger."""
    if args.database is None and args.ledger is None and not os.environ.get("INFTDA_LEDGER"):
        raise bad_argument("DATABASE", None, "or --ledger is required",
                           "pass a database file, or --ledger budget.duckdb")
    return open_database(args.database, must_exist=True, ledger=args.ledger,
                         read_only=read_only and args.database is not None)  # memory: read-write


def cmd_ledger(args: argparse.Namespace) -> int:
    """Print, verify or upgrade the ledger of a database (or --ledger)."""
    from ...duckdb.budgets import ledger_rows, move_ledger, upgrade_ledger, verify_ledger

    con = _ledger_connection(args, read_only=not (args.upgrade or args.move_to))
    try:
        where = args.ledger or args.database
        if args.move_to:
            moved = move_ledger(con, args.move_to)
            print(f"Moved {moved} rows of the ledger in {args.database} to {args.move_to}; "
                  f"use --ledger {args.move_to} from now on.")
            return 0
        if args.upgrade:
            moved = upgrade_ledger(con)
            print(f"Upgraded the ledger of {where}: {moved} rows in the hash chain "
                  "(old tables kept as inftda_ledger_v1 and inftda_budgets_v1)." if moved else
                  f"Nothing to upgrade in {where}.")
            return 0
        if args.verify:
            reports = verify_ledger(con).to_pylist()
            if not reports:
                print(f"No ledger in {where}.")
            for r in reports:
                if not r["ok"]:
                    raise LedgerError(r["problem"])
                print(f"The ledger in {r['location']} is intact: {r['rows']} rows, hash chain "
                      f"{'keyed' if r['keyed'] else 'not keyed'}, id {r['ledger_id']}.")
            return 0
        table = ledger_rows(con)
        table = table.append_column("rho_decimal", pa.array(
            [f"{x:.6g}" for x in table.column("rho_approx").to_pylist()], pa.string()))
        if table.num_rows == 0 and args.format == "table":
            print(f"No releases recorded in {where}.")
        else:
            emit(con, table if table is not None else pa.table({}), args.format, LEDGER_COLUMNS)
    finally:
        con.close()
    return EXIT_OK


def cmd_budget(args: argparse.Namespace) -> int:
    """Show budgets, set one with --set, or switch --require-budget."""
    from ...duckdb import budgets

    con = _ledger_connection(args, read_only=False)
    try:
        if args.set_source:
            budget = budget_of(args)
            budgets.set_budget(con, args.set_source, **budget, name=args.name,
                               missing_ok=args.missing_ok)
        elif args.rho is not None or args.epsilon is not None:
            raise bad_argument("--rho/--epsilon", args.rho or args.epsilon, "needs --set SOURCE",
                               "pass --set TABLE --rho R to set a budget")
        if args.require_budget is not None:
            budgets.require_budget(con, args.require_budget == "on")
        delta = float(args.delta) if args.delta is not None else 1e-6
        emit(con, budgets.budget(con, delta=delta), args.format, BUDGET_COLUMNS)
    finally:
        con.close()
    return EXIT_OK


__all__ = ["BUDGET_COLUMNS", "LEDGER_COLUMNS", "cmd_budget", "cmd_ledger"]
