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
then takes every level's true prefix counts as lists (mixed-radix keys, or codes column after
column), releases the levels in order, each from the nodes of the one before, and returns the
released leaves as one row of lists. The keys exist only during that call.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import re
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ..core.accounting import BudgetPlan, epsilon_from_rho, level_table, plan_budget, total_rho
from ..core.errors import (
    BudgetExceededError,
    InftdaError,
    InputError,
    InternalError,
    LedgerError,
    bad_argument,
    call,
    opt,
    shown,
    speaking,
    speaks,
)
from ..core.noise import DiscreteGaussian
from ..core.provenance import provenance
from ..core.randomness import RandomSource
from ..core.request import ReleaseRequest, from_json, parse_request
from ..core.topdown import Allowed, Nodes, check_total, release_children, release_root
from ..ledger.sources import SourceId
from ..ledger.sources import parse as parse_source
from ..ledger.store import Ledger
from . import budgets, capabilities, catalog, evaluation
from .catalog import Where
from .connections import create_macro, register_udfs, registered
from .domain import DomainPlan, load_checks, plan_domains, raise_for_checks
from .sqlgen import (
    PREFIXES,
    UdfNames,
    fragments,
    preview_spec_json,
    render_preview,
    render_release,
    spec_json,
)

MAX_LIVE_RELEASES = 64
DEFAULT_DELTA = 1e-6
ORIGINS = ("python", "cli")  #: origins a Python caller may record (SQL releases record 'sql')

Progress = Callable[[int, int, int, int, float], None]
"""``progress(level, depth, parents, cells, seconds)``: called once per level when its noise and
IntOpt are done (``cells`` noised, ``seconds`` spent in that level's noise+IntOpt)."""

_LOG = logging.getLogger("inftda_duckdb")


class NotPrivateWarning(UserWarning):
    """A release that is not private: seeded noise, or domains read from the private data."""

_LOCK = threading.RLock()


@dataclass
class _Pending:
    """What the levels step needs to charge a begun release and draw its keys."""

    con_ref: Any
    request: ReleaseRequest
    plan: BudgetPlan
    n: int
    sizes: list[int]
    nests: list[tuple[int, ...] | None]
    where: Where
    origin: str


@dataclass
class _Release:
    """A release in progress: each level's random source, noise and domain size (and, for a
    nested level, the earlier levels keying its allowed children), and the nodes released at
    the last level done. Between the begin and the levels step only ``pending`` is set: the
    registry never holds a key."""

    levels: list[tuple[RandomSource, DiscreteGaussian, int, tuple[int, ...] | None]]
    root: int
    nodes: Nodes
    token: str | None = None
    progress: Progress | None = None
    pending: _Pending | None = None


_RELEASES: collections.OrderedDict[str, _Release] = collections.OrderedDict()
# Python API calls, by the token their SQL carries: the progress callback, and the original
# exception a UDF raised (DuckDB only passes its text on)
_PROGRESS: dict[str, Progress | None] = {}
_ERRORS: dict[str, BaseException] = {}
# ... and the ledger row its charge wrote (for the output's provenance)
_LEDGER_IDS: dict[str, int] = {}


def _keep_error(token: str | None, exc: BaseException) -> None:
    if token is not None:
        with _LOCK:
            if token in _PROGRESS:
                _ERRORS.setdefault(token, exc)


def budget_plan(request: ReleaseRequest, domains: DomainPlan, checks: str) -> BudgetPlan:
    """The release's split of its budget; auto weights read the public cells per level from
    the check row (domain sizes and nested node counts, never the data's counts)."""
    return plan_budget(
        request.depth,
        rho=request.rho,
        epsilon=request.epsilon,
        delta=request.delta,
        level_weights=request.level_weights,
        neighbours=request.neighbours,
        max_rows_per_unit=request.max_rows_per_unit,
        auto_target=request.auto_target,
        nodes=_level_cells(domains, load_checks(checks)),
    )


