"""The chain as it stands in one database: its tables and head, the verified state at the head,
and the append that moves the head.

A ledger's three chained tables and its head (:mod:`.chain`) are read and written here for
every :class:`~.store.Ledger`, whatever its database (a :class:`~.dialect.Dialect` holds what
differs). :func:`verified` returns the :class:`State` at the head: the cached one when the head
is the one this process verified, else the rows appended since checked (digests, hashes, links)
and folded in, else, the first time or on any surprise, the whole chain. Every append moves the
head (row count, last hash, MAC), so rows deleted, inserted or edited by hand, a head altered,
a table dropped, or a ledger replaced by an older copy are reported as a broken ledger
(:func:`broken`), before anything is charged.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from ..core.errors import InternalError, LedgerError
from . import chain
from .chain import BUDGETS, HEAD, LEDGER, ROWS, SETTINGS, Key
from .dialect import Dialect


@dataclass(frozen=True)
class Budget:
    """A cap on the total rho of every release of any of ``sources`` (keys, with labels)."""

    name: str
    label: str
    sources: tuple[str, ...]
    labels: tuple[str, ...]
    cap: Fraction
    set_at: datetime.datetime | None = None


@dataclass
class State:
    """A verified ledger as of row ``seq``: what budget decisions need, kept per process."""

    ledger_id: str
    seq: int = 0
    last: str = ""
    counts: tuple[int, ...] = (0, 0, 0)
    next_id: int = 1
    spent: dict[str, Fraction] = field(default_factory=dict)
    releases: dict[str, tuple[int, int]] = field(default_factory=dict)  # (all, not private)
    labels: dict[str, str] = field(default_factory=dict)
    budgets: dict[str, Budget] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)

    def copy(self) -> State:
        return dataclasses.replace(
            self, spent=dict(self.spent), releases=dict(self.releases), labels=dict(self.labels),
            budgets=dict(self.budgets), settings=dict(self.settings))

    def covering(self, key: str) -> list[Budget]:
        return [b for b in self.budgets.values() if key in b.sources]

    def spent_by(self, b: Budget) -> Fraction:
        return sum((self.spent.get(k, Fraction(0)) for k in b.sources), Fraction(0))


STATES: dict[tuple[str, str], State] = {}  # (ledger id, where) -> verified state


class Missing(Exception):
    """The ledger's tables do not exist yet."""


class Site(Protocol):
    """What this module needs of a ledger (a :class:`~.store.Ledger`): its database and
    dialect, the prefix naming its tables, its key, and where it is (``location``, shown in
    messages; ``where``, which keys the cache of verified states)."""

    database: str | None
    dialect: Dialect
    prefix: str
    key: Key
    location: str
    where: str


# ---------------------------------------------------------------------------------------------
# the tables and the head


def tables(site: Site, cur: Any) -> set[str]:
    """The names of the ledger's tables present in its database."""
    rows = cur.execute(site.dialect.sql(site.dialect.tables(site.database)[0]),
                       [site.database, HEAD, *ROWS]).fetchall()
    return {r[0] for r in rows}


def new_ledger(site: Site, cur: Any) -> State:
    """Create the four tables and the head of a new, empty ledger (in ``cur``'s open
    transaction); returns its state."""
    ledger_id = uuid.uuid4().hex
    for table in (HEAD, *ROWS):
        cur.execute(site.dialect.ddl(table, site.prefix + table))
    start = chain.genesis(ledger_id)
    cur.execute(site.dialect.sql(f"INSERT INTO {site.prefix}{HEAD} VALUES "
                                 "(?, ?, current_timestamp, ?, 0, ?, ?)"),
                [ledger_id, chain.FORMAT, site.key.check(), start,
                 chain.head_mac(site.key, ledger_id, 0, start)])
    return State(ledger_id, last=start)


def head(site: Site, cur: Any, counts: bool = True
         ) -> tuple[str, str | None, int, str, str, tuple[int, ...]]:
    """The head row, its key and MAC checked, with the row counts of the three chained
    tables (``counts``; else none, a cheaper read)."""
    p = site.prefix
    tallies = (f", (SELECT count(*) FROM {p}{LEDGER}), (SELECT count(*) FROM {p}{BUDGETS}), "
               f"(SELECT count(*) FROM {p}{SETTINGS})") if counts else ""
    try:
        rows = cur.execute(
            f"SELECT ledger_id, key_check, seq, hash, mac{tallies} FROM {p}{HEAD}").fetchall()
    except site.dialect.missing:
        raise Missing() from None
    if len(rows) != 1:
        raise broken(site, f"its head table holds {len(rows)} rows, not 1")
    ledger_id, key_check, seq, last, mac, *tallied = rows[0]
    if key_check != site.key.check():
        if key_check is None:
            raise LedgerError(
                f"the ledger in {site.location} has no key, but {chain.KEY_FILE} gives one. "
                f"Fix: unset {chain.KEY_FILE} for this ledger (a key is chosen when a ledger "
                "is created)")
        raise LedgerError(
            f"the ledger in {site.location} is keyed and "
            + ("no key was given" if not site.key.keyed else "the key given is not its key")
            + f". Nothing was charged. Fix: set {chain.KEY_FILE} to the file holding the "
            "ledger's key")
    if mac != chain.head_mac(site.key, ledger_id, int(seq), last):
        raise broken(site, "its head row was altered")
    return ledger_id, key_check, int(seq), last, mac, tuple(int(c) for c in tallied)


