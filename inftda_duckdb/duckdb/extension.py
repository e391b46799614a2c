"""Load InfTDA into a DuckDB connection: UDFs, TEMP macros, the release registry; Python API.

``load(con)`` registers, per connection, Python UDFs and the TEMP table macros

- ``inftda_release(source, columns, rho := ..., ...)``: ``SELECT * FROM query(<SQL>)`` where the
  SQL is rendered at bind time by a side-effect-free UDF (DuckDB's Python API has no table
  functions); executing it performs one release (see ``sql/release.sql``);
- ``inftda_preview(source, columns, rho := ..., beta := 0.05, delta := 1e-6)``: noise scale and
  Theorem 1 bound per level; spends nothing.

Random UDFs are registered with ``side_effects=True``; each runs once per execution (begin in
a one-row MATERIALIZED CTE; the levels' lists go straight to the unnest, and a second call
would raise). ``inftda_begin`` accepts only the spec its statement was rendered with (a
capability token, :mod:`.capabilities`), turns the data checks into errors and keeps what the
release needs in a small process registry, keyed by a fresh release id: no key, no noise, no
charge yet. ``inftda_levels`` (one Arrow call) takes the release from the registry, refuses it if
its begin step ran more than once (a correlated subquery), charges the ledger, draws the keys,
then takes the true leaf counts as lists (mixed-radix keys, or codes column after column),
releases every level through the engine-neutral
:func:`~inftda_duckdb.core.topdown.release_below` on DuckDB's ``threads`` worker threads, returns
the released leaves as one row of lists and drops the state (the keys go with it). A release in
parts is charged by its first levels call, the one that releases the levels down to the cut.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import logging
import math
import re
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

import duckdb
import numpy as np
import pyarrow as pa

from ..core import memory, options, planning, units
from ..core.accounting import REPORT_DELTA
from ..core.checks import load_checks, raise_for_checks
from ..core.errors import (
    BudgetExceededError,
    InftdaError,
    InputError,
    InternalError,
    LedgerError,
    ReleaseAbortedError,
    ReleaseInterrupted,
    bad_argument,
    call,
    opt,
    render,
    shown,
    speaking,
    speaks,
)
from ..core.identifiers import quote
from ..core.interrupts import GRACE, interruptible, stopped
from ..core.noise import DiscreteGaussian
from ..core.provenance import (
    PREVIEW_FROM_DATA,
    NotPrivateWarning,
    not_private_texts,
    of_release,
    warn_not_private,
)
from ..core.randomness import RandomSource
from ..core.release import ORIGINS, Checked, charge_fields, charged_text, check, draw
from ..core.request import ReleaseRequest, from_json, parse_request
from ..core.topdown import Cancelled, LevelProgress, check_total, release_below
from ..core.tree import Allowed, Levels, Nodes, mixed_radix
from ..ledger.sources import SourceId
from ..ledger.sources import parse as parse_source
from ..ledger.store import Ledger
from . import budgets, capabilities, catalog, disclosure, evaluation
from .allocator import returning_memory
from .catalog import Where
from .connections import create_macro, register_udfs, registered
from .domain import DomainPlan, frame_enum_text, plan_domains
from .sqlgen import (
    PREFIXES,
    UdfNames,
    fragments,
    preview_spec_json,
    render_preview,
    render_release,
    spec_json,
)

T = TypeVar("T")
MAX_LIVE_RELEASES = 64

Progress = Callable[[LevelProgress], None]
"""``progress(p)``: ``p.cells_done`` of ``p.cells_planned`` noised cells of level ``p.level``
(of ``p.depth``) are done, ``p.seconds`` after the level began (``p.parents`` released parents);
called once per level when it is done and, on long levels, up to 16 times before."""

_LOG = logging.getLogger("inftda_duckdb")


_LOCK = threading.RLock()


@dataclass
class _Pending:
    """What the levels step needs to charge a begun release and draw its keys: the checked
    release (its ``found``: the source's identity and home as the budget check read them)."""

    con_ref: Any
    checked: Checked[tuple[SourceId, catalog.Home]]
    nests: list[tuple[int, ...] | None]  # per level: the earlier levels keying its children
    where: Where
    origin: str


@dataclass
class _Release:
    """A release in progress: each level's random source, noise and domain size (and, for a
    nested level, the earlier levels keying its allowed children), and the nodes released at
    the last level done. Between the begin and the levels step only ``pending`` is set: the
    registry never holds a key before the charge."""

    levels: list[tuple[RandomSource, DiscreteGaussian, int, tuple[int, ...] | None]]
    root: int
    nodes: Nodes
    token: str | None = None
    progress: Progress | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    owner: int = 0  #: id() of the connection that loaded the UDFs (see interrupt())
    charged: str | None = None  #: what the release spent ('rho 1/2 on memory.main.t')
    tree: Levels | None = None  # a release in parts: its levels, and which parts are done
    parts: _Parts | None = None
    pending: _Pending | None = None
    kept: int = 0  #: the rows kept (the checks): more than any leaf's count (@leaf_pairs)


_RELEASES: collections.OrderedDict[str, _Release] = collections.OrderedDict()
# Python API calls, by the token their SQL carries: the progress callback, and the original
# exception a UDF raised (DuckDB only passes its text on)
_PROGRESS: dict[str, Progress | None] = {}
_ERRORS: dict[str, BaseException] = {}
# ... and the ledger row its charge wrote (for the output's provenance)
_LEDGER_IDS: dict[str, int] = {}
# releases inside inftda_begin, not charged yet (owner, token, cancel flag), and the tokens
# of Python calls interrupted before their begin ran
_BEGINNING: dict[int, tuple[int, str | None, threading.Event]] = {}
_CANCELLED: set[str] = set()
# our UDFs running now, by (connection id, token): DuckDB is never interrupted under them (it
# would return while the UDF still runs); they stop on their own flags
_ACTIVE: collections.Counter[tuple[int, str | None]] = collections.Counter()
_LEVELS: dict[int, _Release] = {}  # releases inside their levels UDF (popped from _RELEASES)


@contextlib.contextmanager
def _active(owner: int, token: str | None) -> Iterator[None]:
    with _LOCK:
        _ACTIVE[owner, token] += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[owner, token] -= 1
            if not _ACTIVE[owner, token]:
                del _ACTIVE[owner, token]


def _keep_error(token: str | None, exc: BaseException) -> None:
    if token is not None:
        with _LOCK:
            if token in _PROGRESS:
                _ERRORS.setdefault(token, exc)


# ---------------------------------------------------------------------------------------------
# UDF bodies


def _language(origin: object) -> str:
    """The interface a release was asked from, whose language its errors speak."""
    return "python" if origin == "python" else "cli" if origin == "cli" else "sql"


def _origin(con_ref: Any, step: str, spec_text: str, *rest: Any) -> str:
    """The interface a release was asked from (its errors speak its language)."""
    try:
        return _language(json.loads(spec_text).get("origin", "sql"))
    except (ValueError, AttributeError):
        return "sql"


@speaks(_origin)
def _begin(con_ref: Any, step: str, spec_text: str, checks: str,
           query_id: int | None = None) -> dict[str, Any]:
    """Once per execution: the statement's own spec (capability token), checks -> errors."""
    spec = json.loads(spec_text)
    token = spec.get("token") if isinstance(spec, dict) else None
    flag = threading.Event()
    con = con_ref()
    owner = id(con)
    with _LOCK:
        _BEGINNING[id(flag)] = (owner, token, flag)
    try:
        with _active(owner, token):
            parsed = capabilities.redeem(step, token, spec_text, query_id)
            return _begin_spec(con_ref, spec, checks, flag,
                               parsed if isinstance(parsed, ReleaseRequest) else None)
    except KeyboardInterrupt as exc:  # Ctrl-C landed in this UDF: nothing is charged here
        err = exc if isinstance(exc, ReleaseInterrupted) else stopped(None)
        _keep_error(token, err)
        raise err from None
    except InftdaError as exc:
        _keep_error(token, exc)
        raise
    finally:
        with _LOCK:
            _BEGINNING.pop(id(flag), None)


def _begin_spec(con_ref: Any, spec: dict[str, Any], checks: str, flag: threading.Event,
                request: ReleaseRequest | None = None) -> dict[str, Any]:
    """The checks of :func:`inftda_duckdb.core.release.check`, in its order: the mode's refusals
    and the budget (request and catalog only), the public checks, then the data checks: in
    curator mode their errors raise here (nothing charged); in public-facing mode one is kept
    and raised as one fixed message once charged (see :mod:`.disclosure`). ``request``: the one
    the spec was rendered from (its token's; else parsed from the spec)."""
    request = request if request is not None else from_json(spec["request"])
    domains = DomainPlan.from_json(spec["domains"])
    data = load_checks(checks)
    where = Where.from_json(spec.get("charge") or Where.of(domains.source).to_json())
    con = con_ref()
    if con is None:
        raise InputError("the connection that loaded inftda_duckdb is closed")

    def budget(rho: Fraction) -> tuple[SourceId, catalog.Home]:
        disclosure.admit(con, request, domains, data)
        # before any data check: refused, nothing charged, nothing said
        return disclosure.check_budget(con, where, charge_fields(request, rho, spec["origin"]))

    checked = check(request, domains, data, budget=budget, data=lambda: data,
                    hide=disclosure.is_public(con))
    nests = [None if (nest := domains.nested_parent(k)) is None else nest[1]
             for k in range(request.depth)]
    token = spec.get("token")
    if flag.is_set() or (token is not None and token in _CANCELLED):
        raise stopped(None)  # interrupted before the charge
    if spec["origin"] == "sql":  # the Python API warned when it planned
        _log_frame_enums(request, domains, data)
    rid = uuid.uuid4().hex
    pending = _Pending(con_ref, checked, nests, where, spec["origin"])
    with _LOCK:
        state = _Release([], 0, Nodes.root(0), token, _PROGRESS.get(token) if token else None,
                         flag, id(con), pending=pending, kept=checked.n)
        _RELEASES[rid] = state
        while len(_RELEASES) > MAX_LIVE_RELEASES:
            _RELEASES.popitem(last=False)
    return {"rid": rid}


def _claim(state: _Release) -> None:
    """The levels step, first: refuse a duplicated begin, charge the ledger (a refusal raises:
    nothing drawn), then draw the keys and release the root (Algorithm 1, line 1)."""
    p = state.pending
    if p is None:
        return
    state.pending = None
    capabilities.claim(state.token)
    con = p.con_ref()
    if con is None:
        raise InputError("the connection that loaded inftda_duckdb is closed")
    if state.cancelled.is_set() or (state.token is not None and state.token in _CANCELLED):
        raise stopped(None)  # interrupted before the charge
    checked = p.checked
    request, plan = checked.request, checked.plan
    try:
        # refusal raises BudgetExceededError: nothing drawn
        ledger_id = budgets.charge(con, p.where, charge_fields(request, plan.rho, p.origin),
                                   checked.found)
    except KeyboardInterrupt:  # while the charge was being written
        raise stopped(None, recording=True) from None
    state.charged = charged = charged_text(plan.rho, p.where.label)
    if checked.hidden is not None:
        with disclosure.hidden(charged):  # charged: one fixed message, whatever failed
            raise checked.hidden
    if state.token is not None:
        with _LOCK:
            if state.token in _PROGRESS:
                _LEDGER_IDS[state.token] = ledger_id
    source, state.root = draw(checked, charged)
    state.levels = [(source.derive(k + 1), DiscreteGaussian(plan.level_sigma2[k]),
                     checked.sizes[k], p.nests[k]) for k in range(request.depth)]
    state.nodes = Nodes.root(state.root)
    if p.origin == "sql" and not request.private:
        # on stderr, even under -W error
        _LOG.warning("%s", "; ".join(not_private_texts(request)))


def _log_frame_enums(request: ReleaseRequest, plan: DomainPlan, checks: dict[str, Any]) -> None:
    """From SQL: a warning on stderr when a level's domain is a registered DataFrame's ENUM."""
    if checks.get("frame"):
        enums = [c.column for c in plan.columns if c.kind == "enum"]
        _LOG.warning("%s", render(frame_enum_text(request.source, enums), "sql"))


def _one(rid: Any) -> _Release:
    """The release a one-row UDF call belongs to, removed from the registry (used once)."""
    rid = _plain(rid)
    if len(rid) != 1:
        raise InternalError(f"a release step got {len(rid)} rows, not one")
    with _LOCK:
        state = _RELEASES.pop(str(rid[0].as_py()), None)
    if state is None:
        raise _unknown_release()
    return state


def _unknown_release() -> InputError:
    return InputError("unknown or expired release id: inftda_levels is an internal step of "
                      "inftda_release and cannot be called by hand (or more than "
                      f"{MAX_LIVE_RELEASES} releases were begun at once). Nothing was charged")


def _prefixes(arr: Any, width: int) -> np.ndarray:
    """The true prefixes in a STRUCT(k INTEGER[], key BIGINT[], n BIGINT[]) row: their
    mixed-radix keys (N,) when ``key`` is set, else (width, N) codes (``k`` holds the codes
    column after column, so each level's codes are one contiguous row; NULL: none)."""
    row = _plain(arr)
    key = row.field("key")
    if key.null_count == 0:
        return memory.view(memory.values(key))
    codes = memory.view(memory.values(row.field("k")))
    if codes.shape[0] % max(width, 1):
        raise InternalError("a level got prefixes of the wrong length")
    return codes.reshape(width, -1)


def _own_pairs(arr: Any) -> np.ndarray:
    """The leaf pairs (``key`` of @leaf_pairs) as a WRITABLE int64 view of the levels call's
    own Arrow input (no copy): DuckDB exports the call's arguments into fresh Arrow buffers
    that it frees after the call and never reads back (its list, and any table or CTE it came
    from, keep their own memory: tests/test_levels.py checks it on both shapes), so
    the core may sort the leaves in them (``release_below(overwrite=True)``) instead of in a
    new array of their size (76 MB at 9.5M leaves, faulted in fresh). pyarrow marks imported
    buffers read-only, hence the view through their address; it keeps the buffer alive."""
    values = memory.values(_plain(arr).field("key"))
    view = memory.view(values)  # int64, no nulls: checked
    if view.dtype != np.int64 or view.shape[0] == 0:
        return view
    buf = values.buffers()[1]
    raw = (ctypes.c_int64 * view.shape[0]).from_address(buf.address + values.offset * 8)
    raw._arrow = buf  # the Arrow buffer lives as long as the view
    return np.frombuffer(raw, np.int64)


def _counts(arr: Any) -> np.ndarray:
    return memory.view(memory.values(_plain(arr).field("n")))


def _levels(rid: Any, part: Any, leaves: Any, allowed: Any, threads: Any, cut: Any,
            parts: Any) -> pa.Array:
    """Algorithm 1, lines 2-9 (see ``@levels`` in sql/release.sql). ``cut`` 0: one call, the
    true leaf counts are ``leaves``; releases every level and drops the release state. Else the
    release comes in parts: ``part`` -1 releases levels 1..cut from the cut prefixes' counts,
    then each row ``part`` >= 0 the levels below the cut for its run of cut nodes (the state
    goes when all ``parts`` are done). A nested level's allowed children are ``allowed[k - 1]``.
    Returns one row per call row: the released leaves as column lists (and the release id).
    cancel(), interrupt(con) or Ctrl-C stop it between two blocks (ReleaseInterrupted)."""
    workers = max(1, int(_plain(threads)[0].as_py() or 1))
    cut_level, n_parts = int(_plain(cut)[0].as_py()), int(_plain(parts)[0].as_py())
    part_ids = _plain(part).to_pylist()
    if cut_level and part_ids != [-1]:
        state = _live(_plain(rid)[0].as_py())
        return _stoppable(state, lambda: _parts(_plain(rid).to_pylist(), part_ids,
                                                _plain(leaves), workers))
    state = _one(rid) if not cut_level else _live(_plain(rid)[0].as_py(), first=True)
    return _stoppable(state, lambda: _release_levels(state, rid, part_ids, leaves, allowed,
                                                     workers, cut_level, n_parts))


def _stoppable(state: _Release, run: Callable[[], pa.Array]) -> pa.Array:
    """``run()`` as the release's running levels UDF: a cancel flag, an interrupt or Ctrl-C
    inside it raise ReleaseInterrupted (saying what was charged); its errors are kept for the
    Python caller, in its language. On any error the release and its keys are dropped."""
    language = None if state.pending is None else _language(state.pending.origin)
    with _LOCK:
        _LEVELS[id(state)] = state
    try:
        with _active(state.owner, state.token):
            if state.cancelled.is_set() and state.pending is None:
                raise Cancelled("the release was cancelled before its levels")
            return run()
    except (Cancelled, KeyboardInterrupt) as exc:  # cancel(), interrupt(con) or Ctrl-C here
        _drop(state)
        err = exc if isinstance(exc, ReleaseInterrupted) else stopped(state.charged)
        _keep_error(state.token, err)
        raise err from None
    except InftdaError as exc:
        _drop(state)
        if exc.interface is None:
            exc.interface = language  # DuckDB reads the message after the call: its language
        _keep_error(state.token, exc)
        raise
    except BaseException:
        _drop(state)
        raise
    finally:
        with _LOCK:
            _LEVELS.pop(id(state), None)


def _drop(state: _Release) -> None:
    """A failed release: out of the registry, its keys gone (no later part can run)."""
    with _LOCK:
        for rid in [r for r, st in _RELEASES.items() if st is state]:
            del _RELEASES[rid]
    state.levels, state.tree, state.parts, state.pending = [], None, None, None


def _release_levels(state: _Release, rid: Any, part_ids: list[Any], leaves: Any, allowed: Any,
                    workers: int, cut_level: int, n_parts: int) -> pa.Array:
    """The one call (``cut_level`` 0), or the levels down to the cut of a release in parts."""
    if part_ids not in ([0], [-1]):
        raise InternalError("a one-call release got a part other than 0")
    con_ref = state.pending.con_ref if state.pending is not None else None
    _claim(state)
    levels = _tree(state, memory.values(_plain(allowed)))
    upto = cut_level or levels.depth
    row, radix = _plain(leaves), None
    if row.field("n").null_count and not row.field("key").null_count:  # @leaf_pairs
        # (key << b) | n, b = the bits of the rows kept (SQL's length(bin(kept)), 1 for 0)
        codes, counts, radix = _own_pairs(leaves), None, 1 << max(1, state.kept.bit_length())
    else:
        codes, counts = _prefixes(leaves, upto), _counts(leaves)
        if codes.shape[-1] != counts.shape[0]:
            raise InternalError("the leaves came with different numbers of prefixes and counts")
    with returning_memory(con_ref() if con_ref is not None else None,
                          math.prod(levels.sizes[:upto])):  # public: not the true leaves
        nodes = release_below(levels, state.nodes, codes, counts, upto=upto, workers=workers,
                              progress=state.progress, cancel=state.cancelled.is_set,
                              radix=radix, overwrite=radix is not None)
    check_total(nodes, state.root, upto)
    if not cut_level:
        state.levels = []  # the keys go with the call
        return _rows([nodes])
    with _LOCK:  # the parts below the cut find these nodes
        state.nodes, state.tree, state.parts = nodes, levels, _Parts(n_parts, levels, nodes)
    return _rows([], [str(_plain(rid)[0].as_py())])


class _Parts:
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


def _parts(rids: list[Any], part_ids: list[Any], leaves: Any, workers: int) -> pa.Array:
    """The rows of a release in parts (one call, any number of rows): the levels below the cut
    for the cut nodes of every row's part, in ONE release over their union (the noise is
    addressed by the tree: the same as one release per part, without the per-part overhead),
    then split back into rows."""
    state = _live(rids[0])
    book, tree = state.parts, state.tree
    if book is None or tree is None or any(r != rids[0] for r in rids):
        raise InternalError("the parts of a call belong to no release in parts, or to several")
    if any(not 0 <= p < book.count or p in book.done for p in part_ids) or \
            len(set(part_ids)) != len(part_ids):
        raise InternalError("a part of a release in parts came twice, too late or unknown")
    key_lists, count_lists = leaves.field("key"), leaves.field("n")
    keys, counts = memory.view(memory.values(key_lists)), memory.view(memory.values(count_lists))
    if keys.shape != counts.shape:
        raise InternalError("the leaves came with different numbers of prefixes and counts")
    cols = np.concatenate([np.arange(book.first[p], book.first[p + 1]) for p in part_ids])
    sums: dict[int, list[float]] = {}

    def tally(r: LevelProgress) -> None:
        if r.cells_done == r.cells_planned:
            sums[r.level] = [r.parents, r.cells_planned, r.seconds]

    nodes = release_below(tree, Nodes(state.nodes.codes[:, cols], state.nodes.counts[cols]),
                          keys, counts, workers=workers, progress=tally,
                          cancel=state.cancelled.is_set)
    cut = state.nodes.codes.shape[0]
    at = mixed_radix(nodes.codes[:cut], tree.sizes[:cut], np.int64)  # each leaf's cut key
    bounds = np.searchsorted(at, book.keys_from[np.asarray(part_ids)])
    ends = np.searchsorted(at, book.keys_from[np.asarray(part_ids) + 1])
    out = [Nodes(nodes.codes[:, a:b], nodes.counts[a:b]) for a, b in zip(bounds, ends, strict=True)]
    with _LOCK:
        book.done.update(part_ids)
        for level, values in sums.items():
            acc = book.cells.setdefault(level, [0, 0, 0.0])
            for i, v in enumerate(values):
                acc[i] += v
        finished = len(book.done) == book.count
        if finished:
            _RELEASES.pop(rids[0], None)
            state.levels, state.tree = [], None  # the keys go with the last part
    if finished and state.progress is not None:
        for level in sorted(book.cells):
            parents, cells, seconds = book.cells[level]
            state.progress(LevelProgress(level, tree.depth, int(parents), int(cells), int(cells),
                                         seconds))
    return _rows(out, d=tree.depth)


_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "PiB": 1 << 50, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def memory_limit(con: Any) -> int | None:
    """DuckDB's ``memory_limit`` setting in bytes (None if unreadable): a release too large for
    one list of its leaves under it is planned in parts. ``con``: a connection to read it
    from, or the setting's text as the release macro already read it (no query)."""
    text = con
    if not isinstance(con, str):
        try:
            text = str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
        except duckdb.Error:
            return None
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", text)
    if m is None or m.group(2) not in _UNITS:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def _live(rid: Any, first: bool = False) -> _Release:
    """A release in parts (kept in the registry until its last part is done): its ``first``
    call (the cut) finds it begun and not yet charged, each later part charged."""
    with _LOCK:
        state = _RELEASES.get(str(rid))
    if state is None or (state.pending is None) == first:  # a cut twice, a part before the cut
        raise _unknown_release()
    return state


def _rows(parts: list[Nodes], rids: list[str] | None = None, d: int = 0) -> pa.Array:
    """One row per released part: STRUCT(rid VARCHAR, k INTEGER[][] (a list per column),
    n BIGINT[]); ``rids`` (one row each, no leaves) for the call that releases the cut."""
    if rids is not None:
        none = memory.arrow(np.zeros(len(rids) + 1, np.int64))  # empty lists' offsets
        empty = pa.LargeListArray.from_arrays(
            none, pa.LargeListArray.from_arrays(none[:1], pa.nulls(0, pa.int32())))
        return pa.StructArray.from_arrays(
            [memory.strings(rids), empty,
             pa.LargeListArray.from_arrays(none, pa.nulls(0, pa.int64()))],
            names=["rid", "k", "n"])
    d = parts[0].codes.shape[0] if parts else d
    sizes = np.array([p.counts.shape[0] for p in parts], np.int64)
    # 64-bit offsets: d x m codes in one list may pass 2**31 (DuckDB reads them as LIST)
    lists = pa.LargeListArray.from_arrays
    inner = np.zeros(len(parts) * d + 1, np.int64)
    np.cumsum(np.repeat(sizes, d), out=inner[1:])
    codes = _cat32([p.codes.astype(np.int32, copy=False).ravel() for p in parts])
    columns = lists(memory.arrow(inner), memory.arrow(codes))
    outer = memory.arrow(np.arange(len(parts) + 1, dtype=np.int64) * d)
    n_off = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(sizes, out=n_off[1:])
    counts = _cat32([p.counts for p in parts], np.int64)
    return pa.StructArray.from_arrays(
        [pa.nulls(len(parts), pa.string()), lists(outer, columns),
         lists(memory.arrow(n_off), memory.arrow(counts))],
        names=["rid", "k", "n"],
    )


def _cat32(arrays: list[np.ndarray], dtype: type = np.int32) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays) if arrays \
        else np.zeros(0, dtype)


