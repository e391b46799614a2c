"""The DuckDB engine's Python API: :func:`release`, :func:`preview`, and :func:`run_release`,
which the Python API and the command line share.

A source is a table or view name, or an in-memory object (a DuckDB relation, a pandas or polars
DataFrame, an Arrow table, ...) registered on the connection for the duration of the call and
charged to the ``source_name`` the caller gives. Each call renders its statement with a fresh
capability token (:mod:`.statements`), runs it on a helper thread (Ctrl-C stops the release,
:mod:`.stopping`) and reports the original exception a UDF raised, kept in
:data:`.registry.RELEASES` (DuckDB passes on only its text).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import sys
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from ..core import planning, targets
from ..core.accounting import REPORT_DELTA
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
    shown,
    speaking,
)
from ..core.interrupts import interruptible, stopped
from ..core.provenance import PREVIEW_FROM_DATA, of_release, warn_not_private
from ..core.release import ORIGINS, charged_text, out_of_memory
from ..core.request import ReleaseRequest, parse_request
from ..core.topdown import LevelProgress
from ..ledger.sources import SourceId
from ..ledger.sources import parse as parse_source
from . import allocator, capabilities, disclosure, explain, planner
from .catalog import Where
from .connections import registered
from .domain import DomainPlan, plan_domains
from .progress import TextProgress, in_notebook, watching
from .registration import load
from .registry import RELEASES, Progress
from .sqlgen import UdfNames
from .statements import preview_rendered, public_first, rendered
from .stopping import is_interrupt, planning_interrupts, stop

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
    original = RELEASES.pop_error(token)
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
def _source(con: Any, source: object, source_name: object, shown_as: str | None = None
            ) -> Iterator[tuple[str, Where | None]]:
    """(the name the SQL reads, what it is charged to: None for the relation itself).

    A table or view name is read and charged as itself. An in-memory object (relation,
    DataFrame, Arrow) is registered on ``con`` under a fresh name for the duration of the call
    (DuckDB reads it in place) and charged to ``source_name``, which the caller must give: an
    object has no stable name of its own, and a budget must follow the data from call to call.
    ``source_name`` is a name (``'trips'`` or ``'name:trips'``: budgeted as ``'name:trips'``)
    or ``'file:PATH'`` (the file the object reads: the CLI's ``--input``). The object is never
    printed or executed here (a relation runs when the release does). Messages name it
    ``shown_as`` (the CLI: the file as given), else ``source_name``.
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
    except Exception as exc:  # messages name the source as the caller wrote it
        _rename(exc, name, _SHOWN_AS.get() or shown_as or str(source_name))
        raise
    finally:
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)


_SHOWN_AS: contextvars.ContextVar[str | None] = contextvars.ContextVar("inftda_shown_as",
                                                                     default=None)


@contextlib.contextmanager
def naming(label: str) -> Iterator[None]:
    """Inside the block, messages about an in-memory source name it ``label`` (the command
    line: the ``--input`` file as given)."""
    token = _SHOWN_AS.set(label)
    try:
        yield
    finally:
        _SHOWN_AS.reset(token)


def _rename(exc: BaseException, internal: str, label: str) -> None:
    """Replace the registered view's ``internal`` name by ``label`` in ``exc``'s message (a
    message names what the caller wrote, never ``inftda_source_...``)."""
    if exc.args and isinstance(exc.args[0], str) and internal in exc.args[0]:
        exc.args = (exc.args[0].replace(internal, label), *exc.args[1:])


