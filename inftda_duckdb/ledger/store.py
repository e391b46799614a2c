"""The privacy ledger: budgets over sources, one chained row per executed release, exact refusal.

A :class:`Ledger` is four tables (:mod:`.chain`) in one DuckDB database, which is either

- inside a database an engine already has open (:meth:`Ledger.in_database`: DuckDB keeps each
  database's ledger inside it by default), or
- a ledger file shared by any number of processes, tools and data files (:meth:`Ledger.file`):
  DuckDB lets one process write a file at a time, so the file is attached for each operation
  and detached right after (a process waiting for another retries with back-off), or
- an in-memory ledger chosen explicitly (:meth:`Ledger.memory`, one per process), or
- a PostgreSQL database (:meth:`Ledger.server`, :mod:`.postgres`): the ledger of a cluster's
  drivers. The same code runs on it; a :class:`~.dialect.Dialect` holds what differs.

Every engine calls :meth:`Ledger.charge` once per executed release, before any noise is drawn:
under a process-wide lock and one transaction it verifies the chain (incrementally: the rows
appended since this process last looked; the whole chain the first time), finds every budget
covering the source, refuses (:class:`BudgetExceededError`, nothing written) what would overspend
any of them or, with the setting ``require_budget``, a source no budget covers, and appends the
row. Arithmetic is exact: spent budgets are :class:`~fractions.Fraction` sums of ``'p/q'`` rows.
Verification and appends are :mod:`.verify`'s, the tables for people :mod:`.report`'s, the
upgrade and the move to another ledger :mod:`.admin`'s.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar, cast

import pyarrow as pa

from ..core import accounting
from ..core.accounting import REPORT_DELTA
from ..core.errors import (
    BudgetExceededError,
    InternalError,
    LedgerError,
    bad_argument,
    call,
    number,
    opt,
)
from ..core.exact import to_fraction, to_positive_fraction
from ..core.identifiers import fold
from . import admin, chain, plans, report, verify
from .admin import MOVED_TO
from .chain import BUDGETS, HEAD, LEDGER, SETTINGS, Key
from .dialect import DUCKDB, Dialect, attached, host
from .sources import SourceId
from .verify import Budget, State

DEFAULT_DELTA = float(REPORT_DELTA)  #: the delta at which epsilons are stated
REQUIRE_BUDGET = "require_budget"  # setting: refuse releases of sources no budget covers
_RETRIES = 5
T = TypeVar("T")

# One process-wide lock: read, decide, append and commit happen atomically with respect to every
# other operation on any ledger in this process (another process is kept out by DuckDB's lock).
# Engines take it too around their own ledger-related writes (DuckDB: a database's identity).
LOCK = _LOCK = threading.RLock()


@dataclass(frozen=True)
class Charge:
    """What one executed release spends; written as one ledger row by :meth:`Ledger.charge`."""

    source: SourceId
    columns: tuple[str, ...]
    neighbours: str  # 'substitute' | 'add_remove'
    rho: Fraction  # exact total spent by this release
    privacy_unit: str | None
    max_rows_per_unit: int
    output: str  # 'counts' | 'rows'
    seeded: bool  # a seed was given: not private
    data_domain: bool  # domain_from_data: not private
    origin: str  # 'sql' | 'python' | 'cli' | an engine's name
    delta: float = DEFAULT_DELTA  # the delta at which the ledger states the epsilon
    conversion: str | None = None  # (epsilon, delta) <-> rho in force; None: accounting's now
    plan: str | None = None  # its public plan (core.errorbars), kept beside the row: .plans

    @property
    def private(self) -> bool:
        """A release is private only with secure noise and a public domain."""
        return not self.seeded and not self.data_domain


def _show(x: Fraction) -> str:
    """A budget amount in a message: for people, decimal first (the ledger keeps it exact)."""
    return number(x)


class Ledger:
    """One ledger. Engines pick one per source (see :mod:`inftda_duckdb.duckdb.catalog`), then
    call :meth:`charge`, :meth:`set_budget`, :meth:`set_setting`, :meth:`budgets`,
    :meth:`verify`; all are atomic and safe from several threads and processes."""

    def __init__(self, opener: Callable[[], contextlib.AbstractContextManager[Any]],
                 database: str | None, location: str, where: str, *, durable: bool,
                 explicit: bool, read_only: bool = False, key: Key | None = None,
                 dialect: Dialect = DUCKDB) -> None:
        self._open, self.database, self.location, self.where = opener, database, location, where
        self.dialect = dialect
        # tables are named in the database of the cursor the opener gives, or in ``database``
        self.prefix = dialect.prefix(database)
        self.durable, self.explicit, self.read_only = durable, explicit, read_only
        self.key = key if key is not None else chain.key_from_environment()

    def __repr__(self) -> str:
        return f"Ledger({self.location!r})"

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def in_database(cls, con: Any, database: str, *, path: str | None, read_only: bool,
                    explicit: bool = False, key: Key | None = None,
                    cursor: Any = None) -> Ledger:
        """The ledger inside database ``database`` of the DuckDB instance of ``con`` (``path``:
        its file, None in memory), reached through fresh cursors of ``con`` (or ``cursor``, a
        connection of that instance the caller owns and keeps idle meanwhile)."""

        @contextlib.contextmanager
        def opener() -> Iterator[Any]:
            if cursor is not None:
                yield cursor
                return
            with con.cursor() as cur:
                yield cur

        where = path or f"memory:{database}"
        location = path or f"the in-memory database {database!r}"
        return cls(opener, database, location, where, durable=path is not None,
                   explicit=explicit, read_only=read_only, key=key)

    @classmethod
    def file(cls, path: str, key: Key | None = None) -> Ledger:
        """A ledger file (created on first use), attached per operation: shareable by processes."""
        import os

        real = os.path.realpath(os.path.expanduser(path))
        return cls(lambda: attached(real), None, real, real, durable=True, explicit=True,
                   key=key)

    @classmethod
    def memory(cls, key: Key | None = None) -> Ledger:
        """The process's in-memory ledger (explicitly chosen; lost when the process ends)."""

        @contextlib.contextmanager
        def opener() -> Iterator[Any]:
            with host().cursor() as cur:
                yield cur

        return cls(opener, None, "an in-memory ledger (this process only)", "process-memory",
                   durable=False, explicit=True, key=key)

    @classmethod
    def open(cls, location: str) -> Ledger:
        """``':memory:'`` -> :meth:`memory`; a ``postgresql://`` URL -> :meth:`server`;
        anything else is a ledger file path."""
        if not isinstance(location, str) or not location.strip():
            raise bad_argument("ledger", location,
                               "must be a file path, ':memory:' or a postgresql:// URL",
                               "pass e.g. ledger='budget.duckdb'")
        if location.startswith(("postgresql://", "postgres://")):
            return cls.server(location)
        return cls.memory() if location == ":memory:" else cls.file(location)

    @classmethod
    def server(cls, url: str, key: Key | None = None) -> Ledger:
        """A ledger in a PostgreSQL database (``postgresql://user@host:port/db``; the password
        from PGPASSFILE, PGPASSWORD or a libpq service, never shown): for clusters."""
        from . import postgres

        opener, location = postgres.opener(url)
        return cls(opener, None, location, location, durable=True, explicit=True, key=key,
                   dialect=postgres.dialect())

    # -- transactions -------------------------------------------------------------------------

    def run(self, body: Callable[[Any], Any], write: bool = True) -> Any:
        """``body(cursor)`` in one transaction under the process-wide :data:`LOCK` (a write
        also takes the dialect's writer lock); conflicts retried; the ledger's tables created
        on first use (a read of a ledger that has none yet gets ``body(None)``). Engines call
        :meth:`charge` and the other methods; this is their one transaction, shared with
        :mod:`.admin`."""
        if write and self.read_only:
            raise LedgerError(
                f"the ledger in {self.location} cannot record anything: the database is "
                "read-only. Nothing was charged. Fix: open it read-write, or keep the budgets in "
                "a ledger file shared by every tool: load(con, ledger='budget.duckdb') (CLI: "
                "--ledger, or INFTDA_LEDGER)")
        missing: tuple[type[BaseException], ...] = (verify.Missing, *self.dialect.missing)
        with _LOCK, self._open() as cur:
            for attempt in range(_RETRIES):
                cur.execute(self.dialect.begin(write))
                try:
                    if write:
                        self.dialect.lock(cur, self.prefix)
                    result = body(cur)
                    cur.execute("COMMIT")
                    return result
                except missing:
                    self._rollback(cur)
                    present = verify.tables(self, cur)
                    if HEAD in present:
                        raise verify.broken(
                            self, "one of its tables is missing (dropped?)") from None
                    if not write and not present:
                        return body(None)
                    self._create(cur)
                except self.dialect.retry:
                    self._rollback(cur)
                    if attempt == _RETRIES - 1:
                        raise
                    time.sleep(0.01 * 2**attempt)
                except BaseException:
                    self._rollback(cur)
                    raise
        raise InternalError("the ledger transaction loop ended without a result")

    def _create(self, cur: Any) -> None:
        """Create the four tables and the head row (one transaction), unless an older format is
        there: that needs an explicit :meth:`upgrade`."""
        cur.execute(self.dialect.begin(True))
        try:
            self.dialect.lock(cur, self.prefix, create=True)
            present = verify.tables(self, cur)
            if HEAD in present:
                cur.execute("ROLLBACK")  # another connection made them meanwhile
                return
            chained = cur.execute(self.dialect.sql(self.dialect.tables(self.database)[1]),
                                  [self.database, LEDGER]).fetchall()[0][0]
            if chained or SETTINGS in present:
                raise verify.broken(self, "its head table is missing (dropped?)")
            if LEDGER in present or BUDGETS in present:
                raise LedgerError(
                    f"the ledger in {self.location} was written by inftda_duckdb 0.1 (no hash "
                    "chain); it must be upgraded before anything is charged. Fix: "
                    "inftda_duckdb.upgrade_ledger(con) or inftda-duckdb ledger DATABASE "
                    "--upgrade (the old tables are kept as inftda_ledger_v1 and "
                    "inftda_budgets_v1)")
            verify.new_ledger(self, cur)
            plans.create(self, cur)  # each release's public plan, beside its row
            cur.execute("COMMIT")
        except self.dialect.errors as exc:
            self._rollback(cur)
            raise LedgerError(f"the privacy ledger cannot be created in {self.location} ({exc})."
                              " Nothing was charged. Fix: open the database read-write, or "
                              "pass a writable ledger file: load(con, ledger='budget.duckdb')"
                              ) from None
        except BaseException:
            self._rollback(cur)
            raise

    def _rollback(self, cur: Any) -> None:
        with contextlib.suppress(*self.dialect.errors):  # a failed COMMIT has rolled back
            cur.execute("ROLLBACK")

    def _commit(self, after: State) -> None:
        verify.STATES[(after.ledger_id, self.where)] = after

    def ledger_id(self) -> str:
        """This ledger's id (created with the ledger; the same in every copy of its file)."""
        return str(self.run(lambda cur: verify.verified(self, cur).ledger_id,
                             write=not self.read_only))

    def charge(self, charge: Charge, *,
               expect: tuple[str, str] | None = None) -> tuple[int, str]:
        """Record one executed release, or refuse it; returns (release id, ledger id).

        Atomic: verify, find the budgets covering ``charge.source``, compare exactly, append.
        A refusal raises :class:`BudgetExceededError` and writes nothing. ``expect``: the
        (ledger id, where) the source's database is bound to (another ledger is refused).
        """
        _validate(charge)
        if charge.source.durable and not self.durable and not self.explicit:
            raise LedgerError(
                f"release of {charge.source.label} refused: its data is kept in a file, but its "
                f"charge would only be kept in {self.location} and lost when the connection "
                "closes, so the budget would not hold. Nothing was charged. Fix: keep the "
                f"budgets in a file: {opt('ledger', 'budget.duckdb')} (load(con, ledger=...) in "
                "Python, --ledger or --db on the command line, INFTDA_LEDGER), or choose an "
                f"in-memory ledger on purpose: {opt('ledger', ':memory:')}")
        key = charge.source.key

        def body(cur: Any) -> tuple[int, State]:
            state = verify.verified(self, cur, expect)
            if state.settings.get(MOVED_TO):
                raise LedgerError(
                    f"the budgets kept in {self.location} were moved to the ledger "
                    f"{state.settings[MOVED_TO]}; nothing was charged. Fix: use that ledger "
                    "(load(con, ledger=...), --ledger or INFTDA_LEDGER)")
            self._refuse(state, charge)
            rid = state.next_id
            after = verify.append(self, cur, state, LEDGER, chain.CHARGE_COLUMNS,
                                  _charge_values(charge, rid))
            if charge.plan is not None and plans.available(self, cur, state.ledger_id):
                plans.record(self, cur, rid, after.last, charge.plan)
            after.next_id = rid + 1
            after.spent[key] = after.spent.get(key, Fraction(0)) + charge.rho
            total, np_ = after.releases.get(key, (0, 0))
            after.releases[key] = (total + 1, np_ + (not charge.private))
            after.labels[key] = charge.source.label
            return rid, after

        with _LOCK:  # the cache moves with the ledger, before another thread reads either
            rid, after = self.run(body)
            self._commit(after)
            if charge.plan is not None:
                plans.made(self, after.ledger_id)
        return rid, after.ledger_id

    def _refuse(self, state: State, charge: Charge) -> None:
        """Raise if ``charge`` does not fit: no budget where one is required, or more than
        what is left of a budget covering its source."""
        covering = state.covering(charge.source.key)
        if not covering and state.settings.get(REQUIRE_BUDGET) == "true":
            raise BudgetExceededError(
                f"release of {charge.source.label} refused: no budget covers it, and this "
                f"ledger ({self.location}) requires one (require_budget is on). Nothing was "
                f"charged and no noise was drawn. Fix: "
                f"{call('set_budget', _spec(charge.source), rho=...)}, or add it to a "
                "budget's sources")
        tight = [(max(b.cap - state.spent_by(b), Fraction(0)), b) for b in covering]
        for remaining, b in sorted(tight, key=lambda t: t[0]):
            if charge.rho > remaining:
                raise _refusal(charge, b, state.spent_by(b), remaining)

    def check(self, charge: Charge) -> None:
        """Raise what :meth:`charge` would raise for the budget, writing nothing: a release
        checks its budget before it reads its data (the charge checks again, atomically).

        While the head is the one this process verified, the answer comes from that verified
        state without counting the rows: every append moves the head, so only
        rows deleted or inserted by hand leave it unchanged, and the state still holds what was
        verified (a charge deleted by hand is still spent). The charge counts the rows and
        refuses such a ledger as broken, before it writes anything or any noise is drawn."""
        _validate(charge)
        self._read(lambda state: None if state is None else self._refuse(state, charge),
                   counts=False)

    def _read(self, use: Callable[[State | None], T], counts: bool = True) -> T:
        """``use(state)`` on the verified state at the head (None: no ledger yet), writing
        nothing. One read of the head when it and the row counts (unless not ``counts``) are
        still those this process verified (one statement: a consistent snapshot on its own,
        without BEGIN .. COMMIT around it), else a transaction that verifies the rows appended
        since (or the whole chain)."""
        with _LOCK, self._open() as cur:
            try:
                ledger_id, _, seq, last, _, tallies = verify.head(self, cur, counts)
            except verify.Missing:
                pass
            else:
                cached = verify.STATES.get((ledger_id, self.where))
                if cached is not None and (cached.seq, cached.last) == (seq, last) and (
                        not counts or cached.counts == tallies):
                    return use(cached)
        return cast(T, self.run(
            lambda cur: use(None if cur is None else verify.verified(self, cur)), write=False))

    def set_budget(self, sources: list[SourceId], cap: Fraction, name: str | None = None) -> str:
        """Cap the total rho of all releases of any of ``sources`` at ``cap`` (exact; 0 freezes
        them). ``name`` identifies the budget (default: the one source's key); setting a budget
        of that name again replaces its cap and sources. Returns the ledger id."""
        if not sources:
            raise bad_argument("source", [], "must name at least one source",
                               "pass e.g. 'trips' or ['trips', 'file:/data/trips.parquet']")
        if name is None and len(sources) > 1:
            raise bad_argument("name", None, "is required for a budget covering several sources",
                               "pass e.g. name='trips people'")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise bad_argument("name", name, "must be a non-empty text",
                               "pass e.g. name='trips people'")
        keys = list(dict.fromkeys(s.key for s in sources))
        labels = [next(s.label for s in sources if s.key == k) for k in keys]
        budget_name = fold(name.strip()) if name else keys[0]
        label = name.strip() if name else labels[0]

        def body(cur: Any) -> State:
            state = verify.verified(self, cur)
            verify.append(self, cur, state, BUDGETS, chain.BUDGET_COLUMNS, {
                "name": budget_name, "label": label, "sources": keys, "labels": labels,
                "rho": str(cap), "rho_approx": float(cap)})
            return state  # the next operation folds the new row in (with its time)

        return str(self.run(body).ledger_id)

    def set_setting(self, name: str, value: str) -> None:
        """Record a setting (e.g. ``require_budget`` = ``'true'``) in the chain."""

        def body(cur: Any) -> None:
            if verify.verified(self, cur).settings.get(name) != value:
                verify.append(self, cur, verify.verified(self, cur), SETTINGS,
                              chain.SETTING_COLUMNS, {"name": name, "value": value})

        self.run(body)

    def setting(self, name: str) -> str | None:
        return self.run(
            lambda cur: None if cur is None else verify.verified(self, cur).settings.get(name),
            write=False)

    def remaining(self, source: SourceId) -> tuple[Fraction, Budget] | None:
        """The least rho left among the budgets covering ``source``, and that budget (None:
        no budget covers it)."""

        def body(state: State | None) -> tuple[Fraction, Budget] | None:
            if state is None:
                return None
            left = [(max(b.cap - state.spent_by(b), Fraction(0)), b)
                    for b in state.covering(source.key)]
            return min(left, key=lambda t: t[0]) if left else None

        found = self._read(body)
        return None if found is None else (found[0], found[1])

    def budgets(self, delta: object = DEFAULT_DELTA) -> pa.Table:
        """One row per budget (and per charged source no budget covers): budget, spent and
        remaining rho (DOUBLE and exact 'p/q'), releases, and the same as epsilon at ``delta``.
        Epsilons are not additive: eps(spent) + eps(remaining) > eps(budget)."""
        d = float(to_positive_fraction(delta, "delta", "pass e.g. delta=1e-6"))
        if d >= 1:
            raise bad_argument("delta", delta, "must be in (0, 1)", "pass e.g. delta=1e-6")
        state = self.run(lambda cur: None if cur is None else verify.verified(self, cur),
                          write=False)
        return report.budget_table([] if state is None else report.budget_rows(state), d,
                                   self.location)

    def release(self, rid: int) -> dict[str, Any] | None:
        """Release ``rid``'s row of this (verified) ledger with the public ``plan`` recorded
        with it (None: none recorded), or None when there is no such release
        (:func:`.plans.find`)."""
        return cast(dict[str, Any] | None, self.run(
            lambda cur: None if cur is None else (verify.verified(self, cur),
                                                  plans.find(self, cur, rid))[1], write=False))

    def rows(self) -> pa.Table:
        """Every charge, oldest first (the chain's columns left out), with a ``ledger`` column."""
        def body(cur: Any) -> pa.Table | None:
            if cur is None:
                return None
            verify.verified(self, cur)  # a broken ledger is reported, not listed
            return report.charge_table(*self.dialect.view(cur, self.prefix, 0), self.location)

        table = self.run(body, write=False)
        return report.no_charges(self.location) if table is None else table

    def verify(self) -> dict[str, Any]:
        """Check the whole chain now (whatever this process saw before). Returns ``ok``,
        ``rows``, ``ledger_id``, ``keyed``, ``location`` and ``problem`` (None when sound)."""

        result = {"ok": True, "rows": 0, "ledger_id": None, "keyed": self.key.keyed,
                  "location": self.location, "problem": None}

        def body(cur: Any) -> dict[str, Any]:
            if cur is None:
                return result
            for stale in [k for k in verify.STATES if k[1] == self.where]:
                del verify.STATES[stale]
            state = verify.verified(self, cur)
            return {**result, "rows": state.seq, "ledger_id": state.ledger_id}

        try:
            return dict(self.run(body, write=False))
        except LedgerError as exc:
            return {**result, "ok": False, "rows": None, "problem": str(exc)}

    def move_to(self, target: Ledger) -> int:
        """Move this ledger's rows to ``target`` once, then close it (:func:`.admin.move_to`);
        returns the rows moved."""
        return admin.move_to(self, target)

    def upgrade(self, translate: Callable[[str], SourceId]) -> int:
        """Upgrade a format-1 ledger in place (:func:`.admin.upgrade`); returns the rows
        moved."""
        return admin.upgrade(self, translate)

    def format(self) -> int | None:
        """2 for a chained ledger, 1 for an old one, None when there is none yet."""
        with _LOCK, self._open() as cur:
            present = verify.tables(self, cur)
        return 2 if HEAD in present else (1 if present else None)


