"""What the SQL surface discloses, and to whom: the curator mode and the public-facing mode.

``load(con)`` starts in **curator mode** (the default): errors are written for the curator and
quote the data (counts, a few values), and the non-private helpers work. Even there the budget
comes first: a release its budget would refuse is refused before any data check, so it charges
nothing and reveals nothing (:func:`check_budget`).

``load(con, mode='public')`` turns on the **public-facing mode**, for curators who let analysts
call the functions. Its rules, enforced inside every UDF (the analyst can call them by name,
with any argument), never by the SQL that calls them:

- the budget is checked before anything that depends on the data, and a source no budget covers
  is refused (:func:`check_budget`);
- no release fails on the data: rows outside the declared domains (NULLs included) and rows
  with a NULL privacy unit are dropped, so whether a release succeeds is not a bit about the
  data. ``unknown`` defaults to ``'drop'`` and ``neighbours`` to ``'add_remove'`` (dropping rows
  needs a noised total); ``unknown := 'error'`` is refused (:data:`DEFAULTS`, :func:`defaults`);
- after the checks that read only the request and the catalog, the release is charged, *then*
  the data checks run; should one fail all the same, it is one fixed message
  (:data:`DATA_PROBLEM_TAG`) with no count, value or other data-dependent text
  (:func:`hidden`), and the release stays charged (defence in depth);
- ``seed``, ``domain_from_data``, ``rows_per_unit_public`` and ``inftda_evaluate`` on a table not
  declared public are refused, and so is ``inftda_set_budget`` from SQL (:func:`refuse`);
- only public domains are accepted: explicit lists, domain tables the curator declared public
  (:func:`declare_public_table`) and ENUM types whose labels the curator declared public
  (:func:`declare_public_enum`; an ENUM made from a pandas Categorical never is).

The mode cannot be turned off. DuckDB's Python UDF names are instance-wide, so any connection of
the database can call the UDFs of any other: turning the mode on creates the instance-wide UDF
:data:`MARKER`, and every UDF body asks for it (:func:`is_public`). SQL cannot remove a Python
UDF, and a macro of that name could only turn the mode on. Declarations are kept in this
process, per connection, and fail closed (a connection without them accepts no ENUM or table).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import duckdb

from ..core.errors import (
    BudgetExceededError,
    InftdaError,
    InputError,
    ReleaseAbortedError,
    bad_argument,
    opt,
)
from ..core.identifiers import parse_qualified, quote_qualified
from ..core.request import ReleaseRequest
from ..ledger.sources import SourceId
from ..ledger.store import Charge
from . import catalog
from .catalog import Home, Where
from .domain import DomainPlan, enum_labels

MODES = ("curator", "public")
MARKER = f"inftda_public_mode_{secrets.token_hex(8)}"
"""The instance-wide UDF whose existence means: every connection of this database is public.
Named afresh in each process (nobody can create a macro of that name before the mode is turned
on, which would keep the UDF from being created) and always called as ``system.main.<name>``
(DuckDB's system catalog, where only a Python UDF can be and no macro can shadow it)."""

DATA_PROBLEM_TAG = "the data did not pass this release's checks"

DEFAULTS = {"unknown": "drop", "neighbours": "add_remove"}
"""The public-facing mode's defaults for options a call leaves out: no release fails on the
data (a failure would be one bit about it that no noise covers)."""

_LOG = logging.getLogger("inftda_duckdb.disclosure")
_PUBLIC: weakref.WeakSet[Any] = weakref.WeakSet()
_TABLES: weakref.WeakKeyDictionary[Any, set[tuple[str, ...]]] = weakref.WeakKeyDictionary()
_ENUMS: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], str]] = weakref.WeakKeyDictionary()
_SOURCES: weakref.WeakKeyDictionary[Any, set[tuple[str, ...]]] = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------------------------- the mode