def _level_cells(domains: DomainPlan, data: dict[str, Any]) -> list[int]:
    """Cells at each level from the check row: the domain sizes (public; from the data only
    with domain_from_data) and the nested domain tables' node counts."""
    sizes = [int(c["size"]) for c in data["columns"]]
    return _nodes(sizes, domains, [c["nodes"] for c in data["nestings"]])


# ---------------------------------------------------------------------------------------------
# UDF bodies


def _language(origin: object) -> str:
    """The interface a release was asked from, whose language its errors speak."""
    return "python" if origin == "python" else "cli" if origin == "cli" else "sql"


def _origin(con_ref: Any, step: str, spec_text: str, *rest: Any) -> str:
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
    try:
        capabilities.redeem(step, token, spec_text, query_id)
        return _begin_spec(con_ref, spec, checks)
    except InftdaError as exc:
        _keep_error(token, exc)
        raise


def _begin_spec(con_ref: Any, spec: dict[str, Any], checks: str) -> dict[str, Any]:
    request = from_json(spec["request"])
    domains = DomainPlan.from_json(spec["domains"])
    plan = budget_plan(request, domains, checks)
    n = raise_for_checks(request, domains, checks)  # data errors: nothing charged
    sizes = [int(c["size"]) for c in load_checks(checks)["columns"]]
    nests = [None if (nest := domains.nested_parent(k)) is None else nest[1]
             for k in range(request.depth)]
    where = Where.from_json(spec.get("charge") or Where.of(domains.source).to_json())
    rid = uuid.uuid4().hex
    token = spec.get("token")
    with _LOCK:
        state = _Release([], 0, Nodes.root(0), token, _PROGRESS.get(token) if token else None,
                         _Pending(con_ref, request, plan, n, sizes, nests, where, spec["origin"]))
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
    request = p.request
    ledger_id = budgets.charge(con, p.where, dict(
        columns=request.columns,
        neighbours=request.neighbours,
        rho=p.plan.rho,
        privacy_unit=request.privacy_unit,
        max_rows_per_unit=request.max_rows_per_unit,
        output=request.output,
        seeded=request.seed is not None,
        data_domain=request.domain_from_data,
        origin=p.origin,
        delta=DEFAULT_DELTA if request.delta is None else float(request.delta),
    ))
    if state.token is not None:
        with _LOCK:
            if state.token in _PROGRESS:
                _LEDGER_IDS[state.token] = ledger_id
    source = RandomSource.secure() if request.seed is None else RandomSource.from_seed(request.seed)
    state.levels = [(source.derive(k + 1), DiscreteGaussian(p.plan.level_sigma2[k]), p.sizes[k],
                     p.nests[k]) for k in range(request.depth)]
    state.root = release_root(p.n, p.plan, source)
    state.nodes = Nodes.root(state.root)
    if p.origin == "sql" and not request.private:
        _LOG.warning("%s", _not_private_text(request))  # visible on stderr, even under -W error


def _one(rid: Any) -> _Release:
    """The release a one-row UDF call belongs to, removed from the registry (used once)."""
    rid = _plain(rid)
    if len(rid) != 1:
        raise InternalError(f"a release step got {len(rid)} rows, not one")
    with _LOCK:
        state = _RELEASES.pop(str(rid[0].as_py()), None)
    if state is None:
        raise InputError("unknown or expired release id: inftda_levels is an internal step of "
                         "inftda_release and cannot be called by hand (or more than "
                         f"{MAX_LIVE_RELEASES} releases were begun at once). Nothing was charged")
    return state


def _prefixes(arr: Any, width: int) -> np.ndarray:
    """The true prefixes in a STRUCT(k INTEGER[], key BIGINT[], n BIGINT[]) row: their
    mixed-radix keys (N,) when ``key`` is set, else (width, N) codes (``k`` holds the codes
    column after column, so each level's codes are one contiguous row; NULL: none)."""
    row = _plain(arr)
    key = row.field("key")
    if key.null_count == 0:
        return key.flatten().to_numpy(zero_copy_only=False)
    codes = row.field("k").flatten().to_numpy(zero_copy_only=False)
    if codes.shape[0] % max(width, 1):
        raise InternalError("a level got prefixes of the wrong length")
    return codes.reshape(width, -1)


