"""``inftda-duckdb evaluate``: per-level errors of a released table against the truth, beside
the Theorem 1 bound, and (``--plot``) a plot of them, with ``--runs`` fresh releases charged."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from fractions import Fraction
from typing import Any

import duckdb
import pyarrow as pa

from ...core.errors import BudgetExceededError, InputError, bad_argument
from ..output import emit
from ..status import EXIT_OK
from .arguments import budget_of, name_list, release_options
from .database import open_database
from .progress import relay_warnings


def _check_plot_runs(con: duckdb.DuckDBPyConnection, args: argparse.Namespace,
                     plan: Any) -> None:
    """Before any release of ``evaluate --plot --runs N``: the plot can be drawn, and the
    source's budget pays for all N runs (else nothing is spent)."""
    from ...duckdb.budgets import remaining

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("--plot needs matplotlib, which is not installed; nothing was run or "
                         "charged. Fix: pip install 'inftda-duckdb[plot]'") from None
    if not args.runs:
        return
    found = remaining(con, args.true_table)
    if found is None:
        return
    need, (left, budget_label) = plan.rho * args.runs, found
    if need > left:
        raise BudgetExceededError(
            f"--runs {args.runs} at rho {plan.rho} each needs rho {need} (~{float(need):.6g}) "
            f"but only {left} (~{float(left):.6g}) of the budget {budget_label} remains; "
            "nothing was run or charged. Fix: "
            + (f"pass --runs {int(left // plan.rho)} or fewer, or raise" if left >= plan.rho
               else "raise")
            + f" the budget with inftda-duckdb budget DATABASE --set {args.true_table} --rho R")


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Per-level error metrics of a released table against the truth (and a plot)."""
    from ...core.accounting import plan_budget
    from ...duckdb.evaluation import evaluate, plot_errors
    from ...duckdb.extension import release

    columns = name_list(args.columns)
    if args.runs is not None and args.plot is None:
        raise bad_argument("--runs", args.runs, "only applies with --plot",
                           "pass --plot errors.png --runs N")
    has_budget = args.rho is not None or args.epsilon is not None
    if args.runs is not None and not has_budget:
        raise bad_argument("--runs", args.runs, "needs the budget of the releases",
                           "pass --rho R (or --epsilon E --delta D)")
    if args.plot is not None and not args.plot.lower().endswith(".png"):
        raise bad_argument("--plot", args.plot, "must end in .png", "pass e.g. --plot errors.png")
    budget = budget_of(args, delta_default=True) if has_budget else {}
    if "epsilon" in budget and budget["delta"] is None:
        budget["delta"] = Fraction(1, 10**6)
    con = open_database(args.database, must_exist=True, ledger=args.ledger)
    try:
        options = release_options(con, args)
        scope = {k: options[k] for k in ("domains", "domain_tables") if k in options}
        nodes = None
        if budget and options.get("level_weights") == "auto":  # the public cells per level
            nodes = evaluate(con, args.true_table, args.released_table, columns,
                             **scope)["domain_cells"].to_pylist()
        target = options.get("auto_target")
        if isinstance(target, str) and target.lower() in [c.lower() for c in columns]:
            target = [c.lower() for c in columns].index(target.lower()) + 1
        plan = plan_budget(len(columns), **budget, level_weights=options.get("level_weights"),
                           neighbours=args.neighbours or "substitute",
                           max_rows_per_unit=options.get("max_rows_per_unit", 1),
                           auto_target=target, nodes=nodes) if budget else None
        if args.plot is not None:
            _check_plot_runs(con, args, plan)

        def measure(released: str) -> pa.Table:
            return evaluate(con, args.true_table, released, columns, plan=plan,
                            beta=float(args.beta), **scope)

        table = measure(args.released_table)
        emit(con, table, args.format)
        if args.plot is not None:
            runs = [table]
            for _ in range(args.runs or 0):
                with relay_warnings():
                    run = release(con, args.true_table, columns, **budget, **options,
                                  origin="cli")
                con.register("inftda_cli_run", run)
                runs.append(measure("inftda_cli_run"))
            folder, name = os.path.split(os.path.abspath(args.plot))
            temporary = os.path.join(folder, f".{name}.{os.getpid()}.tmp.png")
            try:
                plot_errors(runs, temporary)
                os.replace(temporary, args.plot)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(temporary)
            sys.stderr.write(f"wrote {args.plot} ({len(runs)} run(s))\n")
    finally:
        con.close()
    return EXIT_OK


__all__ = ["cmd_evaluate"]
