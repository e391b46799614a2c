"""What the driver runs: ``release`` and ``preview`` on Spark, with DuckDB's request, checks,
ledger and numbers.

A release, in order (Algorithm 1 of the paper; what runs where):

1. driver: validate every argument (:func:`inftda_duckdb.core.request.parse_request`), plan the
   budget, read the public domains (:mod:`.domains`) and check them: nothing read from the
   private data yet, nothing charged;
2. executors: the leaf GROUP BY, coded and pinned (:mod:`.leaves`); one aggregate for the data
   checks (NULLs, undeclared values: DuckDB's messages), raised before anything is charged;
3. driver: charge the ledger once, draw the key, release the root and levels 1..c from the true
   counts of the c-prefixes (:mod:`.subtrees`; c is the cut);
4. executors, lazily, when the returned DataFrame is evaluated: one shuffle by subtree and levels
   c+1..d of every subtree, decoded to the columns' values.

The returned DataFrame is deterministic: its lineage starts at the pinned leaves and the cut
nodes, and its noise at the level keys it carries, so evaluating it again (or recomputing a lost
partition) gives the same rows and charges nothing. Write it once (``df.write.parquet(...)``) or
``cache()`` it to avoid recomputing the subtrees.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..core import options as option_table
from ..core import planning
from ..core.checks import load_checks, raise_for_checks
from ..core.errors import InputError, bad_argument, opt
from ..core.provenance import (
    MARKER,
    PREVIEW_FROM_DATA,
    not_private_reason,
    of_release,
    warn_not_private,
)
from ..core.release import (
    ORIGINS,
    charged_text,
    check,
    draw,
    least_squares,
    public_plan,
    unit_cap_text,
)
from ..core.request import ReleaseRequest, parse_request
from ..core.topdown import check_total, release_below
from ..core.tree import Levels, Nodes, mixed_radix
from . import descent, estimates, pins, sessions
from . import domains as dom
from . import leaves as lv
from . import ledger as charges
from .jobs import Run, run_tagged
from .subtrees import CHUNK_CELLS, choose_cut
from .transit import UnencryptedTransitWarning, unencrypted_settings, warning_text

_LOG = logging.getLogger("inftda_duckdb")

T_ = TypeVar("T_")



def release(
    source: DataFrame | str,
    columns: Sequence[str],
    *,
    ledger: object = None,  # a file, URL, Ledger or engine object: ledger.locate finds it
    source_name: str | None = None,
    partitions: int | None = None,
    origin: str = "python",
    **options: Any,
) -> DataFrame:
    """One InfTDA release of ``source`` (a Spark DataFrame or a table name) over ``columns``.

    ``options`` are the release options of the option table (:mod:`inftda_duckdb.core.options`,
    listed below; ``domain_tables`` may hold DataFrames or table names here), checked as DuckDB
    checks them. ``ledger`` (a ledger file on the driver, a ``postgresql://`` URL (for a
    cluster), ``':memory:'``, a ``Ledger`` or
    a DuckDB connection; default ``INFTDA_LEDGER``) is charged once, before any noise is drawn;
    ``source_name`` is the source's identity in the ledger (``'file:PATH'``, ``'name:NAME'`` or
    a plain name; default: a catalog table's identity, or the files a DataFrame reads: see
    :mod:`.ledger`). ``partitions`` sets the number of
    subtree partitions. Returns a lazy, deterministic DataFrame: the columns (their own names and
    types) and ``count``, or one row per synthetic record with ``output='rows'``.

    Ctrl-C (a ``KeyboardInterrupt``) cancels the release's Spark jobs and raises
    :class:`~inftda_duckdb.core.errors.ReleaseInterrupted` saying whether the budget was spent
    (:mod:`.jobs`).
    """

    def work(spark: SparkSession | None, run: Run) -> DataFrame:
        return _release(spark, run, source, columns, ledger=ledger, source_name=source_name,
                        partitions=partitions, origin=origin, options=options)

    return _tagged(source, work)


release.__doc__ = (release.__doc__ or "") + option_table.docstring(
    option_table.of(option_table.RELEASE, "spark", request=True))


def _tagged(source: object, work: Callable[[SparkSession | None, Run], T_]) -> T_:
    """``work(session, run)`` under a job tag of its own (:func:`.jobs.run_tagged`), when there
    is a session: the source's, or the active one of the calling thread (a Spark Connect
    session is active per thread, and the work runs on a helper thread)."""
    spark = source.sparkSession if isinstance(source, DataFrame) else \
        SparkSession.getActiveSession()
    if spark is None:  # a table name without a session: work() says so
        return work(None, Run())
    return run_tagged(spark, lambda run: work(spark, run))


def _release(
    session: SparkSession | None,
    run: Run,
    source: DataFrame | str,
    columns: Sequence[str],
    *,
    ledger: object,
    source_name: str | None,
    partitions: int | None,
    origin: str,
    options: dict[str, Any],
) -> DataFrame:
    """The release (:func:`release`), with ``run``'s cancellation state."""
    if origin not in ORIGINS:
        raise bad_argument("origin", origin, f"must be one of {', '.join(ORIGINS)}",
                           "leave it out (the default is 'python')")
    if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int)
                                   or partitions < 1):
        raise bad_argument("partitions", partitions, "must be a positive integer",
                           f"leave it out, or pass e.g. {opt('partitions', 200)}")
    domain_tables = options.pop("domain_tables", None)
    spark, request, src, tables = _prepare(session, source, columns, source_name, domain_tables,
                                           options)
    chunk = sessions.positive_setting(spark, CHUNK_SETTING, CHUNK_CELLS) or CHUNK_CELLS
    share = sessions.positive_setting(spark, descent.SHARE_SETTING, descent.TASK_LEAVES)
    book = charges.ledger_of(ledger)
    dplan, frames = dom.plan(request, src, tables)  # refuses a domain table of private data
    sid = charges.source_of(spark, source, source_name, frames)
    _warn_transit(spark)
    dplan.check_sizes()  # a declared domain above the cell limit: refused before any job
    raw = lv.raw_leaves(request, src)
    if request.domain_from_data:  # the domains are read from the (pinned) raw leaves
        raw = pins.pin(raw)
    values = dom.resolve(spark, request, src, dplan, frames,
                         raw if request.domain_from_data else None)
    public = load_checks(json.dumps(values.checks))
    sizes = values.sizes
    nodes = dom.level_nodes(values)
    cut = choose_cut(nodes, sizes)
    read: dict[str, Any] = {}

    def budget(rho: Fraction) -> None:  # refused: before any job reads the data
        charges.check(book, sid, request, rho, origin)

    def data() -> Mapping[str, Any]:  # the one job over the data, after the public checks
        leaves = read["leaves"] = pins.pin(lv.coded(request, values, raw))
        summary = read["summary"] = lv.summary(request, values, leaves, cut)
        stats = summary.stats
        failing = request.unknown == "error" and any(
            v for k, v in stats.items() if k.startswith(("unknown", "outside")))
        found = lv.examples(request, values, raw, spark, stats) if failing else {}
        return load_checks(lv.checks_json(request, values, stats, found))

    checked = check(request, values.plan, public, budget=budget, data=data)
    plan, summary, leaves = checked.plan, read["summary"], read["leaves"]
    run.before_charge()  # cancelled meanwhile: nothing is charged
    plan_text = public_plan(checked)
    ledger_id = charges.charge(book, sid, request, plan.rho, origin, plan_text)  # refused: no noise
    run.charged, run.ledger_id = charged_text(plan.rho, sid.label), ledger_id
    if checked.unit_rows is not None:  # to the curator, on stderr (the engine has no public mode)
        _LOG.warning("%s", unit_cap_text(request, *checked.unit_rows))
    secret, root = draw(checked, run.charged)
    lsq = least_squares(checked, secret)
    allowed = {k: a for k in range(request.depth) if (a := values.allowed(k, cut)) is not None}
    levels = top_levels = Levels.build(sizes, plan, secret, allowed)
    cut_e = None
    below: dict[int, DataFrame] = {}  # least squares: the sums below the bands, pinned (held)
    held: list[DataFrame] = []
    if lsq is not None:  # every cell noised, estimated: the sums below the cut, then the top
        # its bands from public sizes alone (every public leaf is noised: nodes[-1] bound them)
        shape = descent.layout(spark, sizes, cut, nodes[-1], partitions, share)
        at_cut, below, held = estimates.sums(spark, levels, shape.bands, lsq.arith, chunk,
                                             shape.partitions)
        top_levels, root, codes, e = lsq.top(levels, cut, *at_cut)
    cut_nodes = Nodes.root(root)
    if cut:  # levels 1..cut on the driver, from the true counts of the cut prefixes
        cut_nodes = release_below(top_levels, cut_nodes, summary.prefix_keys,
                                  summary.prefix_counts, upto=cut)
        check_total(cut_nodes, root, cut)
    if lsq is not None:  # where each released cut node's subtree continues
        keys = mixed_radix(codes, sizes[:cut], np.int64)
        cut_e = e[np.searchsorted(keys, mixed_radix(cut_nodes.codes, sizes[:cut], np.int64))]
    else:
        shape = descent.layout(spark, sizes, cut, root, partitions, share)
    result = descent.descend(spark, request, values, leaves, cut_nodes, levels, shape, chunk,
                             src.fields, arith=None if lsq is None else lsq.arith, cut_e=cut_e,
                             sums=below)
    warn_not_private(request)
    record = of_release(request, rho=plan.rho, source=sid.label, ledger_id=ledger_id,
                        engine="spark", plan=plan_text)
    pinned = [leaves, *([raw] if request.domain_from_data else []), *values.pinned(), *held]
    return pins.attach(_provenance(result, request, record), pinned)


