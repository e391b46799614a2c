"""The ``inftda-duckdb`` command line: release, shell, preview, intervals, plan, ledger, budget,
evaluate, demo, sample.

Conventions (this package owns them; see :data:`EXIT_STATUS`): a failure prints one ``Error: ...``
line on stderr, with fixes spelled as command-line options (messages are rendered for the CLI,
see ``core/errors.py``), and exits with a status that says what happened: 2 input error, 3 budget
refused, 1 internal error, 130 interrupted. ``--format table|csv|json`` chooses how results print.
A release writes nothing when it fails: a file is written under a temporary name in the same
folder and renamed at the end (with its provenance: Parquet metadata or a CSV sidecar); a table
is created in one transaction with its provenance as ``COMMENT ON TABLE``; the source database
must exist. Progress goes to stderr from the first second.

Modules: :mod:`.grammar` (the parsers and shared option groups), :mod:`.flags` (the release and
preview options, from the option table), :mod:`.arguments` (what the options mean),
:mod:`.database` (the database, the source, the public-facing mode), :mod:`.progress` (progress
and warnings on stderr), :mod:`.language` (fixes spelled as options), and one module per command
family: :mod:`.release` (release, preview; :mod:`.spark` for ``--engine spark``), :mod:`.ledger`
(ledger, budget), :mod:`.errorbars` (intervals, plan), :mod:`.evaluate`, :mod:`.misc` (shell,
demo, sample).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ...core.errors import speaking
from ..status import error_text, exit_status
from . import language  # noqa: F401  (registers the command line's renderer of fixes)
from .errorbars import cmd_intervals, cmd_plan
from .evaluate import cmd_evaluate
from .grammar import build_parser
from .ledger import cmd_budget, cmd_ledger
from .misc import cmd_demo, cmd_sample, cmd_shell
from .release import cmd_preview, cmd_release

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "release": cmd_release, "shell": cmd_shell, "preview": cmd_preview, "ledger": cmd_ledger,
    "budget": cmd_budget, "evaluate": cmd_evaluate, "demo": cmd_demo, "sample": cmd_sample,
    "intervals": cmd_intervals, "plan": cmd_plan,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``inftda-duckdb`` console script; returns the exit status."""
    with speaking("cli"):
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
            return COMMANDS[args.command](args)
        except (Exception, KeyboardInterrupt) as error:
            sys.stderr.write(f"Error: {error_text(error)}\n")
            return exit_status(error)


__all__ = ["COMMANDS", "build_parser", "main"]
