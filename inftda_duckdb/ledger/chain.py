"""The ledger's tables and the hash chain that links their rows.

Four tables in one DuckDB database (the store of every engine's ledger):

- ``inftda_ledger``: one row per charged release;
- ``inftda_budgets``: one row per budget change (the budget in force is the latest of its name);
- ``inftda_settings``: one row per change of a setting (e.g. ``require_budget``);
- ``inftda_ledger_head``: one row: the ledger's id, the number of rows and the last row's hash.

Every row of the first three carries ``seq`` (1, 2, 3, ... across the three tables), a ``digest``
(SHA-256 of its content, enforced by a CHECK constraint: an UPDATE that changes a value without
recomputing the digest fails) and ``hash = HMAC-SHA256(key, prev_hash || digest)``, where
``prev_hash`` is the hash of row ``seq - 1`` (of row 0: a hash of the ledger's id). Without a key
(the default) the HMAC key is empty: anyone can recompute the chain, so it detects accidents and
naive edits, not a forger who can write the file. With a key kept outside the file
(``INFTDA_LEDGER_KEY_FILE``) nobody without the key can produce a valid row. The head's ``mac``
binds the row count and the last hash, so deleting rows or the whole table is detected too.

Verification is one vectorised query: each row's digest and hash recomputed by DuckDB's sha256,
and each ``prev_hash`` compared with the previous row's hash by a window.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import stat
from dataclasses import dataclass
from typing import Any

from ..core.errors import InputError

HEAD, LEDGER, BUDGETS, SETTINGS = (
    "inftda_ledger_head", "inftda_ledger", "inftda_budgets", "inftda_settings")
ROWS = (LEDGER, BUDGETS, SETTINGS)  # the chained tables
FORMAT = 2  # format 1: the tables of inftda_duckdb 0.1 (no chain); see admin.upgrade
KEY_FILE = "INFTDA_LEDGER_KEY_FILE"
_POSITIVE = "'[1-9][0-9]*(/[1-9][0-9]*)?'"  # Fraction.__str__ of a positive rational

# What each row's digest covers: every column but the derived DOUBLEs (rho_approx, epsilon),
# serialised by to_json, NULL-safe and unambiguous; times as microseconds since the epoch
# (independent of the session's TimeZone), delta with 17 significant digits.
CONTENT = {
    LEDGER: "to_json({'seq': seq, 'id': id, 'at': epoch_us(started_at), 'source': source, "
            "'key': source_key, 'columns': columns, 'neighbours': neighbours, "
            "'unit': privacy_unit, 'm': max_rows_per_unit, 'rho': rho, "
            "'delta': printf('%.17g', delta), 'output': output, 'seeded': seeded, "
            "'data_domain': data_domain, 'private': private, 'origin': origin, "
            "'conversion': conversion})::VARCHAR",
    BUDGETS: "to_json({'seq': seq, 'name': name, 'label': label, 'sources': sources, "
             "'labels': labels, 'rho': rho, 'at': epoch_us(set_at)})::VARCHAR",
    SETTINGS: "to_json({'seq': seq, 'name': name, 'value': value, "
              "'at': epoch_us(set_at)})::VARCHAR",
}

_CHAINED = """,
    seq BIGINT PRIMARY KEY,
    prev_hash VARCHAR NOT NULL,
    digest VARCHAR NOT NULL{check},
    hash VARCHAR NOT NULL
)"""

DDL = {
    HEAD: """CREATE TABLE {t} (
    ledger_id VARCHAR NOT NULL,
    format INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    key_check VARCHAR,
    seq BIGINT NOT NULL,
    hash VARCHAR NOT NULL,
    mac VARCHAR NOT NULL
)""",
    LEDGER: f"""CREATE TABLE {{t}} (
    id BIGINT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    source VARCHAR NOT NULL,
    columns VARCHAR[] NOT NULL,
    neighbours VARCHAR NOT NULL CHECK (neighbours IN ('substitute', 'add_remove')),
    privacy_unit VARCHAR,
    max_rows_per_unit BIGINT NOT NULL CHECK (max_rows_per_unit >= 1),
    rho VARCHAR NOT NULL CHECK ({{positive}}),
    rho_approx {{double}} NOT NULL,
    epsilon {{double}} NOT NULL,
    delta {{double}} NOT NULL,
    output VARCHAR NOT NULL,
    seeded BOOLEAN NOT NULL,
    data_domain BOOLEAN NOT NULL,
    private BOOLEAN NOT NULL CHECK (private = (NOT seeded AND NOT data_domain)),
    origin VARCHAR NOT NULL,
    conversion VARCHAR NOT NULL,
    source_key VARCHAR NOT NULL{_CHAINED}""",
    BUDGETS: f"""CREATE TABLE {{t}} (
    name VARCHAR NOT NULL,
    label VARCHAR NOT NULL,
    sources VARCHAR[] NOT NULL,
    labels VARCHAR[] NOT NULL,
    rho VARCHAR NOT NULL CHECK (rho = '0' OR {{positive}}),
    rho_approx {{double}} NOT NULL,
    set_at TIMESTAMPTZ NOT NULL{_CHAINED}""",
    SETTINGS: f"""CREATE TABLE {{t}} (
    name VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    set_at TIMESTAMPTZ NOT NULL{_CHAINED}""",
}


def ddl(table: str, qualified: str, postgres: bool = False) -> str:
    """The CREATE TABLE statement of ``table`` under the qualified name ``qualified``, in
    DuckDB's dialect or PostgreSQL's (same columns and checks, but no digest CHECK: PostgreSQL
    has no ``to_json`` of DuckDB's; every charge's verification, run by DuckDB, checks it)."""
    if postgres:
        return DDL[table].format(t=qualified, check="", double="DOUBLE PRECISION",
                                 positive=f"rho ~ '^{_POSITIVE[1:-1]}$'")
    return DDL[table].format(t=qualified, check=f" CHECK (digest = sha256({CONTENT.get(table)}))",
                             double="DOUBLE", positive=f"regexp_full_match(rho, {_POSITIVE})")


# ---------------------------------------------------------------------------------------------
# keys and hashes


@dataclass(frozen=True)
class Key:
    """The chain's HMAC key (empty: an unkeyed chain) and its pads for SQL."""

    secret: bytes = b""

    @property
    def keyed(self) -> bool:
        return bool(self.secret)

    def pads(self) -> dict[str, bytes]:
        """HMAC's inner and outer padded keys (RFC 2104), parameters of :func:`hmac_sql`."""
        block = (hashlib.sha256(self.secret).digest() if len(self.secret) > 64
                 else self.secret).ljust(64, b"\0")
        return {"ipad": bytes(b ^ 0x36 for b in block), "opad": bytes(b ^ 0x5C for b in block)}

    def mac(self, text: str) -> str:
        return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest()

    def check(self) -> str | None:
        """What a keyed ledger stores to tell a wrong key from a broken chain."""
        return self.mac("inftda-ledger-key-check") if self.keyed else None


MAX_KEY_BYTES = 4096
"""A key file holds at most this many bytes (a key needs 16; HMAC hashes any key over 64)."""


def key_from_environment() -> Key:
    """The key in the file named by ``INFTDA_LEDGER_KEY_FILE`` (trailing newline dropped).

    Only a regular file (or a symlink to one) is a key file, and at most
    :data:`MAX_KEY_BYTES` + 1 bytes are read: a FIFO, a device (``/dev/zero``), a socket or a
    directory is refused at once, without waiting for a writer or reading without end (opened
    non-blocking, then checked on the open file itself, so a file swapped in between is
    caught)."""
    path = os.environ.get(KEY_FILE)
    if not path:
        return Key()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"{KEY_FILE}={path!r} cannot be read ({exc.strerror}). Fix: point it "
                         "at the ledger's key file, or unset it for an unkeyed ledger") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{KEY_FILE}={path!r} is not a regular file (a FIFO, a device, a "
                         "socket or a directory): a ledger key is read from a regular file "
                         "only. Fix: point it at the ledger's key file, e.g. made with "
                         "head -c 32 /dev/urandom > ledger.key")
    with os.fdopen(fd, "rb", buffering=0) as handle:
        secret = b""
        while len(secret) <= MAX_KEY_BYTES:
            chunk = handle.read(MAX_KEY_BYTES + 1 - len(secret))
            if not chunk:
                break
            secret += chunk
    if len(secret) > MAX_KEY_BYTES:
        raise InputError(f"the ledger key file {path} has more than {MAX_KEY_BYTES} bytes: a "
                         f"key file holds at most {MAX_KEY_BYTES} (a key needs 16 to 64). Fix: "
                         "point it at the ledger's key file, e.g. made with "
                         "head -c 32 /dev/urandom > ledger.key")
    secret = secret.rstrip(b"\r\n")
    if len(secret) < 16:
        raise InputError(f"the ledger key in {path} has {len(secret)} bytes; a key needs at "
                         "least 16. Fix: e.g. head -c 32 /dev/urandom > ledger.key")
    return Key(secret)


def hmac_sql(message: str) -> str:
    """SQL computing HMAC-SHA256 of the VARCHAR expression ``message`` (UTF-8) with the key
    whose pads are the parameters ``$ipad`` and ``$opad`` (see :meth:`Key.pads`)."""
    return f"sha256($opad || unhex(sha256($ipad || encode({message}))))"


def genesis(ledger_id: str) -> str:
    """The ``prev_hash`` of row 1: ties the chain to this ledger's id."""
    return hashlib.sha256(f"inftda ledger {ledger_id}".encode()).hexdigest()


def head_mac(key: Key, ledger_id: str, seq: int, last: str) -> str:
    return key.mac(f"{ledger_id}:{seq}:{last}")


# ---------------------------------------------------------------------------------------------
# verification


def verify_sql(prefix: str) -> str:
    """One query over the rows with ``seq > $after``: how many, the first whose digest or hash
    is wrong, the first whose link to the previous row (``$last`` before the first) is wrong,
    the last seq and hash. Parameters: ``$after``, ``$last``, ``$ipad``, ``$opad``."""
    rows = " UNION ALL ".join(
        f"SELECT seq, prev_hash, digest, hash, digest = sha256({CONTENT[t]}) AS ok "
        f"FROM {prefix}{t} WHERE seq > $after" for t in ROWS)
    return f"""
WITH r AS ({rows}),
c AS (
    SELECT seq, hash, ok AND hash = {hmac_sql('prev_hash || digest')} AS ok_row,
           prev_hash = lag(hash, 1, $last) OVER (ORDER BY seq)
           AND seq = lag(seq, 1, $after) OVER (ORDER BY seq) + 1 AS ok_link
    FROM r)
SELECT count(*), min(seq) FILTER (NOT ok_row), min(seq) FILTER (NOT ok_link), max(seq),
       arg_max(hash, seq)
FROM c"""


def row_sql(table: str, columns: list[str]) -> str:
    """SELECT one chained row of ``table`` from the named parameters ``$<column>`` (cast as in
    ``columns``: ``'name::TYPE'``) plus ``$seq`` and ``$prev_hash``, with its digest and hash
    computed by DuckDB from the very values it holds."""
    values = ", ".join(f"${c.split('::')[0]}::{c.split('::')[1]} AS {c.split('::')[0]}"
                       if "::" in c else f"{c.split('=')[1]} AS {c.split('=')[0]}"
                       for c in columns)
    return (
        f"SELECT *, {hmac_sql('prev_hash || digest')} AS hash FROM ("
        f"SELECT *, sha256({CONTENT[table]}) AS digest FROM ("
        f"SELECT $seq::BIGINT AS seq, $prev_hash::VARCHAR AS prev_hash, {values}))"
    )


def insert_sql(table: str, prefix: str, columns: list[str]) -> str:
    """INSERT :func:`row_sql`'s row into ``prefix`` + ``table``; returns the new hash."""
    return f"INSERT INTO {prefix}{table} BY NAME {row_sql(table, columns)} RETURNING hash"


# The columns each kind of row is appended with (:func:`row_sql`'s ``columns``); ``set_at`` is
# the time of the append, or, in the ``_AT`` lists, a time given (rows moved or upgraded).
CHARGE_COLUMNS = [
    "id::BIGINT", "started_at::TIMESTAMPTZ", "source::VARCHAR", "source_key::VARCHAR",
    "columns::VARCHAR[]", "neighbours::VARCHAR", "privacy_unit::VARCHAR",
    "max_rows_per_unit::BIGINT", "rho::VARCHAR", "rho_approx::DOUBLE", "epsilon::DOUBLE",
    "delta::DOUBLE", "output::VARCHAR", "seeded::BOOLEAN", "data_domain::BOOLEAN",
    "private::BOOLEAN", "origin::VARCHAR", "conversion::VARCHAR"]
BUDGET_COLUMNS = ["name::VARCHAR", "label::VARCHAR", "sources::VARCHAR[]", "labels::VARCHAR[]",
                  "rho::VARCHAR", "rho_approx::DOUBLE", "set_at=current_timestamp"]
BUDGET_COLUMNS_AT = [c if not c.startswith("set_at") else "set_at::TIMESTAMPTZ"
                     for c in BUDGET_COLUMNS]
SETTING_COLUMNS = ["name::VARCHAR", "value::VARCHAR", "set_at=current_timestamp"]
SETTING_COLUMNS_AT = ["name::VARCHAR", "value::VARCHAR", "set_at::TIMESTAMPTZ"]


# ---------------------------------------------------------------------------------------------
# a charge's digest and hash in Python (the hot path; DuckDB's CHECK still verifies the digest)

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_SHORT = set("\b\f\n\r\t")  # control characters to_json writes with a short escape
_CHARGE_FIELDS = (("seq", "seq"), ("id", "id"), ("at", "started_at"), ("source", "source"),
                  ("key", "source_key"), ("columns", "columns"), ("neighbours", "neighbours"),
                  ("unit", "privacy_unit"), ("m", "max_rows_per_unit"), ("rho", "rho"),
                  ("delta", "delta"), ("output", "output"), ("seeded", "seeded"),
                  ("data_domain", "data_domain"), ("private", "private"), ("origin", "origin"),
                  ("conversion", "conversion"))
CHARGE_INSERT = ("id", "started_at", "source", "source_key", "columns", "neighbours",
                 "privacy_unit", "max_rows_per_unit", "rho", "rho_approx", "epsilon", "delta",
                 "output", "seeded", "data_domain", "private", "origin", "conversion", "seq",
                 "prev_hash", "digest", "hash")


def _plain(value: Any) -> bool:
    """A value Python's json writes as DuckDB's to_json does (DuckDB writes the escapes of
    other control characters in upper case)."""
    if isinstance(value, str):
        return all(ch >= " " or ch in _SHORT for ch in value)
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return True


def charge_digest(row: dict[str, Any]) -> str | None:
    """The digest :data:`CONTENT` gives a charge row (``started_at`` an aware datetime,
    ``delta`` a float), or None when DuckDB must compute it (an unusual character)."""
    content: dict[str, Any] = {}
    for field, column in _CHARGE_FIELDS:
        value = row[column]
        if column == "started_at":
            value = (value - _EPOCH) // datetime.timedelta(microseconds=1)
        elif column == "delta":
            value = f"{value:.17g}"  # printf('%.17g'), as the SQL
        elif column == "columns":
            value = list(value)
        if not _plain(value):
            return None
        content[field] = value
    text = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()

