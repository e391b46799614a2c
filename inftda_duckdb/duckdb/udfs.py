"""The bodies DuckDB calls while a release or preview statement runs (see ``sql/release.sql``).

Random UDFs are registered with ``side_effects=True``; each runs once per execution (begin in
a one-row MATERIALIZED CTE; the levels' lists go straight to the unnest, and a second call
would raise). :func:`begin` accepts only the spec its statement was rendered with (a
capability token, :mod:`.capabilities`), turns the data checks into errors and keeps what the
release needs in :data:`.registry.RELEASES`, keyed by a fresh release id: no key, no noise, no
charge yet. :func:`levels` (one Arrow call) takes the release from the registry, refuses it if
its begin step ran more than once (a correlated subquery), charges the ledger, draws the keys,
then takes the true leaf counts as lists (mixed-radix keys, or codes column after column),
releases every level through the engine-neutral
:func:`~inftda_duckdb.core.topdown.release_below` on DuckDB's ``threads`` worker threads, returns
the released leaves as one row of lists and drops the state (the keys go with it). A release in
parts is charged by its first levels call, the one that releases the levels down to the cut;
:func:`release_parts` releases the levels below the cut. :func:`preview_rows` computes the
preview's rows (no data read but the checks).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import weakref
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from ..core import leastsquares, memory, planning
from ..core.checks import load_checks, raise_for_checks
from ..core.errors import (
    InftdaError,
    InputError,
    InternalError,
    ReleaseInterrupted,
    render,
    speaks,
)
from ..core.identifiers import quote
from ..core.interrupts import stopped
from ..core.noise import DiscreteGaussian
from ..core.provenance import not_private_texts
from ..core.release import (
    charge_fields,
    charged_text,
    check,
    draw,
    least_squares,
    public_plan,
    repeated_text,
    unit_cap_text,
)
from ..core.request import ReleaseRequest, from_json
from ..core.topdown import Cancelled, LevelProgress, check_total, release_below
from ..core.tree import Nodes, mixed_radix
from ..ledger.sources import SourceId
from . import arguments, budgets, capabilities, catalog, disclosure
from .allocator import returning_memory
from .arrow_io import levels_of, own_pairs, plain, prefix_counts, prefixes, rows
from .catalog import Where
from .domain import DomainPlan, frame_enum_text
from .registry import MAX_LIVE_RELEASES, RELEASES, Parts, Pending, Release

_LOG = logging.getLogger("inftda_duckdb")


def _language(origin: object) -> str:
    """The interface a release was asked from, whose language its errors speak."""
    return "python" if origin == "python" else "cli" if origin == "cli" else "sql"


def _origin(con_ref: Any, step: str, spec_text: str, *rest: Any) -> str:
    """The interface a release was asked from (its errors speak its language)."""
    try:
        return _language(json.loads(spec_text).get("origin", "sql"))
    except (ValueError, AttributeError, TypeError, RecursionError):  # a malformed hand call
        return "sql"


@speaks(_origin)
def begin(con_ref: Any, step: str, spec_text: str, checks: str,
          query_id: int | None = None) -> dict[str, Any]:
    """Once per execution: the statement's own spec (capability token), checks -> errors.
    Returns ``{'rid': release id}``; nothing is charged here."""
    spec = arguments.json_object(spec_text, "inftda_begin", "spec")
    token = spec.get("token")
    flag = threading.Event()
    con = con_ref()
    owner = id(con)
    with RELEASES.beginning(owner, token, flag):
        try:
            with RELEASES.active(owner, token):
                parsed = capabilities.redeem(step, token, spec_text, query_id)
                return _begin_spec(con_ref, spec, checks, flag,
                                   parsed if isinstance(parsed, ReleaseRequest) else None)
        except KeyboardInterrupt as exc:  # Ctrl-C landed in this UDF: nothing is charged here
            err = exc if isinstance(exc, ReleaseInterrupted) else stopped(None)
            RELEASES.keep_error(token, err)
            raise err from None
        except InftdaError as exc:
            RELEASES.keep_error(token, exc)
            raise


def _begin_spec(con_ref: Any, spec: dict[str, Any], checks: str, flag: threading.Event,
                request: ReleaseRequest | None = None) -> dict[str, Any]:
    """The checks of :func:`inftda_duckdb.core.release.check`, in its order: the mode's refusals
    and the budget (request and catalog only), the public checks, then the data checks: in
    curator mode their errors raise here (nothing charged); in public-facing mode one is kept
    and raised as one fixed message once charged (see :mod:`.disclosure`). ``request``: the one
    the spec was rendered from (its token's; else parsed from the spec)."""
    request = request if request is not None else from_json(spec["request"])
    domains = DomainPlan.from_json(spec["domains"])
    data = _checks(checks, "inftda_begin")
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
    if flag.is_set() or RELEASES.cancelled(token):
        raise stopped(None)  # interrupted before the charge
    if spec["origin"] == "sql":  # the Python API warned when it planned
        _log_frame_enums(request, domains, data)
    pending = Pending(con_ref, checked, nests, where, spec["origin"])
    state = Release([], 0, Nodes.root(0), token, RELEASES.progress_of(token), flag, id(con),
                    pending=pending, kept=checked.n)
    return {"rid": RELEASES.add(state)}


def _checks(text: Any, udf: str) -> dict[str, Any]:
    """The check row its statement computed (a spec its token vouched for came with it; a
    malformed one is refused, before anything is charged)."""
    try:
        return load_checks(text)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError):
        raise arguments.malformed(udf, "checks", text) from None


