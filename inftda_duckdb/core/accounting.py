"""Privacy accounting: zCDP budgets, the split over levels, noise scales, and Theorem 1's bound.

- ``rho`` (zCDP) <-> ``(epsilon, delta)``: :data:`CONVERSION` names the conversion in force,
  Canonne, Kamath and Steinke 2020 (``epsilon = inf over a > 1 of a rho + (ln(1/delta) +
  (a - 1) ln(1 - 1/a) - ln a) / (a - 1)``, never worse than Bun and Steinke 2016's ``rho +
  2 sqrt(rho ln(1/delta))``, which stays available by name). Bounded exactly (:mod:`.conversion`):
  rho is rounded *down* to a 20-digit rational and epsilon *up*, so a release never spends more
  than ``(epsilon, delta)`` allows.
- Level split (paper, Algorithm 1 line 5): ``substitute`` (bounded DP, the paper) noises levels
  ``1..d``; a unit holding at most ``m`` rows moves ``m`` rows from one cell to another, so the L2
  sensitivity of a level is ``sqrt(2) m`` and ``rho_k = Delta**2 / (2 sigma_k**2)`` gives
  ``sigma_k**2 = m**2 / rho_k`` (``d / rho`` for the paper's uniform split, ``m = 1``).
  ``add_remove`` (unbounded DP) also noises the root count ``n``; adding or removing a unit changes
  one cell per level by at most ``m``: ``sigma_k**2 = m**2 / (2 rho_k)`` over ``d + 1`` levels.
  ``substitute`` with a privacy unit (``noised_root``): replacing all rows of one unit by any
  others, at most ``m`` kept, including none, moves at most ``m`` rows out of cells and ``m``
  into cells (level sensitivity ``sqrt(2) m``, as above) and changes the capped total
  ``n' = sum_u min(r_u, m)`` by at most ``m``: the root is noised with
  ``sigma_0**2 = m**2 / (2 rho_0)``, the budget split over ``d + 1`` parts.
- :func:`error_bound`: Theorem 1, corrected to a two-sided tail (see its docstring), for either
  estimator (:data:`ESTIMATORS`): ``'least_squares'`` adds its rounding term.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .conversion import CKS, CONVERSIONS, epsilon_upper, rho_lower
from .errors import InternalError, bad_argument, opt
from .exact import to_fraction, to_positive_fraction
from .noise import MAX_SIGMA2

__all__ = [
    "ALIASES",
    "CONVERSION",
    "CONVERSIONS",
    "ESTIMATORS",
    "ETA",
    "NEIGHBOURS",
    "REPORT_DELTA",
    "BudgetPlan",
    "auto_level",
    "auto_shares",
    "cells_of",
    "check_estimator",
    "epsilon_from_rho",
    "error_bound",
    "joint_bounds",
    "noise_terms",
    "plan_budget",
    "rho_from_epsilon_delta",
    "rounding",
    "total_rho",
]

NEIGHBOURS = ("substitute", "add_remove")
ALIASES = {"bounded": "substitute", "unbounded": "add_remove"}
"""The usual names of the two neighbouring relations (bounded / unbounded DP), accepted too."""
AUTO = "auto"  #: level_weights that minimise Theorem 1's bound at a target (auto_shares)
AUTO_TARGETS = ("leaves", "all")  #: besides a level number 1..d
AUTO_BETA = 0.05  #: the beta of the bound auto weights minimise (it only enters through logs)
_AUTO_DIGITS = 6  # significant digits of each auto share but the largest
INFTDA = "inftda"
LEAST_SQUARES = "least_squares"
ESTIMATORS = (INFTDA, LEAST_SQUARES)
"""What the integer pass fits to each parent: the noisy children (``'inftda'``, the paper's
Algorithm 1) or the rounded least-squares estimates from every level's full noisy histogram
(``'least_squares'``, :mod:`~inftda_duckdb.core.leastsquares`)."""
ETA = 2.0 ** -12
"""The largest arithmetic error of a least-squares estimate a release may have (certified from
public numbers before the charge: :mod:`~inftda_duckdb.core.leastsquares.arithmetic`); it enters
the bound's rounding term."""
REPORT_DELTA = Fraction(1, 10**6)
"""The delta at which the epsilon of a rho budget is reported (previews, provenance, ledger
tables) when the caller gives none; it never changes what a release spends."""