CHUNK_SETTING = "inftda.spark.chunkCells"
"""A Spark setting (``spark.conf.set``) for the cells an executor releases at once (default
:data:`.subtrees.CHUNK_CELLS`): smaller chunks, less memory, more calls."""


def _prepare(
    session: SparkSession | None,
    source: object,
    columns: object,
    name: str | None,
    domain_tables: Sequence[DataFrame | str] | None,
    options: dict[str, Any],
) -> tuple[SparkSession, ReleaseRequest, dom.Source, list[tuple[str, DataFrame]]]:
    """The session, the validated request, the source and the domain tables as DataFrames."""
    if isinstance(source, DataFrame):
        spark, frame = source.sparkSession, source
        label = name or "DataFrame"
    elif isinstance(source, str):
        spark = _session(session)
        frame = _table(spark, source, "source")
        label = source
    else:
        raise bad_argument("source", type(source).__name__, "must be a Spark DataFrame or a "
                           "table name", "pass spark.read.parquet(...) or 'db.trips'")
    tables: list[tuple[str, DataFrame]] = []
    if domain_tables is not None:
        if isinstance(domain_tables, str | DataFrame):
            domain_tables = [domain_tables]
        for i, table in enumerate(domain_tables):
            if isinstance(table, DataFrame):
                tables.append((f"domain_tables[{i}]", table))
            elif isinstance(table, str):
                tables.append((table, _table(spark, table, "domain_tables")))
            else:
                raise bad_argument("domain_tables", type(table).__name__, "must hold Spark "
                                   "DataFrames or table names", "pass [geo_df] or ['geo']")
    if isinstance(columns, tuple):
        columns = list(columns)
    request = parse_request(label, columns, **options,
                            domain_tables=[n for n, _ in tables] or None)
    return spark, request, dom.Source.of(frame, label, request), tables


