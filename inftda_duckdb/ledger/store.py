"""The privacy ledger: one row per executed release, budgets per source, exact refusal.

Every execution of a release spends privacy budget (DuckDB re-runs the macro on every execution),
so the release calls :func:`charge` once per execution, before any noise is drawn. Two tables live
in the instance's default database (the database a fresh cursor starts in, whatever ``USE`` says):

- ``inftda_ledger``: one row per charged release (rho as an exact ``'p/q'`` string).
- ``inftda_budgets``: one row per source with a cap on the total rho (exact ``'p/q'``).

Arithmetic is exact: the spent budget is the :class:`~fractions.Fraction` sum of the ledger's
strings, so three releases of rho 1/3 under a budget of 1 succeed and a fourth is refused.
A source without a budget is uncapped: releases proceed and are recorded.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import weakref
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import duckdb
import pyarrow as pa

from ..core.accounting import epsilon_from_rho, rho_from_epsilon_delta
from ..core.errors import (
    BudgetExceededError,
    InputError,
    InternalError,
    arg,
    bad_argument,
    call,
    speaks,
)
from ..core.exact import to_fraction, to_positive_fraction
from ..core.identifiers import literal, parse_qualified, quote
from ..duckdb.connections import create_macro, register_udfs

LEDGER = "inftda_ledger"
BUDGETS = "inftda_budgets"
DEFAULT_DELTA = 1e-6
_RETRIES = 5

# One process-wide lock: read budget, sum spent, compare, insert and commit happen atomically with
# respect to every other charge or budget change in this process (one process writes a database).
_LOCK = threading.RLock()

_LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS {t} (
    id BIGINT PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    source VARCHAR NOT NULL,
    columns VARCHAR[] NOT NULL,
    neighbours VARCHAR NOT NULL,
    privacy_unit VARCHAR,
    max_rows_per_unit BIGINT NOT NULL,
    rho VARCHAR NOT NULL,
    rho_approx DOUBLE NOT NULL,
    epsilon DOUBLE NOT NULL,
    delta DOUBLE NOT NULL,
    output VARCHAR NOT NULL,
    seeded BOOLEAN NOT NULL,
    data_domain BOOLEAN NOT NULL,
    private BOOLEAN NOT NULL,
    origin VARCHAR NOT NULL
)"""

_BUDGETS_DDL = """
CREATE TABLE IF NOT EXISTS {t} (
    source VARCHAR PRIMARY KEY,
    rho VARCHAR NOT NULL,
    rho_approx DOUBLE NOT NULL,
    set_at TIMESTAMPTZ NOT NULL
)"""


@dataclass(frozen=True)
class Charge:
    """What one executed release spends; written as one ledger row by :func:`charge`."""

    source: str  # canonical source name, see canonical_source
    columns: tuple[str, ...]
    neighbours: str  # 'substitute' | 'add_remove'
    rho: Fraction  # exact total spent by this release
    privacy_unit: str | None
    max_rows_per_unit: int
    output: str  # 'counts' | 'rows'
    seeded: bool  # a seed was given: not private
    data_domain: bool  # domain_from_data: not private
    origin: str  # 'sql' | 'python' | 'cli'
    delta: float = DEFAULT_DELTA  # the delta at which the ledger states the epsilon

    @property
    def private(self) -> bool:
        """A release is private only with secure noise and a public domain."""
        return not self.seeded and not self.data_domain


def _epsilon(rho: Fraction, delta: object) -> float:
    """epsilon at ``delta`` of a total ``rho`` (rounded up); 0 for nothing spent."""
    return 0.0 if rho == 0 else epsilon_from_rho(rho, delta)


# ---------------------------------------------------------------------------------------------
# tables


def _default_database(con: Any) -> str:
    """The instance's default database: where a fresh cursor starts (``USE`` does not move it)."""
    with con.cursor() as cur:
        return str(cur.execute("SELECT current_database()").fetchall()[0][0])


def _tables(db: str) -> tuple[str, str]:
    """The ledger's and the budgets' qualified names in database ``db``."""
    return f"{quote(db)}.main.{LEDGER}", f"{quote(db)}.main.{BUDGETS}"


def _missing_tables(cur: Any, db: str) -> list[str]:
    rows = cur.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'"
        " AND table_name IN (?, ?)",
        [db, LEDGER, BUDGETS],
    ).fetchall()
    return sorted({LEDGER, BUDGETS} - {r[0] for r in rows})


