"""Budgets and charges from DuckDB: the Python API (:func:`set_budget`, :func:`budget`,
:func:`require_budget`, :func:`verify_ledger`, :func:`ledger_rows`, :func:`upgrade_ledger`), the
SQL functions (``inftda_budget()``, ``inftda_set_budget(...)``, ``inftda_ledger_rows()``) and
:func:`charge`, called once per executed release before any noise is drawn.

Setting a budget commits in the ledger at once (a ROLLBACK could not undo it), so it is refused
inside an open transaction. Python checks the connection; a SQL function cannot (DuckDB tells a
UDF nothing about the caller's transaction, and a UDF cannot use the caller's connection), so
the SQL setters run only in a statement vouched for by :func:`outside_transaction` (the shell
vouches for each statement it runs after checking) and refuse everywhere else.

Which ledger, and which identity a source has, is decided in :mod:`.catalog`; the ledger itself
(chain, exact arithmetic, refusal) is :mod:`inftda_duckdb.ledger`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import weakref
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import duckdb
import pyarrow as pa

from ..core.errors import InftdaError, InputError, LedgerError, bad_argument, render, speaks
from ..core.identifiers import fold, literal, parse_qualified, quote
from ..core.release import uncovered_text
from ..ledger.report import budget_table, no_charges
from ..ledger.sources import SourceId
from ..ledger.store import DEFAULT_DELTA, REQUIRE_BUDGET, Charge, Ledger, exact_cap
from . import arguments, catalog, disclosure
from .catalog import Context, Where
from .connections import create_function, create_macro, register_udfs

_LOG = logging.getLogger("inftda_duckdb")
_SAID: set[tuple[str, str]] = set()  # (ledger, source key) told that no budget covers it
_VOUCHED: dict[str, bool] = {}  # live vouchers -> whether a transaction was open at the check
_VOUCHER = "inftda_vouch"  # the connection's variable carrying its voucher to the setters


@contextlib.contextmanager
def outside_transaction(con: Any, sql: str) -> Iterator[None]:
    """Run the ONE statement ``sql`` on ``con`` within this block, vouched for: the SQL budget
    setters (``inftda_set_budget``, ``inftda_require_budget``) it calls run if no transaction
    was open on ``con`` when the block began, and refuse (naming the transaction) if one was.
    Several statements are refused (a ``BEGIN`` among them would open one after the check).

    The voucher is a fresh random value in ``con``'s own variable ``inftda_vouch`` (DuckDB
    variables belong to one connection: another cursor, perhaps inside a transaction, does not
    see it), known to this process only while the block runs."""
    try:
        count = len(con.extract_statements(sql))
    except duckdb.Error:  # a parse error: the statement itself reports it
        count = 1
    if count != 1:
        raise bad_argument("sql", sql, "must be exactly one statement (a BEGIN among several "
                           "would open a transaction after the check)",
                           "run the statements one by one")
    voucher = secrets.token_hex(16)
    _VOUCHED[voucher] = catalog.in_transaction(con)
    try:
        with contextlib.suppress(duckdb.Error):  # an aborted transaction: the statement (a
            con.execute(f"SET VARIABLE {_VOUCHER} = '{voucher}'")  # ROLLBACK?) still runs
        yield
    finally:
        _VOUCHED.pop(voucher, None)
        with contextlib.suppress(duckdb.Error):
            con.execute(f"RESET VARIABLE {_VOUCHER}")


def _refuse_unvouched(voucher: str | None, what: str) -> None:
    """The SQL setters' guard: see :func:`outside_transaction`."""
    state = _VOUCHED.get(voucher or "")
    if state is False:
        return
    if state is True:
        raise _in_transaction(what)
    raise InputError(
        f"{what} from SQL is refused here: it commits in the ledger at once, and a SQL function "
        "cannot tell whether it runs inside an open transaction (a ROLLBACK could not undo it). "
        "Nothing was changed. Fix: from Python call inftda_duckdb.set_budget(con, ...) or "
        "require_budget(con) (both refused inside a transaction), use the command line "
        "(inftda-duckdb budget --set ...), or run the SQL in inftda-duckdb shell, which checks "
        "for an open transaction before each statement")