def _tree(state: _Release, allowed: Any) -> Levels:
    """The release's :class:`Levels`: its per-level keys and noise, and each nested level's
    allowed children (``allowed[k - 1]``; NULL when level k is not nested)."""
    if len(allowed) != len(state.levels):
        raise InternalError(f"a release of {len(state.levels)} levels got {len(allowed)} "
                            "levels of allowed children")
    rules = [
        None if nest is None else Allowed(nest, _prefixes(allowed.slice(k, 1), len(nest) + 1))
        for k, (_, _, _, nest) in enumerate(state.levels)
    ]
    return Levels(
        tuple(size for _, _, size, _ in state.levels),
        tuple(dist for _, dist, _, _ in state.levels),
        tuple(src for src, _, _, _ in state.levels),
        tuple(rules),
    )




def cancel(token: str | None = None, owner: object = None) -> int:
    """Ask running releases to stop between two blocks: the one a Python call started under
    ``token``, those of connection ``owner``, or all of them; they raise
    :class:`ReleaseInterrupted` saying whether they were charged. Returns how many (a release
    still before its charge counts, and is never charged)."""
    with _LOCK:
        if token is not None:
            _CANCELLED.add(token)
        states = [*_RELEASES.values(), *_LEVELS.values()]
        flags = [s.cancelled for s in states if _matches(s.token, s.owner, token, owner)]
        flags += [f for o, t, f in _BEGINNING.values() if _matches(t, o, token, owner)]
    for flag in flags:
        flag.set()
    return len(flags)