def neighbours_name(value: object) -> object:
    """``value`` with the aliases 'bounded' / 'unbounded' replaced by the canonical names."""
    return ALIASES.get(value, value) if isinstance(value, str) else value

#: The (epsilon, delta) <-> rho conversion in force (the ledger records it per row).
CONVERSION = CKS
_DIGITS = 20  # significant digits kept in a converted rho


def _check_delta(delta: object) -> Fraction:
    fix = f"pass 0 < delta < 1, e.g. {opt('delta', 1e-6)}"
    value = to_positive_fraction(delta, "delta", fix)
    if value >= 1:
        raise bad_argument("delta", delta, "must be strictly between 0 and 1", fix)
    return value


def rho_from_epsilon_delta(
    epsilon: object, delta: object, conversion: str = CONVERSION
) -> Fraction:
    """The largest ``rho`` whose zCDP guarantee implies ``(epsilon, delta)``-DP under
    ``conversion`` (default: the one in force, :data:`CONVERSION`), rounded *down* to 20
    significant digits; see :mod:`.conversion`."""
    eps = to_positive_fraction(epsilon, "epsilon",
                               f"pass a positive epsilon, e.g. {opt('epsilon', 1)}")
    dlt = _check_delta(delta)
    rho = _round_down(_convert(rho_lower, eps, dlt, conversion, "epsilon", epsilon), _DIGITS)
    if rho <= 0:
        raise bad_argument(
            "epsilon", epsilon, f"gives a rho too small to represent at delta = {delta}",
            "pass a larger epsilon",
        )
    return rho


def epsilon_from_rho(rho: object, delta: object, conversion: str = CONVERSION) -> float:
    """The ``epsilon`` of ``(epsilon, delta)``-DP implied by ``rho``-zCDP under ``conversion``
    (default: :data:`CONVERSION`), rounded *up* to a float; see :mod:`.conversion`."""
    r = to_positive_fraction(rho, "rho", f"pass a positive rho, e.g. {opt('rho', 0.5)}")
    eps = _convert(epsilon_upper, r, _check_delta(delta), conversion, "rho", rho)
    result = float(eps)
    if Fraction(result) < eps:
        result = math.nextafter(result, math.inf)
    return result


def _convert(
    direction: Callable[[Fraction, Fraction, str], Fraction],
    value: Fraction, delta: Fraction, conversion: str, name: str, given: object,
) -> Fraction:
    if conversion not in CONVERSIONS:
        raise bad_argument(
            "conversion", conversion, f"must be one of {', '.join(CONVERSIONS)}",
            f"omit it (the conversion in force is {CONVERSION!r})",
        )
    try:
        return direction(value, delta, conversion)
    except (ValueError, OverflowError):
        raise bad_argument(
            name, given, f"is outside the range the conversion supports at delta = {delta}",
            "pass a value between 1e-300 and 1e300",
        ) from None