def _claim(state: Release) -> None:
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
    if state.cancelled.is_set() or RELEASES.cancelled(state.token):
        raise stopped(None)  # interrupted before the charge
    checked = p.checked
    request, plan = checked.request, checked.plan
    try:
        # refusal raises BudgetExceededError: nothing drawn
        public = public_plan(checked)
        ledger_id = budgets.charge(con, p.where,
                                   charge_fields(request, plan.rho, p.origin, public),
                                   checked.found)
    except KeyboardInterrupt:  # while the charge was being written
        raise stopped(None, recording=True) from None
    state.charged = charged = charged_text(plan.rho, p.where.label)
    if checked.hidden is not None:
        with disclosure.hidden(charged):  # charged: one fixed message, whatever failed
            raise checked.hidden
    RELEASES.keep_ledger_id(state.token, ledger_id, public)
    if checked.unit_rows is not None and not disclosure.is_public(con):
        # to the curator only, on stderr: exact private counts (never in public-facing mode)
        _LOG.warning("%s", unit_cap_text(request, *checked.unit_rows))
    with disclosure.hidden(charged) if disclosure.is_public(con) else contextlib.nullcontext():
        source, state.root = draw(checked, charged)  # the cell limit from the noised total
        state.lsq = least_squares(checked, source)
    state.levels = [(source.derive(k + 1), DiscreteGaussian(plan.level_sigma2[k]),
                     checked.sizes[k], p.nests[k]) for k in range(request.depth)]
    state.nodes = Nodes.root(state.root)
    if p.origin == "sql" and not request.private:
        # on stderr, even under -W error
        _LOG.warning("%s", "; ".join(not_private_texts(request)))
    if p.origin == "sql":
        _say_repeated(con, request, charged)


_RAN: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
"""Per connection, the release statements (their requests) executed from SQL."""


def _say_repeated(con: Any, request: ReleaseRequest, charged: str) -> None:
    """From SQL, a release statement executed again on one connection: said on stderr (a
    notebook's saved query re-runs it, and charges it, wherever it is used)."""
    ran = _RAN.setdefault(con, set())
    key = request.to_json()
    if key in ran:
        _LOG.warning("%s", repeated_text(charged))
    ran.add(key)


def _log_frame_enums(request: ReleaseRequest, plan: DomainPlan, checks: dict[str, Any]) -> None:
    """From SQL: a warning on stderr when a level's domain is a registered DataFrame's ENUM."""
    if checks.get("frame"):
        enums = [c.column for c in plan.columns if c.kind == "enum"]
        _LOG.warning("%s", render(frame_enum_text(request.source, enums), "sql"))


def _one(rid: Any) -> Release:
    """The release a one-row UDF call belongs to, removed from the registry (used once)."""
    rid = plain(rid)
    if len(rid) != 1:  # the statement calls it on its one row
        raise arguments.hand_call("inftda_levels", "rid", f"{len(rid)} rows",
                                  "comes in one row per call")
    state = RELEASES.take(str(rid[0].as_py()))
    if state is None:
        raise _unknown_release()
    return state


def _unknown_release() -> InputError:
    return InputError("unknown or expired release id: inftda_levels is an internal step of "
                      "inftda_release and cannot be called by hand (or more than "
                      f"{MAX_LIVE_RELEASES} releases were begun at once). Nothing was charged")


