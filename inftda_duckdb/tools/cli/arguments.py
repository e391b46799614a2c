"""What the command line's options mean: exact numbers, name lists, ``--domain COL=SPEC`` and
``--domain-file COL=FILE``, the budget (``--rho``, or ``--epsilon`` with ``--delta``), the
keyword arguments of a release or preview, and the files ``--input``/``--output`` name.

Every check raises the package's ``InputError`` (exit status 2) naming the option, the value,
the rule and the fix; nothing here opens a database except to read a public ``--domain-file``.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import duckdb

from ...core.errors import InftdaError, bad_argument
from ...core.exact import to_positive_fraction
from ...core.identifiers import literal, quote

FILE_KINDS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


_INT_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


def fraction(name: str, example: str) -> Callable[[str], Fraction]:
    def parse(text: str) -> Fraction:
        try:
            return to_positive_fraction(text, name, f"pass e.g. {name} {example}")
        except InftdaError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def positive_int(name: str, example: str = "1") -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(str(bad_argument(
                name, text, "must be a positive integer", f"pass e.g. {name} {example}")))
        return int(text)

    return parse


def name_list(text: str, name: str = "--columns") -> list[str]:
    names = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in names):
        raise bad_argument(name, text, "must be a comma-separated list of names",
                           f"pass e.g. {name} origin,dest,hour")
    return names


def parse_domain(spec: str) -> tuple[str, range | list[Any]]:
    """``col=LO..HI`` (integers LO..HI inclusive, kept a ``range``: never expanded, whatever its
    size) or ``col=a,b,c`` (labels, in code order)."""
    column, sep, values = spec.partition("=")
    fix = "pass e.g. --domain hour=0..23 or --domain origin=EWR,JFK,LGA"
    if not sep or not column.strip() or not values.strip():
        raise bad_argument("--domain", spec, "must be COLUMN=LO..HI or COLUMN=V1,V2,...", fix)
    match = _INT_RANGE.match(values)
    if match:
        low, high = int(match[1]), int(match[2])
        if high < low:
            raise bad_argument("--domain", spec, "must have LO <= HI", fix)
        return column.strip(), range(low, high + 1)
    labels = [v.strip() for v in values.split(",")]
    if any(not v for v in labels) or len(set(labels)) != len(labels):
        raise bad_argument("--domain", spec, "must list distinct, non-empty values", fix)
    return column.strip(), labels


def file_kind(path: str, option: str) -> str:
    kind = FILE_KINDS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise bad_argument(option, path, "must end in .parquet, .pq or .csv",
                           f"pass e.g. {option} data.parquet")
    return kind


def reader_sql(path: str, option: str) -> str:
    """SQL that reads a Parquet or CSV file, after checking that it exists."""
    kind = file_kind(path, option)
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
    relation = con.sql(f"SELECT * FROM {reader_sql(path.strip(), '--domain-file')}")
    names = {name.lower(): name for name in relation.columns}
    chosen = names.get(column.lower(), relation.columns[0])
    values = [row[0] for row in relation.select(quote(chosen)).fetchall()]
    unique = list(dict.fromkeys(values))
    if not unique or None in unique:
        raise bad_argument("--domain-file", spec, "must hold at least one value and no NULLs",
                           "list the public values of the column, one per row")
    return column, unique


def budget_of(args: argparse.Namespace, delta_default: bool = False) -> dict[str, Any]:
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


def release_options(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> dict[str, Any]:
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
            for w in name_list(args.level_weights, "--level-weights")]
    if args.auto_target is not None:
        target = args.auto_target.strip()
        options["auto_target"] = int(target) if target.isdigit() else target
    if args.privacy_unit:
        options["privacy_unit"] = args.privacy_unit
    if args.max_rows_per_unit is not None:
        options["max_rows_per_unit"] = args.max_rows_per_unit
    if args.rows_per_unit_public:
        options["rows_per_unit_public"] = True
    if getattr(args, "estimator", None) is not None:  # not a plan's option
        options["estimator"] = args.estimator
    return options


def output_kind(args: argparse.Namespace, folder_ok: bool = False) -> str:
    """The kind of the --output file ('parquet' or 'csv'), once its folder exists and the file
    does not (unless --overwrite); ``folder_ok`` for engines that write a folder of parts
    (Spark)."""
    kind = file_kind(args.output, "--output")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise bad_argument("--output", args.output, "must be in an existing folder",
                           "create the folder first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise bad_argument("--output", args.output, "must be in a folder this user can write "
                           "(checked before the release is charged)",
                           "choose a writable folder, or fix its permissions")
    if os.path.exists(args.output) and not args.overwrite:
        raise bad_argument("--output", args.output, "already exists",
                           "pass --overwrite, or choose another file")
    if os.path.isdir(args.output) and not folder_ok:
        raise bad_argument("--output", args.output, "is a folder", "name a file in it")
    return kind


__all__ = ["FILE_KINDS", "budget_of", "file_kind", "fraction", "name_list", "output_kind",
           "parse_domain", "positive_int", "read_domain_file", "reader_sql",
           "release_options"]