def prepare(con: Any, source: str, columns: object, options: dict[str, Any]
            ) -> tuple[ReleaseRequest, DomainPlan, UdfNames]:
    """(the parsed request, its domain plan, the release UDFs of ``con``), loading InfTDA on
    ``con`` first if it was not; raises on a bad request before any data is read."""
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
    shown_as: str | None = None,
) -> Released:
    """One release, executed as ``statement(release SQL)`` (default: the SQL itself, fetched
    as Arrow; the CLI wraps it in ``CREATE TABLE ... AS``): the Python API and the CLI share it.
    Each call is a new release with fresh noise, charged to the ledger as ``origin``."""
    if origin not in ORIGINS:
        raise bad_argument("origin", origin, f"must be one of {', '.join(ORIGINS)}",
                           "leave it out (the default is 'python')")
    if progress is not None and not callable(progress):
        raise bad_argument("progress", progress, "must be callable",
                           "pass a function progress(p) taking a ScanProgress or a "
                           "LevelProgress")
    with _source(con, source, source_name, shown_as) as (name, charge):
        with planning_interrupts():
            request, plan, names = prepare(con, name, columns, options)
            plan.check_sizes()
        public_first(con, request, plan, origin, charge=charge)
        where = charge or Where.of(plan.source)
        limit = allocator.memory_limit(con)
        sql, token = rendered(request, plan, names, origin, None, where, limit)
        hook: Callable[[Any], None] | None = (
            progress if progress is not None else TextProgress() if in_notebook() else None)
        levels_began = threading.Event()
        scan = (watching(con, hook, until=levels_began) if hook is not None
                else contextlib.nullcontext(None))

        def levels(p: LevelProgress) -> None:  # the levels' reports take over from the scan's
            levels_began.set()
            if hook is not None:
                hook(p)

        RELEASES.open(token, levels if hook is not None else None)
        ledger_id = public = None
        spent = charged_text(request.budget.total, where.label)

        def spent_now() -> str | None:  # what the release spent, once its UDFs are idle
            RELEASES.wait_idle(token)
            return spent if RELEASES.charged(token) else None

        def interrupted() -> ReleaseInterrupted:  # DuckDB stopped it, or Ctrl-C here
            return stopped(spent_now())

        def execute() -> Any:
            try:
                if statement is None:
                    return con.sql(sql).to_arrow_table()
                return con.execute(statement(sql)).fetchall()
            except duckdb.Error as exc:
                if not RELEASES.has_error(token):  # DuckDB's own error, not one of ours
                    if is_interrupt(exc):
                        raise interrupted() from None
                    if isinstance(exc, duckdb.OutOfMemoryException):
                        raise out_of_memory(limit, spent_now()) from None
                _reraise(exc, token)
                raise  # pragma: no cover

        try:
            try:  # on a helper thread: Ctrl-C reaches this one at once and stops the release
                with scan:  # DuckDB's progress while it reads the data, until the levels
                    result = interruptible(execute, lambda: stop(con, token=token), interrupted)
            finally:
                capabilities.forget(token)
                public = RELEASES.plan_of(token)
                ledger_id = RELEASES.forget(token)  # and any release it began and never finished
        except BaseException as exc:  # an interrupt, say: tell the caller what was charged
            if ledger_id is not None:
                with contextlib.suppress(AttributeError, TypeError):
                    exc.inftda_ledger_id = ledger_id  # type: ignore[attr-defined]
            raise
        record = of_release(request, rho=request.budget.total, source=where.label,
                            ledger_id=ledger_id, engine="duckdb", plan=public)
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
    estimator: str | None = None,
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
    ``inftda_not_private``. ``progress(p)``, if given, gets, from the first second: a
    :class:`~inftda_duckdb.duckdb.progress.ScanProgress` (percent, seconds) about twice a
    second while DuckDB reads the data (its own estimate: from a helper thread), then a
    :class:`~inftda_duckdb.core.topdown.LevelProgress` (level, depth, parents, cells_done,
    cells_planned, seconds) once per level when it is done and, on long levels, up to 16 times
    before (from the DuckDB thread running the release). Left out in a Jupyter notebook, a
    :class:`~inftda_duckdb.duckdb.progress.TextProgress` prints both as lines on stderr.
    """
    options = dict(
        rho=rho, epsilon=epsilon, delta=delta, domains=domains, domain_tables=domain_tables,
        domain_from_data=domain_from_data, level_weights=level_weights, auto_target=auto_target,
        output=output, neighbours=neighbours, privacy_unit=privacy_unit,
        max_rows_per_unit=max_rows_per_unit, rows_per_unit_public=rows_per_unit_public,
        unknown=unknown, seed=seed, estimator=estimator,
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
    estimator: str | None = None,
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
        rows_per_unit_public=rows_per_unit_public, estimator=estimator,
    )
    report = planning.report_delta(options)
    with _source(con, source, None if isinstance(source, str) else "preview",
                 shown(source)) as (name, _):
        request, plan, names = prepare(con, name, columns, options)
        sql = preview_rendered(request, plan, names, planning.check_beta(beta), report,
                               origin="python")
        try:
            table = con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            _reraise(exc)
            raise  # pragma: no cover
    if request.domain_from_data:
        warnings.warn(PREVIEW_FROM_DATA, UserWarning, stacklevel=2)
    return table


def plan(
    con: Any,
    source: object,
    columns: list[str] | tuple[str, ...],
    *,
    max_error: object = None,
    level: object = None,
    beta: float = 0.05,
    delta: object = None,
    domains: dict[str, Any] | None = None,
    domain_tables: list[str] | None = None,
    domain_from_data: bool = False,
    level_weights: list[object] | str | None = None,
    auto_target: str | int | None = None,
    neighbours: str | None = None,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    rows_per_unit_public: bool = False,
    estimator: str | None = None,
) -> dict[str, Any]:
    """The smallest rho (exact, to 6 significant digits: within 0.001% of the least) for which
    the Theorem 1 bound at ``level`` (default: the leaves) is at most ``max_error`` with
    probability ``1 - beta`` (or one target per level: ``max_error=[x1, None, x3]``), under the
    best split considered: ``level_weights`` if given, else the uniform split and ``'auto'``,
    for the release's ``estimator`` (its bound: Theorem 1, plus the rounding term for
    ``'least_squares'``).

    Spends nothing and reads what :func:`preview` reads (public sizes; the public-facing mode's
    rules included). Returns a mapping: ``rho``, ``epsilon`` at ``delta`` (default 1e-6),
    ``level_weights`` (the split's exact parts, root first when the total is noised),
    ``split``, ``bounds`` (per level, at that rho), ``max_error``, ``candidates`` (the rho
    each split considered needs), ``release_options`` (``release(..., **release_options)``
    spends exactly this plan) and ``rows`` (the table ``inftda_plan`` returns)."""
    options = dict(
        max_error=max_error, level=level, beta=beta, delta=delta, domains=domains,
        domain_tables=domain_tables, domain_from_data=domain_from_data,
        level_weights=level_weights, auto_target=auto_target, neighbours=neighbours,
        privacy_unit=privacy_unit, max_rows_per_unit=max_rows_per_unit,
        rows_per_unit_public=rows_per_unit_public, estimator=estimator,
    )
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise bad_argument("con", con, "must be a duckdb connection", "pass duckdb.connect()")
    with speaking("python"), \
            _source(con, source, None if isinstance(source, str) else "plan") as (name, _):
        request, goals, b, report = planner.request_of(con, name, list(columns), options)
        domains_plan = plan_domains(request, con, strict=True)
        if registered(con, "plan") is None:
            load(con)
        names = UdfNames.numbered(registered(con, "release") or 0)
        sql = planner.rendered(request, domains_plan, names, registered(con, "plan") or 0,
                               goals, b, report, "python")
        try:
            table = con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            _reraise(exc)
            raise  # pragma: no cover
    if request.domain_from_data:
        warnings.warn(PREVIEW_FROM_DATA, UserWarning, stacklevel=2)
    return targets.as_mapping(table)


if "IPython" in sys.modules:  # a notebook restarted without load(): still explained
    explain.install()
