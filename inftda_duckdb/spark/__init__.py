"""The Spark engine: the same InfTDA release as DuckDB's, on a Spark DataFrame or table.

Install with ``pip install 'inftda-duckdb[spark]'`` (PySpark 4, Java 17)::

    from inftda_duckdb import spark as inftda_spark
    df = inftda_spark.release(trips, ["origin", "dest", "hour"], rho=0.5,
                              domains={"hour": range(24), ...}, ledger="budget.duckdb")
    df.write.parquet("trips_dp.parquet")        # evaluate once; re-evaluation is identical
    inftda_spark.unpin(df)                      # free the pinned leaves once written

Modules, in the order a release runs them:

- ``domains``   public domains on the driver (lists, domain tables, opt-in data), checked
- ``gather``    public data to the driver, and joined, within ``spark.driver.maxResultSize``
- ``sessions``  what a release asks of its session, classic or Spark Connect
- ``leaves``    the leaf GROUP BY in Spark, coded by the domains; the data checks
- ``pins``      the pinned leaves a result reads (``pin``), freed by ``unpin``
- ``subtrees``  the cut, levels 1..c on the driver, levels c+1..d per subtree on executors
- ``descent``   the levels below the cut in bands, so that no task holds more than its share
- ``transit``   which Spark settings encrypt the keys and counts between machines
- ``ledger``    which ledger a release is charged to (shared with DuckDB), and as which source
- ``driver``    ``release`` and ``preview``: request, checks, ledger charge, result DataFrame
- ``jobs``      Spark work under a job tag of its own (``run_tagged``): Ctrl-C cancels it and
                says whether the budget was spent (``Run``); also for writing a result
- ``errorbars`` ``intervals`` of a released DataFrame and ``plan`` (the rho a target needs)

A seeded Spark release equals the seeded DuckDB release and ``core.topdown.release_tree``.
"""

from .driver import preview, release, unpin
from .errorbars import intervals, plan
from .jobs import Run, run_tagged
from .transit import UnencryptedTransitWarning

__all__ = ["Run", "UnencryptedTransitWarning", "intervals", "plan", "preview", "release",
           "run_tagged", "unpin"]
