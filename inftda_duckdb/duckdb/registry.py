"""The process registry of DuckDB releases: one object owns every release's state and its lock.

A release is begun by ``inftda_begin`` (its checks passed, nothing charged, no key drawn: only
:class:`Pending` is set), found again by its release id in the levels step, which charges it,
draws its keys and releases its levels, and then forgotten (the keys go with it). A release in
parts stays until its last part is done. Beside the releases, the registry keeps, by the
capability token their SQL carries, what the Python API's calls need: the progress callback,
the original exception a UDF raised (DuckDB passes only its text on), the ledger row the charge
wrote, and the calls cancelled before their begin step ran; and which of our UDFs run now (by
connection and token), so that a stop request never interrupts DuckDB under one of them.

All of it is read and written under one lock, only through :data:`RELEASES`'s methods.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.interrupts import GRACE
from ..core.leastsquares import LeastSquares
from ..core.release import Checked
from ..core.topdown import LevelProgress
from ..core.tree import Levels, Nodes, mixed_radix
from ..ledger.sources import SourceId
from .arrow_io import Level
from .catalog import Home, Where

MAX_LIVE_RELEASES = 64  #: begun releases kept; the oldest is forgotten past it

Progress = Callable[[LevelProgress], None]
"""``progress(p)``: ``p.cells_done`` of ``p.cells_planned`` noised cells of level ``p.level``
(of ``p.depth``) are done, ``p.seconds`` after the level began (``p.parents`` released parents);
called once per level when it is done and, on long levels, up to 16 times before."""


@dataclass
class Pending:
    """What the levels step needs to charge a begun release and draw its keys: the checked
    release (its ``found``: the source's identity and home as the budget check read them)."""

    con_ref: Any
    checked: Checked[tuple[SourceId, Home]]
    nests: list[tuple[int, ...] | None]  # per level: the earlier levels keying its children
    where: Where
    origin: str


@dataclass
class Release:
    """A release in progress: each level's random source, noise and domain size (and, for a
    nested level, the earlier levels keying its allowed children), and the nodes released at
    the last level done. Between the begin and the levels step only ``pending`` is set: the
    registry never holds a key before the charge."""

    levels: list[Level]
    root: int
    nodes: Nodes
    token: str | None = None
    progress: Progress | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    owner: int = 0  #: id() of the connection that loaded the UDFs (see interrupt())
    charged: str | None = None  #: what the release spent ('rho 1/2 on memory.main.t')
    tree: Levels | None = None  # a release in parts: its levels, and which parts are done
    parts: Parts | None = None
    pending: Pending | None = None
    kept: int = 0  #: the rows kept (the checks): more than any leaf's count (@leaf_pairs)
    lsq: LeastSquares | None = None  #: estimator 'least_squares' (holds the root's noise)
    cut_e: np.ndarray | None = None  #: ... in parts: where each cut node's subtree continues


class Parts:
    """The parts of a release in parts: the cut nodes of part p are ``nodes[:, first[p]:
    first[p + 1]]`` (runs of consecutive cut prefixes); which parts are done, and the levels
    below the cut summed over the parts done (for one progress report per level)."""

    def __init__(self, count: int, levels: Levels, nodes: Nodes) -> None:
        cut = nodes.codes.shape[0]
        span = int(np.prod(levels.sizes[:cut], dtype=object))
        group = -(-span // count)
        keys = mixed_radix(nodes.codes, levels.sizes[:cut], np.int64)
        self.keys_from = np.arange(count + 1, dtype=np.int64) * group  # part p: cut keys from..
        self.count, self.first = count, np.searchsorted(keys, self.keys_from)
        self.done: set[int] = set()
        self.cells: dict[int, list[float]] = {}


def _matches(token: str | None, owner_id: int, wanted: str | None, owner: object) -> bool:
    return (wanted is None or token == wanted) and (owner is None or owner_id == id(owner))


class ReleaseRegistry:
    """Every release of this process between its begin step and its end, and the Python calls
    that wait on them; thread-safe (one re-entrant lock)."""

    def __init__(self, capacity: int = MAX_LIVE_RELEASES) -> None:
        self._lock = threading.RLock()
        self._capacity = capacity
        self._releases: collections.OrderedDict[str, Release] = collections.OrderedDict()
        # Python API calls, by token: the progress callback, the original exception a UDF
        # raised, and the ledger row its charge wrote (for the output's provenance)
        self._progress: dict[str, Progress | None] = {}
        self._errors: dict[str, BaseException] = {}
        self._ledger_ids: dict[str, int] = {}
        self._plans: dict[str, str] = {}  # the public plans of those charges
        # releases inside inftda_begin, not charged yet (owner, token, cancel flag), and the
        # tokens of Python calls interrupted before their begin ran
        self._beginning: dict[int, tuple[int, str | None, threading.Event]] = {}
        self._cancelled: set[str] = set()
        # our UDFs running now, by (connection id, token): DuckDB is never interrupted under
        # them (it would return while the UDF still runs); they stop on their own flags
        self._active: collections.Counter[tuple[int, str | None]] = collections.Counter()
        self._levels: dict[int, Release] = {}  # releases inside their levels UDF (taken)
        self._begun: collections.Counter[int] = collections.Counter()  # by connection id

    # ------------------------------------------------------------------ releases, by release id

    def add(self, state: Release, rid: str | None = None) -> str:
        """Keep a begun release under ``rid`` (default: a fresh id) and return the id; past
        the capacity the oldest begun release is forgotten."""
        rid = uuid.uuid4().hex if rid is None else rid
        with self._lock:
            self._releases[rid] = state
            self._begun[state.owner] += 1
            while len(self._releases) > self._capacity:
                self._releases.popitem(last=False)
        return rid

    def begun(self, owner: object) -> int:
        """How many releases connection ``owner`` has begun in this process (a shell compares
        it before and after a statement: did the statement run a release?)."""
        with self._lock:
            return self._begun[id(owner)]

    def take(self, rid: str) -> Release | None:
        """The release ``rid``, removed (a one-call release is used once); None if unknown."""
        with self._lock:
            return self._releases.pop(rid, None)

    def find(self, rid: str) -> Release | None:
        """The release ``rid``, left in place (a release in parts); None if unknown."""
        with self._lock:
            return self._releases.get(rid)

    def drop(self, state: Release) -> None:
        """A failed release: out of the registry, its keys gone (no later part can run)."""
        with self._lock:
            for rid in [r for r, st in self._releases.items() if st is state]:
                del self._releases[rid]
        state.levels, state.tree, state.parts, state.pending = [], None, None, None

    def ids(self) -> set[str]:
        """The ids of the releases kept now."""
        with self._lock:
            return set(self._releases)

    def states(self) -> list[Release]:
        """The releases kept now."""
        with self._lock:
            return list(self._releases.values())

    def cut(self, state: Release, nodes: Nodes, tree: Levels, parts: Parts) -> None:
        """A release in parts released its levels down to the cut: its parts find these."""
        with self._lock:
            state.nodes, state.tree, state.parts = nodes, tree, parts

    def parts_done(self, rid: str, state: Release, part_ids: list[int],
                   sums: dict[int, list[float]]) -> bool:
        """Record parts ``part_ids`` of release ``rid`` as done, adding each level's
        ``[parents, cells, seconds]`` of ``sums``; after the last part the release is forgotten
        and its keys dropped. Returns whether that was the last part."""
        book = state.parts
        assert book is not None
        with self._lock:
            book.done.update(part_ids)
            for level, values in sums.items():
                acc = book.cells.setdefault(level, [0, 0, 0.0])
                for i, v in enumerate(values):
                    acc[i] += v
            finished = len(book.done) == book.count
            if finished:
                self._releases.pop(rid, None)
                state.levels, state.tree = [], None  # the keys go with the last part
        return finished

    # ------------------------------------------------------------------ our UDFs running now

    @contextlib.contextmanager
    def beginning(self, owner: int, token: str | None, flag: threading.Event) -> Iterator[None]:
        """While a begin step of connection ``owner`` runs: :meth:`cancel` sets ``flag``."""
        with self._lock:
            self._beginning[id(flag)] = (owner, token, flag)
        try:
            yield
        finally:
            with self._lock:
                self._beginning.pop(id(flag), None)

    @contextlib.contextmanager
    def active(self, owner: int, token: str | None) -> Iterator[None]:
        """While one of our UDFs runs for connection ``owner`` and call ``token``."""
        with self._lock:
            self._active[owner, token] += 1
        try:
            yield
        finally:
            with self._lock:
                self._active[owner, token] -= 1
                if not self._active[owner, token]:
                    del self._active[owner, token]

    @contextlib.contextmanager
    def in_levels(self, state: Release) -> Iterator[None]:
        """While a release (taken from the registry or not) is inside its levels UDF:
        :meth:`cancel` still finds it."""
        with self._lock:
            self._levels[id(state)] = state
        try:
            yield
        finally:
            with self._lock:
                self._levels.pop(id(state), None)

    def running(self, token: str | None, owner: object) -> bool:
        """Whether a matching release is in one of our UDFs, or between them: it stops on its
        own flag, and DuckDB must not be interrupted under it."""
        with self._lock:
            return any(_matches(s.token, s.owner, token, owner)
                       for s in self._releases.values()) or any(
                _matches(t, o, token, owner) for o, t in self._active)

    def wait_idle(self, token: str, timeout: float = GRACE) -> None:
        """Until no UDF of the call ``token`` runs (DuckDB may return before a UDF has), or
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not any(t == token for _, t in self._active):
                    return
            time.sleep(0.005)

    def cancel(self, token: str | None = None, owner: object = None) -> int:
        """Set the cancel flag of the matching releases (the call ``token``'s, connection
        ``owner``'s, or all; a token is remembered for a begin step still to come). Returns
        how many flags were set."""
        with self._lock:
            if token is not None:
                self._cancelled.add(token)
            states = [*self._releases.values(), *self._levels.values()]
            flags = [s.cancelled for s in states if _matches(s.token, s.owner, token, owner)]
            flags += [f for o, t, f in self._beginning.values() if _matches(t, o, token, owner)]
        for flag in flags:
            flag.set()
        return len(flags)

    def cancelled(self, token: str | None) -> bool:
        """Whether the Python call ``token`` was cancelled."""
        with self._lock:
            return token is not None and token in self._cancelled

    # ------------------------------------------------------------------ Python calls, by token

    def open(self, token: str, progress: Progress | None) -> None:
        """A Python call starts the statement carrying ``token``, reporting to ``progress``."""
        with self._lock:
            self._progress[token] = progress

    def progress_of(self, token: str | None) -> Progress | None:
        """The progress callback of the call ``token`` (None: none, or not a Python call)."""
        with self._lock:
            return self._progress.get(token) if token else None

    def keep_error(self, token: str | None, exc: BaseException) -> None:
        """Keep the first error a UDF raised for the Python call ``token`` (if one is open)."""
        if token is not None:
            with self._lock:
                if token in self._progress:
                    self._errors.setdefault(token, exc)

    def has_error(self, token: str) -> bool:
        """Whether a UDF of the call ``token`` raised an error of ours."""
        with self._lock:
            return token in self._errors

    def pop_error(self, token: str | None) -> BaseException | None:
        """The error kept for the call ``token``, removed; None if there is none."""
        with self._lock:
            return self._errors.pop(token, None) if token is not None else None

    def keep_ledger_id(self, token: str | None, ledger_id: int, plan: str | None = None) -> None:
        """The ledger row the charge of the Python call ``token`` wrote (if one is open), and
        the public plan it recorded."""
        if token is not None:
            with self._lock:
                if token in self._progress:
                    self._ledger_ids[token] = ledger_id
                    if plan is not None:
                        self._plans[token] = plan

    def plan_of(self, token: str) -> str | None:
        """The public plan the charge of the Python call ``token`` recorded (None: none)."""
        with self._lock:
            return self._plans.get(token)

    def charged(self, token: str) -> bool:
        """Whether the release of the call ``token`` was charged."""
        with self._lock:
            return token in self._ledger_ids

    def forget(self, token: str) -> int | None:
        """The call ``token`` is over: everything kept for it goes, with any release it began
        and did not finish (the statement failed). Returns the ledger row its charge wrote."""
        with self._lock:
            self._progress.pop(token, None)
            self._errors.pop(token, None)
            self._cancelled.discard(token)
            ledger_id = self._ledger_ids.pop(token, None)
            self._plans.pop(token, None)
            for rid in [r for r, st in self._releases.items() if st.token == token]:
                del self._releases[rid]
        return ledger_id

    def calls(self) -> set[str]:
        """The tokens of the Python calls still tracked (open, or with an error kept)."""
        with self._lock:
            return set(self._progress) | set(self._errors)


RELEASES = ReleaseRegistry()
"""The process's one registry."""
