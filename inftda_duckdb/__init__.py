"""inftda-duckdb: differentially private synthetic contingency tables (InfTDA) inside DuckDB.

Public API::

    load(con)                                  register the SQL functions on a DuckDB connection
    release(con, source, columns, rho=...)     one InfTDA release -> pyarrow.Table (charged)
    preview(con, source, columns, rho=...)     per-level noise and error bound (spends nothing)
    intervals(con, released, level=k)          every k-prefix's count with its proven interval
    plan(con, source, columns, max_error=X)    the rho a target error needs (spends nothing)
    load(con, ledger='budget.duckdb')          ... keeping budgets in a ledger file shared by all
    set_budget(con, source, rho=...)           cap what may be spent on a source (or several)
    budget(con)                                budgets, spent and remaining
    require_budget(con)                        refuse releases of sources no budget covers
    verify_ledger(con)                         check the ledger's hash chain now
    evaluate(con, true, released, columns)     per-level errors vs the truth (curator only)
    interrupt(con)                             stop the releases running on con (another thread)
    explain(exc)                               what DuckDB's error about our SQL means (rhoo := 2)

Map of the package (the folder listing reads like the algorithm):

- ``core/``      engine-neutral, numpy/Arrow in and out, imports no engine:
  ``exact`` (budgets as Fractions), ``randomness`` (AES-256 keyed PRF; seeded for tests only),
  ``noise`` (exact discrete Gaussian), ``intopt`` (the paper's IntOpt over whole levels),
  ``kernel`` (the same per block, compiled with numba, GIL-free),
  ``accounting`` (rho / (epsilon, delta), level split, Theorem 1), ``topdown`` (Algorithm 1 a
  level at a time), ``request`` (every release argument validated), ``units`` (which rows of a
  privacy unit are kept), ``limits`` (the cell limit), ``interrupts`` (stopping a release),
  ``identifiers``, ``memory``, ``errors``
- ``ledger/``    budgets and the ledger of releases, exact, atomic and hash-chained, shared by every
  engine: ``sources`` (what a budget covers), ``chain`` (tables and hashes), ``store``
- ``duckdb/``    the DuckDB engine: ``extension`` (its entry point: load(), release(),
  preview()), ``registration`` (UDFs and table macros of a connection), ``statements`` (the
  release statement and its capability token), ``udfs`` (the steps DuckDB runs), ``arrow_io``
  (leaves in and out), ``registry`` (releases in progress), ``api`` (release()/preview()),
  ``stopping`` (cancel, interrupt, Ctrl-C), ``catalog`` (names as DuckDB resolves them,
  database identity, which ledger), ``budgets`` (budgets and charges from DuckDB),
  ``capabilities`` (internal steps only their statement can run), ``domain`` (public domains in
  the catalog), ``sqlgen`` (renders sql/), ``evaluation`` (per-level metrics, curator only),
  ``disclosure`` (curator and public-facing modes), ``allocator`` (DuckDB's memory),
  ``connections``
- ``spark/``     the Spark engine (extra ``spark``; not imported here): ``driver`` (release()/
  preview()), ``domains``, ``leaves`` (the leaf GROUP BY), ``subtrees`` (levels below the cut on
  executors), ``ledger`` (which ledger and source), ``transit``, ``commands`` (--engine spark)
- ``tools/``     ``cli``, ``shell``, ``demo`` (sample data) and ``workloads`` (the paper's)
"""

from ._version import __version__
from .core.errors import (
    BudgetExceededError,
    InftdaError,
    InputError,
    InternalError,
    LedgerError,
    ReleaseOutOfMemoryError,
)
from .core.interrupts import ReleaseInterrupted  # raised where a release is stopped
from .core.limits import ReleaseAbortedError  # raised past the cell limit, after the charge
from .core.provenance import NotPrivateWarning
from .duckdb.budgets import (
    budget,
    move_ledger,
    require_budget,
    set_budget,
    upgrade_ledger,
    verify_ledger,
)
from .duckdb.evaluation import evaluate
from .duckdb.explain import explain
from .duckdb.extension import interrupt, intervals, load, plan, preview, release

__all__ = [
    "BudgetExceededError",
    "InftdaError",
    "InputError",
    "InternalError",
    "LedgerError",
    "NotPrivateWarning",
    "ReleaseAbortedError",
    "ReleaseInterrupted",
    "ReleaseOutOfMemoryError",
    "__version__",
    "budget",
    "evaluate",
    "explain",
    "interrupt",
    "intervals",
    "load",
    "move_ledger",
    "plan",
    "preview",
    "release",
    "require_budget",
    "set_budget",
    "upgrade_ledger",
    "verify_ledger",
]
