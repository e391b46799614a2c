"""The check row: what an engine measured before a release, turned into errors in one order.

An engine computes one *check row* per release (DuckDB in its generated SQL, Spark in one job and
on the driver): per hierarchy column its resolved domain (type, size, declared values that are
not valid values of the column's type, duplicates) and, from the private data, the rows with a
NULL or a value outside the domain; per domain table its defects, orphans and the data rows
whose combination it does not list; the rows read and kept. :func:`raise_for_public_checks`
reads only what is public (the request, the catalog, the declared domains);
:func:`raise_for_checks` adds the data checks. The order in which an engine calls them, around
the budget check, is :mod:`.release`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .domains import ColumnDomain, DomainPlan, Nesting, no_domain
from .errors import InputError, InternalError, arg, opt
from .request import ReleaseRequest


def load_checks(checks_json: str) -> dict[str, Any]:
    """The check row as one dict: the data stats (one struct in SQL) spread over the columns.
    An ENUM column's checks leave out what cannot happen (no bad or duplicate labels, no value
    outside its domain): zeros here."""
    checks: dict[str, Any] = json.loads(checks_json)
    for c in checks["columns"]:
        c.setdefault("bad", 0)
        c.setdefault("bad_examples", [])
        c.setdefault("dups", 0)
    stats = checks.pop("stats", None)
    if stats is not None:
        checks["n"], checks["kept"] = stats["n"], stats["kept"]
        checks["nulls_unit"] = stats.get("nulls_unit", 0)
        if "read_unit" in stats:  # a privacy unit: its rows with a unit, before the cap
            checks["read_unit"] = stats["read_unit"]
        if "masks" in stats:  # all-ENUM leaves under one key: [mask of NULL columns, rows]
            masks = stats["masks"] or []
            for i in range(1, len(checks["columns"]) + 1):
                stats[f"nulls{i}"] = sum(rows for mask, rows in masks if mask >> (i - 1) & 1)
        for i, c in enumerate(checks["columns"], 1):
            c.update(nulls=stats[f"nulls{i}"], unknown=stats.get(f"unknown{i}", 0),
                     examples=stats.get(f"examples{i}") or [])
    return checks


def raise_for_checks(request: ReleaseRequest, plan: DomainPlan, checks: Mapping[str, Any]) -> int:
    """The public checks, then the data checks, of a loaded check row (:func:`load_checks`);
    returns n, the rows kept. For a preview (every check at once); a release takes them in
    :func:`inftda_duckdb.core.release.check`'s order, around its budget check."""
    raise_for_public_checks(request, plan, checks)
    return raise_for_data_checks(request, plan, checks)


def raise_for_data_checks(request: ReleaseRequest, plan: DomainPlan,
                          checks: Mapping[str, Any]) -> int:
    """The checks that read the private data (NULLs, values outside the declared domains or
    domain tables, NULL privacy units) as an InputError; returns n, the rows kept. Data
    problems are only errors with ``unknown := 'error'``; with 'drop' those rows were dropped
    when the check row was computed."""
    if request.unknown == "error" and checks.get("nulls_unit"):
        raise InputError(
            f"{arg('privacy_unit')} {request.privacy_unit!r} of {request.source} is NULL in "
            f"{checks['nulls_unit']} rows: they cannot be told apart as units. Fix: filter "
            f"them out or fill them (e.g. one unit per row) in a view, or pass "
            f"{opt('unknown', 'drop')} with {opt('neighbours', 'add_remove')} to drop them"
        )
    if request.unknown == "error" and "n" in checks:
        for col, dom, c in zip(request.columns, plan.columns, checks["columns"], strict=True):
            _check_data(request, col, dom, c)
        for nest, c in zip(plan.nestings, checks["nestings"], strict=True):
            if c["outside"]:
                names = ", ".join(request.columns[k] for k in nest.levels)
                raise InputError(
                    f"{c['outside']} rows of {request.source} have a combination of ({names}) "
                    f"that domain table {'.'.join(nest.table)} does not list (e.g. "
                    f"{c['outside_examples']}). Fix: add the combinations to the domain table, "
                    "filter or map those rows in a view, or pass "
                    f"{opt('unknown', 'drop')} with {opt('neighbours', 'add_remove')}"
                )
    return int(checks.get("kept", 0))


