"""inftda-duckdb: differentially private synthetic contingency tables (InfTDA) inside DuckDB.

Public API::

    load(con)                                  register the SQL functions on a DuckDB connection
    release(con, source, columns, rho=...)     one InfTDA release -> pyarrow.Table (charged)
    preview(con, source, columns, rho=...)     per-level noise and error bound (spends nothing)
    set_budget(con, source, rho=...)           cap what may be spent on a source table
    budget(con)                                budgets, spent and remaining per source
    evaluate(con, true, released, columns)     per-level errors vs the truth (curator only)
    interrupt(con)                             stop the releases running on con (another thread)

Map of the package (the folder listing reads like the algorithm):

- ``core/``      engine-neutral, numpy/Arrow in and out, imports no engine:
  ``exact`` (budgets as Fractions), ``randomness`` (AES-256 keyed PRF; seeded for tests only),
  ``noise`` (exact discrete Gaussian), ``intopt`` (the paper's IntOpt over whole levels),
  ``accounting`` (rho / (epsilon, delta), level split, Theorem 1), ``topdown`` (Algorithm 1 a
  level at a time), ``request`` (every release argument validated), ``units`` (which rows of a
  privacy unit are kept), ``limits`` (the cell limit), ``interrupts`` (stopping a release),
  ``identifiers``, ``memory``, ``errors``
- ``ledger/``    budgets and the ledger of releases, exact and atomic, shared by every engine
- ``duckdb/``    the DuckDB engine: ``extension`` (UDFs, table macros, release()/preview()),
  ``domain`` (public domains in the catalog), ``sqlgen`` (renders sql/), ``evaluation``
  (per-level metrics, curator only), ``connections``
- ``tools/``     ``cli``, ``shell``, ``demo`` (sample data) and ``workloads`` (the paper's)
"""

from .core.errors import BudgetExceededError, InftdaError, InputError, InternalError
from .core.interrupts import ReleaseInterrupted  # raised where a release is stopped
from .core.limits import ReleaseAbortedError  # raised past the cell limit, after the charge
from .duckdb.evaluation import evaluate
from .duckdb.extension import NotPrivateWarning, interrupt, load, preview, release
from .ledger.store import budget, set_budget

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "InftdaError",
    "InputError",
    "InternalError",
    "NotPrivateWarning",
    "ReleaseAbortedError",
    "ReleaseInterrupted",
    "__version__",
    "budget",
    "evaluate",
    "interrupt",
    "load",
    "preview",
    "release",
    "set_budget",
]