def _validate(c: Charge) -> None:
    ok = (
        isinstance(c.rho, Fraction)
        and c.rho > 0
        and c.neighbours in ("substitute", "add_remove")
        and c.output in ("counts", "rows")
        and isinstance(c.origin, str)
        and c.origin != ""
        and isinstance(c.max_rows_per_unit, int)
        and c.max_rows_per_unit >= 1
        and isinstance(c.source, SourceId)
        and c.source.key != ""
        and 0 < c.delta < 1
        and (c.plan is None or isinstance(c.plan, str))
    )
    if not ok:
        raise InternalError(f"invalid ledger charge {c!r}")


def _charge_values(c: Charge, rid: int) -> dict[str, Any]:
    return {
        "id": rid, "started_at": datetime.datetime.now(datetime.UTC),
        "source": c.source.label, "source_key": c.source.key,
        "columns": list(c.columns), "neighbours": c.neighbours, "privacy_unit": c.privacy_unit,
        "max_rows_per_unit": c.max_rows_per_unit, "rho": str(c.rho), "rho_approx": float(c.rho),
        "epsilon": report.epsilon(c.rho, c.delta), "delta": c.delta, "output": c.output,
        "seeded": c.seeded, "data_domain": c.data_domain, "private": c.private,
        "origin": c.origin, "conversion": c.conversion or accounting.CONVERSION,
    }