def _matches(token: str | None, owner_id: int, wanted: str | None, owner: object) -> bool:
    return (wanted is None or token == wanted) and (owner is None or owner_id == id(owner))


def _ours_running(token: str | None, owner: object) -> bool:
    """Whether a matching release is in one of our UDFs, or between them: it stops on its own
    flag, and DuckDB must not be interrupted under it."""
    with _LOCK:
        return any(_matches(s.token, s.owner, token, owner) for s in _RELEASES.values()) or any(
            _matches(t, o, token, owner) for o, t in _ACTIVE)


def _wait_idle(token: str, timeout: float = GRACE) -> None:
    """Until no UDF of the call ``token`` runs (DuckDB may return before a UDF has)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with _LOCK:
            if not any(t == token for _, t in _ACTIVE):
                return
        time.sleep(0.005)


def interrupt(con: Any) -> int:
    """Stop the releases running on ``con`` (call it from another thread, as
    ``con.interrupt()``): each stops within a block of its level and raises
    :class:`ReleaseInterrupted` saying whether it was charged. A release still in DuckDB's own
    work (reading the data) is stopped by ``con.interrupt()``, before any charge. Returns how
    many releases were asked to stop."""
    return _stop(con, owner=con)


def _stop(con: Any, token: str | None = None, owner: object = None) -> int:
    ours = _ours_running(token, owner)
    n = cancel(token, owner)
    if not ours:  # DuckDB's own work (reading the data): its interrupt is the fast way
        con.interrupt()
    return n


@contextlib.contextmanager
def _planning() -> Iterator[None]:
    """Ctrl-C while a release is planned (DuckDB reports it as 'Query interrupted'): nothing
    was charged, and the error says so."""
    try:
        yield
    except ReleaseInterrupted:
        raise
    except (KeyboardInterrupt, RuntimeError, duckdb.InterruptException) as exc:
        if isinstance(exc, RuntimeError) and str(exc) != "Query interrupted":
            raise
        raise stopped(None) from None


def statement(con: Any, run: Callable[[], T]) -> T:
    """Run one SQL statement's work (``run``, on ``con``) so that Ctrl-C stops a release in it
    within a block: on a helper thread, Ctrl-C here calling :func:`interrupt`. A release it
    stopped raises :class:`ReleaseInterrupted` (charged or not); other statements raise
    ``KeyboardInterrupt`` as usual. For shells and notebooks that run raw SQL."""

    def unwrapped() -> T:
        try:
            return run()
        except duckdb.Error as exc:
            m = re.search(r"\bReleaseInterrupted: (.*)", str(exc), re.S)
            if m is None:
                raise
            text = m[1].strip()
            raise ReleaseInterrupted(text, "after its budget was charged" in text) from None

    return interruptible(unwrapped, lambda: interrupt(con), KeyboardInterrupt)


def _is_interrupt(exc: BaseException) -> bool:
    """DuckDB's own interrupt, or a Ctrl-C it caught inside a UDF (it wraps the text)."""
    return isinstance(exc, duckdb.InterruptException) or "KeyboardInterrupt" in str(exc)


