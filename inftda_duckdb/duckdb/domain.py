"""Public domains of the hierarchy columns: where the values X_k of each level come from.

A level's domain is never read silently from the private data. In order of precedence it is
an explicit list (``domains := {'hour': range(24)}``), the distinct values of a public domain
table that has a column of that name (``domain_tables := ['geo']``), the labels of an ENUM
column, or (opt-in, not private) the distinct values in the data (``domain_from_data``).

A domain table also *nests* levels: if ``geo`` has columns ``state`` and ``county`` (both in the
hierarchy, state first), a state's children are only the counties ``geo`` lists under it.

The values themselves are resolved inside DuckDB by the generated SQL (so TEMP tables and any
column type work); this module decides the plan, inspects the catalog when it is visible, and
turns the data check row computed in SQL into clear errors before anything is charged.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core import limits
from ..core.errors import InputError, InternalError, bad_argument, opt, render
from ..core.identifiers import quote_qualified
from ..core.request import Labels, ReleaseRequest
from ..core.topdown import MAX_KEY_SPAN
from ..ledger.sources import fold, label
from .catalog import resolve_release

KINDS = ("list", "table", "enum", "data")


@dataclass(frozen=True)
class ColumnDomain:
    """Where the domain of one hierarchy level comes from."""

    column: str
    kind: str  # one of KINDS
    labels: Labels = ()  # kind 'list': the values as text in code order, or an integer range
    table: int = -1  # kind 'table': index into DomainPlan.nestings
    table_column: str = ""  # kind 'table': the column's name in that table
    known_enum: bool = False  # kind 'enum' and the catalog showed an ENUM: code = enum_code(v)
    size: int | None = None  # |X_k| when known at planning time (lists, ENUMs seen in the catalog)


@dataclass(frozen=True)
class Nesting:
    """A public domain table and the hierarchy levels (0-based, ascending) it lists together."""

    table: tuple[str, ...]
    levels: tuple[int, ...]
    names: tuple[str, ...]  # the table's own column names for those levels


@dataclass(frozen=True)
class DomainPlan:
    columns: tuple[ColumnDomain, ...]
    nestings: tuple[Nesting, ...]
    source: tuple[str, str, str] = ("", "", "")  # resolved once: read by the SQL, charged
    shadow: str | None = None  # unqualified name resolved outside TEMP: refuse a TEMP namesake

    def nested_parent(self, level: int) -> tuple[int, tuple[int, ...]] | None:
        """For a nested level: (nesting index, earlier levels keying its allowed children)."""
        for t, nest in enumerate(self.nestings):
            if level in nest.levels[1:]:
                return t, nest.levels[: nest.levels.index(level)]
        return None

    def check_sizes(self) -> None:
        """Refuse a release (not a preview) with a domain larger than the cell limit, when its
        size is known as planned: before any SQL runs (a level noises every value of its
        domain under each released parent)."""
        for k, c in enumerate(self.columns, 1):
            if c.size is not None:
                limits.check_domain(c.column, k, c.size)

    def key_sizes(self, level: int) -> list[int] | None:
        """The domain sizes of levels 1..``level`` when all were known at planning time and
        their product is below 2**62: the level's prefixes then travel as one mixed-radix
        BIGINT key each (the order of the codes), else as one list of codes per column."""
        sizes = [c.size for c in self.columns[:level]]
        known = [s for s in sizes if s is not None]
        if len(known) < len(sizes) or math.prod(known) >= MAX_KEY_SPAN:
            return None
        return known

    def to_json(self) -> dict[str, Any]:
        """What inftda_begin needs to interpret the checks (labels stay in the SQL)."""
        return {
            "columns": [[c.column, c.kind, c.size] for c in self.columns],
            "nestings": [[list(n.table), list(n.levels), list(n.names)] for n in self.nestings],
            "source": list(self.source),
            "shadow": self.shadow,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DomainPlan:
        return cls(
            tuple(ColumnDomain(c, k, size=(size or [None])[0]) for c, k, *size in data["columns"]),
            tuple(Nesting(tuple(t), tuple(lv), tuple(nm)) for t, lv, nm in data["nestings"]),
            tuple(data.get("source") or ("", "", "")),
            data.get("shadow"),
        )


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
            "source", request.source, "was not found (no such table or view)", _source_fix()
        )
    if source is not None:
        _check_columns(request, source)
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


def nesting(request: ReleaseRequest, table: tuple[str, ...], names: list[str]) -> Nesting:
    """The hierarchy levels a domain table lists: its columns named like hierarchy columns."""
    by_lower = {fold(name): name for name in names}
    levels = [k for k, c in enumerate(request.columns) if fold(c) in by_lower]
    if not levels:
        raise bad_argument(
            "domain_tables",
            ".".join(table),
            f"has no column named like a hierarchy column {list(request.columns)}",
            "name the table's columns like the hierarchy columns",
        )
    return Nesting(table, tuple(levels), tuple(by_lower[fold(request.columns[k])]
                                               for k in levels))


def column_domains(
    request: ReleaseRequest, nestings: list[Nesting], otherwise: Callable[[str], ColumnDomain]
) -> tuple[ColumnDomain, ...]:
    """Every level's domain by precedence: an explicit list, the domain table listing the
    column, the data (opt-in, not private), else ``otherwise(column)`` (DuckDB: the column's
    ENUM labels; Spark, which has no ENUM: an error). A column in two tables is refused."""
    owner: dict[int, int] = {}
    for t, nest in enumerate(nestings):
        for k in nest.levels:
            if k in owner:
                raise bad_argument(
                    "domain_tables",
                    [".".join(n.table) for n in nestings],
                    f"list column {request.columns[k]!r} in two tables",
                    "give each hierarchy column at most one domain table",
                )
            owner[k] = t
    columns = []
    for k, col in enumerate(request.columns):
        if col in request.domains:
            labels = request.domains[col]
            columns.append(ColumnDomain(col, "list", labels=labels, size=len(labels)))
        elif k in owner:
            nest = nestings[owner[k]]
            name = nest.names[nest.levels.index(k)]
            columns.append(ColumnDomain(col, "table", table=owner[k], table_column=name))
        elif request.domain_from_data:
            columns.append(ColumnDomain(col, "data"))
        else:
            columns.append(otherwise(col))
    return tuple(columns)


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


def _source_fix() -> str:
    return "check the name (qualify it as schema.table if needed) or create the table first"


def _check_columns(request: ReleaseRequest, source: list[tuple[str, str]]) -> None:
    names = {fold(name) for name, _ in source}
    wanted = list(request.columns)
    if request.privacy_unit is not None:
        wanted.append(request.privacy_unit)
    missing = [c for c in wanted if fold(c) not in names]
    if missing:
        raise bad_argument(
            "columns",
            missing,
            f"not found in {request.source}",
            f"use columns of the source: {', '.join(n for n, _ in source)}",
        )


def no_domain(column: str, type_name: str, enums: bool = True) -> InputError:
    """A column without a public domain (``enums``: the engine has ENUM types; Spark has not)."""
    enum = "make it an ENUM, " if enums else ""
    return InputError(
        f"column {column!r} ({type_name}) has no public domain. Fix: declare its values with "
        f"{opt('domains', {column: '...'})}, {enum}list it in a domain table "
        f"({opt('domain_tables', ['...'])}), or (exploration only, not private) pass "
        f"{opt('domain_from_data', True)}"
    )


def load_checks(checks_json: str) -> dict[str, Any]:
    """The check row as one dict: the data stats (one struct in SQL) spread over the columns.
    An ENUM column's checks leave out what cannot happen (no bad or duplicate labels, no value
    outside its domain): zeros here."""
    checks: dict[str, Any] = json.loads(checks_json)
    for c in checks["columns"]:
        c.setdefault("bad", 0)
        c.setdefault("bad_examples", [])
        c.setdefault("dups", 0)
    stats = checks.pop("stats", None)
    if stats is not None:
        checks["n"], checks["kept"] = stats["n"], stats["kept"]
        checks["nulls_unit"] = stats.get("nulls_unit", 0)
        if "masks" in stats:  # all-ENUM leaves under one key: [mask of NULL columns, rows]
            masks = stats["masks"] or []
            for i in range(1, len(checks["columns"]) + 1):
                stats[f"nulls{i}"] = sum(rows for mask, rows in masks if mask >> (i - 1) & 1)
        for i, c in enumerate(checks["columns"], 1):
            c.update(nulls=stats[f"nulls{i}"], unknown=stats.get(f"unknown{i}", 0),
                     examples=stats.get(f"examples{i}") or [])
    return checks


def raise_for_checks(request: ReleaseRequest, plan: DomainPlan, checks_json: str) -> int:
    """Turn the check row computed in SQL into an InputError; return n (rows kept).

    Runs before anything is charged (curator mode; in public-facing mode after the charge, its
    data errors hidden, see :mod:`.disclosure`), after the budget check. Data problems (NULLs,
    values outside the declared domain) are only errors with ``unknown := 'error'``; with 'drop'
    those rows were dropped in SQL.
    """
    checks = raise_for_public_checks(request, plan, checks_json)
    if request.unknown == "error" and checks.get("nulls_unit"):
        raise InputError(
            f"privacy_unit {request.privacy_unit!r} of {request.source} is NULL in "
            f"{checks['nulls_unit']} rows: they cannot be told apart as units. Fix: filter "
            f"them out or fill them (e.g. one unit per row) in a view, or pass "
            f"{opt('unknown', 'drop')} with {opt('neighbours', 'add_remove')} to drop them"
        )
    if request.unknown == "error" and "n" in checks:
        for col, dom, c in zip(request.columns, plan.columns, checks["columns"], strict=True):
            _check_data(request, col, dom, c)
        for nest, c in zip(plan.nestings, checks["nestings"], strict=True):
            if c["outside"]:
                names = ", ".join(request.columns[k] for k in nest.levels)
                raise InputError(
                    f"{c['outside']} rows of {request.source} have a combination of ({names}) "
                    f"that domain table {'.'.join(nest.table)} does not list (e.g. "
                    f"{c['outside_examples']}). Fix: add the combinations to the domain table, "
                    "filter or map those rows in a view, or pass "
                    f"{opt('unknown', 'drop')} with {opt('neighbours', 'add_remove')}"
                )
    return int(checks.get("kept", 0))


def raise_for_public_checks(request: ReleaseRequest, plan: DomainPlan,
                            checks_json: str) -> dict[str, Any]:
    """The checks of the check row that read only the request, the catalog and the public
    domains (never the private data): a TEMP namesake, each level's declared domain, each
    domain table. Returns the check row."""
    checks = load_checks(checks_json)
    if not plan.columns:
        raise InternalError("empty domain plan")
    if checks.get("shadow"):
        raise InputError(
            f"source {request.source!r} names two objects: the TEMP table or view "
            f"temp.main.{plan.shadow} (which the statement would read) and "
            f"{'.'.join(plan.source)} (resolved when the release was planned); nothing was "
            f"charged. Fix: qualify the name, e.g. 'temp.main.{plan.shadow}' or "
            f"'{'.'.join(plan.source)}'"
        )
    for col, dom, c in zip(request.columns, plan.columns, checks["columns"], strict=True):
        _check_domain(col, dom, c)
    for nest, c in zip(plan.nestings, checks["nestings"], strict=True):
        _check_nesting(request, nest, c)
    return checks


def _check_domain(col: str, dom: ColumnDomain, c: dict[str, Any]) -> None:
    if dom.kind == "enum" and not str(c["type"]).startswith("ENUM("):
        raise no_domain(col, str(c["type"]))
    if c["bad"]:
        where = "domains" if dom.kind == "list" else "its domain table"
        raise InputError(
            f"{c['bad']} values declared for column {col!r} in {where} are not valid "
            f"{c['type']} values (e.g. {c['bad_examples']}). Fix: declare values of the "
            "column's type"
        )
    if c["dups"]:
        raise InputError(
            f"the domain of column {col!r} lists {c['dups']} values twice once converted to "
            f"{c['type']}. Fix: list each value once"
        )
    if c["size"] == 0 and dom.kind != "data":
        raise InputError(f"the domain of column {col!r} is empty. Fix: declare its values")
    if dom.size is not None and c["size"] != dom.size:
        raise InputError(
            f"the domain of column {col!r} has {c['size']} values, but had {dom.size} when the "
            "statement was planned (the column's type changed in between). Fix: run the "
            "statement again"
        )


def _check_nesting(request: ReleaseRequest, nest: Nesting, c: dict[str, Any]) -> None:
    table = ".".join(nest.table)
    if c["defects"]:
        raise InputError(
            f"domain table {table} has {c['defects']} rows with a NULL or a value outside the "
            f"domains of ({', '.join(nest.names)}) (e.g. {c['defect_examples']}). Fix: correct "
            "or remove those rows of the domain table"
        )
    if c["orphans"]:
        first = request.columns[nest.levels[0]]
        raise InputError(
            f"{c['orphans']} declared values of column {first!r} have no row in domain table "
            f"{table} (e.g. {c['orphan_examples']}), so they would have no children. Fix: add "
            "rows for them to the domain table or remove them from the domain"
        )


def _check_data(request: ReleaseRequest, col: str, dom: ColumnDomain, c: dict[str, Any]) -> None:
    fix_drop = f"or pass {opt('unknown', 'drop')} with {opt('neighbours', 'add_remove')}"
    if c["nulls"]:
        raise InputError(
            f"column {col!r} of {request.source} is NULL in {c['nulls']} rows. Fix: filter "
            f"them out or map NULL to a declared value in a view, {fix_drop}"
        )
    if c["unknown"]:
        raise InputError(
            f"column {col!r} of {request.source} has {c['unknown']} rows with values outside "
            f"its declared domain (e.g. {c['examples']}). Fix: declare those values, filter "
            f"or map them in a view, {fix_drop}"
        )
