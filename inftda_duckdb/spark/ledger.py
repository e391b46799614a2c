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
  plain name, which is ``'name:NAME'``, as DuckDB reads it); else the *dataset* of the files the
  release reads (:func:`inftda_duckdb.ledger.sources.dataset`), ``file:<dataset>``, the key
  DuckDB gives ``source_name='file:PATH'`` and the command line gives ``--input PATH`` for the
  same files. One rule whichever way Spark reaches them:

  - a catalog table (by name, or ``spark.table``, or a DataFrame reading its files): the folder
    it is stored in (its location), so its name and its files are one source;
  - a folder of part files (Spark's ``part-...`` files, partition folders ``k=v``): the folder,
    whether it holds one file or many, read whole, by partition or by one part;
  - a file people named (``trips.parquet``): the file itself;
  - a join with public tables: only the private input's files; a table's files are public when
    the release lists it in ``domain_tables`` (the source's other files are the private input);
    a release over files of several datasets, none of them declared public, is refused
    (it is charged to one source: ``source_name`` names the one whose budget applies);
  - a temporary view over no files: ``name:<view>``; a DataFrame over no files needs
    ``source_name``.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence
from fractions import Fraction

from pyspark.sql import DataFrame, SparkSession

from ..core.errors import bad_argument, opt
from ..core.release import charge_fields
from ..core.request import ReleaseRequest
from ..ledger import Charge, Ledger, SourceId
from ..ledger.locate import LEDGER_VARIABLE, locate
from ..ledger.sources import dataset, parse


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


def source_of(spark: SparkSession, source: object, source_name: str | None,
              public: Sequence[DataFrame] = ()) -> SourceId:
    """The source a release is charged as (see the module docstring); ``public``: the domain
    tables, whose datasets are public lookups when the source joins them."""
    if source_name is not None:
        parsed = parse(source_name, "source_name")
        return parsed if isinstance(parsed, SourceId) else SourceId.named(parsed)
    view = None
    if isinstance(source, str):
        table = spark.catalog.getTable(source)
        parts = [table.catalog or "spark_catalog", *(table.namespace or []), table.name]
        if not table.isTemporary:
            where = location(spark, parts)
            if where is not None:
                return SourceId.file(where)
        view = table.name if table.isTemporary else "spark:" + ".".join(p for p in parts if p)
        source = spark.table(source)
    assert isinstance(source, DataFrame)
    read = datasets(source)
    private = sorted(read - set().union(*(datasets(t) for t in public))) if read else []
    if len(private) == 1:
        return SourceId.file(private[0])
    if read and not private:
        raise bad_argument(
            "domain_tables", None, "read every dataset the source reads: the domain tables "
            "would be read from the private data", "pass public tables not derived from the "
            "data, or name the source's dataset with source_name")
    if len(private) > 1:
        raise bad_argument(
            "source_name", None, f"is required: the source reads the files of "
            f"{len(private)} datasets ({', '.join(private)}), and a release is charged to one "
            "source (a public table it joins is declared by listing it in domain_tables)",
            f"pass {opt('source_name', 'file:' + private[0])} (the dataset whose budget "
            "applies), or list the public tables in domain_tables")
    if view is not None:
        return SourceId.named(view)
    raise bad_argument(
        "source_name", None, "is required for a DataFrame that reads no files (the ledger "
        "charges its releases to this name, and a budget caps them)",
        f"pass {opt('source_name', 'trips')}, or {opt('source_name', 'file:/data/trips')} "
        "for data read from files")


def location(spark: SparkSession, parts: Sequence[str]) -> str | None:
    """Where a catalog table's files are stored (``DESCRIBE TABLE EXTENDED``), as a path or URI;
    None for a view, or a table that has no location."""
    name = ".".join("`" + p.replace("`", "``") + "`" for p in parts if p)
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect():
        if str(row[0]).strip() == "Location" and row[1]:
            return _local(str(row[1]).strip())
    return None


def input_files(frame: DataFrame) -> list[str]:
    """The files ``frame`` reads (Spark's ``inputFiles``; none for a plan Spark cannot list)."""
    try:
        return [_local(f) for f in frame.inputFiles()]
    except Exception:
        return []


def datasets(frame: DataFrame) -> set[str]:
    """The datasets (:func:`inftda_duckdb.ledger.sources.dataset`) of the files ``frame`` reads."""
    return {dataset(f) for f in input_files(frame)}


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