def _spec(source: SourceId) -> str:
    kind = source.key.split(":", 1)[0]
    return {"file": "file:", "name": "name:"}.get(kind, "") + source.label


def _refusal(c: Charge, b: Budget, spent: Fraction, remaining: Fraction) -> BudgetExceededError:
    short = c.rho - remaining
    most = number(remaining, "down")
    fix = (f"request at most {opt('rho', int(most) if most.isdigit() else float(most))}, or raise"
           if remaining > 0 else "the budget is exhausted: raise")
    which = (f"the budget {b.label!r} (covering {', '.join(b.labels)}; rho {_show(b.cap)})"
             if len(b.sources) > 1 or b.label != c.source.label
             else f"the budget of rho {_show(b.cap)}")
    err = BudgetExceededError(
        f"release on {c.source.label} refused: it requests rho {_show(c.rho)} but only "
        f"{_show(remaining)} of {which} remains (spent {_show(spent)}); "
        f"difference {_show(short)}. Nothing was charged and no noise was drawn. Fix: {fix} "
        f"the budget with {call('set_budget', _spec(c.source), rho=...)}")
    err.source = c.source.label  # type: ignore[attr-defined]
    err.budget = b.label  # type: ignore[attr-defined]
    err.requested = c.rho  # type: ignore[attr-defined]
    err.remaining = remaining  # type: ignore[attr-defined]
    err.difference = short  # type: ignore[attr-defined]
    return err


def exact_cap(rho: object = None, epsilon: object = None, delta: object = None) -> Fraction:
    """A budget from ``rho`` (>= 0, exact) or ``epsilon`` and ``delta`` (the largest rho whose
    epsilon at delta is at most ``epsilon``, rounded down)."""
    fix = "pass rho=2.0, or epsilon=1.0 and delta=1e-6"
    if (rho is None) == (epsilon is None):
        raise bad_argument("rho/epsilon", (rho, epsilon), "exactly one must be given", fix)
    if rho is not None:
        if delta is not None:
            raise bad_argument("delta", delta, "goes only with epsilon, not with rho", fix)
        cap = to_fraction(rho, "rho", fix)
        if cap < 0:
            raise bad_argument("rho", rho, "must be >= 0 (0 freezes the source)", fix)
        return cap
    if delta is None:
        raise bad_argument("delta", delta, "is required with epsilon", fix)
    return accounting.rho_from_epsilon_delta(epsilon, delta)
