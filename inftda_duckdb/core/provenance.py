"""What a released table says about itself: one provenance record, written everywhere it goes.

:func:`provenance` builds the record once; every output carries the same keys: the Arrow schema
metadata of ``release()``, the key-value metadata of a Parquet file, the JSON sidecar of a CSV file
(``<file>.provenance.json``) and the ``COMMENT ON TABLE`` of a table the CLI creates (readable from
DuckDB's own shell: ``SELECT comment FROM duckdb_tables()``). A release that is not private also
says so in its rows: a constant column :data:`MARKER` (see :func:`not_private_reason`), which
``CREATE TABLE ... AS``, ``COPY`` and every client keep, where a comment or metadata would be lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from .accounting import CONVERSION, epsilon_from_rho

MARKER = "inftda_not_private"
"""The column a release that is not private carries (every row: the reason)."""

DEFAULT_DELTA = Fraction(1, 10**6)


def decimal(value: Fraction) -> str:
    """A readable decimal beside an exact fraction: 6 significant digits (``'0.333333'``)."""
    return f"{float(value):.6g}"


def not_private_reason(seed: int | None, domain_from_data: bool) -> str | None:
    """Why a release is NOT private (None when it is): a seed, domains read from the data."""
    parts = []
    if seed is not None:
        parts.append(f"seeded (seed {seed}): its noise is reproducible, so anyone who knows the "
                     "seed can remove it")
    if domain_from_data:
        parts.append("its domains were read from the private data (domain_from_data)")
    if not parts:
        return None
    return "NOT PRIVATE: " + "; ".join(parts) + ". For tests and exploration only: never publish"


def provenance(
    *,
    rho: Fraction,
    columns: tuple[str, ...] | list[str],
    neighbours: str,
    output: str,
    source: str,
    seed: int | None = None,
    domain_from_data: bool = False,
    epsilon: Fraction | None = None,
    delta: Fraction | None = None,
    privacy_unit: str | None = None,
    max_rows_per_unit: int = 1,
    rows_per_unit_public: bool = False,
    ledger_id: int | None = None,
    engine: str = "duckdb",
) -> dict[str, str]:
    """The provenance record of one release, every value a string (metadata formats want text).

    ``epsilon``/``delta``: the budget as the user gave it; without them the epsilon implied by
    ``rho`` is stated at delta = 1e-6.
    """
    from .. import __version__

    reason = not_private_reason(seed, domain_from_data)
    if epsilon is None or delta is None:
        delta = DEFAULT_DELTA
        eps = repr(epsilon_from_rho(rho, delta))
    else:
        eps = str(epsilon) if epsilon.denominator == 1 else decimal(epsilon)
    return {
        "private": "false" if reason else "true",
        "why": reason or (f"rho-zCDP ({neighbours} neighbours): exact discrete Gaussian noise "
                          "from a secure source, public domains"),
        "rho": str(rho),
        "rho_decimal": decimal(rho),
        "epsilon": eps,
        "delta": f"{float(delta):g}",
        "conversion": CONVERSION,
        "neighbours": neighbours,
        "privacy_unit": privacy_unit or "",
        "max_rows_per_unit": str(max_rows_per_unit),
        "rows_per_unit_public": str(rows_per_unit_public).lower(),
        "columns": json.dumps(list(columns)),
        "output": output,
        "source": source,
        "ledger_id": "" if ledger_id is None else str(ledger_id),
        "seed": "" if seed is None else str(seed),
        "domain_from_data": str(domain_from_data).lower(),
        "mechanism": "InfTDA",
        "engine": engine,
        "package": f"inftda-duckdb {__version__}",
    }


def comment(record: Mapping[str, Any]) -> str:
    """The record as one line of text (a table comment): the verdict first, then key=value."""
    head = ("NOT PRIVATE release" if record.get("private") == "false"
            else "Differentially private release")
    body = "; ".join(f"{k}={v}" for k, v in record.items() if v != "")
    return f"{head} (inftda-duckdb): {body}"


__all__ = ["MARKER", "comment", "decimal", "not_private_reason", "provenance"]