def set_mode(con: Any, mode: str | None) -> None:
    """``load(con, mode=...)``: None keeps the mode in force (curator, unless public); 'public'
    turns the public-facing mode on for the whole database instance, for good."""
    if mode is not None and mode not in MODES:
        raise bad_argument("mode", mode, f"must be one of {', '.join(map(repr, MODES))}",
                           "pass mode='public' for analysts, or leave it out (curator)")
    if mode == "curator" and is_public(con):
        raise bad_argument("mode", mode, "cannot be turned off: this database is in the "
                           "public-facing mode", "open a new database instance (another "
                           "process) for curator work")
    if mode == "public":
        global _EVER_PUBLIC
        _EVER_PUBLIC = True
        _PUBLIC.add(con)
        if _marked(con) is not True:
            try:
                con.create_function(MARKER, _public, [], "VARCHAR")
            except duckdb.Error:  # made meanwhile, or a TEMP macro of con has the name
                with con.cursor() as cur, contextlib.suppress(duckdb.Error):
                    cur.create_function(MARKER, _public, [], "VARCHAR")
            if _marked(con) is not True:  # fail closed: say so, never leave others curator
                raise InputError(
                    f"the public-facing mode could not be turned on for the whole database "
                    f"instance: DuckDB refused to create its marker function {MARKER} (the "
                    "name is taken, by a macro?). This connection is public; others of the "
                    "instance would not be. Fix: drop what has that name, or open the database "
                    "in a new process")


def _public() -> str:
    """The body of the :data:`MARKER` UDF (module-level: DuckDB keeps only a borrowed reference
    to a UDF's function, which must outlive the connection that registered it)."""
    return "public"


_EVER_PUBLIC = False
"""Whether any connection of this process turned the mode on. Python UDFs exist only in the
process that registered them, so until then no database instance here has :data:`MARKER`
(checking costs a statement, ~0.5 ms, several times per release)."""


def _marked(con: Any) -> bool | None:
    """Whether the instance of ``con`` has :data:`MARKER` (True), surely not (False: DuckDB says
    no such function exists), or whether something else answers to its name (None: counted as
    public by :func:`is_public`, fail closed)."""
    if not _EVER_PUBLIC:
        return False
    with con.cursor() as cur:
        try:
            rows = cur.execute(f"SELECT system.main.{MARKER}()").fetchall()
        except duckdb.CatalogException:
            return False
        except duckdb.Error:
            return None
    return True if rows == [("public",)] else None


def is_public(con: Any) -> bool:
    """Whether ``con`` (or any connection of its database instance) is in public-facing mode."""
    return con in _PUBLIC or _marked(con) is not False


# ------------------------------------------------------------------------------ declarations


def declare_public_table(con: Any, name: str) -> None:
    """The curator vouches that table or view ``name`` is public knowledge (a domain table an
    analyst may name, or a true table ``inftda_evaluate`` may read in public-facing mode).
    Resolved now, as DuckDB resolves it; kept for ``con``, in this process."""
    with con.cursor() as cur:
        found = catalog.resolve_release(cur, name, _context(con))
        try:
            cur.execute(f"SELECT * FROM {quote_qualified(found)} LIMIT 0")
        except duckdb.Error:
            raise bad_argument("name", name, "was not found (no such table or view)",
                               "create the public table first") from None
    _TABLES.setdefault(con, set()).add(_low(found))


def declare_public_enum(con: Any, type_name: str) -> None:
    """The curator vouches that the labels of an ENUM type are public values (never read from
    the data): columns of an ENUM type with exactly these labels, in this order, may then be
    released in public-facing mode. ``type_name``: a type made by ``CREATE TYPE``, or
    ``table.column`` for a column declared with an anonymous ``ENUM(...)``. Kept for ``con``,
    in this process."""
    parts = parse_qualified(type_name, "type_name")
    try:
        row = con.execute(f"SELECT enum_range(NULL::{quote_qualified(parts)})").fetchall()
        labels = tuple(str(x) for x in row[0][0])
    except duckdb.Error:
        labels = _column_enum(con, parts) if len(parts) > 1 else ()
    if not labels:
        raise bad_argument("type_name", type_name, "is not an ENUM type or ENUM column of this "
                           "database", "create it with CREATE TYPE name AS ENUM (...public "
                           "values...), or name a column as 'table.column'")
    _ENUMS.setdefault(con, {})[labels] = type_name


