"""A ledger kept in a PostgreSQL database: the shared ledger of a cluster's drivers.

``Ledger.open('postgresql://user@host:port/db')`` keeps the very ledger of :mod:`.store` (the same
four tables, the same hash chain, optionally keyed, the same exact ``'p/q'`` amounts) in a server
database every driver can reach, through psycopg 3 (the ``postgres`` extra). Only what differs
between the two databases lives here (:class:`Postgres`, a :class:`~.dialect.Dialect`):

- **Writers are serialised by the server**: every write transaction starts with
  ``LOCK TABLE inftda_ledger_head IN EXCLUSIVE MODE`` (readers go on; a second writer waits for
  the first to commit, up to ``dialect.LOCK_WAIT`` = 30 s), then reads the head, decides and
  appends under READ COMMITTED: no other writer can commit in between, so two drivers can never
  overspend.
  Reads run in one REPEATABLE READ snapshot. Creating the tables takes an advisory lock.
- **The chain is DuckDB's**: digests, hashes, verification and the budget arithmetic are the SQL
  of :mod:`.chain` and :mod:`.verify`, run by a private in-memory DuckDB over the rows fetched from
  the server (only the rows appended since this process last looked, after the first time).
  PostgreSQL only stores them, so a row edited, deleted or inserted by hand is detected exactly
  as in a ledger file. The rows are append-only besides: a trigger refuses UPDATE, DELETE and
  TRUNCATE (as DuckDB's digest CHECK refuses a plain UPDATE).
- **Passwords are never shown**: the ledger's ``location`` (in every message, in ``budgets()``'s
  ``ledger`` column, and recorded in DuckDB databases bound to it) is the URL without its
  password; prefer PGPASSFILE, PGPASSWORD or a libpq service (``postgresql:///?service=budget``).

One connection per process and server URL is kept open (re-opened after a fork or a failure).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import pyarrow as pa

from ..core.errors import LedgerError, bad_argument
from . import chain
from . import dialect as common
from .chain import HEAD, ROWS
from .dialect import Dialect

_APPEND_ONLY = """CREATE OR REPLACE FUNCTION inftda_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN
    RAISE EXCEPTION 'the privacy ledger is append-only: % on % refused', TG_OP, TG_TABLE_NAME;
END $$"""
_CREATE_LOCK = 0x1F7DA_1ED6E  # advisory lock key taken while a ledger's tables are created
_CONNECTIONS: dict[tuple[int, str], Any] = {}  # (pid, url) -> open psycopg connection
_SCRATCH: dict[int, Any] = {}  # pid -> a private in-memory DuckDB running the chain's SQL
_SCHEMAS: dict[str, pa.Schema] = {}  # chained table -> its Arrow schema (DuckDB's types)


@atexit.register
def _close() -> None:
    """Close this process's connections (never a parent's, inherited through a fork)."""
    for (pid, _), con in list(_CONNECTIONS.items()):
        if pid == os.getpid():
            con.close()
    _CONNECTIONS.clear()


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise LedgerError(
            "a postgresql:// ledger needs psycopg 3, which is not installed. Nothing was "
            "charged. Fix: pip install 'inftda-duckdb[postgres]'") from None
    return psycopg


class Postgres(Dialect):
    """PostgreSQL's side of the ledger (see the module docstring)."""

    def __init__(self) -> None:
        psycopg = _psycopg()
        self.errors = (psycopg.Error,)
        self.missing = (psycopg.errors.UndefinedTable,)
        self.retry = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)

    def prefix(self, database: str | None) -> str:
        return "" if database is None else f'"{database}".'  # the connection's schema

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def ddl(self, table: str, qualified: str) -> str:
        """The table, and for the chained ones a trigger refusing UPDATE, DELETE and TRUNCATE
        (DuckDB's digest CHECK blocks a plain UPDATE; here the rows are append-only)."""
        if table == HEAD:
            return chain.ddl(table, qualified, postgres=True) + ";\n" + _APPEND_ONLY
        return chain.ddl(table, qualified, postgres=True) + ";\n" + append_only(qualified)

    def begin(self, write: bool) -> str:
        # writes: READ COMMITTED behind the head's lock; reads: one snapshot
        return "BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    def lock(self, cur: Any, prefix: str, create: bool = False) -> None:
        wait = f"SET LOCAL lock_timeout = '{int(common.LOCK_WAIT * 1000)}ms'; "
        if create:
            cur.execute(f"{wait}SELECT pg_advisory_xact_lock({_CREATE_LOCK})")
        else:
            cur.execute(f"{wait}LOCK TABLE {prefix}{HEAD} IN EXCLUSIVE MODE")

    def tables(self, database: str | None) -> tuple[str, str]:
        where = "WHERE table_schema = coalesce(?::text, current_schema()) AND table_name"
        return (f"SELECT table_name FROM information_schema.tables {where} IN (?, ?, ?, ?)",
                f"SELECT count(*) FROM information_schema.columns {where} = ? AND "
                "column_name = 'seq'")

    def view(self, cur: Any, prefix: str, after: int) -> tuple[Any, str]:
        """The rows with ``seq > after`` of the three chained tables, fetched from the server
        and registered under the tables' names in this process's private DuckDB."""
        scratch = _scratch()
        for table in ROWS:
            schema = _SCHEMAS[table]
            columns = ", ".join(f'"{name}"' for name in schema.names)
            rows = cur.execute(f"SELECT {columns} FROM {prefix}{table} WHERE seq > %s "
                               "ORDER BY seq", [after]).fetchall()
            columns_ = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
            scratch.register(table, pa.Table.from_arrays(
                [pa.array(list(v), type=f.type) for v, f in zip(columns_, schema, strict=True)],
                schema=schema))
        return scratch, ""

    def insert(self, table: str, columns: tuple[str, ...]) -> str:
        values = ", ".join(["%s"] * len(columns))  # typed by psycopg: a VALUES list
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values})"

    def append(self, cur: Any, prefix: str, table: str, columns: list[str],
               params: dict[str, Any]) -> str:
        result = _scratch().execute(chain.row_sql(table, columns), params)
        names = [d[0] for d in result.description]
        values = result.fetchall()[0]
        quoted = ", ".join(f'"{n}"' for n in names)
        cur.execute(f"INSERT INTO {prefix}{table} ({quoted}) "
                    f"VALUES ({', '.join(['%s'] * len(names))})", list(values))
        return str(values[names.index("hash")])