def _in_transaction(what: str) -> InputError:
    """The refusal of a budget setter inside an open transaction (Python and SQL alike)."""
    return InputError(
        f"{what} commits in the ledger at once, so a ROLLBACK could not undo it; it is refused "
        "inside an open transaction. Nothing was changed. Fix: COMMIT or ROLLBACK first, then "
        "run it again")


def charge(con: Any, where: Where, fields: dict[str, Any],
           found: tuple[SourceId, catalog.Home] | None = None) -> int:
    """Charge one executed release of the source at ``where`` (the other :class:`Charge`
    fields in ``fields``) to its ledger; returns the ledger row id. Refusals raise.
    ``found``: the source's identity and home as the budget-first check of the same statement
    read them (:func:`.disclosure.check_budget`), reused when that home was already bound to
    its ledger (binding is once, and a later move is refused by the ledger moved from); else
    both are read again here."""
    fallback = catalog.default_database(con)
    with con.cursor() as cur:  # one cursor for the identity and an in-database ledger
        if found is not None and found[1].ledger_id is not None:
            source, h = found
        else:
            source, h = catalog.source_id(cur, where, fallback, owner=con)
        ledger = catalog.ledger_for(con, h, cursor=cur)
        rid, ledger_id = ledger.charge(Charge(source=source, **fields),
                                       expect=catalog.expectation(h),
                                       identity=catalog.claim(where, h, ledger))
        uncovered = (ledger.where, source.key) not in _SAID and _uncovered(ledger, source)
    catalog.bind(con, h, ledger, ledger_id)
    if uncovered:
        _SAID.add((ledger.where, source.key))
        text = render(uncovered_text(fields["rho"], source.label, source.spec),
                      fields["origin"])
        # logged (on stderr by default), never a Python warning: under -W error that would
        # fail a release whose budget is already spent
        _LOG.warning("%s%s", "WARNING: " if fields["origin"] == "cli" else "", text)
    return rid


def _uncovered(ledger: Ledger, source: SourceId) -> bool:
    """Whether no budget covers ``source`` (read after its charge: a failed read is no notice,
    never a failed release)."""
    try:
        return ledger.remaining(source) is None
    except (duckdb.Error, InftdaError):
        return False


def _ledger_of(con: Any, wheres: list[Where]) -> tuple[Ledger, list[SourceId], list[Any]]:
    """The one ledger holding the budgets of every source in ``wheres`` (and their ids)."""
    fallback = catalog.default_database(con)
    with con.cursor() as cur:
        found = [catalog.source_id(cur, w, fallback) for w in wheres]
    ledgers = {}
    for _, h in found:
        ledger = catalog.ledger_for(con, h)
        ledgers[ledger.where] = ledger
    if len(ledgers) > 1:
        raise bad_argument(
            "source", [s.label for s, _ in found], "spans databases that each keep their own "
            "ledger, so no single budget can cover them",
            "keep them in one ledger file: load(con, ledger='budget.duckdb') (CLI: --ledger, or "
            "INFTDA_LEDGER)")
    return next(iter(ledgers.values())), [s for s, _ in found], [h for _, h in found]


def _check_bindings(con: Any, ledger: Ledger, homes: list[Any]) -> str:
    ledger_id = ledger.ledger_id()
    for h in homes:
        if h.ledger_id is not None and h.ledger_id != ledger_id:
            raise LedgerError(
                f"the budgets of database {h.database!r} are kept in the ledger {h.ledger}, but "
                f"this connection uses {ledger.location}. Nothing was changed. Fix: use that "
                "ledger (load(con, ledger=...), --ledger or INFTDA_LEDGER)")
    return ledger_id


