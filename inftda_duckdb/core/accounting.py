"""Privacy accounting: zCDP budgets, the split over levels, noise scales, and Theorem 1's bound.

- ``rho`` (zCDP) <-> ``(epsilon, delta)``: ``epsilon = rho + 2 sqrt(rho ln(1/delta))`` (Bun and
  Steinke 2016, Prop. 1.3), inverted exactly as ``rho = (sqrt(L + epsilon) - sqrt(L))**2`` with
  ``L = ln(1/delta)``, computed in 60-digit decimal arithmetic and rounded *down* to a 20-digit
  rational, so a release never spends more than ``(epsilon, delta)`` allows.
- Level split (paper, Algorithm 1 line 5): ``substitute`` (bounded DP, the paper) noises levels
  ``1..d``; a unit holding at most ``m`` rows moves ``m`` rows from one cell to another, so the L2
  sensitivity of a level is ``sqrt(2) m`` and ``rho_k = Delta**2 / (2 sigma_k**2)`` gives
  ``sigma_k**2 = m**2 / rho_k`` (``d / rho`` for the paper's uniform split, ``m = 1``).
  ``add_remove`` (unbounded DP) also noises the root count ``n``; adding or removing a unit changes
  one cell per level by at most ``m``: ``sigma_k**2 = m**2 / (2 rho_k)`` over ``d + 1`` levels.
- :func:`error_bound`: Theorem 1, corrected to a two-sided tail (see its docstring).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import Any

from .errors import InternalError, bad_argument
from .exact import to_fraction, to_positive_fraction
from .noise import MAX_SIGMA2

__all__ = [
    "CONVERSION",
    "NEIGHBOURS",
    "BudgetPlan",
    "epsilon_from_rho",
    "error_bound",
    "level_table",
    "plan_budget",
    "rho_from_epsilon_delta",
    "total_rho",
]

NEIGHBOURS = ("substitute", "add_remove")
CONVERSION = "bun-steinke-2016"  #: the (epsilon, delta) <-> rho conversion in force (ledger rows)

_PRECISION = 60  # decimal digits of the intermediate arithmetic
_DIGITS = 20  # significant digits kept in a converted rho


def _decimal(value: Fraction) -> Decimal:
    return Decimal(value.numerator) / Decimal(value.denominator)


def _check_delta(delta: object) -> Fraction:
    fix = "pass 0 < delta < 1, e.g. delta := 1e-6"
    value = to_positive_fraction(delta, "delta", fix)
    if value >= 1:
        raise bad_argument("delta", delta, "must be strictly between 0 and 1", fix)
    return value


def rho_from_epsilon_delta(epsilon: object, delta: object) -> Fraction:
    """The largest ``rho`` (rounded down to 20 significant digits) whose zCDP guarantee implies
    ``(epsilon, delta)``-DP: ``rho = (sqrt(L + epsilon) - sqrt(L))**2``, ``L = ln(1/delta)``."""
    eps = to_positive_fraction(epsilon, "epsilon", "pass a positive epsilon, e.g. epsilon := 1")
    dlt = _check_delta(delta)
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        big_l = (1 / _decimal(dlt)).ln()
        rho = ((big_l + _decimal(eps)).sqrt() - big_l.sqrt()) ** 2
        rho *= 1 - Decimal(10) ** (-40)  # margin over the 60-digit rounding error
        quantum = Decimal(10) ** (rho.adjusted() - _DIGITS + 1)
        rounded = rho.quantize(quantum, rounding=ROUND_FLOOR)
    if rounded <= 0:
        raise bad_argument(
            "epsilon", epsilon, f"gives a rho too small to represent at delta = {delta}",
            "pass a larger epsilon",
        )
    return Fraction(rounded)


def _epsilon_decimal(rho: Fraction, delta: Fraction) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        big_l = (1 / _decimal(delta)).ln()
        r = _decimal(rho)
        return r + 2 * (r * big_l).sqrt()


def epsilon_from_rho(rho: object, delta: object) -> float:
    """The ``epsilon`` of ``(epsilon, delta)``-DP implied by ``rho``-zCDP, rounded *up* to a float:
    ``epsilon = rho + 2 sqrt(rho ln(1/delta))``."""
    r = to_positive_fraction(rho, "rho", "pass a positive rho, e.g. rho := 0.5")
    eps = _epsilon_decimal(r, _check_delta(delta))
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        eps *= 1 + Decimal(10) ** (-40)  # margin over the 60-digit rounding error
        result = float(eps)
        if Decimal(result) < eps:
            result = math.nextafter(result, math.inf)
    return result


@dataclass(frozen=True)
class BudgetPlan:
    """How a release spends ``rho``: per level budget and discrete Gaussian variance (exact).

    ``level_rho[k-1]`` and ``level_sigma2[k-1]`` are for level ``k`` (1..d); ``root_rho`` and
    ``root_sigma2`` are set only for ``add_remove``, where the root count is noised too. The parts
    sum to ``rho`` exactly.
    """

    rho: Fraction
    neighbours: str
    max_rows_per_unit: int
    depth: int
    root_rho: Fraction | None
    root_sigma2: Fraction | None
    level_rho: tuple[Fraction, ...]
    level_sigma2: tuple[Fraction, ...]

    @property
    def sensitivity2(self) -> int:
        """Squared L2 sensitivity of one level's counts: ``2 m**2`` (substitute) or ``m**2``."""
        m2 = self.max_rows_per_unit**2
        return 2 * m2 if self.neighbours == "substitute" else m2


