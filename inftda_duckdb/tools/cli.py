"""The ``inftda-duckdb`` command line: release, shell, preview, ledger, budget, evaluate, demo.

Every subcommand exits 0 on success and 1 with ``Error: <message>`` on stderr on bad input. A
release writes nothing when it fails: a file is written under a temporary name in the same folder
and renamed at the end; a table is created in one statement; the source database must exist.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any, NoReturn

import duckdb
import pyarrow as pa

from ..core.errors import InftdaError, bad_argument
from ..core.exact import to_positive_fraction
from ..core.identifiers import literal, parse_qualified, quote, quote_qualified
from ..core.topdown import LevelProgress
from .shell import clean_message, render

FILE_KINDS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
_INT_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")

EPILOG = """\
examples:
  inftda-duckdb demo
  inftda-duckdb release --db trips.duckdb --table trips --columns origin,dest,hour \\
      --rho 0.5 --domain hour=0..23 --into-table trips_dp
  inftda-duckdb release --input trips.parquet --columns origin,dest --epsilon 1 --delta 1e-6 \\
      --domain origin=EWR,JFK,LGA --domain-file dest=airports.csv --output trips_dp.parquet
  inftda-duckdb preview --domain-sizes 50,20,24 --rho 0.5
  inftda-duckdb release --engine spark --master 'local[2]' --input 'data/*.parquet' \
      --columns origin,dest --rho 0.5 --domain-file dest=airports.csv --db budget.duckdb \
      --output trips_dp.parquet
  echo "SELECT * FROM inftda_budget();" | inftda-duckdb shell trips.duckdb
"""


class Parser(argparse.ArgumentParser):
    """argparse with the package's error convention: ``Error: ...`` and exit status 1."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"Error: {message}\n")


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
                   "the spark extra; the ledger in --db is charged)")
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
                   help="split of rho over the levels (default uniform), e.g. 1,1,2")
    g.add_argument("--neighbours", choices=("substitute", "add_remove"), default="substitute",
                   help="substitute: bounded DP, the row count is public (default); add_remove: "
                   "unbounded DP, the total is noised too")
    g.add_argument("--privacy-unit", metavar="COL",
                   help="column identifying the protected unit (e.g. a person id)")
    g.add_argument("--max-rows-per-unit", type=_positive_int("--max-rows-per-unit"),
                   metavar="M", help="keep at most M rows per privacy unit (default 1)")


def build_parser() -> Parser:
    """The full command-line grammar (also the source of every --help text)."""
    from .. import __version__

    parser = Parser(prog="inftda-duckdb", epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Differentially private contingency tables (InfTDA) with DuckDB.")
    parser.add_argument("--version", action="version",
                        version=f"inftda-duckdb {__version__} (DuckDB {duckdb.__version__})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("release", help="release a DP table from a table or a Parquet/CSV file",
                       description="Release a differentially private contingency table of "
                       "--columns (a hierarchy, coarsest first) with InfTDA, and write it to a "
                       "table or a file. The ledger in --db is charged (in memory without --db).")
    _add_source_options(p, need=True)
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
    o.add_argument("--unknown", choices=("error", "drop"), default="error",
                   help="values outside the public domain: error (default) or drop (needs "
                   "--neighbours add_remove)")
    o.add_argument("--seed", type=int, metavar="N",
                   help="deterministic noise for tests and demos: the release is NOT PRIVATE")
    o.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    p = sub.add_parser("shell", help="interactive SQL shell with the package loaded",
                       description="An SQL shell on DATABASE (in memory if omitted) with "
                       "inftda_release, inftda_preview, inftda_budget, inftda_set_budget and "
                       "inftda_evaluate loaded. Statements end with ';'. Dot commands: .tables, "
                       ".schema [T], .budget, .ledger, .help, .quit. From a pipe it runs the "
                       "statements and stops with status 1 at the first error.")
    p.add_argument("database", nargs="?", metavar="DATABASE", help="DuckDB database file")

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

    p = sub.add_parser("ledger", help="list the releases charged in a database",
                       description="Print the ledger (table inftda_ledger) of DATABASE: one "
                       "row per release, with its source, columns, rho and whether it was private.")
    p.add_argument("database", metavar="DATABASE", help="DuckDB database file")

    p = sub.add_parser("budget", help="show or set privacy budgets",
                       description="Without --set: print each source's budget, spent and "
                       "remaining rho (and epsilon at --delta). With --set SOURCE: set the total "
                       "budget of SOURCE to --rho R or --epsilon E --delta D; releases beyond it "
                       "are refused.")
    p.add_argument("database", metavar="DATABASE", help="DuckDB database file")
    p.add_argument("--set", metavar="SOURCE", dest="set_source",
                   help="table or view whose budget to set")
    g = p.add_argument_group("budget")
    g.add_argument("--rho", type=_fraction("--rho", "1"), help="total zCDP budget")
    g.add_argument("--epsilon", type=_fraction("--epsilon", "1"), help="total epsilon")
    g.add_argument("--delta", type=_fraction("--delta", "1e-6"),
                   help="delta for --epsilon, and for the epsilon columns shown (default 1e-6)")

    p = sub.add_parser("evaluate", help="per-level errors of a release against the truth",
                       description="Curator only (reads the private table; the output is NOT "
                       "private): per-level error metrics of RELEASED (a counts table) against "
                       "TRUE, beside the Theorem 1 bound when the release's budget is given.")
    p.add_argument("database", metavar="DATABASE", help="DuckDB database file")
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
                   "(each is charged to the ledger) and plot them all")

    p = sub.add_parser("demo", help="release embedded sample data and compare with the truth",
                       description="Build 200,000 NYC-like taxi trips (origin borough -> "
                       "destination zone -> hour) in memory, release them with rho = 1 (secure "
                       "noise) and print the release beside the truth: the largest cells, the "
                       "per-level maximum error beside the Theorem 1 bound, and the ledger entry.")
    p.add_argument("--rho", type=_fraction("--rho", "1"), default=Fraction(1),
                   help="budget (default 1)")
    p.add_argument("--rows", type=_positive_int("--rows"), default=200_000,
                   help="number of sample trips (default 200000)")
    return parser


