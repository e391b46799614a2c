"""Public domains in DuckDB's catalog: the domain plan of a release (:mod:`inftda_duckdb.core.
domains`, its rules and precedence) as this engine fills it in.

The values themselves are resolved inside DuckDB by the generated SQL (so TEMP tables and any
column type work); this module resolves the source and the domain tables in the catalog, checks
columns and types when the catalog shows them, reads an ENUM column's labels as its domain, and
warns about the ENUM DuckDB makes of a pandas Categorical.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from ..core.domains import (
    ColumnDomain,
    DomainPlan,
    Nesting,
    check_columns,
    column_domains,
    nesting,
    no_domain,
    source_fix,
)
from ..core.errors import bad_argument, opt, render
from ..core.identifiers import fold, label, quote_qualified
from ..core.request import ReleaseRequest
from .catalog import resolve_release


def table_columns(con: Any, parts: tuple[str, ...]) -> list[tuple[str, str]] | None:
    """``[(name, type)]`` of a table or view, or None when ``con`` cannot see it."""
    try:
        rel = con.sql(f"SELECT * FROM {quote_qualified(parts)} LIMIT 0")
        return [(str(n), str(t)) for n, t in zip(rel.columns, rel.types, strict=True)]
    except Exception:  # invisible (TEMP to another connection) or missing
        return None


def plan_domains(
    request: ReleaseRequest,
    con: Any,
    *,
    strict: bool,
    context: tuple[str, str, str] | None = None,
) -> DomainPlan:
    """Decide every level's domain; check columns and types against the visible catalog.

    ``strict`` (Python path, caller's own connection): a source or domain table that cannot be
    found is an error. Otherwise (SQL bind time, a fresh cursor that cannot see TEMP tables) an
    invisible source is checked later, inside DuckDB, before anything is charged.

    The source and the domain tables are resolved here, once (``context``: the caller's current
    database, schema and search_path when ``con`` is a fresh cursor), to the fully qualified
    names the SQL reads and the ledger charges. A name ``con`` cannot see resolves to
    ``temp.main.<name>``. A domain table that is the source itself is refused.
    """
    resolved = resolve_release(con, request.source, context)
    shadow = None
    if len(request.source_parts) == 1 and fold(resolved[0]) != "temp":
        shadow = resolved[2]
    source = table_columns(con, resolved)
    if source is None and strict:
        raise bad_argument(
            "source", request.source, "was not found (no such table or view)", source_fix()
        )
    if source is not None:
        check_columns(request, source)
    nestings: list[Nesting] = []
    for given in request.domain_tables:
        parts = resolve_release(con, quote_qualified(given), context)
        if tuple(fold(p) for p in parts) == tuple(fold(p) for p in resolved):
            raise bad_argument(
                "domain_tables",
                ".".join(given),
                f"names the private source {label(resolved)} itself: its values and "
                "combinations would be read from the private data, and the release would not "
                "be private",
                "pass a public table that is not derived from the data, or declare the values "
                f"with {opt('domains')}; to read domains from the data explicitly (not private) "
                f"pass {opt('domain_from_data', True)}",
            )
        cols = table_columns(con, parts)
        if cols is None:
            raise bad_argument(
                "domain_tables",
                ".".join(parts),
                "names a table that was not found (from SQL a domain table must be a "
                "non-TEMP table or view)",
                "create it as a regular table, or call inftda_duckdb.release from Python",
            )
        nestings.append(nesting(request, parts, [name for name, _ in cols]))
    types = {fold(name): typ for name, typ in source or []}

    def enum(col: str) -> ColumnDomain:
        typ = types.get(fold(col))
        if typ is not None and not typ.startswith("ENUM("):
            raise no_domain(col, typ)
        size = None if typ is None else len(_ENUM_LABEL.findall(typ))
        return ColumnDomain(col, "enum", known_enum=typ is not None, size=size)

    columns = column_domains(request, nestings, enum)
    result = DomainPlan(columns, tuple(nestings), resolved, shadow)
    if strict:  # the caller's own connection sees its TEMP views (SQL: the checks do it)
        warn_frame_enums(request.source, frame_enums(con, result))
    return result


_ENUM_LABEL = re.compile(r"'((?:[^']|'')*)'")  # one label of an ENUM type's name (as in SQL)


def enum_labels(type_name: str) -> tuple[str, ...]:
    """The labels of an ENUM type as DuckDB names it (``ENUM('a', 'it''s')``), in order."""
    return tuple(label.replace("''", "'") for label in _ENUM_LABEL.findall(type_name))


FRAME_SCAN = "pandas_scan("
"""In the SQL of the TEMP view DuckDB makes for a registered pandas DataFrame (DuckDB >= 1.5.1;
DuckDB 1.5.0 gives such a view an empty SQL text, which no CREATE VIEW can)."""


class CategoricalDomainWarning(UserWarning):
    """A level's domain is the ENUM of a registered pandas DataFrame: a Categorical's categories
    are, unless declared, the values pandas found in the data."""


def frame_enums(con: Any, plan: DomainPlan) -> tuple[str, ...]:
    """The hierarchy columns whose domain is the ENUM of a registered pandas DataFrame (from
    the catalog: the view's SQL, never the data)."""
    db, schema, name = plan.source
    enums = tuple(c.column for c in plan.columns if c.kind == "enum")
    if not enums or db.lower() != "temp":
        return ()
    try:
        rows = con.execute("SELECT schema_name, view_name, sql FROM duckdb_views() "
                           "WHERE temporary").fetchall()
    except Exception:  # a connection that cannot run it: nothing to say
        return ()
    registered = any(FRAME_SCAN in str(sql) or not str(sql or "").strip()
                     for s, v, sql in rows if (fold(s), fold(v)) == (fold(schema), fold(name)))
    return enums if registered else ()


def frame_enum_text(source: str, columns: tuple[str, ...] | list[str]) -> str:
    names = ", ".join(repr(c) for c in columns)
    frame = "" if source.startswith("inftda_source_") else f" {source!r}"  # release(con, df)
    return (
        f"the domain of {names} is the ENUM that DuckDB made from the pandas Categorical of the "
        f"registered DataFrame{frame}: unless its categories were declared from a public "
        "list, pandas took them from the data, and a value only one person has would be "
        "released as a private category. Fix: build the column with pd.CategoricalDtype("
        f"categories=[...public values...]), or declare the values with {opt('domains', ...)}"
    )


def warn_frame_enums(source: str, columns: tuple[str, ...]) -> None:
    if columns:
        warnings.warn(render(frame_enum_text(source, columns)), CategoricalDomainWarning,
                      stacklevel=4)