def declare_failsafe_source(con: Any, name: str) -> None:
    """The curator vouches that reading the view (or other source) ``name`` cannot fail on its
    rows: no CAST, arithmetic, ``error()``, parsing of a file or scan of another kind of
    database in it that one row could make fail. In public-facing mode a release reads only
    tables of DuckDB databases, the sources declared here and those declared public
    (:func:`declare_public_table`): whether a release fails, and what it says, must not depend
    on the data, and DuckDB's own error (raised before the charge, quoting the row's value)
    cannot be replaced there. Resolved now on ``con`` itself (its TEMP objects and registered
    DataFrames included); kept for ``con``, in this process."""
    found = catalog.resolve(con, name, _context(con))
    if found is None:
        raise bad_argument("name", name, "names no table or view this connection can see",
                           "create it first, or check the name")
    _SOURCES.setdefault(con, set()).add(_low(found))


def _column_enum(con: Any, parts: tuple[str, ...]) -> tuple[str, ...]:
    """The labels of the ENUM column ``table.column`` (from the catalog; () if not one)."""
    with con.cursor() as cur:
        db, schema, table = catalog.resolve_release(cur, quote_qualified(parts[:-1]), _context(con))
        rows = cur.execute(
            "SELECT data_type FROM duckdb_columns() WHERE lower(database_name) = lower(?) AND "
            "lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND "
            "lower(column_name) = lower(?)", [db, schema, table, parts[-1]]).fetchall()
    found = str(rows[0][0]) if rows else ""
    return enum_labels(found) if found.startswith("ENUM(") else ()


def _context(con: Any) -> tuple[str, str, str]:
    db, schema, path = con.execute(
        "SELECT current_database(), current_schema(), current_setting('search_path')"
    ).fetchall()[0]
    return str(db), str(schema), str(path or "")


def _low(parts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p.lower() for p in parts)


def public_table(con: Any, parts: tuple[str, ...]) -> bool:
    return _low(parts) in _TABLES.get(con, set())


# ------------------------------------------------------------------------------- refusals


def refuse(what: str, fix: str) -> InputError:
    """A request the public-facing mode refuses (it names only the request, never the data)."""
    return InputError(f"{what} is refused in public-facing mode (this connection serves "
                      f"analysts; nothing was charged). Fix: {fix}")


def refuse_if_public(con: Any, what: str, fix: str) -> None:
    if is_public(con):
        raise refuse(what, fix)