def set_budget(
    con: Any,
    source: str | list[str],
    *,
    rho: object = None,
    epsilon: object = None,
    delta: object = None,
    name: str | None = None,
    missing_ok: bool = False,
    context: Context | None = None,
    temp: tuple[str, ...] = (),
) -> str:
    """Cap the total rho of all releases of ``source`` (exact; recorded in the ledger's chain).

    ``source``: a table or view name (resolved as DuckDB resolves it; an error naming close
    candidates if nothing has that name, unless ``missing_ok`` for a table not created yet),
    ``'file:PATH'`` (a Parquet or CSV file released through the CLI or by path), ``'name:NAME'``
    (an in-memory object released under that name), or a list of these: one budget for the
    people behind all of them (``name`` is then required). A release must fit every budget that
    covers its source. Give ``rho`` or ``epsilon`` and ``delta`` (converted to the largest rho
    whose epsilon at delta is at most ``epsilon``). ``rho=0`` freezes; a budget below what was
    spent leaves 0. Setting a budget of the same name again replaces its cap and sources.

    It commits at once in the ledger, so it is refused inside an open transaction (a ROLLBACK
    could not undo it). Returns the budget's label.
    """
    if not isinstance(missing_ok, bool):
        raise bad_argument("missing_ok", missing_ok, "must be true or false",
                           "pass missing_ok=True to budget a table not created yet")
    cap = exact_cap(rho, epsilon, delta)
    if context is None and catalog.in_transaction(con):
        raise _in_transaction("set_budget")
    wheres = catalog.parse_sources(con, source, missing_ok=missing_ok, context=context,
                                   temp=temp)
    ledger, sources, homes = _ledger_of(con, wheres)
    ledger_id = _check_bindings(con, ledger, homes)
    ledger.set_budget(sources, cap, name, identities=tuple(
        catalog.claim(w, h, ledger) for w, h in zip(wheres, homes, strict=True)))
    for h in homes:
        catalog.bind(con, h, ledger, ledger_id)
    return name.strip() if name else sources[0].label


def remaining(con: Any, source: str) -> tuple[Fraction, str] | None:
    """What is left of the tightest budget covering ``source`` (a name as for
    :func:`set_budget`), and that budget's label; None when no budget covers it."""
    ledger, sources, _ = _ledger_of(con, catalog.parse_sources(con, source, missing_ok=False))
    found = ledger.remaining(sources[0])
    return None if found is None else (found[0], found[1].label)


def require_budget(con: Any, on: bool = True, *, database: str | None = None) -> None:
    """Deny by default: with ``on``, the ledger refuses every release of a source that no
    budget covers (recorded in the ledger's chain, so every tool using it obeys). The ledger is
    the connection's (``database``: the one inside that database, default the default one)."""
    if not isinstance(on, bool):
        raise bad_argument("on", on, "must be true or false", "pass on=True or on=False")
    if catalog.in_transaction(con):
        raise _in_transaction("require_budget")
    fallback = catalog.default_database(con)
    with con.cursor() as cur:
        h = catalog.home(cur, database or fallback)
    ledger = catalog.ledger_for(con, h)
    _check_bindings(con, ledger, [h])
    ledger.set_setting(REQUIRE_BUDGET, "true" if on else "false")
    catalog.bind(con, h, ledger, ledger.ledger_id())


def budget(con: Any, delta: object = DEFAULT_DELTA) -> pa.Table:
    """Per budget (and per charged source no budget covers): the budget, spent and remaining rho
    (DOUBLE and exact 'p/q'), releases, the same as epsilon at ``delta``, and the ledger.
    ``budget``/``remaining_*`` are NULL for a source without a budget."""
    tables = [ledger.budgets(delta) for ledger in catalog.ledgers(con)]
    if not tables:
        return budget_table([], float(exact_cap(rho=delta)), "")
    return pa.concat_tables(tables)


