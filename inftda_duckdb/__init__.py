"""inftda-duckdb: differentially private synthetic contingency tables (InfTDA) inside DuckDB.

Public API::

    load(con)                                  register the SQL functions on a DuckDB connection
    release(con, source, columns, rho=...)     one InfTDA release -> pyarrow.Table (charged)
    preview(con, source, columns, rho=...)     per-level noise and error bound (spends nothing)
    set_budget(con, source, rho=...)           cap what may be spent on a source table
    budget(con)                                budgets, spent and remaining per source
    evaluate(con, true, released, columns)     per-level errors vs the truth (curator only)

Map of the package (the folder listing reads like the algorithm):

- ``exact``        exact budgets: user numbers to Fractions, never rounded through floats
- ``randomness``   secure random source (AES-256 as a keyed PRF); seeded source for tests only
- ``noise``        exact discrete Gaussian N_Z(0, sigma^2), vectorised and counter-addressed
- ``intopt``       the paper's IntOpt over a whole level (dense and ragged)
- ``accounting``   rho / (epsilon, delta), the per-level split, sensitivity, Theorem 1 bound
- ``topdown``      Algorithm 1 a level at a time (numpy only: any engine can drive it)
- ``request``      every release argument parsed and validated in one place
- ``domain``       public domains: ENUM labels, explicit lists, nested domain tables
- ``identifiers``  quoting of table and column names
- ``sqlgen``       renders the sql/ templates into one release statement
- ``extension``    DuckDB glue: UDFs, table macros, the release registry, release()/preview()
- ``ledger``       budgets and the ledger of releases, exact and atomic
- ``evaluation``   per-level error metrics against the truth (curator only, not private)
- ``workloads``    the paper's synthetic workloads, for trying and benchmarking
- ``cli``, ``shell``, ``demo``   the command line, the SQL shell and the sample data
- ``errors``       InputError, BudgetExceededError, InternalError
"""

from .errors import BudgetExceededError, InftdaError, InputError, InternalError
from .evaluation import evaluate
from .extension import NotPrivateWarning, load, preview, release
from .ledger import budget, set_budget

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "InftdaError",
    "InputError",
    "InternalError",
    "NotPrivateWarning",
    "__version__",
    "budget",
    "evaluate",
    "load",
    "preview",
    "release",
    "set_budget",
]
