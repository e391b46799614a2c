"""``inftda-duckdb build-kernel``: compile the optional kernel ahead of time, or check it.

The command's grammar and its behaviour both live here, so that changing or removing the
command is a change to this module and one line of the command table."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..status import EXIT_INPUT, EXIT_OK


def add_parser(sub: Any) -> None:
    """The ``build-kernel`` subcommand, on the subparsers ``sub`` of the command line."""
    p = sub.add_parser("build-kernel", help="compile the optional kernel ahead of time "
                       "(faster first releases of wide trees)",
                       description="Compile the optional kernel (the fast extra) ahead of time "
                       "for this machine, Python and package version, into a directory only you "
                       "can write: releases then load it in a few ms from a process's first "
                       "large level, without numba. Outputs are identical with and without it. "
                       "Needs the fast extra (numba, setuptools) and a C/C++ compiler; takes "
                       "~15 s. A build that is missing, stale or refused is simply not used.")
    p.add_argument("--dir", dest="directory", metavar="DIR",
                   help="where to build (default: $INFTDA_KERNEL_DIR, else "
                   "$XDG_CACHE_HOME/inftda-duckdb or ~/.cache/inftda-duckdb); releases look "
                   "in INFTDA_KERNEL_DIR")
    p.add_argument("--force", action="store_true",
                   help="compile even if the current build is there")
    p.add_argument("--check", action="store_true",
                   help="only report whether the current build is there and sound, and what "
                   "releases will use (exit status 2 if not built or refused)")


def cmd_build_kernel(args: argparse.Namespace) -> int:
    """Compile the kernel ahead of time, or (``--check``) say whether it is built and sound."""
    from ...core import _kernel_build

    if args.check:
        ok, lines = _kernel_build.status(args.directory)
        sys.stdout.write("".join(line + "\n" for line in lines))
        return EXIT_OK if ok else EXIT_INPUT
    built = _kernel_build.build(args.directory, force=args.force,
                                say=lambda line: sys.stderr.write(line + "\n"))
    verb = "built" if built.fresh else "already built (--force compiles again)"
    sys.stdout.write(f"{verb}: {built.path}\nkey: {built.key}\nseconds: {built.seconds:.1f}\n")
    return EXIT_OK


__all__ = ["add_parser", "cmd_build_kernel"]