def live(rid: Any, first: bool = False) -> Release:
    """A release in parts (kept in the registry until its last part is done): its ``first``
    call (the cut) finds it begun and not yet charged, each later part charged; else
    InputError (unknown or expired release id)."""
    state = RELEASES.find(str(rid))
    if state is None or (state.pending is None) == first:  # a cut twice, a part before the cut
        raise _unknown_release()
    return state


def levels(rid: Any, part: Any, leaves: Any, allowed: Any, threads: Any, cut: Any,
           parts: Any) -> pa.Array:
    """Algorithm 1, lines 2-9 (see ``@levels`` in sql/release.sql). ``cut`` 0: one call, the
    true leaf counts are ``leaves``; releases every level and drops the release state. Else the
    release comes in parts: ``part`` -1 releases levels 1..cut from the cut prefixes' counts,
    then each row ``part`` >= 0 the levels below the cut for its run of cut nodes (the state
    goes when all ``parts`` are done). A nested level's allowed children are ``allowed[k - 1]``.
    Returns one row per call row: the released leaves as column lists (and the release id).
    cancel(), interrupt(con) or Ctrl-C stop it between two blocks (ReleaseInterrupted)."""
    udf = "inftda_levels"
    workers = max(1, arguments.integer(plain(threads)[0].as_py() or 1, udf, "threads", 1))
    cut_level = arguments.integer(plain(cut)[0].as_py(), udf, "cut")
    n_parts = arguments.integer(plain(parts)[0].as_py(), udf, "parts")
    part_ids = plain(part).to_pylist()
    if not all(isinstance(p, int) for p in part_ids) or plain(rid).null_count:
        raise arguments.malformed(udf, "part or rid")
    if cut_level and part_ids != [-1]:
        state = live(plain(rid)[0].as_py())
        return _stoppable(state, lambda: release_parts(plain(rid).to_pylist(), part_ids,
                                                       plain(leaves), workers))
    state = _one(rid) if not cut_level else live(plain(rid)[0].as_py(), first=True)
    return _stoppable(state, lambda: _release_levels(state, rid, part_ids, leaves, allowed,
                                                     workers, cut_level, n_parts))


def _stoppable(state: Release, run: Callable[[], pa.Array]) -> pa.Array:
    """``run()`` as the release's running levels UDF: a cancel flag, an interrupt or Ctrl-C
    inside it raise ReleaseInterrupted (saying what was charged); its errors are kept for the
    Python caller, in its language. On any error the release and its keys are dropped."""
    language = None if state.pending is None else _language(state.pending.origin)
    with RELEASES.in_levels(state):
        try:
            with RELEASES.active(state.owner, state.token):
                if state.cancelled.is_set() and state.pending is None:
                    raise Cancelled("the release was cancelled before its levels")
                return run()
        except (Cancelled, KeyboardInterrupt) as exc:  # cancel(), interrupt(con) or Ctrl-C
            RELEASES.drop(state)
            err = exc if isinstance(exc, ReleaseInterrupted) else stopped(state.charged)
            RELEASES.keep_error(state.token, err)
            raise err from None
        except InftdaError as exc:
            RELEASES.drop(state)
            if exc.interface is None:
                exc.interface = language  # DuckDB reads the message after the call: its language
            RELEASES.keep_error(state.token, exc)
            raise
        except BaseException:
            RELEASES.drop(state)
            raise


def _release_levels(state: Release, rid: Any, part_ids: list[Any], leaves: Any, allowed: Any,
                    workers: int, cut_level: int, n_parts: int) -> pa.Array:
    """The one call (``cut_level`` 0), or the levels down to the cut of a release in parts."""
    if part_ids not in ([0], [-1]):
        raise InternalError("a one-call release got a part other than 0")
    con_ref = state.pending.con_ref if state.pending is not None else None
    _claim(state)
    tree = levels_of(state.levels, memory.values(plain(allowed)))
    upto = cut_level or tree.depth
    row, radix = plain(leaves), None
    if row.field("n").null_count and not row.field("key").null_count:  # @leaf_pairs
        # (key << b) | n, b = the bits of the rows kept (SQL's length(bin(kept)), 1 for 0)
        codes, counts, radix = own_pairs(leaves), None, 1 << max(1, state.kept.bit_length())
    else:
        codes, counts = prefixes(leaves, upto), prefix_counts(leaves)
        if codes.shape[-1] != counts.shape[0]:
            raise InternalError("the leaves came with different numbers of prefixes and counts")
    with returning_memory(con_ref() if con_ref is not None else None,
                          math.prod(tree.sizes[:upto])):  # public: not the true leaves
        estimated, cut_codes, cut_e = tree, None, None
        if state.lsq is not None:  # every cell noised, estimated: the integer pass reads them
            stop = _stop(state)
            if cut_level:
                estimated, state.root, cut_codes, cut_e = state.lsq.split(tree, cut_level, stop)
            else:
                estimated, state.root = state.lsq.whole(tree, stop)
            state.nodes = Nodes.root(state.root)
        nodes = release_below(estimated, state.nodes, codes, counts, upto=upto, workers=workers,
                              progress=state.progress, cancel=state.cancelled.is_set,
                              radix=radix, overwrite=radix is not None)
    check_total(nodes, state.root, upto)
    if not cut_level:
        state.levels = []  # the keys go with the call
        return rows([nodes])
    if cut_codes is not None and cut_e is not None:  # each released cut node's estimate
        sizes = tree.sizes[:cut_level]
        at = np.searchsorted(mixed_radix(cut_codes, sizes, np.int64),
                             mixed_radix(nodes.codes, sizes, np.int64))
        state.cut_e = cut_e[at]
    RELEASES.cut(state, nodes, tree, Parts(n_parts, tree, nodes))  # the parts find these
    return rows([], [str(plain(rid)[0].as_py())])