def ensure_tables(con: Any) -> None:
    """Create ``inftda_ledger`` and ``inftda_budgets`` in the default database if absent."""
    db = _default_database(con)
    with _LOCK, con.cursor() as cur:
        missing = _missing_tables(cur, db)
        if not missing:
            return
        ledger, budgets = _tables(db)
        try:
            if LEDGER in missing:
                cur.execute(_LEDGER_DDL.format(t=ledger))
            if BUDGETS in missing:
                cur.execute(_BUDGETS_DDL.format(t=budgets))
        except duckdb.Error as exc:
            raise InputError(
                f"the privacy ledger cannot be created in database {db!r} ({exc}); releases "
                "need a writable ledger. Fix: open the database read-write (or ATTACH the data "
                "read-only into a writable database file and make that the default)"
            ) from None


# ---------------------------------------------------------------------------------------------
# source names


def _key(parts: tuple[str, str, str]) -> str:
    return ".".join(quote(p) if ("." in p or '"' in p) else p for p in parts)


def canonical_source(
    con: Any, source: str, context: tuple[str, str, str] | None = None
) -> str:
    """The ledger key of ``source``: :func:`resolve_source` joined as ``'db.schema.name'``."""
    return _key(resolve_source(con, source, context))


def source_key(parts: tuple[str, str, str]) -> str:
    """The ledger key of an already resolved ``(db, schema, name)``."""
    return _key(parts)


def resolve_source(
    con: Any, source: str, context: tuple[str, str, str] | None = None
) -> tuple[str, str, str]:
    """Resolve ``source`` through the catalog the way DuckDB does -> ``(db, schema, name)``.

    ``context`` = (current database, current schema, search_path) of the caller when ``con`` is
    a fresh cursor that does not share the caller's ``USE`` / ``SET search_path`` (the SQL path
    resolves at bind time on such a cursor; the macro passes the caller's settings).

    Identifiers are case-insensitive; the catalog's spelling is returned. An unqualified name
    is looked up in ``temp.main``, then the current database and schema, then the search path.
    A name the connection cannot see (e.g. another connection's TEMP table, invisible to a
    cursor) is taken as a TEMP object: ``'temp.main.<name>'``. Ledger and budget lookups compare
    keys case-insensitively, so the spelling of an unseen name does not matter.
    """
    parts = parse_qualified(source)
    db, schema, path = context or con.execute(
        "SELECT current_database(), current_schema(), current_setting('search_path')"
    ).fetchall()[0]
    rows = con.execute(
        "SELECT database_name, schema_name, table_name FROM duckdb_tables() UNION ALL "
        "SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal"
    ).fetchall()
    objects = {tuple(p.lower() for p in r): (r[0], r[1], r[2]) for r in rows}
    catalogs = {
        r[0].lower() for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
    }
    searched = [("temp", "main"), (db, schema)]
    for entry in str(path or "").split(","):
        if entry.strip():
            p = parse_qualified(entry.strip(), "search_path")
            searched.append((p[0], p[1]) if len(p) == 2 else (db, p[0]))
    low = tuple(p.lower() for p in parts)

    def find(candidates: list[tuple[str, str, str]]) -> tuple[str, str, str] | None:
        for c in candidates:
            hit = objects.get(tuple(p.lower() for p in c))
            if hit is not None:
                return hit
        return None

    if len(parts) == 1:
        hit = find([(d, s, parts[0]) for d, s in searched])
        return hit or ("temp", "main", parts[0])
    if len(parts) == 2:
        as_schema = find([(d, parts[0], parts[1]) for d in dict.fromkeys(d for d, _ in searched)])
        as_catalog = find([(parts[0], "main", parts[1])])
        if as_schema and as_catalog and as_schema != as_catalog:
            raise bad_argument(
                "source",
                source,
                "is ambiguous (a database and a schema have that name)",
                f"qualify it fully, e.g. '{_key(as_schema)}' or '{_key(as_catalog)}'",
            )
        hit = as_schema or as_catalog
        if hit is None:
            hit = (parts[0], "main", parts[1]) if low[0] in catalogs else ("temp", *parts)
        return hit
    return objects.get(low, (parts[0], parts[1], parts[2]))


# ---------------------------------------------------------------------------------------------
# charging


def _show(x: Fraction) -> str:
    return f"{x} (~{float(x):.6g})" if x.denominator != 1 else str(x)


def _validate(c: Charge) -> None:
    ok = (
        isinstance(c.rho, Fraction)
        and c.rho > 0
        and c.neighbours in ("substitute", "add_remove")
        and c.output in ("counts", "rows")
        and c.origin in ("sql", "python", "cli")
        and isinstance(c.max_rows_per_unit, int)
        and c.max_rows_per_unit >= 1
        and isinstance(c.source, str)
        and c.source != ""
        and 0 < c.delta < 1
    )
    if not ok:
        raise InternalError(f"invalid ledger charge {c!r}")