def verify_ledger(con: Any) -> pa.Table:
    """Check every ledger of ``con`` now, whole (rows, digests, hashes, links, head, and the
    identities of the attached databases it recorded): one row per ledger with ``ok`` and,
    when broken, the ``problem``."""
    reports = []
    for ledger in catalog.ledgers(con):
        try:  # and the identity of every database it keeps budgets for, as the chain has it
            claims = catalog.identity_claims(con, ledger)
        except LedgerError as exc:  # an identity table emptied or doubled
            reports.append({"location": ledger.location, "ok": False, "rows": None,
                            "ledger_id": None, "keyed": ledger.key.keyed, "problem": str(exc)})
            continue
        reports.append(ledger.verify(claims))
    return pa.Table.from_pylist(reports, schema=pa.schema([
        ("location", pa.string()), ("ok", pa.bool_()), ("rows", pa.int64()),
        ("ledger_id", pa.string()), ("keyed", pa.bool_()), ("problem", pa.string())]))


def ledger_rows(con: Any) -> pa.Table:
    """Every release charged in the ledgers of ``con``, oldest first."""
    tables = [ledger.rows() for ledger in catalog.ledgers(con)]
    return pa.concat_tables(tables) if tables else no_charges()


def move_ledger(con: Any, to: str, database: str | None = None) -> int:
    """Move the budgets and charges kept inside ``database`` (default: the default database) to
    the ledger file ``to``, once: they are appended there in order, the database is bound to
    ``to`` and its own ledger refuses further charges. Then use ``load(con, ledger=to)``.
    Returns the rows moved."""
    with con.cursor() as cur:
        h = catalog.home(cur, database or catalog.default_database(con))
    own = Ledger.in_database(con, h.database, path=h.path, read_only=h.read_only)
    catalog.choose(con, to)
    target = catalog.ledger_for(con, h)
    if target.where == own.where:
        raise bad_argument("to", to, "is the database's own ledger",
                           "pass another ledger file, e.g. to='budget.duckdb'")
    moved = own.move_to(target)
    catalog.bind(con, h, target, target.ledger_id(), again=True)
    return moved


def upgrade_ledger(con: Any) -> int:
    """Upgrade every format-1 ledger (inftda_duckdb 0.1) of ``con`` to the chained format, each
    in one transaction; old tables are kept as ``inftda_ledger_v1`` / ``inftda_budgets_v1``.
    An old source name ``db.schema.name`` maps to that table's identity (its database as it is
    attached now; a database name no longer attached is taken as the ledger's own database).
    Returns the number of rows moved."""
    moved = 0
    for ledger in catalog.ledgers(con):
        if ledger.format() != 1 or ledger.database is None:
            continue
        own, known = ledger.database, _attached(con)

        def translate(old: str, own: str = own, known: dict[str, str] = known) -> SourceId:
            parts = parse_qualified(old)
            if len(parts) != 3:
                return SourceId.named(old)
            db, schema, name = parts
            if fold(db) == "temp":
                return SourceId.temp(schema, name)
            db = known.get(fold(db), own)
            with con.cursor() as cur:
                h = catalog.home(cur, db)
            if h.id is None:
                raise LedgerError(f"database {db!r} is read-only: it cannot be given the "
                                  "identity the upgraded ledger keys its budgets on")
            return SourceId.table(h.id, schema, name, f"{db}.{schema}.{name}", h.path is not None)

        moved += ledger.upgrade(translate)
    return moved