def _plain(arr: Any) -> Any:
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def _preview_rows(con_ref: Any, step: str, spec_text: str, checks: str
                  ) -> list[dict[str, Any]]:
    spec = json.loads(spec_text)
    capabilities.redeem(step, spec.get("token") if isinstance(spec, dict) else None,
                        spec_text, None, once=False)
    request = from_json(spec["request"])
    domains = DomainPlan.from_json(spec["domains"])
    data = load_checks(checks)
    if (con := con_ref()) is not None:
        disclosure.admit(con, request, domains, data)
    raise_for_checks(request, domains, data)
    if spec.get("interface", "sql") == "sql":  # Python's preview warned when it planned
        _log_frame_enums(request, domains, data)
    return planning.preview_rows(request, domains, data, float(spec["beta"]),
                                 float(spec["delta"]))


_SQL_TYPES = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.string(): "VARCHAR",
              pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}
_PREVIEW_TYPE = "STRUCT(" + ", ".join(
    f"{quote(f.name)} {_SQL_TYPES[f.type]}" for f in planning.PREVIEW_SCHEMA) + ")[]"
"""The preview UDF's SQL type: a list of :data:`~inftda_duckdb.core.planning.PREVIEW_SCHEMA`
rows."""


# ---------------------------------------------------------------------------------------------
# registration


