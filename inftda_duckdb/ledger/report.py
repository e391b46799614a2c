"""The ledger's tables for people: budgets (cap, spent and remaining, in rho and in epsilon) and
charges (one row per executed release).

:func:`budget_table` has one row per budget, then one per charged source no budget covers, with
rho exact (``'p/q'``) and as a DOUBLE, and epsilon at a given delta under the conversion in force
(rounded up; epsilons are not additive). :func:`charge_table` lists a ledger's charges without
the chain's columns, each row naming its ledger. Both are what :meth:`~.store.Ledger.budgets`
and :meth:`~.store.Ledger.rows` return and what an engine shows (``inftda_budget()``,
``inftda_ledger_rows()``).
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import duckdb
import pyarrow as pa

from ..core import accounting
from ..core.identifiers import fold, literal
from . import chain
from .chain import LEDGER
from .verify import State


def epsilon(rho: Fraction, delta: float) -> float:
    """epsilon at ``delta`` of a total ``rho`` (rounded up) under the conversion in force; 0 for
    nothing spent."""
    return _epsilon_under(rho, float(delta), accounting.CONVERSION)


@functools.lru_cache(maxsize=512)
def _epsilon_under(rho: Fraction, delta: float, conversion: str) -> float:
    # cached: the exact conversion is slow, and releases repeat their budgets
    return 0.0 if rho == 0 else accounting.epsilon_from_rho(rho, delta, conversion)


BUDGET_SCHEMA = pa.schema([
    ("budget", pa.string()),
    ("sources", pa.list_(pa.string())),
    ("budget_rho", pa.float64()),
    ("spent_rho", pa.float64()),
    ("remaining_rho", pa.float64()),
    ("budget_rho_exact", pa.string()),
    ("spent_rho_exact", pa.string()),
    ("remaining_rho_exact", pa.string()),
    ("releases", pa.int64()),
    ("non_private_releases", pa.int64()),
    ("delta", pa.float64()),
    ("budget_epsilon", pa.float64()),
    ("spent_epsilon", pa.float64()),
    ("remaining_epsilon", pa.float64()),
    ("set_at", pa.timestamp("us", tz="UTC")),
    ("ledger", pa.string()),
])


def budget_rows(state: State) -> list[dict[str, Any]]:
    """Per budget, then per charged source no budget covers: cap, spent, releases."""
    out: list[dict[str, Any]] = []
    covered: set[str] = set()
    for b in sorted(state.budgets.values(), key=lambda b: fold(b.label)):
        covered.update(b.sources)
        counts = [state.releases.get(k, (0, 0)) for k in b.sources]
        out.append({"budget": b.label, "sources": list(b.labels), "cap": b.cap,
                    "spent": state.spent_by(b), "n": sum(c[0] for c in counts),
                    "np": sum(c[1] for c in counts), "set_at": b.set_at})
    for key in sorted(set(state.spent) - covered, key=lambda k: state.labels[k]):
        n, np_ = state.releases[key]
        out.append({"budget": None, "sources": [state.labels[key]], "cap": None,
                    "spent": state.spent[key], "n": n, "np": np_, "set_at": None})
    return out


def budget_table(rows: list[dict[str, Any]], delta: float, location: str) -> pa.Table:
    """:data:`BUDGET_SCHEMA` rows from :func:`budget_rows`' entries."""
    cols: dict[str, list[Any]] = {f.name: [] for f in BUDGET_SCHEMA}
    for e in rows:
        cap, spent = e["cap"], e["spent"]
        rem = None if cap is None else max(cap - spent, Fraction(0))
        for name, value in (
            ("budget", e["budget"]), ("sources", e["sources"]),
            ("budget_rho", None if cap is None else float(cap)), ("spent_rho", float(spent)),
            ("remaining_rho", None if rem is None else float(rem)),
            ("budget_rho_exact", None if cap is None else str(cap)),
            ("spent_rho_exact", str(spent)),
            ("remaining_rho_exact", None if rem is None else str(rem)),
            ("releases", e["n"]), ("non_private_releases", e["np"]), ("delta", delta),
            ("budget_epsilon", None if cap is None else epsilon(cap, delta)),
            ("spent_epsilon", epsilon(spent, delta)),
            ("remaining_epsilon", None if rem is None else epsilon(rem, delta)),
            ("set_at", e["set_at"]), ("ledger", location),
        ):
            cols[name].append(value)
    return pa.table(cols, schema=BUDGET_SCHEMA)


def charge_table(cur: Any, prefix: str, location: str) -> pa.Table:
    """Every charge in ``prefix`` + the ledger table, oldest first, without the chain's
    columns, with a ``ledger`` column holding ``location``."""
    return cur.sql(f"SELECT * EXCLUDE (prev_hash, digest, hash), {literal(location)} AS ledger "
                   f"FROM {prefix}{LEDGER} ORDER BY seq").to_arrow_table()


def no_charges(location: str = "") -> pa.Table:
    """An empty table of charges (the columns of :meth:`~.store.Ledger.rows`)."""
    with duckdb.connect() as scratch:
        scratch.execute(chain.ddl(LEDGER, LEDGER))
        return charge_table(scratch, "", location)
