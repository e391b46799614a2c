"""inftda-duckdb: differentially private synthetic contingency tables (InfTDA) inside DuckDB.

Map of the package (the folder listing reads like the algorithm):

- ``exact``       exact budgets: user numbers to Fractions, never rounded through floats
- ``randomness``  secure random source (AES-256 as a keyed PRF); seeded source for tests only
- ``noise``       exact discrete Gaussian N_Z(0, sigma^2), vectorised
- ``intopt``      the paper's IntOpt over a whole level (dense and ragged)
- ``accounting``  rho / (epsilon, delta), the per-level split, sensitivity, Theorem 1 bound
- ``errors``      InputError, BudgetExceededError, InternalError
"""

from .errors import BudgetExceededError, InftdaError, InputError, InternalError

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "InftdaError",
    "InputError",
    "InternalError",
    "__version__",
]