def broken(site: Site, what: str, seq: int | None = None) -> LedgerError:
    at = f" (first at row seq {seq})" if seq is not None else ""
    return LedgerError(
        f"the privacy ledger in {site.location} is broken: {what}{at}. Budgets cannot be "
        "trusted, so every release is refused and nothing was charged. Fix: restore the "
        "ledger from a backup; `inftda-duckdb ledger --verify` shows the first bad row")


# ---------------------------------------------------------------------------------------------
# verification


def verified(site: Site, cur: Any, expect: tuple[str, str] | None = None) -> State:
    """The verified state at the head: the cached one when nothing changed, else the rows
    appended since checked and folded in, else (or on any surprise) the whole chain."""
    ledger_id, _, seq, last, _, counts = head(site, cur)
    if expect is not None and ledger_id != expect[0]:
        raise LedgerError(
            f"the budgets of this source are kept in the ledger {expect[1]}, but this "
            f"connection uses {site.location}, another ledger. Nothing was charged. Fix: "
            f"use that ledger (load(con, ledger=...), --ledger or INFTDA_LEDGER)")
    cached = STATES.get((ledger_id, site.where))
    if cached is not None and (cached.seq, cached.last, cached.counts) == (seq, last, counts):
        return cached
    if sum(counts) != seq:
        raise broken(site, f"it holds {sum(counts)} rows but its head counts {seq} "
                           "(rows were deleted or inserted by hand)")
    if cached is not None and seq > cached.seq and _check(
            site, rows := site.dialect.view(cur, site.prefix, cached.seq), cached, seq, last):
        state = _fold(site, rows, cached.copy())
    else:
        rows = site.dialect.view(cur, site.prefix, 0)
        fresh = State(ledger_id, last=chain.genesis(ledger_id))
        if not _check(site, rows, fresh, seq, last, raise_=True):
            raise InternalError("ledger verification returned without a verdict")
        if cached is not None and cached.seq > 0 and (
                seq < cached.seq or _hash_at(rows, cached.seq) != cached.last):
            raise broken(site, "it no longer holds the rows this process saw earlier "
                               "(truncated, or replaced by an older copy)")
        state = _fold(site, rows, fresh)
    state.seq, state.last, state.counts = seq, last, counts
    STATES[(ledger_id, site.where)] = state
    return state


def _check(site: Site, rows: tuple[Any, str], since: State, seq: int, last: str,
           raise_: bool = False) -> bool:
    """Verify rows ``since.seq + 1 .. seq`` (digests, hashes, links) of ``rows`` (a
    :meth:`Dialect.view`); True if sound."""
    cur, prefix = rows
    n, bad_row, bad_link, top, top_hash = cur.execute(
        chain.verify_sql(prefix),
        {"after": since.seq, "last": since.last, **site.key.pads()}).fetchall()[0]
    problem = None
    if bad_row is not None:
        problem, at = "a row's content or hash does not match (edited by hand?)", bad_row
    elif bad_link is not None:
        problem, at = "a row does not follow the row before it (rows removed or added?)", \
            bad_link
    elif n != seq - since.seq or (n and (top != seq or top_hash != last)):
        problem, at = "its last rows do not match its head (rows removed or added?)", None
    if problem is None:
        return True
    if raise_:
        raise broken(site, problem, at)
    return False


def _hash_at(rows: tuple[Any, str], seq: int) -> str | None:
    if seq == 0:
        return None
    cur, prefix = rows
    union = " UNION ALL ".join(f"SELECT hash FROM {prefix}{t} WHERE seq = $s" for t in ROWS)
    rows = cur.execute(union, {"s": seq}).fetchall()
    return rows[0][0] if rows else None