def _counts(arr: Any) -> np.ndarray:
    return _plain(arr).field("n").flatten().to_numpy(zero_copy_only=False)


def _levels(rid: Any, upper: Any, leaf: Any, allowed: Any) -> pa.Array:
    """Algorithm 1, lines 2-9, in one call: the true prefix counts of level k < d are
    ``upper[k - 1]``, the leaves' are ``leaf``, a nested level's allowed children are
    ``allowed[k - 1]``; returns the released leaves as one row of column lists and drops the
    release state."""
    state = _one(rid)
    language = None if state.pending is None else _language(state.pending.origin)
    try:
        _claim(state)
        upper, allowed = _plain(upper).flatten(), _plain(allowed).flatten()
        kids = [upper.slice(k, 1) for k in range(len(upper))] + [leaf]
        if len(kids) != len(state.levels) or len(allowed) != len(state.levels):
            raise InternalError(f"a release of {len(state.levels)} levels got {len(kids)} "
                                f"levels of prefixes and {len(allowed)} of allowed children")
        for level in range(1, len(state.levels) + 1):
            _level_step(state, level, kids[level - 1], allowed.slice(level - 1, 1))
    except InftdaError as exc:
        if exc.interface is None:
            exc.interface = language  # DuckDB reads the message after the call: its language
        _keep_error(state.token, exc)
        raise
    finally:
        state.levels = []  # the keys go with the call
    return _leaves(state.nodes)


def _level_step(state: _Release, level: int, kids: Any, allowed: Any) -> None:
    start = time.perf_counter()
    lsource, dist, _, nest = state.levels[level - 1]
    codes, counts = _prefixes(kids, level), _counts(kids)
    if codes.shape[-1] != counts.shape[0]:
        raise InternalError("a level got different numbers of prefixes and counts")
    rule = None if nest is None else Allowed(nest, _prefixes(allowed, len(nest) + 1))
    sizes = [size for _, _, size, _ in state.levels[:level]]
    parents = int((state.nodes.counts > 0).sum())
    nodes = release_children(state.nodes, codes, counts, sizes, dist, lsource, rule)
    check_total(nodes, state.root, level)
    state.nodes = nodes
    if state.progress is not None:
        state.progress(level, len(state.levels), parents, nodes.noised,
                       time.perf_counter() - start)


def _plain(arr: Any) -> Any:
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def _leaves(nodes: Nodes) -> pa.Array:
    """The released leaves as one row: STRUCT(k INTEGER[][] (one list per column), n BIGINT[])."""
    codes, counts = nodes.codes, nodes.counts
    d, m = codes.shape
    # 64-bit offsets: d x m codes in one list may pass 2**31 (DuckDB reads them as LIST)
    lists = pa.LargeListArray.from_arrays
    columns = lists(pa.array(np.arange(d + 1, dtype=np.int64) * m), pa.array(codes.ravel()))
    return pa.StructArray.from_arrays(
        [lists(pa.array(np.array([0, d], np.int64)), columns),
         lists(pa.array(np.array([0, m], np.int64)), pa.array(counts))],
        names=["k", "n"],
    )


