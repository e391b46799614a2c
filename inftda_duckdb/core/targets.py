"""Planning for a target error: the smallest rho whose Theorem 1 bound meets it.

Given the public cells of a release (the same public sizes a preview reads) and a target: at most
``X`` at level ``k`` (or one target per level), :func:`plan_target` returns the smallest total
rho (exact, as the ledger would charge it) for which each targeted level's bound (Theorem 1 at
``beta``, each level alone, as the preview and ``intervals(level=k)`` report it) is at most its
target, under the best of the splits it considers: the one the caller fixed
(``level_weights``: a list, or ``'auto'`` with its ``auto_target``), else the uniform split and
``'auto'`` aimed at each targeted level (and at ``'all'`` for several).

Why it is exact and small: for a split whose parts are fixed fractions of rho (uniform, given
weights), every noise variance scales as ``1 / rho``, so every bound is ``c_k / sqrt(rho)``
(:func:`~.accounting.joint_bounds`) and the least rho is ``max_k (c_k / X_k)**2``. That value is
rounded *up* to 6 significant digits (at most 0.001% above it) and checked with the exact plan at
that rho. ``estimator='least_squares'`` adds the deterministic rounding term ``r_k``
(:func:`~.accounting.rounding`), so the least rho is ``max_k (c_k / (X_k - r_k))**2``, and a
target at or below ``r_k`` cannot be met. ``'auto'`` shares are each cut to 6 significant
digits, so the check may move the rho up by a few steps of its last digit. Nothing is read
but the cells; nothing is spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pyarrow as pa

from .accounting import (
    AUTO,
    INFTDA,
    BudgetPlan,
    auto_level,
    epsilon_from_rho,
    joint_bounds,
    plan_budget,
    rounding,
)
from .errorbars import level_of
from .errors import InputError, InternalError, bad_argument, opt
from .noise import MAX_SIGMA2

DIGITS = 6  #: significant digits of a planned rho (rounded up)
MAX_RHO = Fraction(10) ** 300  #: the largest rho the conversions handle


SCHEMA = pa.schema([
    ("level", pa.int32()), ("column", pa.string()), ("domain_size", pa.int64()),
    ("nodes", pa.int64()), ("rho", pa.string()), ("rho_k", pa.string()),
    ("sigma_k", pa.float64()), ("bound", pa.float64()), ("max_error", pa.float64()),
    ("split", pa.string()), ("beta", pa.float64()), ("epsilon", pa.float64()),
    ("delta", pa.float64()), ("candidates", pa.string()), ("estimator", pa.string()),
])
"""One row per noised level of a plan (:func:`rows`), on every engine."""


def placeholder(depth: int, max_rows_per_unit: int, level_weights: object) -> Fraction:
    """A rho at which a preview of the request plans without refusing (its noise within the
    sampler's limit), so a plan can read the request's public cells through the preview."""
    rho = Fraction(max_rows_per_unit**2 * 10**6 * (depth + 1))
    if isinstance(level_weights, Sequence) and not isinstance(level_weights, str) and \
            level_weights:
        w = [Fraction(x) for x in level_weights]
        rho *= sum(w) / min(w)
    return rho


@dataclass(frozen=True)
class Planned:
    """A plan for a target: the rho, its split (``budget``), every level's bound at ``beta``
    (each level alone), the targets, and the rho each split considered would need (None: that
    split was refused, its noise too large for the sampler)."""

    rho: Fraction
    budget: BudgetPlan
    bounds: tuple[float, ...]
    targets: Mapping[int, float]
    beta: float
    candidates: Mapping[str, Fraction | None]
    estimator: str = INFTDA

    @property
    def level_weights(self) -> list[Fraction]:
        """The split as ``level_weights`` a release takes (its exact parts; root first when
        the total is noised): a release with these and :attr:`rho` spends exactly this plan."""
        root = [] if self.budget.root_rho is None else [self.budget.root_rho]
        return [*root, *self.budget.level_rho]


def targets_of(max_error: object, level: object, columns: Sequence[str]) -> dict[int, float]:
    """``{level: X}`` from ``max_error`` (a number, with ``level``: default the leaves; or one
    number per level, None for a level without a target) and ``level``."""
    d = len(columns)
    fix = f"pass e.g. {opt('max_error', 50)} with {opt('level', d)}"
    if isinstance(max_error, list | tuple):
        if level is not None:
            raise bad_argument("level", level, "goes with one max_error, not a list of them",
                               "leave level out: the list gives one target per level")
        if len(max_error) != d or all(x is None for x in max_error):
            raise bad_argument("max_error", list(max_error), f"must list {d} targets, one per "
                               "level (NULL for a level without one), at least one given",
                               f"pass e.g. {opt('max_error', [None] * (d - 1) + [50])}")
        return {k: _positive(x, f"max_error[{k - 1}]", fix)
                for k, x in enumerate(max_error, start=1) if x is not None}
    if max_error is None:
        raise bad_argument("max_error", None, "is required: the largest error to plan for",
                           fix)
    return {d if level is None else level_of(level, columns): _positive(max_error, "max_error",
                                                                          fix)}


def _positive(value: object, name: str, fix: str) -> float:
    number: object = value
    if isinstance(value, Fraction):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(Fraction(value.strip()))
        except (ValueError, ZeroDivisionError):
            number = None
    if isinstance(number, bool) or not isinstance(number, int | float) or not (
            math.isfinite(number) and number > 0):
        raise bad_argument(name, value, "must be a positive finite number (an error, in "
                           "counts)", fix)
    return float(number)


def _round_up(x: Fraction) -> Fraction:
    """The least number of ``DIGITS`` significant digits that is >= ``x`` (> 0), exactly."""
    quantum = _quantum(x)
    return -(-x // quantum) * quantum


def plan_target(
    cells: Sequence[int],
    targets: Mapping[int, float],
    beta: float,
    *,
    neighbours: str = "substitute",
    max_rows_per_unit: int = 1,
    noised_root: bool | None = None,
    level_weights: Sequence[object] | str | None = None,
    auto_target: object = None,
    estimator: str = INFTDA,
) -> Planned:
    """The smallest rho meeting ``targets`` (``{level: max error}``) at ``beta`` under the best
    split considered (module docstring), from the cells ``N_1..N_d`` only."""
    d = len(cells)
    common: dict[str, Any] = dict(neighbours=neighbours, max_rows_per_unit=max_rows_per_unit,
                                  noised_root=noised_root, nodes=list(cells))
    if level_weights is None:
        aims = list(dict.fromkeys([auto_level(k, d) for k in sorted(targets)]
                                  + (["all"] if len(targets) > 1 else [])))
        splits: list[dict[str, Any]] = [{"level_weights": None}] + [
            {"level_weights": AUTO, "auto_target": a} for a in aims]
    elif isinstance(level_weights, str) and level_weights == AUTO:
        splits = [{"level_weights": AUTO, "auto_target": auto_target}]
    else:
        splits = [{"level_weights": level_weights}]
    found: dict[str, Fraction | None] = {}
    best: tuple[Fraction, BudgetPlan] | None = None
    limit: Fraction | None = None
    for split in splits:
        probe = _probe(d, common, split)
        rho = _least(cells, targets, beta, probe, lambda r, s=split: plan_budget(
            d, rho=r, **common, **s), estimator)
        if rho is None:
            low = _sampler_floor(probe)
            limit = low if limit is None else min(limit, low)
            found[probe.split_label] = None
            continue
        found[probe.split_label] = rho[0]
        if best is None or rho[0] < best[0]:
            best = rho
    if best is None:
        assert limit is not None
        k, x = next(iter(targets.items()))
        raise bad_argument(
            "max_error", x, f"is met by any release: even the smallest budget a release accepts "
            f"({opt('rho', limit)}) keeps the bound at level {k} below it (a smaller rho would "
            "need noise above the sampler's limit)",
            f"release with {opt('rho', limit)}, or ask for a smaller max_error")
    total, budget = best
    bounds = tuple(joint_bounds(cells, budget, beta, k, estimator=estimator)[k]
                   for k in range(1, d + 1))
    return Planned(total, budget, bounds, dict(targets), beta, found, estimator)


def plan_request(request: Any, cells: Sequence[int], targets: Mapping[int, float],
                 beta: float) -> Planned:
    """:func:`plan_target` for the options of a
    :class:`~inftda_duckdb.core.request.ReleaseRequest` (every engine plans through here)."""
    weights = request.level_weights
    return plan_target(
        cells, targets, beta, neighbours=request.neighbours,
        max_rows_per_unit=request.max_rows_per_unit, noised_root=request.noised_root,
        level_weights=weights if weights is None or isinstance(weights, str) else list(weights),
        auto_target=request.auto_target, estimator=request.estimator)


def _probe(d: int, common: Mapping[str, Any], split: Mapping[str, Any]) -> BudgetPlan:
    """The split's plan at a rho large enough for the sampler (variances scale as 1 / rho)."""
    m = int(common["max_rows_per_unit"])
    rho = Fraction(m * m * 10**6)
    for _ in range(8):
        try:
            return plan_budget(d, rho=rho, **common, **split)
        except InputError as exc:
            if "too small" not in str(exc):
                raise
            rho *= 10**10
    raise InternalError(f"no rho gives the split {dict(split)} noise the sampler takes")


def _quantum(x: Fraction) -> Fraction:
    """The unit of the last of ``DIGITS`` significant digits of ``x`` (> 0)."""
    e = len(str(x.numerator)) - len(str(x.denominator))
    if Fraction(10) ** e > x:
        e -= 1
    return Fraction(10) ** (e - DIGITS + 1)


def _least(cells: Sequence[int], targets: Mapping[int, float], beta: float, probe: BudgetPlan,
           at: Any, estimator: str = INFTDA) -> tuple[Fraction, BudgetPlan] | None:
    """The least 6-digit rho whose plan (``at(rho)``) meets every target (None: that rho's
    noise is above the sampler's limit)."""
    for k, x in targets.items():
        if x <= rounding(k, probe, estimator):
            raise bad_argument(
                "max_error", x, f"is at most the rounding term of the {estimator!r} bound at "
                f"level {k} ({rounding(k, probe, estimator):.6g}): no rho meets it",
                f"ask for a larger max_error, or plan with {opt('estimator', INFTDA)}")
    need = max((joint_bounds(cells, probe, beta, k)[k] / (x - rounding(k, probe, estimator)))
               ** 2 for k, x in targets.items())
    rho = _round_up(probe.rho * Fraction(need))
    if rho > MAX_RHO:
        raise bad_argument("max_error", min(targets.values()), f"needs a rho above {MAX_RHO:.0e}"
                           " (beyond what the privacy accounting represents)",
                           "ask for a larger max_error")
    for _ in range(1000):
        try:
            plan = at(rho)
        except InputError:  # the noise of this rho is above the sampler's limit
            return None
        if all(joint_bounds(cells, plan, beta, k, estimator=estimator)[k] <= x
               for k, x in targets.items()):
            return rho, plan
        rho += _quantum(rho)
    raise InternalError(f"no rho near {float(rho):.6g} meets the targets {dict(targets)}")


def _sampler_floor(probe: BudgetPlan) -> Fraction:
    """The least 6-digit rho at which ``probe``'s split keeps every noise variance within the
    sampler's limit (variances scale as 1 / rho)."""
    sigma2 = [*probe.level_sigma2, *([] if probe.root_sigma2 is None else [probe.root_sigma2])]
    return _round_up(max(sigma2) * probe.rho / MAX_SIGMA2)


def rows(planned: Planned, columns: Sequence[str], sizes: Sequence[int], cells: Sequence[int],
         delta: float) -> list[dict[str, Any]]:
    """One row per noised level (a noised root first, level 0): what a plan says, as the SQL
    function and the command line show it."""
    b = planned.budget
    root = b.root_sigma2 is not None
    eps = epsilon_from_rho(planned.rho, delta)
    out = []
    for level in range(0 if root else 1, len(columns) + 1):
        share = b.root_rho if level == 0 else b.level_rho[level - 1]
        sigma2 = b.root_sigma2 if level == 0 else b.level_sigma2[level - 1]
        assert share is not None and sigma2 is not None
        bound = (joint_bounds(cells, b, planned.beta, 0, estimator=planned.estimator)[0]
                 if level == 0
                 else planned.bounds[level - 1])
        out.append({
            "level": level, "column": "(root n)" if level == 0 else columns[level - 1],
            "domain_size": 1 if level == 0 else sizes[level - 1],
            "nodes": 1 if level == 0 else cells[level - 1],
            "rho": str(planned.rho), "rho_k": str(share), "sigma_k": math.sqrt(sigma2),
            "bound": bound, "max_error": planned.targets.get(level),
            "split": b.split_label, "beta": planned.beta, "epsilon": eps, "delta": delta,
            "candidates": "; ".join(f"{k}: {'refused' if v is None else v}"
                                    for k, v in planned.candidates.items()),
            "estimator": planned.estimator,
        })
    return out


def as_mapping(table: pa.Table) -> dict[str, Any]:
    """A plan's rows (:data:`SCHEMA`) as the mapping the Python APIs return: ``rho`` (exact),
    ``epsilon`` at ``delta``, ``level_weights`` (exact parts, root first when noised),
    ``split``, ``bounds`` (per level 1..d, each level alone, at ``beta``), ``max_error`` (per
    targeted level), ``release_options`` (pass them to a release: ``rho`` and
    ``level_weights``), ``candidates`` (each split considered: the rho it needs, None where
    refused) and the ``rows`` themselves."""
    rows = table.to_pylist()
    first = rows[0]
    rho = Fraction(first["rho"])
    weights = [Fraction(r["rho_k"]) for r in rows]
    return {
        "rho": rho, "epsilon": first["epsilon"], "delta": first["delta"],
        "level_weights": weights, "split": first["split"], "beta": first["beta"],
        "bounds": {r["level"]: r["bound"] for r in rows if r["level"] > 0},
        "max_error": {r["level"]: r["max_error"] for r in rows if r["max_error"] is not None},
        "release_options": {"rho": rho, "level_weights": weights,
                            **({} if first["estimator"] == INFTDA
                               else {"estimator": first["estimator"]})},
        "candidates": {name: None if value == "refused" else Fraction(value)
                       for name, value in (c.rsplit(": ", 1)
                                           for c in first["candidates"].split("; "))},
        "rows": table,
    }


__all__ = ["DIGITS", "SCHEMA", "Planned", "as_mapping", "placeholder", "plan_request",
           "plan_target", "rows", "targets_of"]