def defaults(con: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the public-facing mode's :data:`DEFAULTS` where a call left them out (or
    passed NULL), on a public connection; unchanged otherwise."""
    if con is None or not is_public(con):
        return options
    return {**options, **{k: v for k, v in DEFAULTS.items() if options.get(k) is None}}


def admit(con: Any, request: ReleaseRequest, plan: DomainPlan,
          checks: dict[str, Any] | None = None, session: Any = None, *,
          statement: bool = True) -> None:
    """The public-facing mode's refusals of a release or preview, from the request, the
    caller's session and the catalog only (``checks``: the check row, whose column types name
    each ENUM's labels and which carries the session; else ``session`` from the macro; not
    ``statement``: the Python API before it runs its statement, whose session its check row
    carries)."""
    if not is_public(con):
        return
    if statement:
        _check_session(checks.get("session") if checks is not None else session)
    ask = "ask the curator"
    if request.seed is not None:
        raise refuse(f"{opt('seed', request.seed)} (reproducible noise: not private)",
                     "leave it out")
    if request.domain_from_data:
        raise refuse(f"{opt('domain_from_data', True)} (domains read from the private data)",
                     f"declare the values with {opt('domains')}")
    if request.rows_per_unit_public:
        raise refuse(f"{opt('rows_per_unit_public', True)} (an assertion only the curator can "
                     "make)", "leave it out: the total is then noised")
    if request.unknown != DEFAULTS["unknown"]:
        raise refuse(f"{opt('unknown', request.unknown)} (whether a release stops on rows "
                     "outside the domains would tell whether such rows exist)",
                     "leave it out: rows outside the declared domains are dropped")
    for nest in plan.nestings:
        if not public_table(con, nest.table):
            raise refuse(f"domain table {'.'.join(nest.table)}, which the curator has not "
                         "declared public,", f"{ask} to call declare_public_table(con, "
                         f"{'.'.join(nest.table)!r}), or declare the values with "
                         f"{opt('domains')}")
    if checks is None:
        return
    declared = _ENUMS.get(con, {})
    for dom, c in zip(plan.columns, checks["columns"], strict=True):
        if dom.kind == "enum" and enum_labels(str(c["type"])) not in declared:
            raise refuse(f"the ENUM domain of column {dom.column!r}, whose type the curator "
                         "has not declared public (an ENUM may have been made from the data),",
                         f"{ask} to call declare_public_enum(con, 'type_name'), or declare "
                         f"the values with {opt('domains')}")


ADMITTED = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "MERGE_INTO", "CREATE", "COPY",
                      "MULTI", "PREPARE", "EXECUTE", "SET"})
"""The kinds of statement (DuckDB's parser's ``StatementType``) a release or preview may be
part of in public-facing mode: every kind that runs or stores it, none that prints its plan.
``EXPLAIN`` (with or without ``ANALYZE``, any options, after any comment) is refused: its plan
shows DuckDB's cardinality estimates of the private tables (their exact row counts), its
analysis every operator's exact row count. A kind DuckDB adds later is refused until added
here. (DuckDB cannot ``PREPARE`` an ``EXPLAIN``, and ``EXECUTE`` binds the statement again,
under its own text.)"""

QUIET_LOG_LEVELS = frozenset({"INFO", "WARNING", "WARN", "ERROR", "FATAL"})
"""DuckDB's log levels at which no operator logs (DuckDB logs its operators, with their row
counts, at DEBUG): a release or preview runs while logging is off or at one of these."""

_PARSER: list[Any] = []  # a private in-memory DuckDB, for its parser only
_PARSER_LOCK = threading.Lock()


def statement_kinds(text: str) -> list[str] | None:
    """The kinds of the statements in ``text`` as DuckDB's own parser reads them (comments,
    case and spacing as DuckDB takes them: no text matching), or None if it cannot parse it."""
    with _PARSER_LOCK:
        if not _PARSER:
            _PARSER.append(duckdb.connect())
        try:
            return [s.type.name for s in _PARSER[0].extract_statements(text)]
        except duckdb.Error:
            return None


def _check_session(session: Any) -> None:
    """The statement a release or preview is part of, and the caller's profiling and logging,
    as the macro (when it is bound) and the check row (when it runs) read them with
    ``current_query()`` and ``current_setting``: the statement must be of an :data:`ADMITTED`
    kind (``EXPLAIN`` in any spelling is refused when it is bound, before any data is read: the
    generator runs for EXPLAIN too), profiling must be off (DuckDB's profiles show every
    operator's exact row count; the statement then fails and leaves no profile), and logging off
    or at a :data:`QUIET_LOG_LEVELS` level. A session missing from the arguments (a UDF
    called by hand, not through the table macros) is refused too."""
    if not isinstance(session, dict) or "profiling" not in session or "query" not in session:
        raise refuse("a release or preview statement not made by inftda_release or "
                     "inftda_preview", "call the table macros")
    if session["profiling"] is not None:
        raise refuse("profiling (enable_profiling, profiling_mode, PRAGMA enable_profiling), "
                     "which shows the row counts of the private data,",
                     "turn it off (PRAGMA disable_profiling) and run the statement again")
    logging = session.get("logging")
    if not isinstance(logging, dict) or (logging.get("on") and str(
            logging.get("level")).upper() not in QUIET_LOG_LEVELS):
        raise refuse("DuckDB's logging at DEBUG or TRACE level (CALL enable_logging), whose "
                     "operator logs record row counts of the private data,",
                     "log at level INFO or above (CALL enable_logging(level := 'info')), or "
                     "CALL disable_logging()")
    query = session["query"]
    if query is None:  # a relation bound outside any statement: nothing runs or prints here;
        return  # what runs or explains it binds it again, under its own statement
    kinds = statement_kinds(query) if isinstance(query, str) else None
    if kinds is not None and "EXPLAIN" in kinds:
        raise refuse("EXPLAIN of a release or preview (in any spelling: its plan shows "
                     "DuckDB's estimates of the private row counts, EXPLAIN ANALYZE every "
                     "exact one)", "run the statement without EXPLAIN")
    if not kinds or not set(kinds) <= ADMITTED:
        what = ("a statement DuckDB does not show (e.g. a relation's create() or explain() "
                "on DuckDB 1.5)" if not kinds else
                f"a statement of kind {', '.join(sorted(set(kinds) - ADMITTED))}")
        raise refuse(f"a release or preview inside {what}",
                     "call it from a SELECT, CREATE TABLE ... AS, INSERT or COPY statement")


def check_source(con: Any, reader: Any, source: tuple[str, str, str]) -> None:
    """Public-facing mode, before a release is run: refuse a ``source`` whose reading could
    fail on one of its rows (DuckDB's error would come before the charge and quote the value:
    whether a release fails, and what it says, would depend on the data). Admitted: a table of
    a DuckDB database (a scan of stored values cannot fail on them), and what the curator
    declared (:func:`declare_failsafe_source`, :func:`declare_public_table`). ``reader``: a
    connection that sees the catalog as the release will (an idle one; a fresh cursor cannot
    see the caller's TEMP objects, which are then refused unless declared)."""
    if not is_public(con) or _low(source) in _SOURCES.get(con, set()) or public_table(
            con, source):
        return
    rows = reader.execute(
        "SELECT d.type FROM system.main.duckdb_tables() AS t JOIN "
        "system.main.duckdb_databases() AS d "
        "ON d.database_name = t.database_name WHERE t.database_name = ? AND "
        "t.schema_name = ? AND t.table_name = ?", list(source)).fetchall()
    if rows and str(rows[0][0]).lower() == "duckdb":
        return
    raise refuse(
        f"a release of {'.'.join(source)}, which is not a table of a DuckDB database (a view, "
        "a file or DataFrame read through one, a TEMP object, or a table of another kind of "
        "database), so reading it could fail on one of its rows and quote it,",
        f"ask the curator to copy it into a table (CREATE TABLE ... AS), or to vouch that "
        f"reading it cannot fail: declare_failsafe_source(con, {'.'.join(source)!r})")


def check_evaluate(con: Any, *tables: str) -> None:
    """``inftda_evaluate`` reads its tables exactly (the true and released tables, and any
    domain table): in public-facing mode only tables the curator declared public (never a
    private one, in any place)."""
    if not is_public(con):
        return
    with con.cursor() as cur:
        found = [catalog.resolve_release(cur, t) for t in tables]
    if not all(public_table(con, parts) for parts in found):
        raise refuse("inftda_evaluate on a table not declared public (its errors are exact "
                     "reads of both tables)", "evaluate releases against public tables only "
                     "(the curator declares them with declare_public_table), or ask the "
                     "curator to run it")


# ---------------------------------------------------------------------------------- budget


def check_budget(con: Any, where: Where, charge: dict[str, Any]) -> tuple[SourceId, Home]:
    """Would the charge (the :class:`~inftda_duckdb.ledger.store.Charge` fields but the
    source) be refused? Then raise the ledger's own refusal now, charging nothing, before any
    data check or data-dependent message. In public-facing mode a source no budget covers is
    refused too. The charge itself checks again, atomically. Returns the source's identity and
    home (the charge of the same statement may reuse them: :func:`.budgets.charge`)."""
    with con.cursor() as cur:  # (an in-database ledger works through this cursor)
        source, home = catalog.source_id(cur, where, catalog.default_database(con), owner=con)
        ledger = catalog.ledger_for(con, home, cursor=cur)
        ledger.check(Charge(source=source, **charge),
                     identity=catalog.claim(where, home, ledger))
        uncovered = is_public(con) and ledger.remaining(source) is None
    if uncovered:
        raise BudgetExceededError(
            f"release of {source.label} refused: no budget covers it, and a public-facing "
            "connection releases only sources with a budget. Nothing was charged and no noise "
            "was drawn. Fix: ask the curator to set one")
    return source, home


@contextlib.contextmanager
def hidden(charged: str) -> Iterator[None]:
    """Public-facing mode: any error of the data checks inside, or of the cell limit decided
    from the noised total, becomes one fixed message, a :class:`ReleaseAbortedError` (the
    release stays charged, as ``charged`` says). The reason goes to the
    ``inftda_duckdb.disclosure`` logger at DEBUG level only (silent unless the curator
    configures logging)."""
    try:
        yield
    except InftdaError as exc:
        _LOG.debug("public-facing mode hid this data problem: %s", exc)
        raise ReleaseAbortedError(
            f"this release was charged ({charged}) and stopped: {DATA_PROBLEM_TAG} (a NULL, a "
            "value outside the declared domains or domain tables, a NULL privacy unit, or more "
            "cells than the limit). The public-facing mode does not say which, or how often: "
            "that depends on the private data. Fix: ask the curator to check the data") from None
