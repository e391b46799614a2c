"""The privacy ledger, shared by every engine (its store: DuckDB, or a PostgreSQL server; never an
engine).

- ``sources``: :class:`SourceId`, what budgets cover and charges name (tables by their
  database's stored id, files by path, in-memory objects by a name the caller gives);
- ``chain``: the four tables and the hash chain (optionally keyed) that links their rows;
- ``store``: :class:`Ledger` (in a database, a shared file, or in memory), :class:`Charge`,
  :class:`Budget`; charge-or-refuse, budgets over several sources, settings, verification;
- ``postgres``: the same ledger on a PostgreSQL server (``Ledger.open('postgresql://...')``, the
  ``postgres`` extra), for drivers on several machines.

How DuckDB uses it: :mod:`inftda_duckdb.duckdb.budgets`; another engine opens a ledger file with
:meth:`Ledger.open` and charges :class:`SourceId` s of its own.
"""

from .sources import SourceId, fold
from .store import REQUIRE_BUDGET, Budget, Charge, Ledger, exact_cap

__all__ = ["REQUIRE_BUDGET", "Budget", "Charge", "Ledger", "SourceId", "exact_cap", "fold"]