def _preview_rows(step: str, spec_text: str, checks: str) -> list[dict[str, Any]]:
    spec = json.loads(spec_text)
    capabilities.redeem(step, spec.get("token") if isinstance(spec, dict) else None,
                        spec_text, None, once=False)
    request = from_json(spec["request"])
    domains = DomainPlan.from_json(spec["domains"])
    raise_for_checks(request, domains, checks)
    plan = budget_plan(request, domains, checks)
    data = load_checks(checks)
    sizes = [int(c["size"]) for c in data["columns"]]
    nodes = _level_cells(domains, data)
    delta = float(spec["delta"])
    total_eps = epsilon_from_rho(plan.rho, delta)
    rows = []
    for row in level_table(None, plan, float(spec["beta"]), delta, nodes=nodes):
        level = int(row["level"])
        rows.append(
            {
                "level": level,
                "column": "(root n)" if level == 0 else request.columns[level - 1],
                "domain_size": 1 if level == 0 else sizes[level - 1],
                "nodes": int(row["cells"]),
                "rho_k": str(row["rho_k"]),
                "sigma2_k": str(row["sigma2_k"]),
                "sigma_k": float(row["sigma_k"]),
                "bound": float(row["bound"]),
                "split": row["split"],
                "uniform_bound": _maybe(float, row["uniform_bound"]),
                "auto_rho_k": _maybe(str, row["auto_rho_k"]),
                "auto_bound": _maybe(float, row["auto_bound"]),
                "beta": float(spec["beta"]),
                "epsilon": total_eps,
                "delta": delta,
                "private": request.private,
            }
        )
    return rows