def _round_down(x: Fraction, digits: int) -> Fraction:
    """``x`` cut (towards 0) to ``digits`` significant decimal digits, exactly."""
    if x <= 0:
        return Fraction(0)
    e = len(str(x.numerator)) - len(str(x.denominator))  # 10**(e-1) < x < 10**(e+1)
    if Fraction(10) ** e > x:
        e -= 1
    quantum = Fraction(10) ** (e - digits + 1)
    return (x // quantum) * quantum


@dataclass(frozen=True)
class BudgetPlan:
    """How a release spends ``rho``: per level budget and discrete Gaussian variance (exact).

    ``level_rho[k-1]`` and ``level_sigma2[k-1]`` are for level ``k`` (1..d); ``root_rho`` and
    ``root_sigma2`` are set only when the root count is noised too (``add_remove``, or a privacy
    unit under ``substitute`` without public row counts). The parts sum to ``rho`` exactly.
    ``split`` says how they were chosen: ``'uniform'``, ``'weights'`` (given) or ``'auto'``
    (for ``auto_target``).
    """

    rho: Fraction
    neighbours: str
    max_rows_per_unit: int
    depth: int
    root_rho: Fraction | None
    root_sigma2: Fraction | None
    level_rho: tuple[Fraction, ...]
    level_sigma2: tuple[Fraction, ...]
    split: str = "uniform"
    auto_target: str | int | None = None

    @property
    def split_label(self) -> str:
        """``'uniform'``, ``'weights'``, or ``'auto (leaves)'`` / ``'auto (all)'`` /
        ``'auto (level k)'``."""
        if self.split != AUTO:
            return self.split
        target = self.auto_target
        return f"auto ({target})" if isinstance(target, str) else f"auto (level {target})"

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
    level_weights: Sequence[object] | str | None = None,
    neighbours: str = "substitute",
    max_rows_per_unit: int = 1,
    noised_root: bool | None = None,
    auto_target: object = None,
    nodes: Sequence[int] | None = None,
) -> BudgetPlan:
    """Split a budget over the levels (paper, Algorithm 1 line 5: ``rho / d`` per level).

    Give exactly one of ``rho`` or ``epsilon`` with ``delta``. ``level_weights`` (``depth``
    positive numbers, or ``depth + 1`` when the root is noised, the root first) gives
    ``rho_k = rho * w_k / sum(w)`` exactly; the default is uniform. ``level_weights='auto'``
    picks the split minimising Theorem 1's bound at ``auto_target`` (:func:`auto_shares`) from
    the public cells per level ``nodes`` (``N_1..N_d``). ``noised_root``: whether the root count
    is noised (default: with ``add_remove`` only; ``substitute`` with a privacy unit whose row
    counts are not public passes True).
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise bad_argument("depth", depth, "must be an integer >= 1", "pass the number of columns")
    neighbours = str(neighbours_name(neighbours))
    if neighbours not in NEIGHBOURS:
        raise bad_argument(
            "neighbours", neighbours, f"must be one of {', '.join(NEIGHBOURS)} (or the aliases "
            "bounded, unbounded)",
            f"use {opt('neighbours', 'substitute')} (bounded DP, n public) or "
            f"{opt('neighbours', 'add_remove')} (unbounded DP)",
        )
    m = max_rows_per_unit
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise bad_argument(
            "max_rows_per_unit", m, "must be an integer >= 1",
            f"pass e.g. {opt('max_rows_per_unit', 1)}"
        )
    root = neighbours == "add_remove" if noised_root is None else bool(noised_root)
    if neighbours == "add_remove" and not root:
        raise bad_argument("noised_root", noised_root, "must be true with add_remove",
                           "leave it out (add_remove always noises the root count)")
    total = total_rho(rho, epsilon, delta)
    parts = depth + 1 if root else depth
    if isinstance(level_weights, str) and level_weights == AUTO:
        target = auto_level(auto_target, depth)
        shares = auto_shares(total, _split(depth, neighbours, 1, root), nodes, target)
        return _split(depth, neighbours, m, root, total, shares, AUTO, target)
    if auto_target is not None:
        raise bad_argument(
            "auto_target", auto_target, "only applies with level_weights 'auto'",
            f"pass {opt('level_weights', AUTO)} as well, or drop auto_target",
        )
    weights = _weights(level_weights, parts, root)
    shares = tuple(total * w / sum(weights) for w in weights)
    split = "uniform" if level_weights is None else "weights"
    return _split(depth, neighbours, m, root, total, shares, split)


def _split(
    depth: int, neighbours: str, m: int, root: bool, total: Fraction | None = None,
    shares: Sequence[Fraction] | None = None, split: str = "uniform",
    target: str | int | None = None,
) -> BudgetPlan:
    """The plan of exact ``shares`` (root first when ``root``: the root is noised) of
    ``total``; without them, the unit plan (``rho_k = 1`` at every part) whose bound terms are
    the coefficients ``a_l``."""
    parts = depth + 1 if root else depth
    if shares is None:
        total, shares = Fraction(parts), (Fraction(1),) * parts
    assert total is not None
    if len(shares) != parts or sum(shares) != total or min(shares) <= 0:
        raise InternalError(f"level budgets {shares} are not {parts} positive parts of {total}")
    factor = 1 if neighbours == "substitute" else 2
    sigma2 = tuple(Fraction(m * m) / (factor * s) for s in shares)
    if root:  # the root's sensitivity is m under both relations
        sigma2 = (Fraction(m * m) / (2 * shares[0]), *sigma2[1:])
    if max(sigma2) > MAX_SIGMA2:  # refused here, before anything is charged
        raise bad_argument(
            "rho", str(total),
            f"is too small: a level's noise variance sigma2 would be {float(max(sigma2)):.3g}, "
            f"above the sampler's limit {MAX_SIGMA2} (noise this large drowns every count)",
            "pass a larger budget, fewer levels, or a smaller max_rows_per_unit",
        )  # fmt: skip
    return BudgetPlan(
        rho=total, neighbours=neighbours, max_rows_per_unit=m, depth=depth,
        root_rho=shares[0] if root else None, root_sigma2=sigma2[0] if root else None,
        level_rho=tuple(shares[1:] if root else shares),
        level_sigma2=sigma2[1:] if root else sigma2, split=split, auto_target=target,
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
        return to_positive_fraction(rho, "rho",
                                    f"pass a positive finite rho, e.g. {opt('rho', 0.5)}")
    if epsilon is None or delta is None:
        missing = "delta" if epsilon is not None else "epsilon" if delta is not None else "rho"
        raise bad_argument(
            missing, None, "is required", "give either rho, or epsilon with delta (e.g. 1, 1e-6)"
        )
    return rho_from_epsilon_delta(epsilon, delta)


def _weights(level_weights: Sequence[object] | None, parts: int, root: bool) -> list[Fraction]:
    if level_weights is None:
        return [Fraction(1)] * parts
    fix = f"pass {parts} positive weights" + (" (root first)" if root else "")
    if isinstance(level_weights, str | bytes) or not isinstance(level_weights, Sequence):
        raise bad_argument("level_weights", level_weights, "must be a list of numbers", fix)
    if len(level_weights) != parts:
        what = "the noised root and the levels" if root else "the levels"
        raise bad_argument(
            "level_weights", list(level_weights), f"must have {parts} entries: {what}", fix,
        )
    return [
        to_positive_fraction(w, f"level_weights[{i}]", fix) for i, w in enumerate(level_weights)
    ]


# ---------------------------------------------------------------------------------------------
# Theorem 1.


def cells_of(domain_sizes: Sequence[int] | None, nodes: Sequence[int] | None) -> list[int]:
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


def noise_terms(cells: list[int], plan: BudgetPlan, beta: float, k: int,
                paper: bool) -> list[float]:
    """Max-|noise| bounds for levels 0 (a noised root) and 1..k, each failing w.p. beta/events."""
    events = k + (plan.root_sigma2 is not None)
    two = 1 if paper else 2  # Pr[|Z| >= t] <= 2 exp(-t^2 / (2 sigma^2)); the paper drops the 2.
    out = []
    if plan.root_sigma2 is not None:
        out.append(math.sqrt(2 * float(plan.root_sigma2) * math.log(two * events / beta)))
    for level in range(1, k + 1):
        s2 = float(plan.level_sigma2[level - 1])
        out.append(math.sqrt(2 * s2 * math.log(two * events * cells[level - 1] / beta)))
    return out


def joint_bounds(cells: Sequence[int], plan: BudgetPlan, beta: float, upto: int | None = None,
                 *, paper: bool = False, estimator: str = INFTDA) -> list[float]:
    """THE bound function (every bound of the package is computed here): ``[B_0, B_1, ...,
    B_K]`` under ONE event of probability at least ``1 - beta``, ``K = upto`` (default: the
    leaves), on which, simultaneously for every ``j <= K``, every j-prefix's released count is
    within ``B_j`` of its true count (``B_0``: the root's error, 0 when it is public).

    The proof of Theorem 1 (paper, Appendix A, Eq. (4)) gives, deterministically, ``E_j <= E_0
    + 2 sum_{l<=j} M_l`` where ``E_j`` is the largest error at level j and ``M_l`` the largest
    |noise| among level l's noised cells. The event bounds ``|Z_0|`` (a noised root) and each
    ``M_l``, ``l <= K``, by the terms of :func:`noise_terms` (``e = K + 1`` events with a noised
    root, else ``K``, each failing w.p. at most ``beta / e``: a union over ``N_l`` cells of the
    two-sided tail ``2 exp(-t**2 / (2 sigma_l**2))``). So ``B_j = t_0 + 2 sum_{l<=j} t_l``, and
    ``joint_bounds(..., upto=k)[k]`` is Theorem 1's bound at level k (:func:`error_bound`); the
    levels ``j < k`` of the same call are wider than their own Theorem 1 bound (their logs count
    ``k`` events) and hold on the same event; ``upto=0``: the root's own bound (one event).
    ``cells``: ``N_1..N_d``. ``estimator='least_squares'`` adds :func:`rounding` to each
    ``B_j`` (deterministic, so the event is the same).
    """
    cells = list(cells)
    upto = len(cells) if upto is None else upto
    if not 0 <= upto <= len(cells) or plan.depth != len(cells):
        raise InternalError(f"bounds up to level {upto} of a {plan.depth}-level plan with "
                            f"{len(cells)} cell counts")
    parts = _contributions(cells, plan, beta, upto, paper)
    root = plan.root_sigma2 is not None
    out = [parts[0] if root else 0.0]
    for part in parts[root:root + upto]:
        out.append(out[-1] + part)
    return [b + rounding(j, plan, estimator) for j, b in enumerate(out)]


def error_bound(
    domain_sizes: Sequence[int] | None,
    rho: object = None,
    beta: float = 0.05,
    *,
    nodes: Sequence[int] | None = None,
    plan: BudgetPlan | None = None,
    paper: bool = False,
    estimator: str = INFTDA,
) -> list[float]:
    """Theorem 1: for each level ``k = 1..d``, w.p. ``>= 1 - beta`` the max error over level k is
    at most ``bound[k-1]`` (each ``k`` separately, not all levels at once: for several levels
    on one event see :func:`joint_bounds`), for the release's ``estimator``
    (:data:`ESTIMATORS`).

    Substitute: ``sum_{l<=k} sqrt(8 sigma_l**2 ln(2 k N_l / beta))``, ``N_l = prod_{i<=l} |X_i|``
    (or ``nodes[l-1]``, the cells at level l of a nested hierarchy), ``sigma_l**2`` from ``plan``
    (default: uniform substitute split of ``rho``, ``sigma**2 = d / rho`` as in the paper).
    The paper's proof applies the one-sided tail ``Pr[Z >= t] <= exp(-t**2 / 2 sigma**2)`` to
    ``|Z|``; the correct two-sided union bound needs the factor 2 inside the log, used here.
    ``paper=True`` gives the printed formula ``ln(k N_l / beta)``.

    A noised root (``add_remove``, or ``substitute`` with a privacy unit) is released as
    ``max(0, n + Z_0)``, so ``|err_0| <= |Z_0|``; it enters the recursion once, giving a union
    bound over ``k + 1`` events, each failing w.p. ``beta / (k + 1)``:
    ``sqrt(2 sigma_0**2 ln(2 (k+1) / beta)) + sum_{l<=k} sqrt(8 sigma_l**2 ln(2 (k+1) N_l / beta))``
    (``paper=True`` drops the 2s inside the logs).

    ``'least_squares'``: the same terms, with ``sigma_l**2`` bounding the variance proxy of each
    least-squares estimate's error (never more than a cell's own count's), plus the rounding
    term ``k (1 + 2 eta)`` (each level's rounded estimates are within ``1/2 + eta`` of the
    exact ones, and Theorem 1's recursion counts a level's input error twice; ``eta`` =
    :data:`ETA`), and ``1/2 + eta`` more for a noised root (released rounded). The proof is in
    docs/explanation/least-squares.md.
    """
    cells = cells_of(domain_sizes, nodes)
    _check_beta(beta)
    resolved = _resolve_plan(len(cells), rho, plan)
    return [joint_bounds(cells, resolved, beta, k, paper=paper, estimator=estimator)[k]
            for k in range(1, len(cells) + 1)]


def _check_beta(beta: object) -> float:
    """``beta`` as a float strictly between 0 and 1, else the InputError naming it."""
    if isinstance(beta, bool) or not (isinstance(beta, int | float) and 0 < beta < 1):
        raise bad_argument("beta", beta, "must be strictly between 0 and 1", "pass e.g. beta=0.05")
    return float(beta)


def check_estimator(estimator: object) -> str:
    """``estimator`` if it is one of :data:`ESTIMATORS`, else an InputError."""
    if estimator not in ESTIMATORS:
        raise bad_argument("estimator", estimator, f"must be one of {', '.join(ESTIMATORS)}",
                           f"pass {opt('estimator', LEAST_SQUARES)}, or leave it out (the "
                           f"default is {INFTDA!r}, the paper's)")
    return str(estimator)


def rounding(k: int, plan: BudgetPlan, estimator: str) -> float:
    """The bound's rounding term at level ``k`` (0: a noised root's own term): none for
    ``'inftda'``; ``k (1 + 2 eta)``, plus ``1/2 + eta`` for a noised root, for
    ``'least_squares'``. Deterministic: it adds to every bound of one event alike."""
    if check_estimator(estimator) == INFTDA:
        return 0.0
    root = 0.5 + ETA if plan.root_sigma2 is not None else 0.0
    return k * (1 + 2 * ETA) + root


def _contributions(
    cells: list[int], plan: BudgetPlan, beta: float, k: int, paper: bool
) -> list[float]:
    """Each part's share of the bound at level ``k`` (a noised root first; 0 for levels
    below ``k``): the root error enters the recursion once, each level's noise twice."""
    terms = noise_terms(cells, plan, beta, k, paper)
    root = plan.root_sigma2 is not None
    out = [t if root and i == 0 else 2 * t for i, t in enumerate(terms)]
    return out + [0.0] * (plan.depth - k)


