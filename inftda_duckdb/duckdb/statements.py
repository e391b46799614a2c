"""The release and preview statements, each with a fresh capability token minted for its spec.

The Python API renders them with :func:`rendered` and :func:`preview_rendered`. From SQL, the
table macros call :func:`release_sql` / :func:`preview_sql` at bind time (DuckDB's Python API
has no table functions): side-effect-free generators that read only the request and the catalog,
never the data, and return the statement's SQL (``SELECT * FROM query(<SQL>)``). In public-facing
mode a release's refusals and its budget are checked there, before DuckDB reads any data.
"""

from __future__ import annotations

import json
from typing import Any

from ..core import planning
from ..core.errors import InputError, speaks
from ..core.release import charge_fields
from ..core.request import ReleaseRequest, from_json
from . import allocator, arguments, capabilities, disclosure
from .catalog import Where
from .domain import DomainPlan, plan_domains
from .sqlgen import UdfNames, preview_spec_json, render_preview, render_release, spec_json


def preview_rendered(request: ReleaseRequest, plan: DomainPlan, names: UdfNames, beta: float,
                     report: float, origin: str = "sql") -> str:
    """The preview statement, with a capability token minted for it (``origin``: the interface
    that asked, 'sql' or 'python')."""
    token = capabilities.new()
    capabilities.mint(token, preview_spec_json(request, plan, beta, report, token, origin), None)
    return render_preview(request, plan, names, beta, report, origin, token)


def rendered(request: ReleaseRequest, plan: DomainPlan, names: UdfNames, origin: str,
             query_id: int | None, charge: Where | None = None,
             limit: int | None = None) -> tuple[str, str]:
    """The release statement and its capability token, minted for it (and, from SQL, for the
    statement ``query_id`` being bound); the statement names the source it charges. With
    DuckDB's ``memory_limit`` (``limit``, bytes) it may come in parts."""
    token = capabilities.new()
    where = (charge or Where.of(plan.source)).to_json()
    capabilities.mint(token, spec_json(request, plan, origin, token, where), query_id, request)
    return render_release(request, plan, names, origin, token, where, limit), token


def _context(data: dict[str, Any]) -> tuple[str, str, str] | None:
    """The caller's (current_database, current_schema, search_path), passed by the macro: the
    bind-time cursor does not share the caller's USE / SET search_path."""
    db = data.pop("current_database", None)
    schema = data.pop("current_schema", None)
    path = data.pop("search_path", None)
    if not isinstance(db, str) or not isinstance(schema, str):
        return None
    return db, schema, str(path or "")


def public_first(con: Any, request: ReleaseRequest, plan: DomainPlan, origin: str, *,
                 session: Any = None, charge: Where | None = None) -> None:
    """Public-facing mode, before DuckDB reads any data (a refused release does not scan its
    source): the mode's refusals, the source (one whose reading could fail on its rows is
    refused: :func:`.disclosure.check_source`) and the budget. From SQL (``origin`` 'sql')
    when the statement is bound, with the macro's ``session``; from Python before the API runs
    its statement (its session is checked when it runs). ``charge``: what an in-memory object
    passed to the Python API is charged to (its caller holds the data: no source check)."""
    if con is None or not disclosure.is_public(con):
        return
    disclosure.admit(con, request, plan, session=session, statement=origin == "sql")
    if charge is None or charge.kind == "table":
        if origin == "sql":
            with con.cursor() as cur:
                disclosure.check_source(con, cur, plan.source)
        else:  # the caller's own connection, idle: it sees its TEMP objects
            disclosure.check_source(con, con, plan.source)
    disclosure.check_budget(con, charge or Where.of(plan.source),
                            charge_fields(request, request.budget.total, origin))


def _cursor(con_ref: Any) -> Any:
    con = con_ref()
    if con is None:
        raise InputError("the connection that loaded inftda_duckdb is closed")
    return con.cursor()


@speaks("sql")
def release_sql(con_ref: Any, names: UdfNames, options: str) -> str:
    """The release statement for the macro's ``options`` (a JSON object of the request and the
    caller's context), on the connection ``con_ref()`` whose UDFs are ``names``."""
    data = arguments.json_object(options, "inftda_release_sql", "options")
    context, session = _context(data), data.pop("session", None)
    query_id = data.pop("query_id", None)
    setting = data.pop("memory_limit", None)  # the macro read it: no query here
    request = from_json(json.dumps(disclosure.defaults(con_ref(), data)))
    with _cursor(con_ref) as cur:
        plan = plan_domains(request, cur, strict=False, context=context)
        limit = allocator.memory_limit(cur if setting is None else str(setting))
    public_first(con_ref(), request, plan, "sql", session=session)
    plan.check_sizes()
    return rendered(request, plan, names, "sql", query_id, limit=limit)[0]


@speaks("sql")
def preview_sql(con_ref: Any, names: UdfNames, options: str) -> str:
    """The preview statement for the macro's ``options``, as :func:`release_sql`."""
    data = arguments.json_object(options, "inftda_preview_sql", "options")
    context, session = _context(data), data.pop("session", None)
    data.pop("query_id", None)
    data.pop("memory_limit", None)
    beta, report = planning.check_beta(data.pop("beta", 0.05)), planning.report_delta(data)
    request = from_json(json.dumps(disclosure.defaults(con_ref(), data)))
    with _cursor(con_ref) as cur:
        plan = plan_domains(request, cur, strict=False, context=context)
    disclosure.admit(con_ref(), request, plan, session=session)
    return preview_rendered(request, plan, names, beta, report)