def _maybe(kind: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else kind(value)


_PREVIEW_TYPE = (
    "STRUCT(level INTEGER, \"column\" VARCHAR, domain_size BIGINT, nodes BIGINT, rho_k VARCHAR, "
    "sigma2_k VARCHAR, sigma_k DOUBLE, bound DOUBLE, split VARCHAR, uniform_bound DOUBLE, "
    "auto_rho_k VARCHAR, auto_bound DOUBLE, beta DOUBLE, epsilon DOUBLE, delta DOUBLE, "
    "private BOOLEAN)[]"
)


def _nodes(sizes: list[int], domains: DomainPlan, nest_nodes: list[list[int]]) -> list[int]:
    """Cells at each level: valid prefixes (product domains times nested combinations)."""
    nested = {k: (t, nest.levels) for t, nest in enumerate(domains.nestings) for k in nest.levels}
    counts, free = [], 1
    seen = [0] * len(domains.nestings)
    for k, size in enumerate(sizes):
        if k in nested:
            t, _ = nested[k]
            seen[t] += 1
        else:
            free *= size
        total = free
        for t, j in enumerate(seen):
            if j:
                total *= int(nest_nodes[t][j - 1])
        counts.append(max(total, 1))
    return counts


# ---------------------------------------------------------------------------------------------
# registration


def load(con: Any, ledger: str | Ledger | None = None) -> None:
    """Register InfTDA on ``con`` (idempotent; each connection or cursor needs its own load).

    ``ledger``: where budgets and charges are kept: a ledger file any number of processes,
    tools and data files can share (``'budget.duckdb'``, created on first use), or ``':memory:'``
    for an in-memory ledger chosen on purpose. Default: the file named by ``INFTDA_LEDGER``,
    else the ledger inside the database that holds each source (created in the default database
    now, in another database the first time one of its tables is charged or budgeted).
    """
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
    create_macro(con, macros["release_macro"].substitute(generator=f"inftda_release_sql_{n}"))
    create_macro(con, macros["preview_macro"].substitute(generator=f"inftda_preview_sql_{n}"))


def _report_delta(options: dict[str, Any]) -> float:
    """Preview's delta: the budget's delta with epsilon, else only the reporting delta."""
    if options.get("epsilon") is None:
        delta = options.pop("delta", None)
        options["delta"] = None
        delta = DEFAULT_DELTA if delta is None else delta
    else:
        delta = options.get("delta")
    fix = f"pass e.g. {opt('delta', 1e-6)}"
    if isinstance(delta, Fraction):
        delta = float(delta)
    if isinstance(delta, bool) or not isinstance(delta, int | float | str):
        raise bad_argument("delta", delta, "must be a number in (0, 1)", fix)
    try:
        value = float(delta)
    except ValueError:
        raise bad_argument("delta", delta, "must be a number in (0, 1)", fix) from None
    if not 0 < value < 1:
        raise bad_argument("delta", delta, "must be a number in (0, 1)", fix)
    return value


def _beta(beta: object) -> float:
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not 0 < beta < 1:
        raise bad_argument("beta", beta, "must be a number in (0, 1)",
                           f"pass e.g. {opt('beta', 0.05)}")
    return float(beta)


def _context(data: dict[str, Any]) -> tuple[str, str, str] | None:
    """The caller's (current_database, current_schema, search_path), passed by the macro: the
    bind-time cursor does not share the caller's USE / SET search_path."""
    db = data.pop("current_database", None)
    schema = data.pop("current_schema", None)
    path = data.pop("search_path", None)
    if not isinstance(db, str) or not isinstance(schema, str):
        return None
    return db, schema, str(path or "")


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
        context = _context(data)
        query_id = data.pop("query_id", None)
        request = from_json(json.dumps(data))
        with cursor() as cur:
            plan = plan_domains(request, cur, strict=False, context=context)
        return _rendered(request, plan, names, "sql", query_id)[0]

    @speaks("sql")
    def preview_sql(options: str) -> str:
        data = json.loads(options)
        context = _context(data)
        data.pop("query_id", None)
        beta, report = _beta(data.pop("beta", 0.05)), _report_delta(data)
        request = from_json(json.dumps(data))
        with cursor() as cur:
            plan = plan_domains(request, cur, strict=False, context=context)
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
    fn(names.levels, _levels, ["VARCHAR", f"{PREFIXES}[]", PREFIXES, f"{PREFIXES}[]"],
       "STRUCT(k INTEGER[][], n BIGINT[])", type="arrow", side_effects=True,
       null_handling="special")
    fn(names.preview, lambda spec, checks: _preview_rows(names.preview, spec, checks),
       ["VARCHAR", "VARCHAR"], _PREVIEW_TYPE, side_effects=False)


def _preview_rendered(request: ReleaseRequest, plan: DomainPlan, names: UdfNames, beta: float,
                      report: float) -> str:
    """The preview statement, with a capability token minted for it."""
    token = capabilities.new()
    capabilities.mint(token, preview_spec_json(request, plan, beta, report, token), None)
    return render_preview(request, plan, names, beta, report, token)


def _rendered(request: ReleaseRequest, plan: DomainPlan, names: UdfNames, origin: str,
              query_id: int | None, charge: Where | None = None) -> tuple[str, str]:
    """The release statement and its capability token, minted for it (and, from SQL, for the
    statement ``query_id`` being bound); the statement names the source it charges."""
    token = capabilities.new()
    where = (charge or Where.of(plan.source)).to_json()
    capabilities.mint(token, spec_json(request, plan, origin, token, where), query_id)
    return render_release(request, plan, names, origin, token, where), token


# ---------------------------------------------------------------------------------------------
# Python API


_KINDS: dict[str, type[InftdaError]] = {
    "InputError": InputError,
    "LedgerError": LedgerError,
    "BudgetExceededError": BudgetExceededError,
    "InternalError": InternalError,
}


def _reraise(exc: duckdb.Error, token: str | None = None) -> None:
    """A UDF's InputError / BudgetExceededError / InternalError: the original exception object
    (kept by token) when there is one, else rebuilt as that type from DuckDB's message."""
    with _LOCK:
        original = _ERRORS.pop(token, None) if token is not None else None
    if original is not None:
        raise original.with_traceback(None) from None
    m = re.search(r"\b(InputError|LedgerError|BudgetExceededError|InternalError): (.*)", str(exc),
                  re.S)
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
                            **options)
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
                           "pass a function progress(level, depth, parents, cells, seconds)")
    with _source(con, source, source_name) as (name, charge):
        request, plan, names = _prepare(con, name, columns, options)
        sql, token = _rendered(request, plan, names, origin, None, charge)
        with _LOCK:
            _PROGRESS[token] = progress
        ledger_id = None
        try:
            try:
                if statement is None:
                    result = con.sql(sql).to_arrow_table()
                else:
                    result = con.execute(statement(sql)).fetchall()
            except duckdb.Error as exc:
                _reraise(exc, token)
                raise  # pragma: no cover
            finally:
                capabilities.forget(token)
                with _LOCK:
                    _PROGRESS.pop(token, None)
                    _ERRORS.pop(token, None)
                    ledger_id = _LEDGER_IDS.pop(token, None)
                    for rid in [r for r, st in _RELEASES.items() if st.token == token]:
                        del _RELEASES[rid]  # begun but never levelled: the statement failed
        except BaseException as exc:  # an interrupt, say: tell the caller what was charged
            if ledger_id is not None:
                with contextlib.suppress(AttributeError, TypeError):
                    exc.inftda_ledger_id = ledger_id  # type: ignore[attr-defined]
            raise
        record = provenance(
            rho=total_rho(request.rho, request.epsilon, request.delta), columns=request.columns,
            neighbours=request.neighbours, output=request.output, seed=request.seed,
            domain_from_data=request.domain_from_data, epsilon=request.epsilon,
            delta=request.delta, privacy_unit=request.privacy_unit,
            max_rows_per_unit=request.max_rows_per_unit, ledger_id=ledger_id,
            source=(charge or Where.of(plan.source)).label,
        )
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
    neighbours: str = "substitute",
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    unknown: str = "error",
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
    ``inftda_not_private``. ``progress(level, depth, parents, cells, seconds)``, if given, is
    called once per level when its noise and IntOpt are done (from a DuckDB worker thread).
    """
    options = dict(
        rho=rho, epsilon=epsilon, delta=delta, domains=domains, domain_tables=domain_tables,
        domain_from_data=domain_from_data, level_weights=level_weights, auto_target=auto_target,
        output=output, neighbours=neighbours, privacy_unit=privacy_unit,
        max_rows_per_unit=max_rows_per_unit, unknown=unknown, seed=seed,
    )
    with speaking("cli" if origin == "cli" else "python"):
        done = run_release(con, source, columns, options, source_name=source_name,
                           progress=progress, origin=origin)
    _warn_not_private(done.request)
    table: pa.Table = done.result
    return table.replace_schema_metadata(done.provenance)


_SEEDED = (
    "this release used seed := {seed}: its noise is reproducible, so it is NOT private (tests "
    "and demos only); it is recorded as not private in the ledger"
)
_FROM_DATA = (
    "domain_from_data read the domains from the private data: this release is NOT private "
    "(exploration only); declare public domains for a private release"
)


def _not_private_text(request: ReleaseRequest) -> str:
    parts = [_SEEDED.format(seed=request.seed)] if request.seed is not None else []
    if request.domain_from_data:
        parts.append(_FROM_DATA)
    return "; ".join(parts)


def _warn_not_private(request: ReleaseRequest) -> None:
    if request.seed is not None:
        warnings.warn(_SEEDED.format(seed=request.seed), NotPrivateWarning, stacklevel=3)
    if request.domain_from_data:
        warnings.warn(_FROM_DATA, NotPrivateWarning, stacklevel=3)


def preview(
    con: Any,
    source: object,
    columns: list[str] | tuple[str, ...],
    *,
    rho: object = None,
    epsilon: object = None,
    delta: object = DEFAULT_DELTA,
    domains: dict[str, Any] | None = None,
    domain_tables: list[str] | None = None,
    domain_from_data: bool = False,
    level_weights: list[object] | str | None = None,
    auto_target: str | int | None = None,
    neighbours: str = "substitute",
    max_rows_per_unit: int | None = None,
    privacy_unit: str | None = None,
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
    )
    report = _report_delta(options)
    with _source(con, source, None if isinstance(source, str) else "preview") as (name, _):
        request, plan, names = _prepare(con, name, columns, options)
        sql = _preview_rendered(request, plan, names, _beta(beta), report)
        try:
            table = con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            _reraise(exc)
            raise  # pragma: no cover
    if request.domain_from_data:
        warnings.warn(
            "preview with domain_from_data read the domain sizes from the private data",
            UserWarning,
            stacklevel=2,
        )
    return table


__all__ = ["NotPrivateWarning", "Progress", "Released", "fragments", "load", "preview", "release",
           "run_release"]