# ---------------------------------------------------------------------------- helpers


def _connect(database: str | None, must_exist: bool, read_only: bool = False,
             ) -> duckdb.DuckDBPyConnection:
    """Open a database (in memory if None) and load the package; refuse a missing file."""
    from ..duckdb.extension import load

    if database and must_exist and not os.path.isfile(database):
        raise bad_argument("DATABASE", database, "must be an existing DuckDB file",
                           "check the path (nothing was created)")
    con = duckdb.connect(database or ":memory:", read_only=read_only)
    if not read_only:
        load(con)
    return con


def _source(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> str:
    """The name of the source relation: --table, or a TEMP view over --input."""
    if (args.table is None) == (args.input is None):
        raise bad_argument("--table", args.table, "or --input is required (exactly one)",
                           "pass --db DB --table T, or --input FILE.parquet")
    if args.table is not None:
        if not args.db:
            raise bad_argument("--table", args.table, "needs --db", "pass --db DATABASE")
        parse_qualified(args.table, "--table")
        return str(args.table)
    if len(args.input) > 1:
        raise bad_argument("--input", args.input, "must be one file with the DuckDB engine",
                           "pass one file, or --engine spark to read several")
    name = os.path.splitext(os.path.basename(args.input[0]))[0] or "input"
    con.execute(f"CREATE TEMP VIEW {quote(name)} AS SELECT * FROM "
                f"{_reader(args.input[0], '--input')}")
    return quote(name)


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
    if args.level_weights:
        options["level_weights"] = [
            to_positive_fraction(w, "--level-weights", "pass e.g. --level-weights 1,1,2")
            for w in _names(args.level_weights, "--level-weights")]
    if args.privacy_unit:
        options["privacy_unit"] = args.privacy_unit
    if args.max_rows_per_unit is not None:
        options["max_rows_per_unit"] = args.max_rows_per_unit
    return options


class Progress:
    """Begin and end lines on stderr (with elapsed time); a live line on a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self._bar = False  # a progress bar is drawn on the current terminal line
        self.start = time.perf_counter()

    def say(self, text: str) -> None:
        if not self.quiet:
            elapsed = time.perf_counter() - self.start
            if self._bar:
                sys.stderr.write("\n")
                self._bar = False
            sys.stderr.write(f"[{elapsed:7.2f} s] {text}\n")
            sys.stderr.flush()

    def report(self, p: LevelProgress) -> None:
        """The release's progress hook: a level's line once it is done."""
        if p.cells_done == p.cells_planned:
            self.level(p.level, p.depth, p.parents, p.cells_planned, p.seconds)

    def level(self, level: int, depth: int, parents: int, cells: int, seconds: float) -> None:
        """A release's per-level report: a bar redrawn in place on a terminal, else a line."""
        if self.quiet:
            return
        text = (f"level {level}/{depth}: {parents:,} parents, {cells:,} noised cells "
                f"({seconds:.2f} s)")
        if not self.tty:
            self.say(text)
            return
        width = 20
        done = width * level // max(depth, 1)
        bar = "#" * done + "-" * (width - done)
        elapsed = time.perf_counter() - self.start
        sys.stderr.write(f"\r[{elapsed:7.2f} s] [{bar}] {text}\033[K")
        sys.stderr.flush()
        self._bar = True


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


def _is_private(table: pa.Table) -> bool:
    meta = table.schema.metadata or {}
    value = meta.get(b"private", meta.get(b"inftda.private", b"true"))
    return value.lower() not in (b"false", b"0", b"no")


# ---------------------------------------------------------------------------- subcommands


def cmd_release(args: argparse.Namespace) -> int:
    """Release --columns of the source into --into-table or --output."""
    from ..duckdb.extension import release

    if args.engine == "spark":
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
        kind = _file_kind(args.output, "--output")
        folder = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(folder):
            raise bad_argument("--output", args.output, "must be in an existing folder",
                               "create the folder first")
        if os.path.exists(args.output) and not args.overwrite:
            raise bad_argument("--output", args.output, "already exists",
                               "pass --overwrite, or choose another file")
    created = bool(args.db) and not os.path.exists(args.db)
    con = _connect(args.db, must_exist=args.table is not None)
    try:
        if args.into_table is not None and not args.overwrite and _exists(con, target):
            raise bad_argument("--into-table", args.into_table, "already exists",
                               "pass --overwrite, or choose another name")
        source = _source(con, args)
        options = _release_options(con, args)
        if args.seed is not None:
            sys.stderr.write(
                "WARNING: --seed makes this release NOT PRIVATE: anyone who knows the seed can "
                "reproduce the noise and remove it. Use it for tests and demos only.\n")
            options["seed"] = args.seed
        progress = Progress(args.quiet)
        progress.say(f"release of {source} ({', '.join(columns)}) started")
        with relay_warnings(skip="seed"):
            table = release(con, source, columns, **budget, **options, output=args.output_kind,
                            unknown=args.unknown, progress=progress.report, origin="cli")
        progress.say(f"released {table.num_rows} rows"
                     + ("" if _is_private(table) else " (NOT PRIVATE)"))
        con.register("inftda_cli_result", table)
        if args.into_table is not None:
            verb = "CREATE OR REPLACE TABLE" if args.overwrite else "CREATE TABLE"
            con.execute(f"{verb} {target} AS SELECT * FROM inftda_cli_result")
            where = f"table {args.into_table} in {args.db}"
        else:
            _write_file(con, "inftda_cli_result", args.output, kind)
            where = args.output
    except BaseException:
        con.close()
        if created:  # a database this failed run created: remove it, nothing is left behind
            for path in (args.db, args.db + ".wal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        raise
    con.close()
    progress.say(f"wrote {where}")
    return 0


def _exists(con: duckdb.DuckDBPyConnection, relation: str) -> bool:
    try:
        con.execute(f"SELECT * FROM {relation} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def _write_file(con: duckdb.DuckDBPyConnection, relation: str, path: str, kind: str) -> None:
    """COPY a relation to ``path`` through a temporary file renamed at the end."""
    folder, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    options = "FORMAT parquet" if kind == "parquet" else "FORMAT csv, HEADER true"
    try:
        con.execute(f"COPY (SELECT * FROM {relation}) TO {literal(temporary)} ({options})")
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)


def cmd_shell(args: argparse.Namespace) -> int:
    """Run the interactive shell."""
    from .shell import main as shell_main

    return shell_main(args.database)


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
        from ..spark.commands import spark_preview

        return spark_preview(args)
    else:
        from ..duckdb.extension import preview

        if not args.columns:
            raise bad_argument("--columns", None, "is required with a table",
                               "pass --columns A,B,C, or --domain-sizes N1,N2,...")
        con = _connect(args.db, must_exist=True)
        source = _source(con, args)
        with relay_warnings():
            table = preview(con, source, _names(args.columns), **budget, beta=float(args.beta),
                            **_release_options(con, args))
    try:
        show(con, table)
    finally:
        con.close()
    return 0


def show(con: duckdb.DuckDBPyConnection, table: pa.Table, columns: Sequence[str] = ()) -> None:
    """Print ``table`` (only ``columns`` if given) with doubles at 6 significant digits."""
    if columns:
        table = table.select([c for c in columns if c in table.column_names])
    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            values = [None if v is None else float(f"{v:.6g}") for v in table.column(i).to_pylist()]
            table = table.set_column(i, field, pa.array(values, field.type))
    sys.stdout.write(render(con, table, max_rows=1000))


LEDGER_COLUMNS = ("id", "started_at", "source", "columns", "neighbours", "privacy_unit",
                  "max_rows_per_unit", "rho", "epsilon", "delta", "output", "private", "origin")
BUDGET_COLUMNS = ("source", "budget_rho_exact", "spent_rho_exact", "remaining_rho_exact",
                  "releases", "non_private_releases", "delta", "budget_epsilon", "spent_epsilon",
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
    plan = plan_budget(len(sizes), **budget, level_weights=options.get("level_weights"),
                       neighbours=args.neighbours,
                       max_rows_per_unit=options.get("max_rows_per_unit", 1))
    delta = float(budget.get("delta") or Fraction(1, 10**6))
    rows = level_table(sizes, plan, float(args.beta), delta)
    shown = [{key: float(f"{float(value):.6g}") if isinstance(value, Fraction | float) else value
              for key, value in row.items() if key != "sigma2_k"} for row in rows]
    return pa.Table.from_pylist(shown)


def cmd_ledger(args: argparse.Namespace) -> int:
    """Print the ledger of a database."""
    con = _connect(args.database, must_exist=True, read_only=True)
    try:
        try:
            table = con.sql("SELECT * FROM inftda_ledger ORDER BY 1").to_arrow_table()
        except duckdb.CatalogException:
            table = None
        if table is None or table.num_rows == 0:
            print(f"No releases recorded in {args.database}.")
        else:
            show(con, table, LEDGER_COLUMNS)
    finally:
        con.close()
    return 0


def cmd_budget(args: argparse.Namespace) -> int:
    """Show budgets, or set one with --set."""
    from ..ledger import store as ledger

    con = _connect(args.database, must_exist=True)
    try:
        if args.set_source is not None:
            budget = _budget(args)
            ledger.set_budget(con, args.set_source, **budget)
        elif args.rho is not None or args.epsilon is not None:
            raise bad_argument("--rho/--epsilon", args.rho or args.epsilon, "needs --set SOURCE",
                               "pass --set TABLE --rho R to set a budget")
        delta = float(args.delta) if args.delta is not None else 1e-6
        show(con, ledger.budget(con, delta=delta), BUDGET_COLUMNS)
    finally:
        con.close()
    return 0


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
    con = _connect(args.database, must_exist=True)
    try:
        options = _release_options(con, args)
        plan = plan_budget(len(columns), **budget, level_weights=options.get("level_weights"),
                           neighbours=args.neighbours,
                           max_rows_per_unit=options.get("max_rows_per_unit", 1),
                           ) if budget else None
        scope = {k: options[k] for k in ("domains", "domain_tables") if k in options}

        def measure(released: str) -> pa.Table:
            return evaluate(con, args.true_table, released, columns, plan=plan,
                            beta=float(args.beta), **scope)

        table = measure(args.released_table)
        show(con, table)
        if args.plot is not None:
            runs = [table]
            for _ in range(args.runs or 0):
                with relay_warnings():
                    run = release(con, args.true_table, columns, **budget, **options)
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
            print(f"wrote {args.plot} ({len(runs)} run(s))")
    finally:
        con.close()
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job."""
    from .demo import run_demo

    run_demo(rows=args.rows, rho=args.rho, out=sys.stdout)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "release": cmd_release, "shell": cmd_shell, "preview": cmd_preview, "ledger": cmd_ledger,
    "budget": cmd_budget, "evaluate": cmd_evaluate, "demo": cmd_demo,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``inftda-duckdb`` console script; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return COMMANDS[args.command](args)
    except (InftdaError, duckdb.Error, OSError) as error:
        sys.stderr.write(f"Error: {clean_message(error)}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
