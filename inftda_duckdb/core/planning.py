"""What a release will cost and buy, from public information only: the cells of every level, the
split of its budget over the levels, and the per-level preview of Theorem 1's bound.

Every engine plans a release, and answers a preview, here: the cells come from the check row's
public part (each level's domain size and each domain table's node counts, never the data's
counts), so a preview reads no private data (except with ``domain_from_data``, which is marked
not private) and a release's split is fixed before anything is charged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import pyarrow as pa

from . import limits
from .accounting import (
    AUTO,
    INFTDA,
    LEAST_SQUARES,
    REPORT_DELTA,
    BudgetPlan,
    cells_of,
    epsilon_from_rho,
    error_bound,
    joint_bounds,
    noise_terms,
    plan_budget,
)
from .domains import DomainPlan
from .errors import InputError, bad_argument, opt
from .request import ReleaseRequest

PREVIEW_SCHEMA = pa.schema([
    ("level", pa.int32()), ("column", pa.string()), ("domain_size", pa.int64()),
    ("nodes", pa.int64()), ("rho_k", pa.string()), ("sigma2_k", pa.string()),
    ("sigma_k", pa.float64()), ("bound", pa.float64()), ("split", pa.string()),
    ("uniform_bound", pa.float64()), ("auto_rho_k", pa.string()), ("auto_bound", pa.float64()),
    ("beta", pa.float64()), ("epsilon", pa.float64()), ("delta", pa.float64()),
    ("private", pa.bool_()), ("max_cells", pa.int64()), ("estimator", pa.string()),
    ("noised_cells", pa.int64()),
])
"""One row per noised level of a preview (level 0: the noised root), on every engine.
``noised_cells``: the cells the release will noise at that level, where public (every public
cell with ``estimator := 'least_squares'``; NULL for InfTDA: the children of the released
parents, at most ``nodes``)."""


def level_cells(domains: DomainPlan, checks: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """Each level's domain size and its cells (valid prefixes: the product of the free levels'
    sizes times the nested combinations of the domain tables), from the check row's public part
    (the domain sizes, public unless read with ``domain_from_data``, and the domain tables'
    node counts)."""
    sizes = [int(c["size"]) for c in checks["columns"]]
    nest_nodes = [c["nodes"] for c in checks["nestings"]]
    nested = {k: t for t, nest in enumerate(domains.nestings) for k in nest.levels}
    cells, free = [], 1
    seen = [0] * len(domains.nestings)
    for k, size in enumerate(sizes):
        if k in nested:
            seen[nested[k]] += 1
        else:
            free *= size
        total = free
        for t, j in enumerate(seen):
            if j:
                total *= int(nest_nodes[t][j - 1])
        cells.append(max(total, 1))
    return sizes, cells


def budget_plan(request: ReleaseRequest, domains: DomainPlan,
                checks: Mapping[str, Any]) -> BudgetPlan:
    """The release's split of its budget (auto weights read the public cells per level)."""
    return plan_budget(
        request.depth,
        rho=request.rho,
        epsilon=request.epsilon,
        delta=request.delta,
        level_weights=request.level_weights,
        neighbours=request.neighbours,
        max_rows_per_unit=request.max_rows_per_unit,
        noised_root=request.noised_root,
        auto_target=request.auto_target,
        nodes=level_cells(domains, checks)[1],
    )


def check_beta(beta: object) -> float:
    """A preview's ``beta``: a number in (0, 1)."""
    if isinstance(beta, Fraction):
        beta = float(beta)
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not 0 < beta < 1:
        raise bad_argument("beta", beta, "must be a number in (0, 1)",
                           f"pass e.g. {opt('beta', 0.05)}")
    return float(beta)


def report_delta(options: dict[str, Any]) -> float:
    """A preview's delta, taken out of ``options``: with ``epsilon`` the budget's own delta
    (left in ``options``); with ``rho`` only the delta at which the total epsilon is reported
    (default 1e-6; removed from ``options``, which then hold a rho budget)."""
    if options.get("epsilon") is None:
        delta = options.pop("delta", None)
        options["delta"] = None
        delta = REPORT_DELTA if delta is None else delta
    else:
        delta = options.get("delta")
    fix = f"pass e.g. {opt('delta', 1e-6)}"
    if isinstance(delta, Fraction):
        delta = float(delta)
    if isinstance(delta, bool) or not isinstance(delta, int | float | str):
        raise bad_argument("delta", delta, "must be a number in (0, 1)", fix)
    try:
        value = float(delta)
    except ValueError:
        raise bad_argument("delta", delta, "must be a number in (0, 1)", fix) from None
    if not 0 < value < 1:
        raise bad_argument("delta", delta, "must be a number in (0, 1)", fix)
    return value