def load(con: Any, ledger: str | Ledger | None = None, mode: str | None = None) -> None:
    """Register InfTDA on ``con`` (idempotent; each connection or cursor needs its own load).

    ``mode='public'``: the public-facing mode, for a connection whose functions analysts may
    call (see :mod:`.disclosure`): it holds for every connection of the database instance and
    cannot be turned off. Default: the mode in force (curator, the trusted data holder).

    ``ledger``: where budgets and charges are kept: a ledger file any number of processes,
    tools and data files can share (``'budget.duckdb'``, created on first use), or ``':memory:'``
    for an in-memory ledger chosen on purpose. Default: the file named by ``INFTDA_LEDGER``,
    else the ledger inside the database that holds each source (created in the default database
    now, in another database the first time one of its tables is charged or budgeted).
    """
    disclosure.set_mode(con, mode)
    if ledger is not None:
        catalog.choose(con, ledger)
    chosen = catalog.chosen(con)
    with con.cursor() as cur:
        home = catalog.home(cur, catalog.default_database(con))
    store = catalog.ledger_for(con, home)
    if chosen is not None or (not store.read_only and store.format() is None):
        store.ledger_id()  # create it now (reports an unreachable ledger file at once)
    budgets.register(con)
    evaluation.register(con)
    n = register_udfs(con, "release", lambda n: _register(con, n))
    macros = fragments("macros.sql")
    for surface, generator in ((options.RELEASE, f"inftda_release_sql_{n}"),
                               (options.PREVIEW, f"inftda_preview_sql_{n}")):
        create_macro(con, macros[f"{surface}_macro"].substitute(
            generator=generator, parameters=options.macro_parameters(surface),
            fields=options.macro_fields(surface)))