def plan_budget(
    depth: int,
    *,
    rho: object = None,
    epsilon: object = None,
    delta: object = None,
    level_weights: Sequence[object] | None = None,
    neighbours: str = "substitute",
    max_rows_per_unit: int = 1,
) -> BudgetPlan:
    """Split a budget over the levels (paper, Algorithm 1 line 5: ``rho / d`` per level).

    Give exactly one of ``rho`` or ``epsilon`` with ``delta``. ``level_weights`` (``depth``
    positive numbers, or ``depth + 1`` with ``add_remove``, the root first) gives
    ``rho_k = rho * w_k / sum(w)`` exactly; the default is uniform.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise bad_argument("depth", depth, "must be an integer >= 1", "pass the number of columns")
    if neighbours not in NEIGHBOURS:
        raise bad_argument(
            "neighbours", neighbours, f"must be one of {NEIGHBOURS}",
            "use 'substitute' (bounded DP, n public) or 'add_remove' (unbounded DP)",
        )
    m = max_rows_per_unit
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise bad_argument(
            "max_rows_per_unit", m, "must be an integer >= 1", "pass e.g. max_rows_per_unit := 1"
        )
    total = total_rho(rho, epsilon, delta)
    parts = depth + 1 if neighbours == "add_remove" else depth
    weights = _weights(level_weights, parts, neighbours)
    shares = tuple(total * w / sum(weights) for w in weights)
    if sum(shares) != total:
        raise InternalError(f"level budgets {shares} do not sum to rho = {total}")
    factor = 1 if neighbours == "substitute" else 2
    sigma2 = tuple(Fraction(m * m) / (factor * s) for s in shares)
    if max(sigma2) > MAX_SIGMA2:  # refused here, before anything is charged
        raise bad_argument(
            "rho", str(total),
            f"is too small: a level's noise variance sigma2 would be {float(max(sigma2)):.3g}, "
            f"above the sampler's limit {MAX_SIGMA2} (noise this large drowns every count)",
            "pass a larger budget, fewer levels, or a smaller max_rows_per_unit",
        )  # fmt: skip
    root = neighbours == "add_remove"
    return BudgetPlan(
        rho=total, neighbours=neighbours, max_rows_per_unit=m, depth=depth,
        root_rho=shares[0] if root else None, root_sigma2=sigma2[0] if root else None,
        level_rho=shares[1:] if root else shares, level_sigma2=sigma2[1:] if root else sigma2,
    )


def total_rho(rho: object, epsilon: object, delta: object) -> Fraction:
    """The total budget as an exact rho: ``rho``, or (``epsilon``, ``delta``) converted; exactly
    one of the two forms, else an InputError naming what is missing or extra."""
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise bad_argument(
                "rho", rho, "must not be combined with epsilon/delta",
                "give either rho, or epsilon with delta",
            )
        return to_positive_fraction(rho, "rho", "pass a positive finite rho, e.g. rho := 0.5")
    if epsilon is None or delta is None:
        missing = "delta" if epsilon is not None else "epsilon" if delta is not None else "rho"
        raise bad_argument(
            missing, None, "is required", "give either rho, or epsilon with delta (e.g. 1, 1e-6)"
        )
    return rho_from_epsilon_delta(epsilon, delta)


def _weights(level_weights: Sequence[object] | None, parts: int, neighbours: str) -> list[Fraction]:
    if level_weights is None:
        return [Fraction(1)] * parts
    fix = f"pass {parts} positive weights" + (" (root first)" if neighbours == "add_remove" else "")
    if isinstance(level_weights, str | bytes) or not isinstance(level_weights, Sequence):
        raise bad_argument("level_weights", level_weights, "must be a list of numbers", fix)
    if len(level_weights) != parts:
        raise bad_argument(
            "level_weights", list(level_weights),
            f"must have {parts} entries with neighbours={neighbours!r}", fix,
        )
    return [
        to_positive_fraction(w, f"level_weights[{i}]", fix) for i, w in enumerate(level_weights)
    ]


# ---------------------------------------------------------------------------------------------
# Theorem 1.


def _cells(domain_sizes: Sequence[int] | None, nodes: Sequence[int] | None) -> list[int]:
    """N_l, the number of noised cells at level l = 1..d."""
    fix = "pass positive integers, one per hierarchy column"
    if nodes is not None:
        values, name = list(nodes), "nodes"
        if domain_sizes is not None and len(domain_sizes) != len(values):
            raise bad_argument("nodes", values, "must have one entry per domain size", fix)
    elif domain_sizes is not None:
        values, name = list(domain_sizes), "domain_sizes"
    else:
        raise bad_argument("domain_sizes", None, "is required (or nodes)", fix)
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise bad_argument(name, values, "must be a non-empty list of integers >= 1", fix)
    if nodes is not None:
        return values
    return [math.prod(values[:i]) for i in range(1, len(values) + 1)]


def _resolve_plan(depth: int, rho: object, plan: BudgetPlan | None) -> BudgetPlan:
    if plan is None:
        return plan_budget(depth, rho=rho)
    if plan.depth != depth:
        raise bad_argument(
            "plan", f"depth {plan.depth}", f"must match the {depth} levels given",
            "plan the budget with plan_budget(len(domain_sizes), ...)",
        )
    if rho is not None and to_fraction(rho, "rho", "omit rho when passing a plan") != plan.rho:
        raise bad_argument("rho", rho, f"differs from plan.rho = {plan.rho}", "omit rho")
    return plan


def _terms(cells: list[int], plan: BudgetPlan, beta: float, k: int, paper: bool) -> list[float]:
    """Max-|noise| bounds for levels 0 (add_remove root) and 1..k, each failing w.p. beta/events."""
    events = k + (plan.root_sigma2 is not None)
    two = 1 if paper else 2  # Pr[|Z| >= t] <= 2 exp(-t^2 / (2 sigma^2)); the paper drops the 2.
    out = []
    if plan.root_sigma2 is not None:
        out.append(math.sqrt(2 * float(plan.root_sigma2) * math.log(two * events / beta)))
    for level in range(1, k + 1):
        s2 = float(plan.level_sigma2[level - 1])
        out.append(math.sqrt(2 * s2 * math.log(two * events * cells[level - 1] / beta)))
    return out


def error_bound(
    domain_sizes: Sequence[int] | None,
    rho: object = None,
    beta: float = 0.05,
    *,
    nodes: Sequence[int] | None = None,
    plan: BudgetPlan | None = None,
    paper: bool = False,
) -> list[float]:
    """Theorem 1: for each level ``k = 1..d``, w.p. ``>= 1 - beta`` the max error over level k is
    at most ``bound[k-1]`` (each ``k`` separately, not all levels at once).

    Substitute: ``sum_{l<=k} sqrt(8 sigma_l**2 ln(2 k N_l / beta))``, ``N_l = prod_{i<=l} |X_i|``
    (or ``nodes[l-1]``, the cells at level l of a nested hierarchy), ``sigma_l**2`` from ``plan``
    (default: uniform substitute split of ``rho``, ``sigma**2 = d / rho`` as in the paper).
    The paper's proof applies the one-sided tail ``Pr[Z >= t] <= exp(-t**2 / 2 sigma**2)`` to
    ``|Z|``; the correct two-sided union bound needs the factor 2 inside the log, used here.
    ``paper=True`` gives the printed formula ``ln(k N_l / beta)``.

    add_remove: the root is noised (released as ``max(0, n + Z_0)``, so ``|err_0| <= |Z_0|``; it
    enters the recursion once), giving a
    union bound over ``k + 1`` events, each failing w.p. ``beta / (k + 1)``:
    ``sqrt(2 sigma_0**2 ln(2 (k+1) / beta)) + sum_{l<=k} sqrt(8 sigma_l**2 ln(2 (k+1) N_l / beta))``
    (``paper=True`` drops the 2s inside the logs).
    """
    cells = _cells(domain_sizes, nodes)
    if not (isinstance(beta, int | float) and 0 < beta < 1):
        raise bad_argument("beta", beta, "must be strictly between 0 and 1", "pass e.g. beta=0.05")
    resolved = _resolve_plan(len(cells), rho, plan)
    bounds = []
    for k in range(1, len(cells) + 1):
        terms = _terms(cells, resolved, beta, k, paper)
        if resolved.root_sigma2 is None:
            bounds.append(2 * sum(terms))
        else:  # the root error enters the recursion once, each level's noise twice
            bounds.append(terms[0] + 2 * sum(terms[1:]))
    return bounds


def level_table(
    domain_sizes: Sequence[int] | None,
    plan: BudgetPlan,
    beta: float = 0.05,
    delta: float = 1e-6,
    *,
    nodes: Sequence[int] | None = None,
    paper: bool = False,
) -> list[dict[str, Any]]:
    """One row per noised level for a preview: ``level``, ``cells`` (N_l), ``rho_k`` (exact),
    ``epsilon_k`` (that level alone at ``delta``), ``sigma2_k`` (exact), ``sigma_k``, ``noise_k``
    (max |noise| over the level's cells, exceeded w.p. ``<= beta / e``, ``e = d`` or ``d + 1``
    events as for the deepest level) and ``bound`` (:func:`error_bound` at that level; for the
    add_remove root, level 0, its noise term). With ``add_remove`` the first row is the root.
    """
    cells = _cells(domain_sizes, nodes)
    bounds = error_bound(domain_sizes, None, beta, nodes=nodes, plan=plan, paper=paper)
    d = len(cells)
    root = plan.root_sigma2 is not None
    terms = _terms(cells, plan, beta, d, paper)
    rows = []
    levels = [0, *range(1, d + 1)] if root else list(range(1, d + 1))
    for i, level in enumerate(levels):
        rho_k = plan.root_rho if level == 0 else plan.level_rho[level - 1]
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
            "bound": terms[0] if level == 0 else bounds[level - 1],
        })
    return rows