def raise_for_public_checks(request: ReleaseRequest, plan: DomainPlan,
                            checks: Mapping[str, Any]) -> None:
    """The checks of the check row that read only the request, the catalog and the public
    domains (never the private data): a TEMP namesake, each level's declared domain, each
    domain table."""
    if not plan.columns:
        raise InternalError("empty domain plan")
    if checks.get("shadow"):
        raise InputError(
            f"source {request.source!r} names two objects: the TEMP table or view "
            f"temp.main.{plan.shadow} (which the statement would read) and "
            f"{'.'.join(plan.source)} (resolved when the release was planned); nothing was "
            f"charged. Fix: qualify the name, e.g. 'temp.main.{plan.shadow}' or "
            f"'{'.'.join(plan.source)}'"
        )
    for col, dom, c in zip(request.columns, plan.columns, checks["columns"], strict=True):
        _check_domain(col, dom, c)
    for nest, c in zip(plan.nestings, checks["nestings"], strict=True):
        _check_nesting(request, nest, c)


def _check_domain(col: str, dom: ColumnDomain, c: Mapping[str, Any]) -> None:
    if dom.kind == "enum" and not str(c["type"]).startswith("ENUM("):
        raise no_domain(col, str(c["type"]))
    if c["bad"]:
        where = "domains" if dom.kind == "list" else "its domain table"
        raise InputError(
            f"{c['bad']} values declared for column {col!r} in {where} are not valid "
            f"{c['type']} values (e.g. {c['bad_examples']}). Fix: declare values of the "
            "column's type"
        )
    if c["dups"]:
        raise InputError(
            f"the domain of column {col!r} lists {c['dups']} values twice once converted to "
            f"{c['type']}. Fix: list each value once"
        )
    if c["size"] == 0 and dom.kind != "data":
        raise InputError(f"the domain of column {col!r} is empty. Fix: declare its values")
    if dom.size is not None and c["size"] != dom.size:
        raise InputError(
            f"the domain of column {col!r} has {c['size']} values, but had {dom.size} when the "
            "statement was planned (the column's type changed in between). Fix: run the "
            "statement again"
        )


def _check_nesting(request: ReleaseRequest, nest: Nesting, c: Mapping[str, Any]) -> None:
    table = ".".join(nest.table)
    if c["defects"]:
        raise InputError(
            f"domain table {table} has {c['defects']} rows with a NULL or a value outside the "
            f"domains of ({', '.join(nest.names)}) (e.g. {c['defect_examples']}). Fix: correct "
            "or remove those rows of the domain table"
        )
    if c["orphans"]:
        first = request.columns[nest.levels[0]]
        raise InputError(
            f"{c['orphans']} declared values of column {first!r} have no row in domain table "
            f"{table} (e.g. {c['orphan_examples']}), so they would have no children. Fix: add "
            "rows for them to the domain table or remove them from the domain"
        )


def _check_data(request: ReleaseRequest, col: str, dom: ColumnDomain,
                c: Mapping[str, Any]) -> None:
    fix_drop = f"or pass {opt('unknown', 'drop')} with {opt('neighbours', 'add_remove')}"
    if c["nulls"]:
        raise InputError(
            f"column {col!r} of {request.source} is NULL in {c['nulls']} rows. Fix: filter "
            f"them out or map NULL to a declared value in a view, {fix_drop}"
        )
    if c["unknown"]:
        raise InputError(
            f"column {col!r} of {request.source} has {c['unknown']} rows with values outside "
            f"its declared domain (e.g. {c['examples']}). Fix: declare those values, filter "
            f"or map them in a view, {fix_drop}"
        )
