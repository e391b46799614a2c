"""What the ``--public`` shell lets an analyst run: the package's functions and queries over
released tables, nothing that reads a private table.

Every statement is parsed by DuckDB itself (``extract_statements`` for its kind,
``json_serialize_sql`` for its syntax tree), never matched as text, and admitted only if it is:

- a ``SELECT`` (``WITH``, ``UNION``, subqueries included) whose every table reference is a
  released table (one this shell created from admitted queries, or one whose comment is a
  release's provenance: ``inftda-duckdb release --into-table`` writes it) or a table the curator
  declared public (``--public-table``), whose every table function is one of
  :data:`TABLE_FUNCTIONS`, and which calls no macro of the database (a macro can read a table);
- ``CREATE [OR REPLACE] [TEMP] TABLE name AS`` such a ``SELECT``: the shell runs the statement
  it composes itself from the quoted name and the admitted ``SELECT`` (never the text as typed),
  and marks the table released (its comment, :data:`PUBLIC_SHELL`).

Everything else is refused before it runs (nothing is read, nothing charged): other statements
(``INSERT``, ``COPY``, ``ATTACH``, ``SET``, ``PRAGMA``, ``EXPLAIN``, ...), views (a view can
read anything), file readers, the catalog functions (``duckdb_tables()`` shows row counts) and
a ``WITH`` name that shadows a table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import duckdb

from ..core.errors import InputError
from ..core.identifiers import literal, parse_qualified, quote_qualified
from ..core.provenance import is_release_comment

TABLE_FUNCTIONS = frozenset({"inftda_release", "inftda_preview", "inftda_budget",
                             "inftda_releases", "inftda_evaluate", "range", "generate_series",
                             "unnest"})
"""The table functions a public statement may call: the package's (each checks the mode
itself) and three that read nothing."""

_CREATE = re.compile(r"\s*CREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+|TEMPORARY\s+)?TABLE\s+"
                     r"((?:\"(?:[^\"]|\"\")+\"|[A-Za-z_][\w$]*)(?:\s*\.\s*(?:\"(?:[^\"]|\"\")+\"|"
                     r"[A-Za-z_][\w$]*)){0,2})\s+AS\s+(.*)$", re.S | re.I)
PUBLIC_SHELL = ("Differentially private release (inftda-duckdb): made in the public shell from "
                "the package's functions and released tables")
"""The comment of a table the public shell created."""
_FIX = ("query released tables (CREATE TABLE t AS SELECT * FROM inftda_release(...), then "
        "SELECT ... FROM t) or call the package's functions; the curator can declare a table "
        "public with --public-table")


def refused(what: str) -> InputError:
    return InputError(f"the public shell refuses {what}: it runs only the package's functions "
                      f"and queries over released or declared public tables; nothing was run. "
                      f"Fix: {_FIX}")


class Admission:
    """The public shell's gate on connection ``con`` (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def statement(self, sql: str) -> str:
        """The statement to run for ``sql``, or raise :func:`refused`."""
        try:
            parsed = self.con.extract_statements(sql)
        except duckdb.Error:
            raise refused("a statement DuckDB cannot parse") from None
        if len(parsed) != 1:
            raise refused("several statements at once")
        kind = parsed[0].type
        if kind == duckdb.StatementType.SELECT:
            self.check_select(sql)
            return sql
        if kind == duckdb.StatementType.CREATE:
            return self.create(sql)
        raise refused(f"{kind.name} statements")

    def create(self, sql: str) -> str:
        """``CREATE TABLE name AS SELECT``: the statement composed from the parts, checked."""
        match = _CREATE.match(sql.strip())
        if match is None:
            raise refused("CREATE statements other than CREATE TABLE name AS SELECT ...")
        select = match[4]
        try:
            inner = self.con.extract_statements(select)
        except duckdb.Error:
            raise refused("a CREATE TABLE whose query DuckDB cannot parse") from None
        if len(inner) != 1 or inner[0].type != duckdb.StatementType.SELECT:
            raise refused("CREATE statements other than CREATE TABLE name AS SELECT ...")
        self.check_select(select)
        name = quote_qualified(parse_qualified(match[3], "table"))
        return (f"CREATE {'OR REPLACE ' if match[1] else ''}{'TEMP ' if match[2] else ''}"
                f"TABLE {name} AS {select}")

    def created(self, composed: str) -> None:
        """After a composed CREATE TABLE ran: its comment marks it released (the public shell
        refuses COMMENT, so an analyst cannot mark a table)."""
        match = _CREATE.match(composed)
        if match is not None:
            self.con.execute(f"COMMENT ON TABLE {match[3]} IS {literal(PUBLIC_SHELL)}")

    def check_select(self, sql: str) -> None:
        tree = self.con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0]
        data = json.loads(tree)
        if data.get("error"):
            raise refused("a statement DuckDB cannot serialize")
        tables = self._catalog()
        ctes = {str(name).lower() for name in _cte_names(data)}
        for name in sorted(ctes & {parts[-1] for parts in tables}):
            raise refused(f"the WITH name {name!r}, which shadows a table or view")
        macros = self._macros()
        for node in _nodes(data):
            kind = node.get("type")
            if kind == "BASE_TABLE":
                parts = tuple(str(p).lower() for p in (node.get("catalog_name"),
                              node.get("schema_name"), node.get("table_name")) if p)
                if len(parts) == 1 and parts[0] in ctes:
                    continue
                found = tables.get(parts)
                if not found or not all(found):
                    raise refused(f"reading {'.'.join(parts)} (not a released or declared "
                                  "public table)")
            elif kind == "TABLE_FUNCTION":
                function = node.get("function") or {}
                name = str(function.get("function_name", "")).lower()
                if name not in TABLE_FUNCTIONS:
                    raise refused(f"the table function {name}")
            elif node.get("class") == "FUNCTION":
                name = str(node.get("function_name", "")).lower()
                if name in macros or (name.startswith("inftda_") and name not in TABLE_FUNCTIONS):
                    raise refused(f"calling {name} (a macro or an internal function)")

    def _catalog(self) -> dict[tuple[str, ...], list[bool]]:
        """Every table and view by each suffix of its folded (database, schema, name): whether
        each object a reference so spelled could mean is admitted (a released or declared public
        table; a view never is)."""
        from ..duckdb import disclosure

        rows = self.con.execute(
            "SELECT database_name, schema_name, table_name, true, comment FROM duckdb_tables() "
            "UNION ALL SELECT database_name, schema_name, view_name, false, comment "
            "FROM duckdb_views() WHERE NOT internal").fetchall()
        found: dict[tuple[str, ...], list[bool]] = {}
        for db, schema, name, table, comment in rows:
            full = (db.lower(), schema.lower(), name.lower())
            ok = bool(table) and (is_release_comment(comment)
                                  or disclosure.public_table(self.con, full))
            for i in range(3):
                found.setdefault(full[i:], []).append(ok)
        return found

    def _macros(self) -> set[str]:
        rows = self.con.execute(
            "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type "
            "IN ('macro', 'table_macro') AND NOT internal").fetchall()
        return {name for (name,) in rows} - TABLE_FUNCTIONS


def _nodes(value: Any) -> Iterator[dict[str, Any]]:
    """Every object of a serialized syntax tree, depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _cte_names(data: Any) -> Iterator[str]:
    for node in _nodes(data):
        cte = node.get("cte_map")
        if isinstance(cte, dict):
            for entry in cte.get("map") or []:
                if isinstance(entry, dict) and "key" in entry:
                    yield entry["key"]


__all__ = ["PUBLIC_SHELL", "TABLE_FUNCTIONS", "Admission", "refused"]