def _context(data: dict[str, Any]) -> tuple[str, str, str] | None:
    """The caller's (current_database, current_schema, search_path), passed by the macro: the
    bind-time cursor does not share the caller's USE / SET search_path."""
    db = data.pop("current_database", None)
    schema = data.pop("current_schema", None)
    path = data.pop("search_path", None)
    if not isinstance(db, str) or not isinstance(schema, str):
        return None
    return db, schema, str(path or "")


def _public_first(con: Any, request: ReleaseRequest, plan: DomainPlan, session: Any) -> None:
    """Public-facing mode, when a release is bound: its refusals and the budget come before
    DuckDB reads any data (a refused release does not scan the source)."""
    if con is not None and disclosure.is_public(con):
        disclosure.admit(con, request, plan, session=session)
        disclosure.check_budget(con, Where.of(plan.source),
                                charge_fields(request, request.budget.total, "sql"))


def _register(con: Any, n: int) -> None:
    names = UdfNames.numbered(n)
    ref = weakref.ref(con)

    def cursor() -> Any:
        c = ref()
        if c is None:
            raise InputError("the connection that loaded inftda_duckdb is closed")
        return c.cursor()

    @speaks("sql")
    def release_sql(options: str) -> str:
        data = json.loads(options)
        context, session = _context(data), data.pop("session", None)
        query_id = data.pop("query_id", None)
        setting = data.pop("memory_limit", None)  # the macro read it: no query here
        request = from_json(json.dumps(disclosure.defaults(ref(), data)))
        with cursor() as cur:
            plan = plan_domains(request, cur, strict=False, context=context)
            limit = memory_limit(cur if setting is None else str(setting))
        _public_first(ref(), request, plan, session)
        plan.check_sizes()
        return _rendered(request, plan, names, "sql", query_id, limit=limit)[0]

    @speaks("sql")
    def preview_sql(options: str) -> str:
        data = json.loads(options)
        context, session = _context(data), data.pop("session", None)
        data.pop("query_id", None)
        data.pop("memory_limit", None)
        beta, report = planning.check_beta(data.pop("beta", 0.05)), planning.report_delta(data)
        request = from_json(json.dumps(disclosure.defaults(ref(), data)))
        with cursor() as cur:
            plan = plan_domains(request, cur, strict=False, context=context)
        disclosure.admit(ref(), request, plan, session=session)
        return _preview_rendered(request, plan, names, beta, report)

    fn = con.create_function
    fn(f"inftda_release_sql_{n}", release_sql, ["VARCHAR"], "VARCHAR", side_effects=False)
    fn(f"inftda_preview_sql_{n}", preview_sql, ["VARCHAR"], "VARCHAR", side_effects=False)
    fn(
        names.begin,
        lambda spec, checks, query_id: _begin(ref, names.begin, spec, checks, query_id),
        ["VARCHAR", "VARCHAR", "UBIGINT"],
        "STRUCT(rid VARCHAR)",
        side_effects=True,
        null_handling="special",
    )
    fn(names.levels, _levels,
       ["VARCHAR", "BIGINT", PREFIXES, f"{PREFIXES}[]", "BIGINT", "BIGINT", "BIGINT"],
       "STRUCT(rid VARCHAR, k INTEGER[][], n BIGINT[])", type="arrow", side_effects=True,
       null_handling="special")
    fn(names.preview, lambda spec, checks: _preview_rows(ref, names.preview, spec, checks),
       ["VARCHAR", "VARCHAR"], _PREVIEW_TYPE, side_effects=False)
    fn(names.rowkey, lambda seed: units.row_key(seed), ["BIGINT"], "VARCHAR",
       side_effects=True, null_handling="special")


def _preview_rendered(request: ReleaseRequest, plan: DomainPlan, names: UdfNames, beta: float,
                      report: float, origin: str = "sql") -> str:
    """The preview statement, with a capability token minted for it (``origin``: the interface
    that asked, 'sql' or 'python')."""
    token = capabilities.new()
    capabilities.mint(token, preview_spec_json(request, plan, beta, report, token, origin), None)
    return render_preview(request, plan, names, beta, report, origin, token)


def _rendered(request: ReleaseRequest, plan: DomainPlan, names: UdfNames, origin: str,
              query_id: int | None, charge: Where | None = None,
              limit: int | None = None) -> tuple[str, str]:
    """The release statement and its capability token, minted for it (and, from SQL, for the
    statement ``query_id`` being bound); the statement names the source it charges. With
    DuckDB's ``memory_limit`` (``limit``, bytes) it may come in parts."""
    token = capabilities.new()
    where = (charge or Where.of(plan.source)).to_json()
    capabilities.mint(token, spec_json(request, plan, origin, token, where), query_id, request)
    return render_release(request, plan, names, origin, token, where, limit), token