def _cap(cur: Any, budgets: str, source: str) -> Fraction | None:
    rows = cur.execute(
        f"SELECT rho FROM {budgets} WHERE lower(source) = lower(?)", [source]
    ).fetchall()
    return Fraction(rows[0][0]) if rows else None


def _read(
    cur: Any, ledger: str, budgets: str, source: str
) -> tuple[Fraction | None, Fraction, int]:
    """In one query: the source's budget (None: uncapped), what it spent, the next ledger id."""
    caps, spent, next_id = cur.execute(
        f"SELECT (SELECT list(rho) FROM {budgets} WHERE lower(source) = lower($1)), "
        f"(SELECT list(rho) FROM {ledger} WHERE lower(source) = lower($1)), "
        f"(SELECT coalesce(max(id), 0) + 1 FROM {ledger})",
        [source],
    ).fetchone()
    cap = Fraction(caps[0]) if caps else None
    return cap, sum(map(Fraction, spent or []), Fraction(0)), int(next_id)


def _rollback(cur: Any) -> None:
    with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already rolled back
        cur.execute("ROLLBACK")


def _transaction(con: Any, body: Any) -> Any:
    """Run ``body(cursor)`` in BEGIN/COMMIT on a fresh cursor under the lock; retry conflicts."""
    with _LOCK, con.cursor() as cur:
        for attempt in range(_RETRIES):
            cur.execute("BEGIN TRANSACTION")
            try:
                result = body(cur)
                cur.execute("COMMIT")
                return result
            except duckdb.TransactionException:
                _rollback(cur)
                if attempt == _RETRIES - 1:
                    raise
                time.sleep(0.01 * 2**attempt)
            except BaseException:
                _rollback(cur)
                raise
    raise InternalError("unreachable: ledger transaction loop ended")  # pragma: no cover


def charge(con: Any, charge: Charge) -> int:
    """Record one executed release, or refuse it; returns the new ledger row id.

    Atomic: under a process-wide lock and one transaction on a fresh cursor of ``con``, read the
    budget, sum what was spent (exact Fractions), compare, insert and commit. A refusal raises
    :class:`BudgetExceededError` (requested, remaining, difference) and writes nothing. Call it
    before any noise is drawn. The charge commits on its own, so it survives a caller's ROLLBACK.
    """
    _validate(charge)
    ledger, budgets = _tables(_default_database(con))

    def body(cur: Any) -> int:
        cap, spent, next_id = _read(cur, ledger, budgets, charge.source)
        if cap is not None:
            remaining = max(cap - spent, Fraction(0))
            if charge.rho > remaining:
                raise _refusal(charge.source, charge.rho, cap, spent, remaining)
        cur.execute(
            f"INSERT INTO {ledger} VALUES (?, current_timestamp, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?)",
            [
                next_id,
                charge.source,
                list(charge.columns),
                charge.neighbours,
                charge.privacy_unit,
                charge.max_rows_per_unit,
                str(charge.rho),
                float(charge.rho),
                _epsilon(charge.rho, charge.delta),
                charge.delta,
                charge.output,
                charge.seeded,
                charge.data_domain,
                charge.private,
                charge.origin,
            ],
        )
        return int(next_id)

    try:
        return int(_transaction(con, body))
    except duckdb.CatalogException:  # the tables are gone (load() made them): make them, retry
        ensure_tables(con)
        return int(_transaction(con, body))


def _refusal(
    source: str, requested: Fraction, cap: Fraction, spent: Fraction, remaining: Fraction
) -> BudgetExceededError:
    short = requested - remaining
    fix = (
        f"request at most {arg('rho')} {_show(remaining)}, or raise"
        if remaining > 0
        else "the budget is exhausted: raise"
    )
    err = BudgetExceededError(
        f"release on {source} refused: it requests rho {_show(requested)} but only "
        f"{_show(remaining)} of the budget {_show(cap)} remains (spent {_show(spent)}); "
        f"difference {_show(short)}. Nothing was charged and no noise was drawn. Fix: {fix} "
        f"the budget with {call('set_budget', source, rho=...)}"
    )
    err.source = source  # type: ignore[attr-defined]
    err.requested = requested  # type: ignore[attr-defined]
    err.remaining = remaining  # type: ignore[attr-defined]
    err.difference = short  # type: ignore[attr-defined]
    return err


# ---------------------------------------------------------------------------------------------
# budgets