def _fold(site: Site, rows: tuple[Any, str], state: State) -> State:
    """Add the rows after ``state.seq`` of ``rows`` (a :meth:`Dialect.view`) to the state
    (already verified)."""
    (cur, p), after = rows, {"after": state.seq}
    for key, label, rho, n, not_private, top_id, _ in cur.execute(
        f"SELECT source_key, arg_max(source, seq), rho, count(*), count(*) FILTER (NOT "
        f"private), max(id), max(seq) AS s FROM {p}{LEDGER} WHERE seq > $after "
        "GROUP BY source_key, rho ORDER BY s", after).fetchall():
        amount = Fraction(rho)
        if amount <= 0:
            raise broken(site, f"a charge of rho {rho} (not positive)")
        state.spent[key] = state.spent.get(key, Fraction(0)) + n * amount
        total, np_ = state.releases.get(key, (0, 0))
        state.releases[key] = (total + n, np_ + not_private)
        state.labels[key] = label
        state.next_id = max(state.next_id, int(top_id) + 1)
    for name, label, keys, labels, rho, set_at in cur.execute(
        "SELECT name, arg_max(label, seq), arg_max(sources, seq), arg_max(labels, seq), "
        f"arg_max(rho, seq), arg_max(set_at, seq) FROM {p}{BUDGETS} WHERE seq > $after "
        "GROUP BY name", after).fetchall():
        cap = Fraction(rho)
        if cap < 0:
            raise broken(site, f"a budget of rho {rho} (negative)")
        state.budgets[name] = Budget(name, label, tuple(keys), tuple(labels), cap, set_at)
    for name, value in cur.execute(
        f"SELECT name, arg_max(value, seq) FROM {p}{SETTINGS} WHERE seq > $after "
        "GROUP BY name", after).fetchall():
        state.settings[name] = value
    return state


# ---------------------------------------------------------------------------------------------
# the identities of the databases whose sources the ledger keeps

IDENTITY = "identity:"
"""Settings named ``identity:<where>`` record, in the chain, the identity of the database at
``where`` (a database file's real path; ``""``: the ledger's own database, for a ledger kept
inside it) when its sources were first charged or budgeted here. Budget keys contain the
identity: a database whose identity changed (its ``inftda_identity`` row deleted, edited or
dropped) would silently start fresh budgets, so it is refused instead."""

Claim = tuple[str, str | None]  # (where, the identity that database has now; None: it has none)


def identity(site: Site, state: State, claim: Claim | None, cur: Any = None) -> State:
    """Check ``claim`` against the identity the chain recorded for its database (raise
    :func:`changed_identity` if another), and record it when there is none yet and ``cur`` (a
    write transaction) is given; returns the state after."""
    if claim is None:
        return state
    where, now = claim
    name = IDENTITY + where
    known = state.settings.get(name)
    if known is not None and known != now:
        raise changed_identity(site, where, known, now)
    if known is None and now is not None and cur is not None:
        state = append(site, cur, state, SETTINGS, chain.SETTING_COLUMNS,
                       {"name": name, "value": now})
        state.settings[name] = now
    return state


def changed_identity(site: Site, where: str, known: str, now: str | None) -> LedgerError:
    which = f"the database {where}" if where else "this database"
    has = "has none (its inftda_identity row or table was deleted)" if now is None else \
        f"now has {now} (its inftda_identity table was edited, emptied or dropped, or the " \
        "file replaced by another database)"
    return LedgerError(
        f"the identity of {which} changed: the ledger in {site.location} recorded {known} when "
        f"its sources were first charged or budgeted there, and it {has}. Budgets are kept "
        "under the identity, so they would no longer apply: every release is refused and "
        "nothing was charged. Fix: restore the database from a backup, or give it back its "
        f"identity: DELETE FROM inftda_identity; INSERT INTO inftda_identity VALUES "
        f"('{known}', now(), NULL, NULL)")


# ---------------------------------------------------------------------------------------------
# appending


def append(site: Site, cur: Any, state: State, table: str, columns: list[str],
           values: dict[str, Any]) -> State:
    """Append one chained row and move the head; returns the state after it (not cached
    until the transaction commits)."""
    seq = state.seq + 1
    row = {"seq": seq, "prev_hash": state.last, **values}
    digest = chain.charge_digest(row) if table == LEDGER else None
    if digest is not None:  # the hot path: one plain INSERT (the CHECK verifies the digest)
        new = site.key.mac(state.last + digest)
        row.update(digest=digest, hash=new)
        cur.execute(site.dialect.insert(site.prefix + LEDGER, chain.CHARGE_INSERT),
                    [row[c] for c in chain.CHARGE_INSERT])
    else:
        new = site.dialect.append(cur, site.prefix, table, columns,
                                  {**row, **site.key.pads()})
    cur.execute(site.dialect.sql(f"UPDATE {site.prefix}{HEAD} SET seq = ?, hash = ?, mac = ?"),
                [seq, new, chain.head_mac(site.key, state.ledger_id, seq, new)])
    after = state.copy()
    counts = list(state.counts)
    counts[ROWS.index(table)] += 1
    after.seq, after.last, after.counts = seq, new, tuple(counts)
    return after