# ---------------------------------------------------------------------------------------------
# Python API


_KINDS: dict[str, type[InftdaError]] = {
    "InputError": InputError,
    "LedgerError": LedgerError,
    "BudgetExceededError": BudgetExceededError,
    "InternalError": InternalError,
    "ReleaseAbortedError": ReleaseAbortedError,
}


def _reraise(exc: duckdb.Error, token: str | None = None) -> None:
    """A UDF's InputError / BudgetExceededError / InternalError: the original exception object
    (kept by token) when there is one, else rebuilt as that type from DuckDB's message."""
    with _LOCK:
        original = _ERRORS.pop(token, None) if token is not None else None
    if original is not None:
        raise original.with_traceback(None) from None
    m = re.search(r"\b(" + "|".join(_KINDS) + r"): (.*)", str(exc), re.S)
    if m is None:
        raise exc
    err = _KINDS[m.group(1)].__new__(_KINDS[m.group(1)])
    Exception.__init__(err, m.group(2).strip())
    raise err from None


SOURCE_KINDS = ("a table or view name", "a DuckDB relation", "a pandas or polars DataFrame",
                "an Arrow table, record batch, reader or dataset")


def _is_object_source(source: object) -> bool:
    """A relation, DataFrame or Arrow object DuckDB can read (by its type; never inspected)."""
    if isinstance(source, duckdb.DuckDBPyRelation | pa.Table | pa.RecordBatch
                  | pa.RecordBatchReader):
        return True
    module = type(source).__module__.split(".")[0]
    name = type(source).__name__
    return (module, name) in {("pandas", "DataFrame"), ("polars", "DataFrame"),
                              ("polars", "LazyFrame"), ("pyarrow", "Dataset"),
                              ("pyarrow", "FileSystemDataset"), ("pyarrow", "Scanner")}


@contextlib.contextmanager
def _source(con: Any, source: object, source_name: object) -> Iterator[tuple[str, Where | None]]:
    """(the name the SQL reads, what it is charged to: None for the relation itself).

    A table or view name is read and charged as itself. An in-memory object (relation,
    DataFrame, Arrow) is registered on ``con`` under a fresh name for the duration of the call
    (DuckDB reads it in place) and charged to ``source_name``, which the caller must give: an
    object has no stable name of its own, and a budget must follow the data from call to call.
    ``source_name`` is a name (``'trips'`` or ``'name:trips'``: budgeted as ``'name:trips'``)
    or ``'file:PATH'`` (the file the object reads: the CLI's ``--input``). The object is never
    printed or executed here (a relation runs when the release does).
    """
    if isinstance(source, str):
        if source_name is not None:
            raise bad_argument("source_name", source_name,
                               "is only for in-memory sources (a table is charged by its name)",
                               "leave it out, or pass the DataFrame / relation itself")
        yield source, None
        return
    if not _is_object_source(source):
        raise bad_argument("source", source, f"must be {', '.join(SOURCE_KINDS[:-1])} or "
                           f"{SOURCE_KINDS[-1]}",
                           "pass a table name such as 'trips', or the DataFrame itself with "
                           f"{opt('source_name', 'trips')} (or con.register('trips', df) and pass "
                           "'trips')")
    if not isinstance(source_name, str) or not source_name.strip():
        raise bad_argument("source_name", source_name,
                           f"is required with an in-memory source ({shown(source)}): it has no "
                           "stable name of its own, and the budget must follow the data",
                           f"pass e.g. {opt('source_name', 'trips')}: the name this release "
                           "is charged to, whatever object carries the data "
                           f"({call('set_budget', 'name:trips', rho=1)} caps it)")
    parsed = parse_source(source_name, "source_name")
    charge = Where.of(parsed if isinstance(parsed, SourceId) else SourceId.named(parsed))
    name = f"inftda_source_{uuid.uuid4().hex[:16]}"
    try:
        con.register(name, source)
    except duckdb.Error as exc:
        raise bad_argument("source", source, f"cannot be read by this connection ({exc})",
                           "pass an object of this connection (a relation of another "
                           "database: materialise it as a table there)") from None
    try:
        yield name, charge
    finally:
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)


def _prepare(con: Any, source: str, columns: object, options: dict[str, Any]) -> Any:
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise bad_argument("con", con, "must be a duckdb connection", "pass duckdb.connect()")
    request = parse_request(source, list(columns) if isinstance(columns, tuple) else columns,
                            **disclosure.defaults(con, options))
    plan = plan_domains(request, con, strict=True)
    n = registered(con, "release")
    if n is None:
        load(con)
        n = registered(con, "release")
        assert n is not None
    return request, plan, UdfNames.numbered(n)


@dataclass(frozen=True)
class Released:
    """A release as it ran: the request, the provenance record of its output, the result."""

    request: ReleaseRequest
    provenance: dict[str, str]
    result: Any


