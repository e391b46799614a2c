"""The database a command works on: opened with the package loaded (a missing file refused),
the source it releases (``--table`` in ``--db``, or ``--input`` charged as the file itself), and
the public-facing mode (``--public`` and its declarations) on that connection."""

from __future__ import annotations

import argparse
import os
from typing import Any

import duckdb

from ...core.errors import bad_argument
from ...core.identifiers import parse_qualified
from ...ledger.dialect import STORAGE
from .arguments import reader_sql


def open_database(database: str | None, must_exist: bool, read_only: bool = False,
                  ledger: str | None = None) -> duckdb.DuckDBPyConnection:
    """Open a database (in memory if None) and load the package with ``ledger`` (None: the
    default); refuse a missing file."""
    from ...duckdb import catalog
    from ...duckdb.extension import load

    if database and must_exist and not os.path.isfile(database):
        raise bad_argument("DATABASE", database, "must be an existing DuckDB file",
                           "check the path (nothing was created)")
    con = duckdb.connect(database or ":memory:", read_only=read_only, config=dict(STORAGE))
    try:
        if not read_only:
            load(con, ledger=ledger)
        elif ledger is not None:
            catalog.choose(con, ledger)
    except BaseException:
        con.close()
        raise
    return con


def source_of(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> tuple[Any, str]:
    """The source and its name for messages: --table, or a relation reading --input (charged
    as the file itself: see :func:`charged_as`)."""
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
    return con.sql(f"SELECT * FROM {reader_sql(args.input[0], '--input')}"), str(args.input[0])


def charged_as(args: argparse.Namespace) -> str | None:
    """A file given with --input is charged as that file (its absolute path), whatever its
    name: the same file released from Python or SQL as 'file:PATH' is the same source."""
    return None if args.input is None else "file:" + os.path.abspath(args.input[0])


def exists(con: duckdb.DuckDBPyConnection, relation: str) -> bool:
    try:
        con.execute(f"SELECT * FROM {relation} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def public_mode(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> None:
    """``--public`` and its declarations on a loaded connection."""
    from ...duckdb import disclosure
    from ...duckdb.extension import load

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


def refuse_public_on_spark(args: argparse.Namespace) -> None:
    """The public-facing mode is a DuckDB connection's; with Spark it would be silently absent."""
    if getattr(args, "public", False):
        raise bad_argument("--public", True, "is a mode of the DuckDB engine (analysts calling "
                           "its SQL functions); the Spark engine has no such surface",
                           "drop --public (the curator runs Spark releases), or use "
                           "--engine duckdb")


__all__ = ["charged_as", "exists", "open_database", "public_mode", "refuse_public_on_spark",
           "source_of"]