def append_only(qualified: str) -> str:
    """The triggers refusing UPDATE, DELETE and TRUNCATE on the table ``qualified`` (the
    function they call is created with the head)."""
    return "\n".join(f"CREATE TRIGGER inftda_append_only_{what} BEFORE {what} ON {qualified} "
                     f"FOR EACH {each} EXECUTE FUNCTION inftda_append_only();"
                     for what, each in (("update", "ROW"), ("delete", "ROW"),
                                        ("truncate", "STATEMENT")))


_DIALECT: list[Postgres] = []


def dialect() -> Postgres:
    """The dialect (made on first use: it needs psycopg)."""
    if not _DIALECT:
        _DIALECT.append(Postgres())
    return _DIALECT[0]


def _scratch() -> Any:
    pid = os.getpid()
    if pid not in _SCRATCH:
        con = duckdb.connect(":memory:")
        for table in ROWS:
            con.execute(chain.ddl(table, f"shape_{table}"))
            _SCHEMAS[table] = con.sql(f"SELECT * FROM shape_{table}").to_arrow_table().schema
        _SCRATCH.clear()
        _SCRATCH[pid] = con
    return _SCRATCH[pid]


def shown(url: str) -> str:
    """``url`` without its password: the ledger's location in messages and tables."""
    psycopg = _psycopg()
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        raise bad_argument("ledger", "postgresql://...", "is not a valid PostgreSQL URL",
                           "pass e.g. ledger='postgresql://curator@db.example.org:5432/budgets'"
                           " (password in PGPASSFILE or PGPASSWORD)") from None
    params.pop("password", None)
    user, host = params.pop("user", None), params.pop("host", None)
    port, dbname = params.pop("port", None), params.pop("dbname", None)
    if host is not None and (host.startswith("/") or "," in host):
        params["host"] = host  # a socket folder or several hosts: query parameters
        host = None
        if port is not None:
            params["port"], port = port, None
    netloc = (f"{urllib.parse.quote(str(user), safe='')}@" if user else "") + (host or "") + (
        f":{port}" if port else "")
    query = urllib.parse.urlencode(sorted(params.items()), safe="/")
    return f"postgresql://{netloc}/{urllib.parse.quote(str(dbname or ''), safe='')}" + (
        f"?{query}" if query else "")


def opener(url: str) -> tuple[Callable[[], contextlib.AbstractContextManager[Any]], str]:
    """The opener of a :class:`~.store.Ledger` on the server at ``url`` (a cursor of this
    process's connection, in autocommit mode: the ledger sends BEGIN and COMMIT itself), and
    the location shown to users."""
    psycopg = _psycopg()
    location = shown(url)
    secret = str(psycopg.conninfo.conninfo_to_dict(url).get("password") or "")

    def failure(exc: BaseException, what: str) -> LedgerError:
        text = " ".join(str(exc).split())
        if secret:
            text = text.replace(secret, "***")
        return LedgerError(
            f"the ledger at {location} {what} ({text}). The operation was rolled back: nothing "
            "was charged (unless the connection broke while committing; `inftda-duckdb ledger "
            "--verify` and the release list show what was recorded). Fix: check that the "
            "server is reachable and the role may use the ledger's tables; the password comes "
            "from PGPASSFILE, PGPASSWORD or a libpq service")

    @contextlib.contextmanager
    def cursor() -> Iterator[Any]:
        key = (os.getpid(), url)
        con = _CONNECTIONS.get(key)
        if con is None or con.closed or con.broken:
            try:
                con = psycopg.connect(url, autocommit=True)
            except psycopg.Error as exc:
                raise failure(exc, "cannot be reached") from None
            _CONNECTIONS[key] = con
        try:
            with con.cursor() as cur:
                yield cur
        except psycopg.errors.LockNotAvailable as exc:
            raise failure(exc, f"was held by another writer for over {common.LOCK_WAIT:g} s"
                          ) from None
        except psycopg.Error as exc:
            if con.broken:
                con.close()
            raise failure(exc, "failed") from None

    return cursor, location