def set_budget(
    con: Any,
    source: str,
    *,
    rho: object = None,
    epsilon: object = None,
    delta: object = None,
    context: tuple[str, str, str] | None = None,
) -> None:
    """Cap the total rho of all releases on ``source`` (exact; recorded with ``set_at``).

    Give ``rho`` or ``epsilon`` and ``delta`` (converted to the largest rho whose epsilon at
    delta is at most ``epsilon``, rounded down). ``rho=0`` freezes a source. A budget below what
    was already spent is accepted (it cannot be unspent): the remaining budget is then 0 and
    every further release on that source is refused.
    """
    fix = "pass rho=2.0, or epsilon=1.0 and delta=1e-6"
    if (rho is None) == (epsilon is None):
        raise bad_argument("rho/epsilon", (rho, epsilon), "exactly one must be given", fix)
    if rho is not None:
        if delta is not None:
            raise bad_argument("delta", delta, "goes only with epsilon, not with rho", fix)
        cap = to_fraction(rho, "rho", fix)
        if cap < 0:
            raise bad_argument("rho", rho, "must be >= 0 (0 freezes the source)", fix)
    else:
        if delta is None:
            raise bad_argument("delta", delta, "is required with epsilon", fix)
        cap = rho_from_epsilon_delta(epsilon, delta)
    key = canonical_source(con, source, context)
    ensure_tables(con)
    _, budgets = _tables(_default_database(con))

    def body(cur: Any) -> None:
        # a plain UPDATE: DuckDB 2.0.1 misses write-write conflicts on DELETE and UPDATE RETURNING
        if _cap(cur, budgets, key) is None:
            cur.execute(
                f"INSERT INTO {budgets} VALUES (?, ?, ?, current_timestamp)",
                [key, str(cap), float(cap)],
            )
        else:
            cur.execute(
                f"UPDATE {budgets} SET rho = ?, rho_approx = ?, set_at = current_timestamp "
                "WHERE lower(source) = lower(?)",
                [str(cap), float(cap), key],
            )

    _transaction(con, body)


_BUDGET_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("budget_rho", pa.float64()),
        ("spent_rho", pa.float64()),
        ("remaining_rho", pa.float64()),
        ("budget_rho_exact", pa.string()),
        ("spent_rho_exact", pa.string()),
        ("remaining_rho_exact", pa.string()),
        ("releases", pa.int64()),
        ("non_private_releases", pa.int64()),
        ("delta", pa.float64()),
        ("budget_epsilon", pa.float64()),
        ("spent_epsilon", pa.float64()),
        ("remaining_epsilon", pa.float64()),
        ("set_at", pa.timestamp("us", tz="UTC")),
    ]
)


def budget(con: Any, delta: object = DEFAULT_DELTA) -> pa.Table:
    """Per source: budget, spent and remaining rho (DOUBLE and exact 'p/q'), release counts,
    and the same as epsilon at ``delta``. ``budget_*``/``remaining_*`` are NULL without a budget.

    Epsilons are not additive: eps(spent) + eps(remaining) > eps(budget); rho is what composes.
    """
    d = float(to_positive_fraction(delta, "delta", "pass e.g. delta=1e-6"))
    if d >= 1:
        raise bad_argument("delta", delta, "must be in (0, 1)", "pass e.g. delta=1e-6")
    db = _default_database(con)
    with con.cursor() as cur:
        if _missing_tables(cur, db):
            return _BUDGET_SCHEMA.empty_table()
        ledger, budgets = _tables(db)
        spent_rows = cur.execute(f"SELECT source, rho, private FROM {ledger}").fetchall()
        cap_rows = cur.execute(f"SELECT source, rho, set_at FROM {budgets}").fetchall()
    entries: dict[str, dict[str, Any]] = {}
    for src, rho, set_at in cap_rows:
        entries[src.lower()] = {"source": src, "cap": Fraction(rho), "set_at": set_at}
    for src, rho, private in spent_rows:
        e = entries.setdefault(src.lower(), {"source": src, "cap": None, "set_at": None})
        e["spent"] = e.get("spent", Fraction(0)) + Fraction(rho)
        e["n"] = e.get("n", 0) + 1
        e["np"] = e.get("np", 0) + (not private)
    cols: dict[str, list[Any]] = {f.name: [] for f in _BUDGET_SCHEMA}
    for _, e in sorted(entries.items()):
        cap, spent = e["cap"], e.get("spent", Fraction(0))
        rem = None if cap is None else max(cap - spent, Fraction(0))
        for name, value in (
            ("source", e["source"]),
            ("budget_rho", None if cap is None else float(cap)),
            ("spent_rho", float(spent)),
            ("remaining_rho", None if rem is None else float(rem)),
            ("budget_rho_exact", None if cap is None else str(cap)),
            ("spent_rho_exact", str(spent)),
            ("remaining_rho_exact", None if rem is None else str(rem)),
            ("releases", e.get("n", 0)),
            ("non_private_releases", e.get("np", 0)),
            ("delta", d),
            ("budget_epsilon", None if cap is None else _epsilon(cap, d)),
            ("spent_epsilon", _epsilon(spent, d)),
            ("remaining_epsilon", None if rem is None else _epsilon(rem, d)),
            ("set_at", e["set_at"]),
        ):
            cols[name].append(value)
    return pa.table(cols, schema=_BUDGET_SCHEMA)


