"""Sources in DuckDB's catalog: names resolved as DuckDB's binder resolves them, each database's
stored identity, and the ledger a source is charged to.

- **Names.** DuckDB compares identifiers case-insensitively for ASCII letters only ("Ä" and "ä"
  are two tables), looks an unqualified name up in ``temp.main``, then the current database and
  schema, then ``search_path``; :func:`resolve` does exactly that (with
  :func:`inftda_duckdb.core.identifiers.fold`).
- **Identity.** A database gets a random id, stored in its table ``inftda_identity`` the first
  time the package charges or budgets one of its tables. Budget keys use that id, never the file
  name or the ATTACH alias, so a renamed, copied or re-attached file keeps its budgets.
- **Ledger.** A connection's ledger is the one given to ``load(con, ledger=...)``, else the file
  named by ``INFTDA_LEDGER``, else the one inside the database that holds the source (a TEMP
  object, a file or an in-memory object: the connection's default database). The identity row
  also remembers which ledger the database's sources were first charged to: a connection using
  another ledger is refused, so a forgotten ``--ledger`` cannot start a fresh budget.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import duckdb

from ..core.errors import InputError, LedgerError, bad_argument
from ..core.identifiers import fold, label, parse_qualified, quote
from ..ledger.locate import LEDGER_VARIABLE, register
from ..ledger.sources import FILE, NAME, SourceId
from ..ledger.store import LOCK, Ledger
from ..ledger.verify import Claim

IDENTITY = "inftda_identity"
Context = tuple[str, str, str]  # the caller's current database, current schema, search_path

_CHOICE: weakref.WeakKeyDictionary[Any, Ledger] = weakref.WeakKeyDictionary()
# per connection: its default database, and the identities of its databases read so far (keyed
# by name, path and read-only flag, so a database attached again elsewhere is read again)
_DEFAULT: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_HOMES: weakref.WeakKeyDictionary[Any, dict[tuple[str, str | None, bool], Home]] = (
    weakref.WeakKeyDictionary())


# ---------------------------------------------------------------------------------------------
# names


def resolve(
    con: Any, source: str, context: Context | None = None, temp: tuple[str, ...] = ()
) -> tuple[str, str, str] | None:
    """``(db, schema, name)`` of the table or view ``source`` names for DuckDB, catalog spelling,
    or None when nothing visible has that name.

    ``context`` = the caller's (current database, current schema, search_path) when ``con`` is a
    fresh cursor (which does not share the caller's ``USE`` or ``SET search_path``); ``temp`` =
    the caller's TEMP tables and views, which such a cursor cannot see either.
    """
    parts = parse_qualified(source)
    db, schema, path = context or con.execute(
        "SELECT system.main.current_database(), system.main.current_schema(), "
        "system.main.current_setting('search_path')"
    ).fetchall()[0]
    rows = con.execute(
        "SELECT database_name, schema_name, table_name FROM system.main.duckdb_tables() "
        "UNION ALL SELECT database_name, schema_name, view_name FROM system.main.duckdb_views() "
        "WHERE NOT internal"
    ).fetchall()
    objects = {tuple(fold(p) for p in r): (r[0], r[1], r[2]) for r in rows}
    objects.update({("temp", "main", fold(t)): ("temp", "main", t) for t in temp})
    searched = [("temp", "main"), (db, schema)]
    for entry in str(path or "").split(","):
        if entry.strip():
            p = parse_qualified(entry.strip(), "search_path")
            searched.append((p[0], p[1]) if len(p) == 2 else (db, p[0]))

    def find(candidates: list[tuple[str, str, str]]) -> tuple[str, str, str] | None:
        for c in candidates:
            hit = objects.get(tuple(fold(p) for p in c))
            if hit is not None:
                return hit
        return None

    if len(parts) == 1:
        return find([(d, s, parts[0]) for d, s in searched])
    if len(parts) == 2:
        as_schema = find([(d, parts[0], parts[1]) for d in dict.fromkeys(d for d, _ in searched)])
        as_catalog = find([(parts[0], "main", parts[1])])
        if as_schema and as_catalog and as_schema != as_catalog:
            raise bad_argument(
                "source", source, "is ambiguous (a database and a schema have that name)",
                f"qualify it fully, e.g. '{label(as_schema)}' or '{label(as_catalog)}'")
        return as_schema or as_catalog
    return find([(parts[0], parts[1], parts[2])])


def resolve_release(con: Any, source: str, context: Context | None = None) -> tuple[str, str, str]:
    """What a release reads: :func:`resolve`, or, for a name ``con`` cannot see, what DuckDB
    will look up when the statement runs (a TEMP object of the caller, invisible to a cursor;
    the statement fails there if there is none, before anything is charged)."""
    hit = resolve(con, source, context)
    if hit is not None:
        return hit
    parts = parse_qualified(source)
    if len(parts) == 1:
        return ("temp", "main", parts[0])
    if len(parts) == 2:
        dbs = {fold(r[0]) for r in con.execute("SELECT database_name FROM duckdb_databases()")
               .fetchall()}
        return (parts[0], "main", parts[1]) if fold(parts[0]) in dbs else ("temp", *parts)
    return (parts[0], parts[1], parts[2])


def candidates(con: Any, name: str, temp: tuple[str, ...] = ()) -> list[str]:
    """Visible tables and views whose names are close to ``name`` (for error messages)."""
    rows = con.execute(
        "SELECT database_name, schema_name, table_name FROM system.main.duckdb_tables() "
        "WHERE NOT internal UNION ALL SELECT database_name, schema_name, view_name "
        "FROM system.main.duckdb_views() WHERE NOT internal").fetchall()
    names = {label(r) for r in rows} | {label(("temp", "main", t)) for t in temp}
    last = fold(parse_qualified(name)[-1]) if name.strip() else ""
    close = difflib.get_close_matches(last, sorted({fold(n.split(".")[-1]) for n in names}),
                                      n=5, cutoff=0.6)
    return sorted(n for n in names if fold(n.split(".")[-1]) in close)


# ---------------------------------------------------------------------------------------------
# where a source lives


@dataclass(frozen=True)
class Where:
    """A source as the generated statement names it: a catalog object, a file read directly,
    or an in-memory object under a name; turned into a :class:`SourceId` when charged."""

    kind: str  # 'table' | 'file' | 'name'
    parts: tuple[str, ...]  # (db, schema, name) | (path,) | (name,)

    def to_json(self) -> list[Any]:
        return [self.kind, list(self.parts)]

    @property
    def label(self) -> str:
        """How people read it: ``db.schema.name``, the file's path, the object's name."""
        return label(self.parts) if self.kind == "table" else self.parts[0]

    @classmethod
    def from_json(cls, data: list[Any]) -> Where:
        kind, parts = data
        if kind not in ("table", "file", "name") or not all(isinstance(p, str) for p in parts):
            raise InputError(f"invalid source {data!r}")
        return cls(kind, tuple(parts))

    @classmethod
    def of(cls, source: SourceId | tuple[str, str, str]) -> Where:
        if isinstance(source, tuple):
            return cls("table", source)
        kind = source.key.split(":", 1)[0]
        return cls(kind, (source.label,))


@dataclass(frozen=True)
class Home:
    """The database a source's budgets are kept with, and its stored identity."""

    database: str
    path: str | None  # None: in memory
    read_only: bool
    id: str | None  # None: the database has no identity yet and cannot be given one
    ledger_id: str | None  # the ledger its sources were first charged to (None: not yet)
    ledger: str | None  # where that ledger was, for messages


def default_database(con: Any) -> str:
    """Where a fresh cursor starts (``USE`` on the caller does not move it)."""
    known = _DEFAULT.get(con)
    if known is None:
        with con.cursor() as cur:
            known = _DEFAULT[con] = str(
                cur.execute("SELECT system.main.current_database()").fetchall()[0][0])
    return known


def home(cur: Any, database: str, create: bool = True, owner: Any = None) -> Home:
    """The identity of ``database`` (created on first use when it is writable); ``owner``: the
    connection whose cache may answer (an identity is read once per connection)."""
    # every attached database, picked here: ~0.1 ms less than a parameter and a filter
    info = [(path, ro) for name, path, ro in cur.execute(
        "SELECT database_name, path, readonly FROM duckdb_databases()").fetchall()
        if name == database]
    if not info:
        raise bad_argument("source", database, "names a database that is not attached",
                           "ATTACH it first, or check the name")
    path, read_only = info[0][0] or None, bool(info[0][1])
    cache = _HOMES.setdefault(owner, {}) if owner is not None else {}
    hit = cache.get((database, path, read_only))
    if hit is not None:
        return hit
    found = _read_home(cur, database, path, read_only, create)
    if found.id is not None:
        cache[(database, path, read_only)] = found
    return found


def _read_home(cur: Any, database: str, path: str | None, read_only: bool, create: bool) -> Home:
    table = f"{quote(database)}.main.{IDENTITY}"
    try:
        rows = cur.execute(f"SELECT id, ledger_id, ledger FROM {table}").fetchall()
    except duckdb.CatalogException:
        pass  # none yet (or dropped: the ledger that recorded it refuses the new one)
    else:
        if len(rows) != 1:  # made with its one row in one transaction: never empty, never two
            raise LedgerError(
                f"{table} holds {len(rows)} rows, not 1 (edited by hand?): the database's "
                "identity is unclear, so its budgets cannot be found; nothing was charged. "
                "Fix: restore the database from a backup (`inftda-duckdb ledger --verify` "
                "names the identity its ledger recorded)")
        return Home(database, path, read_only, *rows[0])
    if read_only or not create:
        return Home(database, path, read_only, None, None, None)
    with LOCK:  # one identity, whichever thread of this process gets here first
        cur.execute("BEGIN TRANSACTION")
        try:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {table} (id VARCHAR NOT NULL, created_at "
                        "TIMESTAMPTZ NOT NULL, ledger_id VARCHAR, ledger VARCHAR)")
            cur.execute(f"INSERT INTO {table} SELECT ?, current_timestamp, NULL, NULL WHERE NOT "
                        f"EXISTS (SELECT 1 FROM {table})", [uuid.uuid4().hex])
            cur.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            raise
    return _read_home(cur, database, path, read_only, create=False)


def claim(where: Where, h: Home, ledger: Ledger) -> Claim | None:
    """The identity ``ledger`` must have recorded for the database of the source at ``where``
    (home ``h``; :func:`inftda_duckdb.ledger.verify.identity`), or None where the budget key
    holds no identity (a TEMP object, a file, an in-memory object)."""
    if where.kind != "table" or fold(where.parts[0]) == "temp":
        return None
    return database_claim(h, ledger)


def database_claim(h: Home, ledger: Ledger) -> Claim | None:
    """(where, identity) of ``h``'s database for ``ledger``: ``""`` (the ledger's own database)
    for the ledger kept inside it, else the database file's real path; None for an in-memory
    database charged to a ledger outside it (a new one in every process)."""
    if not ledger.explicit and ledger.database == h.database:
        return ("", h.id)
    if h.path is None:
        return None
    return (os.path.realpath(h.path), h.id)


def identity_claims(con: Any, ledger: Ledger) -> tuple[Claim, ...]:
    """The identities of the databases attached to ``con`` whose sources ``ledger`` may keep
    (its own database, for a ledger inside one; every attached file, for a ledger chosen
    explicitly), read afresh, created nowhere (:func:`home` raises on a defaced table)."""
    with con.cursor() as cur:
        names = [r[0] for r in cur.execute(
            "SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()]
        homes = [home(cur, n, create=False) for n in names
                 if ledger.explicit or n == ledger.database]
    return tuple(c for h in homes if (c := database_claim(h, ledger)) is not None)


def bind(con: Any, h: Home, ledger: Ledger, ledger_id: str, again: bool = False) -> None:
    """Remember in ``h`` that its sources are charged to ``ledger`` (first charge only, or
    ``again`` after the ledger's rows were moved)."""
    if h.id is None or h.read_only or (h.ledger_id is not None and not again):
        return
    if not ledger.durable and not (ledger.database == h.database and not ledger.explicit):
        return  # an explicit in-memory ledger binds nothing
    where = ledger.location if ledger.explicit else f"inside {h.path or h.database} (the default)"
    with LOCK, con.cursor() as cur:
        cur.execute(f"UPDATE {quote(h.database)}.main.{IDENTITY} SET ledger_id = ?, ledger = ? "
                    "WHERE ledger_id IS NULL OR ?", [ledger_id, where, again])
    _HOMES.get(con, {}).pop((h.database, h.path, h.read_only), None)  # read it again


def expectation(h: Home) -> tuple[str, str] | None:
    return None if h.ledger_id is None else (h.ledger_id, str(h.ledger))


def source_id(cur: Any, where: Where, fallback: str, owner: Any = None
              ) -> tuple[SourceId, Home]:
    """The ledger identity of a source and its home (``fallback``: the default database, home
    of TEMP objects, files and named objects; ``owner``: see :func:`home`)."""
    if where.kind == "table" and fold(where.parts[0]) != "temp":
        db, schema, name = where.parts
        h = home(cur, db, owner=owner)
        if h.id is None:
            raise LedgerError(
                f"{label(where.parts)} cannot be charged: its database {db!r} is read-only and "
                "has never been opened read-write with inftda_duckdb, so it has no identity to "
                "key its budget on. Nothing was charged. Fix: open it read-write once (e.g. "
                "inftda-duckdb budget DATABASE)")
        return SourceId.table(h.id, schema, name, label(where.parts), h.path is not None), h
    h = home(cur, fallback, owner=owner)
    if where.kind == "table":
        return SourceId.temp(where.parts[1], where.parts[2]), h
    if where.kind == "file":
        return SourceId.file(where.parts[0]), h
    return SourceId.named(where.parts[0]), h


# ---------------------------------------------------------------------------------------------
# which ledger


def choose(con: Any, ledger: str | Ledger | None) -> None:
    """Record the ledger ``con`` charges (``load(con, ledger=...)``); None: the default."""
    if ledger is None:
        _CHOICE.pop(con, None)
        return
    _CHOICE[con] = ledger if isinstance(ledger, Ledger) else Ledger.open(ledger)


def share_choice(con: Any, cursor: Any) -> Any:
    """Give ``cursor`` (a fresh cursor of ``con``) the ledger ``con`` was loaded with."""
    choice = _CHOICE.get(con)
    if choice is not None:
        _CHOICE[cursor] = choice
    return cursor


def chosen(con: Any) -> Ledger | None:
    """The ledger given to load(), else the one named by INFTDA_LEDGER, else None (in-database)."""
    choice = _CHOICE.get(con)
    if choice is not None:
        return choice
    env = os.environ.get(LEDGER_VARIABLE, "").strip()
    return Ledger.open(env) if env else None


def ledger_for(con: Any, h: Home, cursor: Any = None) -> Ledger:
    """The ledger of a source whose home is ``h``: the chosen one (a ledger file this instance
    has attached is used through the instance), else the one inside ``h`` (through ``cursor``
    when given, else through fresh cursors of ``con``)."""
    choice = chosen(con)
    if choice is None:
        return Ledger.in_database(con, h.database, path=h.path, read_only=h.read_only,
                                  cursor=cursor)
    return _through_instance(con, choice)


def _through_instance(con: Any, choice: Ledger) -> Ledger:
    """The chosen ledger, through the instance of ``con`` when it has that file attached."""
    if choice.where != "process-memory":
        with con.cursor() as cur:
            for name, path, read_only in cur.execute(
                    "SELECT database_name, path, readonly FROM duckdb_databases() WHERE path "
                    "IS NOT NULL").fetchall():
                if os.path.realpath(path) == choice.where:
                    return Ledger.in_database(con, name, path=choice.where,
                                              read_only=bool(read_only), explicit=True,
                                              key=choice.key)
    return choice


def connection_ledger(con: Any) -> Ledger:
    """The ledger a connection charges for the sources of its default database (another
    engine given the connection as its ledger finds this one: :mod:`inftda_duckdb.ledger.
    locate`)."""
    with con.cursor() as cur:
        h = home(cur, default_database(con))
    return ledger_for(con, h)


register(duckdb.DuckDBPyConnection, connection_ledger)


def ledgers(con: Any) -> list[Ledger]:
    """Every ledger a connection can show: the chosen one, else each attached database's."""
    choice = chosen(con)
    if choice is not None:  # (no identity read: a defaced one is for verify to report)
        return [_through_instance(con, choice)]
    with con.cursor() as cur:
        rows = cur.execute(
            "SELECT d.database_name, d.path, d.readonly FROM system.main.duckdb_databases() d "
            "WHERE NOT d.internal AND EXISTS (SELECT 1 FROM system.main.duckdb_tables() t "
            "WHERE t.database_name = d.database_name AND t.schema_name = 'main' AND "
            "t.table_name = 'inftda_ledger') ORDER BY "
            "d.database_name = system.main.current_database() DESC, d.database_name").fetchall()
    return [Ledger.in_database(con, n, path=p or None, read_only=bool(r)) for n, p, r in rows]


def in_transaction(con: Any) -> bool:
    """Whether ``con`` has an open transaction (BEGIN without COMMIT or ROLLBACK), asked without
    touching it: in autocommit every statement is a transaction of its own, so two statements
    in a row see two transaction ids; inside BEGIN ... they see one. (A probing BEGIN would fail
    inside a transaction and abort it, losing the caller's work.)"""
    probe = "SELECT current_transaction_id()"
    try:
        first, second = con.execute(probe).fetchall(), con.execute(probe).fetchall()
    except duckdb.TransactionException:  # an aborted transaction is still open
        return True
    return bool(first == second)


def parse_sources(
    con: Any, source: object, *, missing_ok: bool, context: Context | None = None,
    temp: tuple[str, ...] = (), argument: str = "source",
) -> list[Where]:
    """One name or a list of names -> where each lives: table and view names resolved in the
    catalog (an error naming close candidates when nothing has that name, unless
    ``missing_ok``: then the name as DuckDB would place a new table), ``'file:PATH'``,
    ``'name:NAME'``."""
    from ..ledger.sources import parse

    items = [source] if isinstance(source, str) else source
    fix = "pass e.g. 'trips' or ['trips', 'file:/data/trips.parquet']"
    if not isinstance(items, list | tuple) or not items:
        raise bad_argument(argument, source, "must be a name or a non-empty list of names", fix)
    out = []
    for item in items:
        parsed = parse(item, argument)
        if isinstance(parsed, SourceId):
            kind = FILE if parsed.key.startswith(FILE) else NAME
            out.append(Where(kind[:-1], (parsed.label,)))
            continue
        hit = resolve(con, parsed, context, temp)
        if hit is None:
            if not missing_ok:
                near = candidates(con, parsed, temp)
                raise InputError(
                    f"{argument} {parsed!r} names no table or view this connection can see"
                    + (f"; similar names: {', '.join(near)}" if near else "")
                    + ". Nothing was changed. Fix: check the name; to budget a table not "
                    "created yet pass missing_ok=True (SQL: missing_ok := true, CLI: "
                    "--missing-ok); for a file pass 'file:/path/data.parquet'")
            hit = _placed(con, parsed, context)
        out.append(Where("table", hit))
    return out


def _placed(con: Any, name: str, context: Context | None) -> tuple[str, str, str]:
    """Where ``CREATE TABLE name`` would put a new table."""
    parts = parse_qualified(name)
    db, schema, _ = context or con.execute(
        "SELECT system.main.current_database(), system.main.current_schema(), ''").fetchall()[0]
    if len(parts) == 3:
        return (parts[0], parts[1], parts[2])
    if len(parts) == 2:
        dbs = {fold(r[0]): r[0] for r in con.execute(
            "SELECT database_name FROM duckdb_databases()").fetchall()}
        if fold(parts[0]) in dbs:
            return (dbs[fold(parts[0])], "main", parts[1])
        return (db, parts[0], parts[1])
    return (db, schema, parts[0])
