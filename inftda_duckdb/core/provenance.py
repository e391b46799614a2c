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
import warnings
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from .._version import __version__
from .accounting import CONVERSION, REPORT_DELTA, epsilon_from_rho
from .request import ReleaseRequest

MARKER = "inftda_not_private"
"""The column a release that is not private carries (every row: the reason)."""


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
    estimator: str = "inftda",
) -> dict[str, str]:
    """The provenance record of one release, every value a string (metadata formats want text).

    ``epsilon``/``delta``: the budget as the user gave it; without them the epsilon implied by
    ``rho`` is stated at delta = 1e-6.
    """
    reason = not_private_reason(seed, domain_from_data)
    if epsilon is None or delta is None:
        delta = REPORT_DELTA
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
        "estimator": estimator,
        "engine": engine,
        "package": f"inftda-duckdb {__version__}",
    }


def of_release(request: ReleaseRequest, *, rho: Fraction, source: str,
               ledger_id: int | None, engine: str) -> dict[str, str]:
    """The provenance record of a release of ``request`` charged ``rho`` to ``source``."""
    return provenance(
        rho=rho, columns=request.columns, neighbours=request.neighbours, output=request.output,
        source=source, seed=request.seed, domain_from_data=request.domain_from_data,
        epsilon=request.epsilon, delta=request.delta, privacy_unit=request.privacy_unit,
        max_rows_per_unit=request.max_rows_per_unit,
        rows_per_unit_public=request.rows_per_unit_public, ledger_id=ledger_id, engine=engine,
        estimator=request.estimator,
    )


class NotPrivateWarning(UserWarning):
    """A release that is not private: seeded noise, or domains read from the private data."""


SEEDED = (
    "this release used seed := {seed}: its noise is reproducible, so it is NOT private (tests "
    "and demos only); it is recorded as not private in the ledger"
)
FROM_DATA = (
    "domain_from_data read the domains from the private data: this release is NOT private "
    "(exploration only); declare public domains for a private release"
)
PREVIEW_FROM_DATA = "preview with domain_from_data read the domain sizes from the private data"


def not_private_texts(request: ReleaseRequest) -> list[str]:
    """What a caller is told about a release that is not private (empty when it is)."""
    parts = [SEEDED.format(seed=request.seed)] if request.seed is not None else []
    if request.domain_from_data:
        parts.append(FROM_DATA)
    return parts


def warn_not_private(request: ReleaseRequest, stacklevel: int = 3) -> None:
    """Warn (:class:`NotPrivateWarning`) for each reason a release is not private."""
    for text in not_private_texts(request):
        warnings.warn(text, NotPrivateWarning, stacklevel=stacklevel + 1)


def comment(record: Mapping[str, Any]) -> str:
    """The record as one line of text (a table comment): the verdict first, then key=value."""
    head = ("NOT PRIVATE release" if record.get("private") == "false"
            else "Differentially private release")
    body = "; ".join(f"{k}={v}" for k, v in record.items() if v != "")
    return f"{head} (inftda-duckdb): {body}"


__all__ = ["FROM_DATA", "MARKER", "PREVIEW_FROM_DATA", "SEEDED", "NotPrivateWarning", "comment",
           "decimal", "not_private_reason", "not_private_texts", "of_release", "provenance",
           "warn_not_private"]