def _stop(state: Release) -> Callable[[], None]:
    """The least-squares pass's hook between blocks: a cancelled release stops there."""
    def stop() -> None:
        if state.cancelled.is_set():
            raise Cancelled("the release was cancelled between two blocks")
    return stop


def release_parts(rids: list[Any], part_ids: list[Any], leaves: Any, workers: int) -> pa.Array:
    """The rows of a release in parts (one call, any number of rows): the levels below the cut
    for the cut nodes of every row's part, in ONE release over their union (the noise is
    addressed by the tree: the same as one release per part, without the per-part overhead),
    then split back into rows."""
    state = live(rids[0])
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

    below = Nodes(state.nodes.codes[:, cols], state.nodes.counts[cols])
    if state.lsq is not None and state.cut_e is not None:  # the subtrees' own estimates
        tree = leastsquares.below(tree, state.lsq.arith, below.codes.shape[0], below.codes,
                                  state.cut_e[cols], _stop(state))
    nodes = release_below(tree, below, keys, counts, workers=workers, progress=tally,
                          cancel=state.cancelled.is_set)
    cut = state.nodes.codes.shape[0]
    at = mixed_radix(nodes.codes[:cut], tree.sizes[:cut], np.int64)  # each leaf's cut key
    bounds = np.searchsorted(at, book.keys_from[np.asarray(part_ids)])
    ends = np.searchsorted(at, book.keys_from[np.asarray(part_ids) + 1])
    out = [Nodes(nodes.codes[:, a:b], nodes.counts[a:b]) for a, b in zip(bounds, ends, strict=True)]
    finished = RELEASES.parts_done(rids[0], state, part_ids, sums)
    if finished and state.progress is not None:
        for level in sorted(book.cells):
            parents, cells, seconds = book.cells[level]
            state.progress(LevelProgress(level, tree.depth, int(parents), int(cells), int(cells),
                                         seconds))
    return rows(out, d=tree.depth)


def preview_rows(con_ref: Any, step: str, spec_text: str, checks: str) -> list[dict[str, Any]]:
    """The preview's rows (:func:`~inftda_duckdb.core.planning.preview_rows`) for the spec its
    statement was rendered with, after the same checks as a release; spends nothing."""
    spec = arguments.json_object(spec_text, "inftda_prev", "spec")
    capabilities.redeem(step, spec.get("token"), spec_text, None, once=False)
    request = from_json(spec["request"])
    domains = DomainPlan.from_json(spec["domains"])
    data = _checks(checks, "inftda_prev")
    if (con := con_ref()) is not None:
        disclosure.admit(con, request, domains, data)
    raise_for_checks(request, domains, data)
    if spec.get("interface", "sql") == "sql":  # Python's preview warned when it planned
        _log_frame_enums(request, domains, data)
    return planning.preview_rows(request, domains, data, float(spec["beta"]),
                                 float(spec["delta"]))


_SQL_TYPES = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.string(): "VARCHAR",
              pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}
PREVIEW_TYPE = "STRUCT(" + ", ".join(
    f"{quote(f.name)} {_SQL_TYPES[f.type]}" for f in planning.PREVIEW_SCHEMA) + ")[]"
"""The preview UDF's SQL type: a list of :data:`~inftda_duckdb.core.planning.PREVIEW_SCHEMA`
rows."""
