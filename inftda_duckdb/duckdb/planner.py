"""``inftda_plan(...)`` and ``plan()`` on DuckDB: the rho a target error needs, spending nothing.

A plan is a preview without a budget: the request is parsed with a placeholder rho
(:func:`~inftda_duckdb.core.targets.placeholder`) and previewed as ``inftda_preview`` previews it
(the same public sizes, the same checks, the public-facing mode's rules included), and the
preview's cells per level go to :func:`~inftda_duckdb.core.targets.plan_target`, in one UDF call
over the preview's rows (``inftda_plan_rows_<n>``: public numbers in, public numbers out).
The statement is ``SELECT * FROM query(<SQL>)``, its text rendered at bind time as the preview's.
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from typing import Any

import pyarrow as pa

from ..core import options as option_table
from ..core import planning, targets
from ..core.errors import InputError, speaks
from ..core.identifiers import literal, quote
from ..core.request import PrivacyBudget, ReleaseRequest, from_json, parse_request
from . import disclosure
from .connections import create_macro, register_udfs
from .domain import DomainPlan, plan_domains
from .sqlgen import UdfNames
from .statements import preview_rendered
from .udfs import PREVIEW_TYPE

_SQL = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE"}
PLAN_TYPE = "STRUCT(" + ", ".join(
    f"{quote(f.name)} {_SQL[f.type]}" for f in targets.SCHEMA) + ")[]"


def request_of(con: Any, source: str, columns: object, options: dict[str, Any]
               ) -> tuple[ReleaseRequest, dict[int, float], float, float]:
    """(the request with a placeholder budget, the targets, beta, the reporting delta) of a
    plan's ``options`` (taken out of them: max_error, level, beta, delta)."""
    max_error, level = options.pop("max_error", None), options.pop("level", None)
    beta = planning.check_beta(options.pop("beta", 0.05))
    delta = planning.report_delta(options)
    options.pop("delta", None)
    request = parse_request(source, columns, **disclosure.defaults(con, {**options, "rho": 1}))
    rho = targets.placeholder(request.depth, request.max_rows_per_unit, request.level_weights)
    request = dataclasses.replace(request, budget=PrivacyBudget(rho=rho))
    return request, targets.targets_of(max_error, level, request.columns), beta, delta


def rendered(request: ReleaseRequest, plan: DomainPlan, names: UdfNames, n: int,
             goals: dict[int, float], beta: float, delta: float, origin: str) -> str:
    """The plan statement: the preview's, its rows handed to ``inftda_plan_rows_<n>``."""
    preview = preview_rendered(request, plan, names, beta, delta, origin)
    spec = json.dumps({"request": request.to_json(), "targets": {str(k): x for k, x in
                                                                 goals.items()},
                       "beta": beta, "delta": delta})
    return (f"SELECT p.* FROM (SELECT unnest(inftda_plan_rows_{n}({literal(spec)}, "
            f"(SELECT list(x ORDER BY x.level) FROM ({preview}) AS x))) AS p)")


def plan_rows(spec_text: str, preview: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan's rows (:data:`~inftda_duckdb.core.targets.SCHEMA`) from the preview's."""
    spec = json.loads(spec_text)
    request = from_json(spec["request"])
    levels = sorted((r for r in preview if r["level"] >= 1), key=lambda r: r["level"])
    cells = [int(r["nodes"]) for r in levels]
    sizes = [int(r["domain_size"]) for r in levels]
    planned = targets.plan_request(
        request, cells, {int(k): float(x) for k, x in spec["targets"].items()},
        float(spec["beta"]))
    return targets.rows(planned, request.columns, sizes, cells, float(spec["delta"]))


def register(con: Any, names: UdfNames) -> None:
    """``inftda_plan(source, columns, max_error := ..., level := ..., ...)``: its generator and
    its rows UDF (``names``: the connection's release UDFs, whose preview step it runs)."""
    ref = weakref.ref(con)

    @speaks("sql")
    def generate(options: str) -> str:
        data = json.loads(options)
        context = (data.pop("current_database"), data.pop("current_schema"),
                   str(data.pop("search_path") or ""))
        session = data.pop("session", None)
        live = ref()
        if live is None:
            raise InputError("the connection that loaded inftda_duckdb is closed")
        source, columns = data.pop("source"), data.pop("columns")
        request, goals, beta, delta = request_of(live, source, columns, data)
        with live.cursor() as cur:
            plan = plan_domains(request, cur, strict=False, context=context)
        disclosure.admit(live, request, plan, session=session)
        return rendered(request, plan, names, n, goals, beta, delta, "sql")

    def create(k: int) -> None:
        con.create_function(f"inftda_plan_sql_{k}", generate, ["VARCHAR"], "VARCHAR",
                            side_effects=False)
        con.create_function(f"inftda_plan_rows_{k}", plan_rows, ["VARCHAR", PREVIEW_TYPE],
                            PLAN_TYPE, side_effects=False)

    n = register_udfs(con, "plan", create)
    plan = option_table.PLAN
    create_macro(con, f"""inftda_plan(
    source, columns, {option_table.macro_parameters(plan)}
) AS TABLE SELECT * FROM query(inftda_plan_sql_{n}(to_json({{
    'source': source, 'columns': columns, {option_table.macro_fields(plan)},
    'current_database': current_database(), 'current_schema': current_schema(),
    'search_path': current_setting('search_path'),
    'session': {{'profiling': current_setting('enable_profiling')}}
}})::VARCHAR))""")


__all__ = ["PLAN_TYPE", "plan_rows", "register", "rendered", "request_of"]
