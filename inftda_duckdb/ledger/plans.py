"""Each charged release's public plan, kept beside its ledger row: what its error bars need.

A release's plan (:mod:`inftda_duckdb.core.errorbars`: the split of its budget, each level's
noise variance, domain sizes and cells; all public) is written by the charge itself, in the same
transaction as the release's row, to the table ``inftda_plans``. So a released table without
provenance of its own, as ``CREATE TABLE t AS SELECT * FROM inftda_release(...)`` makes, finds
its intervals by the ledger id of its release.

The table is additive: it is not one of the chained tables (:mod:`.chain`), whose content and
verification are unchanged. It is created with a new ledger; a DuckDB ledger of an earlier
version gets it with its first plan; a PostgreSQL one of an earlier version records none (its
drivers' role may not create tables; the owner can create it: :func:`create`, and grant the
drivers ``SELECT, INSERT`` on it). Each plan row is bound to its release's row instead: ``link``
is the hash of that chained row and ``mac = HMAC(key, link ':' plan)`` with the ledger's key
(empty for an unkeyed ledger, as the chain's own hashes). A plan edited by hand, or copied to
another row, is reported when read (:func:`find`), and the row it is bound to is verified by the
chain. Moving a ledger (:mod:`.admin`) does not carry the plans over.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import LedgerError
from .chain import HEAD, LEDGER
from .verify import Site

PLANS = "inftda_plans"
_DDL = ("CREATE TABLE IF NOT EXISTS {t} (id BIGINT NOT NULL, link VARCHAR NOT NULL, "
        "plan VARCHAR NOT NULL, mac VARCHAR NOT NULL)")
_MADE: set[tuple[str, str]] = set()  # (ledger id, where): its plans table exists (committed)


def mac(site: Site, link: str, plan: str) -> str:
    return site.key.mac(f"{link}:{plan}")


def create(site: Site, cur: Any) -> None:
    """Create the plans table (with a new ledger, or the first time a DuckDB ledger of an
    earlier version records a plan); on PostgreSQL append-only, as the chained tables."""
    cur.execute(_DDL.format(t=site.prefix + PLANS))
    if type(site.dialect).__name__ == "Postgres":
        from .postgres import append_only

        cur.execute(append_only(site.prefix + PLANS))


def available(site: Site, cur: Any, ledger_id: str) -> bool:
    """Whether plans can be recorded in the ledger ``ledger_id`` (in the charge's open
    transaction): its table exists, or, in a DuckDB ledger of an earlier version, is created
    now. A PostgreSQL ledger created by an earlier version has none, and the drivers' role may
    not create tables: its releases' plans then live in their own provenance only."""
    if (ledger_id, site.where) in _MADE:
        return True
    if present(site, cur):
        return True
    if type(site.dialect).__name__ == "Postgres":
        return False
    create(site, cur)
    return True


def record(site: Site, cur: Any, rid: int, link: str, plan: str) -> None:
    """Write release ``rid``'s plan (in the charge's open transaction, after
    :func:`available`); ``link``: the hash of its chained row."""
    cur.execute(site.dialect.sql(f"INSERT INTO {site.prefix}{PLANS} VALUES (?, ?, ?, ?)"),
                [rid, link, plan, mac(site, link, plan)])


def made(site: Site, ledger_id: str) -> None:
    """A charge that wrote a plan into the ledger ``ledger_id`` committed: its table exists (a
    table dropped later makes the next charge fail as a ledger missing a table: broken)."""
    _MADE.add((ledger_id, site.where))


def present(site: Site, cur: Any) -> bool:
    """Whether the ledger has a plans table (ledgers of earlier versions have none)."""
    query = site.dialect.sql(site.dialect.tables(site.database)[0])
    rows = cur.execute(query, [site.database, PLANS, HEAD, HEAD, HEAD]).fetchall()
    return any(r[0] == PLANS for r in rows)


def find(site: Site, cur: Any, rid: int) -> dict[str, Any] | None:
    """Release ``rid``'s ledger row (as a dict) with its recorded ``plan`` (None when the
    ledger recorded none), or None when there is no such release; call on a verified ledger.
    A plan whose binding to the row does not hold raises a LedgerError."""
    columns = ["id", "source", "columns", "neighbours", "privacy_unit", "max_rows_per_unit",
               "rho", "output", "private", "seeded", "started_at", "hash"]
    rows = cur.execute(site.dialect.sql(
        f"SELECT {', '.join(columns)} FROM {site.prefix}{LEDGER} WHERE id = ?"), [rid]
    ).fetchall()
    if not rows:
        return None
    row = dict(zip(columns, rows[0], strict=True))
    row["columns"] = list(row["columns"])
    row["plan"] = None
    if present(site, cur):
        plans = cur.execute(site.dialect.sql(
            f"SELECT link, plan, mac FROM {site.prefix}{PLANS} WHERE id = ?"), [rid]).fetchall()
        if len(plans) > 1:
            raise LedgerError(f"the ledger in {site.location} holds {len(plans)} plans for "
                              f"release {rid}, not one: its plans table was edited by hand")
        if plans:
            link, text, tag = plans[0]
            if link != row["hash"] or tag != mac(site, link, text):
                raise LedgerError(
                    f"the plan the ledger in {site.location} holds for release {rid} does not "
                    "belong to that release's row (edited or copied by hand); its intervals "
                    "cannot be trusted. Fix: use the release's own provenance (the table "
                    "release() returned, a table or file the command line wrote)")
            row["plan"] = text
    return row


__all__ = ["PLANS", "available", "create", "find", "made", "present", "record"]