def _attached(con: Any) -> dict[str, str]:
    with con.cursor() as cur:
        return {fold(r[0]): r[0] for r in cur.execute(
            "SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()}


# ---------------------------------------------------------------------------------------------
# SQL side


def _sql_type(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "VARCHAR[]"
    if pa.types.is_integer(t):
        return "BIGINT"
    return {pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}.get(t, "VARCHAR")


def _sql_value(value: Any, sql_type: str) -> str:
    if value is None:
        return f"NULL::{sql_type}"
    if sql_type == "DOUBLE":
        return f"{float(value)!r}::DOUBLE" if math.isfinite(value) else f"'{value}'::DOUBLE"
    if sql_type in ("BIGINT", "BOOLEAN"):
        return f"{value!s}::{sql_type}"
    if sql_type == "VARCHAR[]":
        return "[" + ", ".join(literal(str(v)) for v in value) + "]::VARCHAR[]"
    if sql_type == "TIMESTAMPTZ":
        return f"{literal(value.isoformat())}::TIMESTAMPTZ"
    return f"{literal(str(value))}::{sql_type}"


def table_sql(table: pa.Table) -> str:
    """SQL text whose result is ``table`` (a VALUES list; the body of the read macros)."""
    types = [_sql_type(f.type) for f in table.schema]
    names = [quote(f.name) for f in table.schema]
    rows = table.to_pylist()
    if not rows:
        nulls = ", ".join(f"NULL::{t} AS {n}" for t, n in zip(types, names, strict=True))
        return f"SELECT {nulls} WHERE false"
    values = ", ".join(
        "(" + ", ".join(_sql_value(r[f.name], t) for f, t in zip(table.schema, types, strict=True))
        + ")" for r in rows)
    return f"SELECT * FROM (VALUES {values}) AS t({', '.join(names)})"


def register(con: Any) -> None:
    """SQL side: ``inftda_budget(delta := 1e-6)``, ``inftda_releases(source := NULL)`` (every
    charged release, or those of the sources named, resolved as ``inftda_set_budget`` does),
    ``inftda_set_budget(source, rho := ..., epsilon := ..., delta := ..., name := ...,
    missing_ok := false)`` (``source``: a name or a list) and
    ``inftda_require_budget(required := true)``. ``inftda_set_budget`` resolves names in the
    caller's context (current database, schema, search_path and TEMP objects, passed by the
    macro), exactly as a release does. The setters commit at once, so they run only in a
    statement vouched for by :func:`outside_transaction` (the shell's)."""
    ref = weakref.ref(con)

    def live() -> Any:
        c = ref()
        if c is None:
            raise InputError("the connection that loaded inftda_duckdb is closed")
        return c

    @speaks("sql")
    def budget_text(delta: float | None) -> str:
        return table_sql(budget(live(), DEFAULT_DELTA if delta is None else delta))

    @speaks("sql")
    def set_text(source: str, rho: str | None, epsilon: str | None, delta: str | None,
                 name: str | None, missing_ok: bool | None, db: str, schema: str, path: str,
                 temp: list[str] | None, voucher: str | None) -> str:
        spec = arguments.json_value(source, "inftda_set_budget", "source")
        context = (db, schema, path)
        con = live()
        disclosure.refuse_if_public(con, "inftda_set_budget from SQL (it would let callers "
                                    "raise their own budget)", "the curator sets budgets "
                                    "from Python or the budget command")
        _refuse_unvouched(voucher, "inftda_set_budget")
        with catalog.share_choice(con, con.cursor()) as cur:
            shown = set_budget(cur, spec, rho=rho, epsilon=epsilon, delta=delta, name=name,
                               missing_ok=bool(missing_ok), context=context,
                               temp=tuple(temp or ()))
            rows = [r for r in budget(cur).to_pylist() if r["budget"] == shown]
        r = rows[0]
        return (f"{r['budget']}: budget rho {r['budget_rho_exact']}, spent "
                f"{r['spent_rho_exact']}, remaining {r['remaining_rho_exact']}")

    @speaks("sql")
    def releases_text(source: str | None, db: str, schema: str, path: str) -> str:
        con = live()
        rows = ledger_rows(con)
        if source is not None:
            import pyarrow.compute as pc  # here: its import is ~0.15 s of every process's start

            spec = arguments.json_value(source, "inftda_releases", "source")
            with con.cursor() as cur:
                wheres = catalog.parse_sources(cur, spec, missing_ok=True,
                                               context=(db, schema, path))
            # as set_budget resolves the names, plus each string as given: a source_name
            names = {w.label for w in wheres} | ({spec} if isinstance(spec, str) else set(spec))
            rows = rows.filter(pc.is_in(rows.column("source"), pa.array(sorted(names))))
        return table_sql(rows)

    @speaks("sql")
    def require_text(on: bool, voucher: str | None) -> str:
        con = live()
        disclosure.refuse_if_public(con, "inftda_require_budget from SQL", "the curator sets "
                                    "it from Python")
        _refuse_unvouched(voucher, "inftda_require_budget")
        if on is None:
            raise bad_argument("required", on, "must be true or false",
                               "pass required := true or required := false")
        with catalog.share_choice(con, con.cursor()) as cur:
            require_budget(cur, bool(on))
        return f"require_budget is {'on' if on else 'off'}"

    def create(n: int) -> None:
        create_function(
            con, f"inftda_budget_sql_{n}", budget_text, ["DOUBLE"], "VARCHAR",
            side_effects=False, null_handling="special",
        )  # fmt: skip
        create_function(
            con, f"inftda_set_budget_udf_{n}", set_text,
            ["VARCHAR"] * 5 + ["BOOLEAN"] + ["VARCHAR"] * 3 + ["VARCHAR[]", "VARCHAR"],
            "VARCHAR", side_effects=True, null_handling="special",
        )  # fmt: skip
        create_function(
            con, f"inftda_require_budget_udf_{n}", require_text, ["BOOLEAN", "VARCHAR"],
            "VARCHAR", side_effects=True, null_handling="special",
        )  # fmt: skip
        create_function(
            con, f"inftda_releases_sql_{n}", releases_text, ["VARCHAR"] * 4, "VARCHAR",
            side_effects=False, null_handling="special",
        )  # fmt: skip

    n = register_udfs(con, "ledger", create)
    create_macro(con, "inftda_budget(delta := 1e-6) AS TABLE "
                 f"SELECT * FROM system.main.query(inftda_budget_sql_{n}(delta))")
    # the caller's context, so names resolve as in a release: database, schema, search path
    # (and for the setter its TEMP objects: a table function's arguments take no subquery)
    context = ("system.main.current_database(), system.main.current_schema(), "
               "system.main.current_setting('search_path')")
    temp = ("(SELECT system.main.list(n) FROM (SELECT table_name AS n FROM "
            "system.main.duckdb_tables() WHERE temporary UNION ALL SELECT view_name FROM "
            "system.main.duckdb_views() WHERE temporary AND NOT internal))")
    create_macro(
        con,
        "inftda_set_budget(source, rho := NULL, epsilon := NULL, "
        f"delta := NULL, name := NULL, missing_ok := false) AS inftda_set_budget_udf_{n}("
        "system.main.to_json(source)::VARCHAR, rho::VARCHAR, epsilon::VARCHAR, "
        f"delta::VARCHAR, name::VARCHAR, missing_ok, {context}, {temp}, "
        "system.main.getvariable('inftda_vouch'))",
    )
    create_macro(con, "inftda_releases(source := NULL) AS TABLE SELECT * FROM "
                 f"system.main.query(inftda_releases_sql_{n}("
                 f"system.main.to_json(source)::VARCHAR, {context}))")
    create_macro(con, "inftda_require_budget(required := true) AS "
                 f"inftda_require_budget_udf_{n}(required, "
                 "system.main.getvariable('inftda_vouch'))")


__all__ = ["budget", "charge", "ledger_rows", "move_ledger", "outside_transaction", "register",
           "remaining", "require_budget",
           "set_budget", "upgrade_ledger", "verify_ledger"]