# ---------------------------------------------------------------------------------------------
# SQL side


_SQL_TYPES = {
    pa.string(): "VARCHAR",
    pa.float64(): "DOUBLE",
    pa.int64(): "BIGINT",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}


def _sql_value(value: Any, sql_type: str) -> str:
    if value is None:
        return f"NULL::{sql_type}"
    if sql_type == "DOUBLE":
        return f"{float(value)!r}::DOUBLE" if math.isfinite(value) else f"'{value}'::DOUBLE"
    if sql_type == "BIGINT":
        return f"{int(value)}::BIGINT"
    return f"{literal(str(value))}::{sql_type}"


def budget_sql(con: Any, delta: object = DEFAULT_DELTA) -> str:
    """SQL text whose result is :func:`budget` (the body of the ``inftda_budget()`` macro)."""
    table = budget(con, delta if delta is not None else DEFAULT_DELTA)
    types = [_SQL_TYPES[f.type] for f in table.schema]
    names = [quote(f.name) for f in table.schema]
    rows = table.to_pylist()
    if not rows:
        nulls = ", ".join(f"NULL::{t} AS {n}" for t, n in zip(types, names, strict=True))
        return f"SELECT {nulls} WHERE false"
    values = ", ".join(
        "("
        + ", ".join(_sql_value(r[f.name], t) for f, t in zip(table.schema, types, strict=True))
        + ")"
        for r in rows
    )
    return f"SELECT * FROM (VALUES {values}) AS t({', '.join(names)})"


def register(con: Any) -> None:
    """SQL side: ``inftda_budget(delta := 1e-6)`` and ``inftda_set_budget(source, rho := ...)``.

    The UDFs are numbered per connection (see :mod:`inftda_duckdb.connections`); registering the
    same connection again only re-creates its macros. ``inftda_set_budget`` resolves the source
    in the caller's context (current database, schema and search_path, passed by the macro),
    exactly as a release does.
    """
    ref = weakref.ref(con)

    def live() -> Any:
        c = ref()
        if c is None:
            raise InputError("the connection that loaded inftda_duckdb is closed")
        return c

    @speaks("sql")
    def budget_text(delta: float | None) -> str:
        return budget_sql(live(), delta)

    @speaks("sql")
    def set_text(
        source: str,
        rho: str | None,
        epsilon: str | None,
        delta: str | None,
        db: str,
        schema: str,
        path: str,
    ) -> str:
        # runs inside the caller's statement: only a fresh cursor may touch the database
        context = (db, schema, path)
        with live().cursor() as cur:
            set_budget(cur, source, rho=rho, epsilon=epsilon, delta=delta, context=context)
            key = canonical_source(cur, source, context).lower()
            r = next(r for r in budget(cur).to_pylist() if r["source"].lower() == key)
        return (
            f"{r['source']}: budget rho {r['budget_rho_exact']}, spent "
            f"{r['spent_rho_exact']}, remaining {r['remaining_rho_exact']}"
        )

    def create(n: int) -> None:
        con.create_function(
            f"inftda_budget_sql_{n}", budget_text, ["DOUBLE"], "VARCHAR",
            side_effects=False, null_handling="special",
        )  # fmt: skip
        con.create_function(
            f"inftda_set_budget_udf_{n}", set_text, ["VARCHAR"] * 7, "VARCHAR",
            side_effects=True, null_handling="special",
        )  # fmt: skip

    n = register_udfs(con, "ledger", create)
    create_macro(
        con,
        "inftda_budget(delta := 1e-6) AS TABLE "
        f"SELECT * FROM query(inftda_budget_sql_{n}(delta))"
    )
    create_macro(
        con,
        "inftda_set_budget(source, rho := NULL, epsilon := NULL, "
        f"delta := NULL) AS inftda_set_budget_udf_{n}(source::VARCHAR, rho::VARCHAR, "
        "epsilon::VARCHAR, delta::VARCHAR, current_database(), current_schema(), "
        "current_setting('search_path'))"
    )