def preview_rows(request: ReleaseRequest, domains: DomainPlan, checks: Mapping[str, Any],
                 beta: float, delta: float) -> list[dict[str, Any]]:
    """The preview of a release (rows of :data:`PREVIEW_SCHEMA`): per noised level its domain
    size, cells, rho_k and sigma_k (exact and decimal), the bound at ``beta`` of the release's
    estimator (:func:`~inftda_duckdb.core.accounting.error_bound`) under the split in force,
    under the uniform split and under ``level_weights='auto'``, the total epsilon at ``delta``,
    and the cells the estimator noises."""
    plan = budget_plan(request, domains, checks)
    sizes, cells = level_cells(domains, checks)
    total_eps = epsilon_from_rho(plan.rho, delta)
    cap = limits.max_cells()
    rows = []
    every = request.estimator == LEAST_SQUARES
    for row in level_table(None, plan, beta, delta, nodes=cells, estimator=request.estimator):
        level = int(row["level"])
        rows.append({
            "level": level,
            "column": "(root n)" if level == 0 else request.columns[level - 1],
            "domain_size": 1 if level == 0 else sizes[level - 1],
            "nodes": int(row["cells"]),
            "rho_k": str(row["rho_k"]),
            "sigma2_k": str(row["sigma2_k"]),
            "sigma_k": float(row["sigma_k"]),
            "bound": float(row["bound"]),
            "split": row["split"],
            "uniform_bound": _maybe(float, row["uniform_bound"]),
            "auto_rho_k": _maybe(str, row["auto_rho_k"]),
            "auto_bound": _maybe(float, row["auto_bound"]),
            "beta": beta,
            "epsilon": total_eps,
            "delta": delta,
            "private": request.private,
            "max_cells": cap,
            "estimator": request.estimator,
            "noised_cells": int(row["cells"]) if every or level == 0 else None,
        })
    return rows


def preview_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Preview rows as an Arrow table of :data:`PREVIEW_SCHEMA`."""
    return pa.Table.from_pylist(list(rows), schema=PREVIEW_SCHEMA)


def _maybe(kind: Any, value: Any) -> Any:
    return None if value is None else kind(value)


def level_table(
    domain_sizes: Sequence[int] | None,
    plan: BudgetPlan,
    beta: float = 0.05,
    delta: float = 1e-6,
    *,
    nodes: Sequence[int] | None = None,
    paper: bool = False,
    estimator: str = INFTDA,
) -> list[dict[str, Any]]:
    """One row per noised level for a preview: ``level``, ``cells`` (N_l), ``rho_k`` (exact),
    ``epsilon_k`` (that level alone at ``delta``), ``sigma2_k`` (exact), ``sigma_k``, ``noise_k``
    (max |noise| over the level's cells, exceeded w.p. ``<= beta / e``, ``e = d`` or ``d + 1``
    events as for the deepest level) and ``bound`` (:func:`error_bound` at that level; for the
    noised root, level 0, its noise term). With a noised root the first row is the root.

    Beside them: ``split`` (:attr:`BudgetPlan.split_label`), ``uniform_bound`` (the bound under
    the uniform split), ``auto_rho_k`` and ``auto_bound`` (under ``level_weights='auto'`` for the
    plan's own target, else the leaves); None where that split is refused (noise too large).
    Every bound is ``estimator``'s (:func:`error_bound`).
    """
    cells = cells_of(domain_sizes, nodes)
    d = len(cells)
    root = plan.root_sigma2 is not None
    terms = noise_terms(cells, plan, beta, d, paper)
    target = plan.auto_target if plan.split == AUTO else "leaves"
    uniform = _level_bounds(cells, _replan(plan, None, None, cells), beta, paper, estimator)
    auto = _level_bounds(cells, _replan(plan, AUTO, target, cells), beta, paper, estimator)
    rows = []
    for i, (rho_k, bound) in enumerate(_level_bounds(cells, plan, beta, paper, estimator)):
        level = i + 1 - root
        sigma2 = plan.root_sigma2 if level == 0 else plan.level_sigma2[level - 1]
        assert rho_k is not None and sigma2 is not None
        rows.append({
            "level": level,
            "cells": 1 if level == 0 else cells[level - 1],
            "rho_k": rho_k,
            "epsilon_k": epsilon_from_rho(rho_k, delta),
            "sigma2_k": sigma2,
            "sigma_k": math.sqrt(sigma2),
            "noise_k": terms[i],
            "bound": bound,
            "split": plan.split_label,
            "uniform_bound": uniform[i][1],
            "auto_rho_k": auto[i][0],
            "auto_bound": auto[i][1],
        })
    return rows


def _level_bounds(
    cells: list[int], plan: BudgetPlan | None, beta: float, paper: bool, estimator: str
) -> list[tuple[Fraction | None, float | None]]:
    """(rho_k, bound) per noised level (a noised root first: its noise term)."""
    d = len(cells)
    if plan is None:
        return [(None, None)] * (d + 1)
    bounds: list[float] = error_bound(None, None, beta, nodes=cells, plan=plan, paper=paper,
                                      estimator=estimator)
    if plan.root_sigma2 is None:
        return list(zip(plan.level_rho, bounds, strict=True))
    root_term = joint_bounds(cells, plan, beta, d, paper=paper, estimator=estimator)[0]
    return [(plan.root_rho, root_term), *zip(plan.level_rho, bounds, strict=True)]


def _replan(
    plan: BudgetPlan, weights: str | None, target: str | int | None, cells: list[int]
) -> BudgetPlan | None:
    """``plan``'s budget, relation and unit bound split another way (None: refused)."""
    try:
        return plan_budget(
            plan.depth, rho=plan.rho, level_weights=weights, neighbours=plan.neighbours,
            max_rows_per_unit=plan.max_rows_per_unit, auto_target=target, nodes=cells,
            noised_root=plan.root_sigma2 is not None,
        )
    except InputError:
        return None


__all__ = ["PREVIEW_SCHEMA", "budget_plan", "check_beta", "level_cells", "level_table",
           "preview_rows", "preview_table", "report_delta"]
