"""The privacy ledger, shared by every engine (its store: DuckDB, or a PostgreSQL server; never an
engine).

- ``sources``: :class:`SourceId`, what budgets cover and charges name (tables by their
  database's stored id, files by path, in-memory objects by a name the caller gives);
- ``chain``: the four tables and the hash chain (optionally keyed) that links their rows;
- ``dialect``: what differs between the databases a ledger is kept in, and DuckDB's side
  (its dialect; a ledger file attached per operation; the process's in-memory ledger);
- ``verify``: the chain as it stands in a database: its head, the verified state at the head
  (checked incrementally, cached per process), :class:`Budget`, and the append that moves the
  head;
- ``store``: :class:`Ledger` (in a database, a shared file, in memory, or on a server),
  :class:`Charge`: one transaction with retry, charge-or-refuse, budgets over several sources,
  settings, verification on demand;
- ``report``: the budget and charge tables for people;
- ``admin``: the upgrade of an inftda_duckdb 0.1 ledger, and the move of a ledger's rows to
  another (a shared file);
- ``postgres``: the same ledger on a PostgreSQL server (``Ledger.open('postgresql://...')``, the
  ``postgres`` extra), for drivers on several machines.
- ``locate``: the ledger a caller names (a location, a :class:`Ledger`, or an engine's object
  such as a DuckDB connection), found without importing that engine.

How DuckDB uses it: :mod:`inftda_duckdb.duckdb.budgets`; another engine opens a ledger file with
:meth:`Ledger.open` and charges :class:`SourceId` s of its own.
"""

from ..core.identifiers import fold
from .sources import SourceId
from .store import REQUIRE_BUDGET, Charge, Ledger, exact_cap
from .verify import Budget

__all__ = ["REQUIRE_BUDGET", "Budget", "Charge", "Ledger", "SourceId", "exact_cap", "fold"]