def run_release(
    con: Any,
    source: object,
    columns: object,
    options: dict[str, Any],
    *,
    source_name: object = None,
    progress: Progress | None = None,
    origin: str = "python",
    statement: Callable[[str], str] | None = None,
) -> Released:
    """One release, executed as ``statement(release SQL)`` (default: the SQL itself, fetched
    as Arrow; the CLI wraps it in ``CREATE TABLE ... AS``): the Python API and the CLI share it.
    Each call is a new release with fresh noise, charged to the ledger as ``origin``."""
    if origin not in ORIGINS:
        raise bad_argument("origin", origin, f"must be one of {', '.join(ORIGINS)}",
                           "leave it out (the default is 'python')")
    if progress is not None and not callable(progress):
        raise bad_argument("progress", progress, "must be callable",
                           "pass a function progress(p) taking a LevelProgress")
    with _source(con, source, source_name) as (name, charge):
        with _planning():
            request, plan, names = _prepare(con, name, columns, options)
            plan.check_sizes()
        where = charge or Where.of(plan.source)
        sql, token = _rendered(request, plan, names, origin, None, where, memory_limit(con))
        with _LOCK:
            _PROGRESS[token] = progress
        ledger_id = None
        spent = charged_text(request.budget.total, where.label)

        def interrupted() -> ReleaseInterrupted:  # DuckDB stopped it, or Ctrl-C here
            _wait_idle(token)
            with _LOCK:
                return stopped(spent if token in _LEDGER_IDS else None)

        def execute() -> Any:
            try:
                if statement is None:
                    return con.sql(sql).to_arrow_table()
                return con.execute(statement(sql)).fetchall()
            except duckdb.Error as exc:
                with _LOCK:
                    ours = token in _ERRORS
                if not ours and _is_interrupt(exc):
                    raise interrupted() from None
                _reraise(exc, token)
                raise  # pragma: no cover

        try:
            try:  # on a helper thread: Ctrl-C reaches this one at once and stops the release
                result = interruptible(execute, lambda: _stop(con, token=token), interrupted)
            finally:
                capabilities.forget(token)
                with _LOCK:
                    _PROGRESS.pop(token, None)
                    _ERRORS.pop(token, None)
                    _CANCELLED.discard(token)
                    ledger_id = _LEDGER_IDS.pop(token, None)
                    for rid in [r for r, st in _RELEASES.items() if st.token == token]:
                        del _RELEASES[rid]  # begun but never finished: the statement failed
        except BaseException as exc:  # an interrupt, say: tell the caller what was charged
            if ledger_id is not None:
                with contextlib.suppress(AttributeError, TypeError):
                    exc.inftda_ledger_id = ledger_id  # type: ignore[attr-defined]
            raise
        record = of_release(request, rho=request.budget.total, source=where.label,
                            ledger_id=ledger_id, engine="duckdb")
    return Released(request, record, result)


def release(
    con: Any,
    source: object,
    columns: list[str] | tuple[str, ...],
    *,
    rho: object = None,
    epsilon: object = None,
    delta: object = None,
    domains: dict[str, Any] | None = None,
    domain_tables: list[str] | None = None,
    domain_from_data: bool = False,
    level_weights: list[object] | str | None = None,
    auto_target: str | int | None = None,
    output: str = "counts",
    neighbours: str | None = None,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    rows_per_unit_public: bool = False,
    unknown: str | None = None,
    seed: int | None = None,
    source_name: str | None = None,
    progress: Progress | None = None,
    origin: str = "python",
) -> pa.Table:
    """One InfTDA release of ``source`` over the hierarchy ``columns`` (same options as SQL).

    ``source``: a table or view name, or an in-memory object (a DuckDB relation, a pandas or
    polars DataFrame, an Arrow table) with ``source_name``, the identity it is charged to (a
    name, ``'name:NAME'``, or ``'file:PATH'`` for a file read directly). Every call
    is a new release with fresh noise, charged to the ledger (recorded with ``origin``: 'python'
    or 'cli'). Returns the synthetic table; its schema metadata is the release's provenance
    (private or not and why, rho exact and decimal, epsilon/delta, neighbours, columns, ledger
    id, package version), and a release that is not private carries the column
    ``inftda_not_private``. ``progress(p)``, if given, gets a
    :class:`~inftda_duckdb.core.topdown.LevelProgress` (level, depth, parents, cells_done,
    cells_planned, seconds) once per level when it is done and, on long levels, up to 16 times
    before (from the DuckDB thread running the release).
    """
    options = dict(
        rho=rho, epsilon=epsilon, delta=delta, domains=domains, domain_tables=domain_tables,
        domain_from_data=domain_from_data, level_weights=level_weights, auto_target=auto_target,
        output=output, neighbours=neighbours, privacy_unit=privacy_unit,
        max_rows_per_unit=max_rows_per_unit, rows_per_unit_public=rows_per_unit_public,
        unknown=unknown, seed=seed,
    )
    with speaking("cli" if origin == "cli" else "python"):
        done = run_release(con, source, columns, options, source_name=source_name,
                           progress=progress, origin=origin)
    warn_not_private(done.request)
    table: pa.Table = done.result
    return table.replace_schema_metadata(done.provenance)


def preview(
    con: Any,
    source: object,
    columns: list[str] | tuple[str, ...],
    *,
    rho: object = None,
    epsilon: object = None,
    delta: object = REPORT_DELTA,
    domains: dict[str, Any] | None = None,
    domain_tables: list[str] | None = None,
    domain_from_data: bool = False,
    level_weights: list[object] | str | None = None,
    auto_target: str | int | None = None,
    neighbours: str | None = None,
    max_rows_per_unit: int | None = None,
    privacy_unit: str | None = None,
    rows_per_unit_public: bool = False,
    beta: float = 0.05,
) -> pa.Table:
    """Per level: domain size, cells, rho_k, sigma_k, the Theorem 1 bound at ``beta`` and the
    total epsilon at ``delta`` (with ``rho``, delta only sets the reported epsilon); beside the
    split in force (``split``), the bound under the uniform split and the budget and bound under
    ``level_weights='auto'`` (its target, else the leaves).

    Spends nothing and reads no private data, except with ``domain_from_data`` (then the domain
    sizes come from the data: the result is marked not private and a warning says so).
    ``source`` is a table name or an in-memory object, as for :func:`release`.
    """
    options = dict(
        rho=rho, epsilon=epsilon, delta=delta, domains=domains, domain_tables=domain_tables,
        domain_from_data=domain_from_data, level_weights=level_weights, auto_target=auto_target,
        neighbours=neighbours, max_rows_per_unit=max_rows_per_unit, privacy_unit=privacy_unit,
        rows_per_unit_public=rows_per_unit_public,
    )
    report = planning.report_delta(options)
    with _source(con, source, None if isinstance(source, str) else "preview") as (name, _):
        request, plan, names = _prepare(con, name, columns, options)
        sql = _preview_rendered(request, plan, names, planning.check_beta(beta), report,
                                origin="python")
        try:
            table = con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            _reraise(exc)
            raise  # pragma: no cover
    if request.domain_from_data:
        warnings.warn(PREVIEW_FROM_DATA, UserWarning, stacklevel=2)
    return table


__all__ = ["NotPrivateWarning", "Progress", "Released", "cancel", "fragments", "interrupt", "load",
           "preview", "release", "run_release", "statement"]