# ---------------------------------------------------------------------------------------------
# Automatic level weights.


def auto_level(target: object, depth: int) -> str | int:
    """``'leaves'`` (also for ``depth``), ``'all'``, or a level ``1..depth - 1``."""
    if target is None or target == depth:
        return "leaves"
    if isinstance(target, str) and target in AUTO_TARGETS:
        return target
    if isinstance(target, int) and not isinstance(target, bool) and 1 <= target < depth:
        return target
    raise bad_argument(
        "auto_target", target, f"must be 'leaves', 'all' or a level 1..{depth}",
        f"pass e.g. {opt('auto_target', 'leaves')} (or a level number, or a hierarchy column's "
        "name)",
    )


def auto_shares(
    total: Fraction, unit: BudgetPlan, nodes: Sequence[int] | None, target: str | int
) -> tuple[Fraction, ...]:
    """The split of ``total`` minimising Theorem 1's bound (at :data:`AUTO_BETA`) at ``target``,
    from the public cells per level ``nodes`` only.

    The bound at level k is ``B_k = sum_l a_l(k) / sqrt(rho_l)`` (:func:`error_bound`; ``a_l`` is
    the term at ``rho_l = 1``, the ``unit`` plan), and ``sum_l A_l / sqrt(rho_l)`` with ``sum_l
    rho_l = rho`` is least at ``rho_l`` proportional to ``A_l**(2/3)`` (Lagrange). Targets:
    ``'leaves'``: ``B_d``; ``'all'``: ``sum_k B_k`` (every level counts once); a level ``k < d``:
    ``B_k + B_d`` (the levels below k still need budget: they get what the leaves need, and the
    levels down to k get more). Each share but the largest is cut to 6 significant digits and
    the largest takes the rest: any positive split summing exactly to rho is private.
    """
    if nodes is None:
        raise bad_argument(
            "nodes", None, "is required with level_weights 'auto' (the public cells per level)",
            "pass the cells of each level (domain sizes' products, or nested node counts)",
        )
    cells = cells_of(None, nodes)
    if len(cells) != unit.depth:
        raise bad_argument("nodes", cells, f"must have {unit.depth} entries", "one per level")
    d = unit.depth
    if target == "leaves":
        levels = [d]
    elif target == "all":
        levels = list(range(1, d + 1))
    elif isinstance(target, int) and 1 <= target < d:
        levels = [target, d]
    else:
        raise InternalError(f"auto target {target!r} was not checked by auto_level")
    coef = [0.0] * (d + (unit.root_sigma2 is not None))
    for k in levels:
        for i, a in enumerate(_contributions(cells, unit, AUTO_BETA, k, paper=False)):
            coef[i] += a
    weights = [a ** (2 / 3) for a in coef]
    shares = [_round_down(total * Fraction(w / sum(weights)), _AUTO_DIGITS) for w in weights]
    largest = max(range(len(shares)), key=weights.__getitem__)
    shares[largest] = total - sum(shares) + shares[largest]
    return tuple(shares)
