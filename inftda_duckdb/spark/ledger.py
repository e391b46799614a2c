"""Which ledger a Spark release is charged to, and as which source.

The ledger is the engine-neutral one (:mod:`inftda_duckdb.ledger`), shared with DuckDB: a
release on either engine of the same source, charged to the same ledger, spends the same
budgets (a budget may cover several sources; ``require_budget`` refuses sources none covers).

- **Which ledger** (:func:`ledger_of`): ``ledger=`` a ledger file on the driver (created on first
  use; give DuckDB the same file with ``load(con, ledger=...)``, ``--ledger`` or
  ``INFTDA_LEDGER``), a ``postgresql://`` URL (a ledger on a server: the drivers of a
  cluster), ``':memory:'`` (this process only, chosen on purpose), a
  :class:`~inftda_duckdb.ledger.Ledger`, or a DuckDB connection (the ledger it charges); without
  one, the file named by ``INFTDA_LEDGER``. There is no implicit default: Spark data outlives the
  process, and a budget kept only in memory would not hold.
- **Which source** (:func:`source_of`): ``source_name`` (``'file:PATH'``, ``'name:NAME'``, or a
  plain name, which is ``'name:NAME'``, as DuckDB reads it); else a catalog table by its identity,
  ``name:spark:<catalog>.<namespace>.<table>``; else the files a DataFrame or a temporary view
  reads, ``file:<path>`` (several files: their common folder; the same key DuckDB gives the file
  released as ``'file:PATH'`` or with ``--input``); a temporary view over no files by its name.
"""

from __future__ import annotations

import os
import urllib.parse
from fractions import Fraction

from pyspark.sql import DataFrame, SparkSession

from ..core.errors import bad_argument, opt
from ..core.release import charge_fields
from ..core.request import ReleaseRequest
from ..ledger import Charge, Ledger, SourceId
from ..ledger.locate import LEDGER_VARIABLE, locate
from ..ledger.sources import FILE, parse
from .domains import input_files


def ledger_of(ledger: object) -> Ledger:
    """The ledger to charge (see the module docstring); checked before anything runs: an
    unreachable or broken ledger raises ``LedgerError`` here, before any Spark job."""
    if ledger is None:
        ledger = os.environ.get(LEDGER_VARIABLE, "").strip() or None
    found = locate(ledger)
    if found is None:
        raise bad_argument(
            "ledger", ledger, "must be a ledger file on the driver, a postgresql:// URL, "
            "':memory:', a Ledger or a DuckDB connection: every Spark release is charged to a "
            "ledger",
            f"pass {opt('ledger', 'budget.duckdb')} (the file DuckDB releases of the same data "
            f"use), or set {LEDGER_VARIABLE}=budget.duckdb",
        )
    found.ledger_id()  # creates a new ledger file; a broken or unreachable one raises now
    return found


def source_of(spark: SparkSession, source: object, source_name: str | None) -> SourceId:
    """The source a release is charged as (see the module docstring)."""
    if source_name is not None:
        parsed = parse(source_name, "source_name")
        return parsed if isinstance(parsed, SourceId) else SourceId.named(parsed)
    view = None
    if isinstance(source, str):
        table = spark.catalog.getTable(source)
        if not table.isTemporary:
            parts = [table.catalog or "spark_catalog", *(table.namespace or []), table.name]
            return SourceId.named("spark:" + ".".join(p for p in parts if p))
        view, source = table.name, spark.table(source)
    assert isinstance(source, DataFrame)
    files = sorted(_local(f) for f in input_files(source))
    if not files and view is not None:
        return SourceId.named(view)
    if not files:
        raise bad_argument(
            "source_name", None, "is required for a DataFrame that reads no files (the ledger "
            "charges its releases to this name, and a budget caps them)",
            f"pass {opt('source_name', 'trips')}, or {opt('source_name', 'file:/data/trips')} "
            "for data read from files")
    path = files[0] if len(files) == 1 else os.path.commonpath(files)
    if "://" in path:  # s3a://, hdfs://: a URI, not a path on the driver
        return SourceId(FILE + path, path, True)
    return SourceId.file(path)


def _local(uri: str) -> str:
    """A ``file:`` URI as a plain path (other schemes, e.g. ``s3a://``, stay URIs)."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "file":
        return uri
    return urllib.parse.unquote(parsed.path)


def check(ledger: Ledger, source: SourceId, request: ReleaseRequest, rho: Fraction,
          origin: str) -> None:
    """Raise now what charging this release would refuse (``BudgetExceededError``,
    ``LedgerError``): the budget check that comes before any job reads the data."""
    ledger.check(Charge(source=source, **charge_fields(request, rho, f"spark-{origin}")))


def charge(ledger: Ledger, source: SourceId, request: ReleaseRequest, rho: Fraction,
           origin: str, plan: str | None = None) -> int:
    """Charge one release (on the driver, before any noise): its ledger row id, or
    ``BudgetExceededError`` / ``LedgerError`` with nothing written. ``origin``: ``'python'`` or
    ``'cli'``, recorded as ``'spark-python'`` / ``'spark-cli'``; ``plan``: its public plan,
    recorded beside its row."""
    rid, _ = ledger.charge(Charge(source=source,
                                  **charge_fields(request, rho, f"spark-{origin}", plan)))
    return rid