def _session(spark: SparkSession | None) -> SparkSession:
    if spark is None:
        raise InputError("no active SparkSession for a table name. Fix: create one with "
                         "SparkSession.builder.getOrCreate(), or pass a DataFrame")
    return spark


def _table(spark: SparkSession, name: str, argument: str) -> DataFrame:
    try:
        return spark.table(name)
    except AnalysisException:
        raise bad_argument(argument, name, "was not found (no such table or view)",
                           "check the name, or pass a DataFrame") from None


def _warn_transit(spark: SparkSession) -> None:
    master = sessions.master(spark)
    missing = unencrypted_settings(master, lambda key: spark.conf.get(key, None))
    if missing:
        warnings.warn(warning_text(master, missing), UnencryptedTransitWarning, stacklevel=3)


def _provenance(result: DataFrame, request: ReleaseRequest, record: dict[str, str]
                ) -> DataFrame:
    """The provenance record (:mod:`inftda_duckdb.core.provenance`) as every column's metadata
    ``inftda`` (Spark keeps it in the Parquet files it writes), and, for a release that is not
    private, the constant column ``inftda_not_private`` with the reason, as DuckDB adds it."""
    meta = {"inftda": json.dumps(record)}
    columns = [dom.col(c).alias(c, metadata=meta) for c in result.columns]
    reason = not_private_reason(request.seed, request.domain_from_data)
    if reason is not None:
        columns.append(F.lit(reason).alias(MARKER, metadata=meta))
    return result.select(*columns)


def unpin(result: DataFrame) -> int:
    """Free the data a released DataFrame pins (its true leaves, in executor storage or
    checkpoint files) once it has been written: it cannot be evaluated afterwards. Returns how
    many pinned DataFrames were freed (0 for a DataFrame :func:`release` did not return, or the
    second time). Also freed when the DataFrame is garbage collected (Spark's context cleaner)."""
    return pins.unpin(result)


def preview(
    source: DataFrame | str,
    columns: Sequence[str],
    *,
    beta: float = 0.05,
    **options: Any,
) -> pa.Table:
    """Per level: domain size, cells, rho_k, sigma_k, the Theorem 1 bound at ``beta`` and the
    total epsilon at ``delta`` (default 1e-6): the table :func:`inftda_duckdb.preview` returns,
    for the options of :func:`release`. Spends nothing and reads no private data, except with
    ``domain_from_data`` (then marked not private). Ctrl-C cancels its Spark jobs (:mod:`.jobs`)."""
    return _tagged(source, lambda spark, _: _preview(spark, source, columns, beta, options))


def _preview(session: SparkSession | None, source: DataFrame | str, columns: Sequence[str],
             beta: float, options: dict[str, Any]) -> pa.Table:
    domain_tables = options.pop("domain_tables", None)
    report = planning.report_delta(options)
    beta = planning.check_beta(beta)
    spark, request, src, tables = _prepare(session, source, columns, None, domain_tables,
                                           options)
    dplan, frames = dom.plan(request, src, tables)
    raw = lv.raw_leaves(request, src) if request.domain_from_data else None
    values = dom.resolve(spark, request, src, dplan, frames, raw, preview=True)
    public = load_checks(json.dumps(values.checks))
    raise_for_checks(request, values.plan, public)
    rows = planning.preview_rows(request, values.plan, public, beta, report)
    if request.domain_from_data:
        warnings.warn(PREVIEW_FROM_DATA, UserWarning, stacklevel=2)
    return planning.preview_table(rows)
