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
import os
import warnings
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from .._version import __version__
from .accounting import CONVERSION, REPORT_DELTA, epsilon_from_rho
from .request import ReleaseRequest

SIDECAR = ".provenance.json"
"""The suffix of a CSV release's provenance file: ``<file>.provenance.json``."""
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
    plan: str | None = None,
    estimator: str = "inftda",
) -> dict[str, str]:
    """The provenance record of one release, every value a string (metadata formats want text).

    ``epsilon``/``delta``: the budget as the user gave it; without them the epsilon implied by
    ``rho`` is stated at delta = 1e-6. ``plan``: the release's public plan (what its intervals
    need, :mod:`.errorbars`), a JSON text.
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
        "plan": plan or "",
    }


def published(source: str) -> str:
    """A source as a published record names it: a file by its name alone (the curator's
    folders are not published; the ledger keeps the full path, which the budget follows)."""
    kind, sep, rest = source.partition(":")
    path = rest if sep and kind == "file" else source
    if os.path.isabs(path):
        return ("file:" if sep and kind == "file" else "") + os.path.basename(path)
    return source


def of_release(request: ReleaseRequest, *, rho: Fraction, source: str,
               ledger_id: int | None, engine: str, plan: str | None = None) -> dict[str, str]:
    """The provenance record of a release of ``request`` charged ``rho`` to ``source`` (a file
    named by its name alone: :func:`published`; ``plan``: its public plan)."""
    return provenance(
        rho=rho, columns=request.columns, neighbours=request.neighbours, output=request.output,
        source=published(source), seed=request.seed, domain_from_data=request.domain_from_data,
        epsilon=request.epsilon, delta=request.delta, privacy_unit=request.privacy_unit,
        max_rows_per_unit=request.max_rows_per_unit,
        rows_per_unit_public=request.rows_per_unit_public, ledger_id=ledger_id, engine=engine,
        plan=plan,
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


KEYS = ("private", "why", "rho", "rho_decimal", "epsilon", "delta", "conversion", "neighbours",
        "privacy_unit", "max_rows_per_unit", "rows_per_unit_public", "columns", "output",
        "source", "ledger_id", "seed", "domain_from_data", "mechanism", "estimator", "engine",
        "package", "plan")
"""The keys of a record, in the order :func:`provenance` writes them."""
_HEADS = ("Differentially private release", "NOT PRIVATE release")
_BY = " (inftda-duckdb): "


def comment(record: Mapping[str, Any]) -> str:
    """The record as one line of text (a table comment): the verdict first, then key=value."""
    head = _HEADS[1] if record.get("private") == "false" else _HEADS[0]
    body = "; ".join(f"{k}={v}" for k, v in record.items() if v != "")
    return f"{head}{_BY}{body}"


def is_release_comment(text: object) -> bool:
    """Whether a table's comment says it holds a release (:func:`comment` wrote it)."""
    return isinstance(text, str) and any(text.startswith(head + _BY) for head in _HEADS)


def from_comment(text: object) -> dict[str, str] | None:
    """The record a :func:`comment` holds (None: not a release's comment). Values are split at
    ``'; key='`` for the keys of :data:`KEYS` after the one being read, in their order."""
    if not is_release_comment(text):
        return None
    assert isinstance(text, str)
    body, record, at = text.split(_BY, 1)[1], {}, 0
    keys = [k for k in KEYS if body.startswith(f"{k}=") or f"; {k}=" in body]
    for i, key in enumerate(keys):
        start = at + len(key) + 1 if i == 0 else body.find(f"; {key}=", at) + len(key) + 3
        ends = [e for k in keys[i + 1:] if (e := body.find(f"; {k}=", start)) >= 0]
        end = min(ends, default=len(body))
        record[key] = body[start:end]
        at = end
    return record


__all__ = ["FROM_DATA", "KEYS", "MARKER", "PREVIEW_FROM_DATA", "SEEDED", "SIDECAR",
           "NotPrivateWarning", "comment", "decimal", "from_comment", "is_release_comment",
           "not_private_reason", "not_private_texts", "of_release", "provenance", "published",
           "warn_not_private"]
