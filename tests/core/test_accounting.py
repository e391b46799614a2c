"""Accounting: conversions, exact splits, noise scales, Theorem 1 by hand and by simulation."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core import conversion
from inftda_duckdb.core.accounting import (
    CONVERSIONS,
    NEIGHBOURS,
    BudgetPlan,
    epsilon_from_rho,
    error_bound,
    plan_budget,
    rho_from_epsilon_delta,
)
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.intopt import intopt
from inftda_duckdb.core.planning import level_table

CASES = [(1, 1e-6), (0.1, 1e-8), (10, 1e-8), ("0.37", "1e-5"), (Fraction(1, 3), 0.5), (50, 1e-12)]


# ------------------------------------------------------------------------------------------------
# rho <-> (epsilon, delta)


@pytest.mark.parametrize(("eps", "delta"), CASES)
def test_rho_from_epsilon_delta_is_conservative_and_short(eps: object, delta: object) -> None:
    rho = rho_from_epsilon_delta(eps, delta)
    e = Fraction(str(eps))
    # Never spends more than (eps, delta) allows, and loses nothing visible
    # (tests/core/test_conversion checks this independently on a dense grid) ...
    back = epsilon_from_rho(rho, delta)
    assert back <= math.nextafter(float(e), math.inf)
    assert back == pytest.approx(float(e), rel=1e-12)
    # ... beats Bun-Steinke, which stays available by name as the float formula (peers:
    # L (sqrt(1 + eps/L) - 1)^2) ...
    bs = rho_from_epsilon_delta(eps, delta, "bun-steinke-2016")
    big_l = math.log(1 / float(Fraction(str(delta))))
    assert bs == pytest.approx(big_l * (math.sqrt(1 + float(e) / big_l) - 1) ** 2, rel=1e-9)
    assert rho > bs
    # ... and is a short rational: at most 20 significant digits.
    assert len(str(Decimal(rho.numerator) / Decimal(rho.denominator)).replace(".", "").lstrip("0")
               .split("E")[0]) <= 20


@pytest.mark.parametrize(("rho", "delta"), [(0.5, 1e-6), ("1/3", 1e-8), (Fraction(2, 7), 0.01)])
def test_epsilon_from_rho_rounds_up(rho: object, delta: object) -> None:
    r, d = Fraction(str(rho)) if not isinstance(rho, Fraction) else rho, Fraction(str(delta))
    for name in CONVERSIONS:
        eps = epsilon_from_rho(rho, delta, name)
        exact = conversion.epsilon_upper(r, d, name)  # the exact bound, before the float
        assert Fraction(eps) >= exact
        assert Fraction(math.nextafter(eps, 0)) < exact  # the smallest float above
    big_l = math.log(1 / float(d))
    bs = epsilon_from_rho(rho, delta, "bun-steinke-2016")
    assert bs == pytest.approx(float(r) + 2 * math.sqrt(float(r) * big_l), rel=1e-14)
    assert epsilon_from_rho(rho, delta) < bs


@pytest.mark.parametrize(("eps", "delta"), [(1e59, 1e-6), (1e60, 1e-6), (1e100, 1e-100)])
def test_conversion_of_huge_epsilon_is_exact_not_a_decimal_error(eps: float, delta: float) -> None:
    """Huge budgets inside the parser's range convert (issue 15: epsilon := 1e300 raised
    decimal.InvalidOperation; 1e100, inside the range, did too before the conversion's rework)."""
    rho = rho_from_epsilon_delta(eps, delta)
    assert float(rho) == pytest.approx(eps, rel=1e-9)
    assert epsilon_from_rho(rho, delta) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize(
    ("eps", "delta", "match"),
    [
        (0, 1e-6, "epsilon must be a positive"), (-1, 1e-6, "epsilon"),
        (float("nan"), 1e-6, "epsilon"),
        (1, 0, "delta must be a positive"), (1, 1, "strictly between 0 and 1"),
        (1, 1.5, "strictly between"), (1, "junk", "delta must be a finite number"),
    ],
)
def test_conversion_errors(eps: object, delta: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        rho_from_epsilon_delta(eps, delta)


# ------------------------------------------------------------------------------------------------
# plan_budget


def test_uniform_substitute_split_is_the_papers() -> None:
    plan = plan_budget(3, rho="1/2")
    assert plan.level_rho == (Fraction(1, 6),) * 3
    assert plan.level_sigma2 == (Fraction(6),) * 3  # d / rho (paper, line 5)
    assert plan.root_rho is None and plan.root_sigma2 is None
    assert plan.sensitivity2 == 2 and plan.neighbours == "substitute" and plan.depth == 3


def test_uniform_add_remove_split_includes_the_root() -> None:
    plan = plan_budget(2, rho=Fraction(3, 2), neighbours="add_remove")
    assert plan.root_rho == Fraction(1, 2) and plan.level_rho == (Fraction(1, 2),) * 2
    assert plan.root_sigma2 == 1 and plan.level_sigma2 == (1, 1)  # m^2 / (2 rho_k)
    assert plan.sensitivity2 == 1


@pytest.mark.parametrize("m", [1, 2, 5])
def test_sigma_for_both_relations_and_rows_per_unit(m: int) -> None:
    sub = plan_budget(2, rho=1, max_rows_per_unit=m)
    add = plan_budget(2, rho=1, max_rows_per_unit=m, neighbours="add_remove")
    # substitute: Delta2 = sqrt(2) m, rho_k = Delta2^2 / (2 sigma^2) = 1/2.
    assert all(2 * m * m / (2 * s) == Fraction(1, 2) for s in sub.level_sigma2)
    # add_remove: Delta2 = m, rho_k = 1/3 at every level including the root.
    assert add.root_sigma2 is not None
    assert all(m * m / (2 * s) == Fraction(1, 3) for s in (add.root_sigma2, *add.level_sigma2))
    assert sub.sensitivity2 == 2 * m * m and add.sensitivity2 == m * m


def test_weighted_split_is_exact_and_sums_to_rho() -> None:
    plan = plan_budget(3, rho="0.7", level_weights=[1, 2, "0.5"])
    assert plan.level_rho == (Fraction(1, 5), Fraction(2, 5), Fraction(1, 10))
    assert sum(plan.level_rho) == Fraction(7, 10)
    add = plan_budget(2, rho="1/3", level_weights=[1, 1, 1], neighbours="add_remove")
    assert add.root_rho is not None and add.root_rho + sum(add.level_rho) == Fraction(1, 3)
    uneven = plan_budget(7, rho=Fraction(1, 3))
    assert sum(uneven.level_rho) == Fraction(1, 3)


def test_plan_from_epsilon_delta() -> None:
    plan = plan_budget(2, epsilon=1, delta=1e-6)
    assert plan.rho == rho_from_epsilon_delta(1, 1e-6)
    assert sum(plan.level_rho) == plan.rho


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((2,), {}, "rho is required"),
        ((2,), {"rho": 1, "epsilon": 1, "delta": 1e-6}, "must not be combined"),
        ((2,), {"rho": 1, "delta": 1e-6}, "must not be combined"),
        ((2,), {"epsilon": 1}, "delta is required"),
        ((2,), {"delta": 1e-6}, "epsilon is required"),
        ((2,), {"rho": 0}, "rho must be a positive"),
        ((2,), {"rho": float("inf")}, "rho must be a finite"),
        ((2,), {"rho": "abc"}, "rho must be a finite"),
        ((2,), {"epsilon": 1, "delta": 2}, "delta must be strictly between"),
        ((0,), {"rho": 1}, "depth must be an integer >= 1"),
        ((True,), {"rho": 1}, "depth must be an integer"),
        ((2,), {"rho": 1, "neighbours": "sometimes"}, "neighbours must be one of"),
        ((2,), {"rho": 1, "max_rows_per_unit": 0}, "max_rows_per_unit must be an integer >= 1"),
        ((2,), {"rho": 1, "max_rows_per_unit": 1.5}, "max_rows_per_unit"),
        ((2,), {"rho": 1, "level_weights": [1]}, "must have 2 entries"),
        ((2,), {"rho": 1, "level_weights": [1, 1], "neighbours": "add_remove"}, "3 entries"),
        ((2,), {"rho": 1, "level_weights": [1, 0]}, r"level_weights\[1\] must be a positive"),
        ((2,), {"rho": 1, "level_weights": [1, -2]}, r"level_weights\[1\]"),
        ((2,), {"rho": 1, "level_weights": "12"}, "must be a list of numbers"),
    ],
)
def test_plan_errors_name_argument_value_rule_and_fix(
    args: tuple[object, ...], kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(InputError, match=match) as info:
        plan_budget(*args, **kwargs)  # type: ignore[arg-type]
    assert "; got " in str(info.value) and "Fix: " in str(info.value)


# ------------------------------------------------------------------------------------------------
# Theorem 1 by hand


def test_bound_by_hand_substitute() -> None:
    # d = 2, rho = 1: sigma^2 = d / rho = 2, so each term is sqrt(16 ln(.)).
    # two-sided: k=1: 4 sqrt(ln(2*1*2/0.05)); k=2: 4 sqrt(ln(2*2*2/0.05)) + 4 sqrt(ln(2*2*6/0.05))
    assert error_bound([2, 3], 1, 0.05) == pytest.approx([8.373316317611684, 18.950100438834177])
    # as printed: k=1: 4 sqrt(ln 40); k=2: 4 sqrt(ln 80) + 4 sqrt(ln 240)
    paper = error_bound([2, 3], 1, 0.05, paper=True)
    assert paper == pytest.approx([7.682582330559366, 17.737622099327265])
    # The paper's formula verbatim: sum_l sqrt((8 d / rho) ln(k prod_{i<=l} |X_i| / beta)).
    printed = [
        sum(math.sqrt(8 * 2 / 1 * math.log(k * n / 0.05)) for n in [2, 6][:k]) for k in (1, 2)
    ]
    assert paper == pytest.approx(printed, rel=1e-12)


def test_bound_nested_and_plan_forms() -> None:
    # Nested hierarchy: the node counts replace the products.
    assert error_bound(None, 1, 0.05, nodes=[2, 6]) == error_bound([2, 3], 1, 0.05)
    assert error_bound([2, 3], None, 0.05, plan=plan_budget(2, rho=1)) == error_bound([2, 3], 1)
    # m = 2 doubles sigma, so doubles the bound.
    doubled = error_bound([2, 3], None, plan=plan_budget(2, rho=1, max_rows_per_unit=2))
    assert doubled == pytest.approx([2 * b for b in error_bound([2, 3], 1)])
    with pytest.raises(InputError, match=r"differs from plan\.rho"):
        error_bound([2, 3], 2, plan=plan_budget(2, rho=1))
    with pytest.raises(InputError, match="must match the 3 levels"):
        error_bound([2, 3, 4], plan=plan_budget(2, rho=1))
    with pytest.raises(InputError, match="beta must be strictly between"):
        error_bound([2, 3], 1, 1.5)
    with pytest.raises(InputError, match="domain_sizes must be a non-empty list of integers"):
        error_bound([2, 0], 1)
    with pytest.raises(InputError, match="nodes must have one entry per domain size"):
        error_bound([2, 3], 1, nodes=[2])


def test_bound_by_hand_add_remove() -> None:
    # d = 2, rho = 3/2 uniform over root + 2 levels: sigma^2 = 1 everywhere; k + 1 events.
    plan = plan_budget(2, rho=Fraction(3, 2), neighbours="add_remove")
    # k=1: sqrt(2 ln(2*2/0.05)) + 2 sqrt(2 ln(2*2*2/0.05))
    # k=2: sqrt(2 ln(2*3/0.05)) + 2 sqrt(2 ln(2*3*2/0.05)) + 2 sqrt(2 ln(2*3*6/0.05))
    assert error_bound([2, 3], plan=plan) == pytest.approx([9.332336417586006, 16.97084116718466])
    table = level_table([2, 3], plan, 0.05, 1e-6)
    assert [row["level"] for row in table] == [0, 1, 2]
    assert table[0]["bound"] == pytest.approx(math.sqrt(2 * math.log(2 * 3 / 0.05)))
    assert table[2]["bound"] == pytest.approx(16.97084116718466)


def test_level_table_substitute() -> None:
    plan = plan_budget(2, rho=1)
    table = level_table([2, 3], plan, 0.05, 1e-6)
    assert [row["level"] for row in table] == [1, 2] and [row["cells"] for row in table] == [2, 6]
    assert [row["rho_k"] for row in table] == [Fraction(1, 2)] * 2
    assert table[0]["sigma_k"] == pytest.approx(math.sqrt(2))
    assert table[0]["epsilon_k"] == epsilon_from_rho(Fraction(1, 2), 1e-6)
    assert [row["bound"] for row in table] == error_bound([2, 3], 1)
    assert table[1]["noise_k"] == pytest.approx(math.sqrt(2 * 2 * math.log(2 * 2 * 6 / 0.05)))


# ------------------------------------------------------------------------------------------------
# Theorem 1 by simulation


def binomial_upper_quantile(n: int, p: float, alpha: float) -> int:
    """Smallest t with P[Binomial(n, p) > t] <= alpha (exact, in log space)."""
    log_pmf = [
        math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1)
        + x * math.log(p) + (n - x) * math.log1p(-p)
        for x in range(n + 1)
    ]
    tail = 0.0
    for t in range(n, -1, -1):
        if tail + math.exp(log_pmf[t]) > alpha:
            return t
        tail += math.exp(log_pmf[t])
    return 0


def exceed_count(
    rng: np.random.Generator, sigma: float, cells: int, trials: int, bound: float
) -> int:
    noise = rng.normal(0.0, sigma, size=(trials, cells))
    return int((np.abs(noise).max(axis=1) > bound).sum())


@pytest.mark.statistical
def test_single_level_term_holds_with_probability_beta_over_k() -> None:
    """max |noise| over N_l cells exceeds the level's term w.p. <= beta / k.

    Domain [5, 100], rho = 1/2: sigma^2 = 4, N_2 = 500, k = 2, beta = 0.1. The count of
    exceedances in 4000 trials is compared with the upper 1e-6 quantile of Binomial(4000, beta/k):
    false-failure rate <= 1e-6. Negative control: the term without the union bound over cells
    (ln(2 k / beta)) must fail the same test.
    """
    rng = np.random.default_rng(12345)
    plan = plan_budget(2, rho=Fraction(1, 2))
    term = level_table([5, 100], plan, 0.1, 1e-6)[1]["noise_k"]
    assert term == pytest.approx(math.sqrt(2 * 4 * math.log(2 * 2 * 500 / 0.1)))
    trials, limit = 4000, binomial_upper_quantile(4000, 0.1 / 2, 1e-6)
    assert exceed_count(rng, 2.0, 500, trials, term) <= limit
    too_small = math.sqrt(2 * 4 * math.log(2 * 2 / 0.1))
    assert exceed_count(rng, 2.0, 500, trials, too_small) > limit


@pytest.mark.statistical
def test_theorem_1_holds_for_a_simulated_release() -> None:
    """Two-level InfTDA (rounded Gaussian noise + IntOpt) on a fixed tree, 2000 independent runs.

    The level-2 max error exceeds error_bound w.p. <= beta = 0.1 (the bound is loose); the count is
    tested against the upper 1e-6 quantile of Binomial(2000, 0.1): false-failure rate <= 1e-6.
    Negative control: a bound 4 times smaller must fail.
    """
    rng = np.random.default_rng(777)
    sizes, rho, beta, runs = [5, 100], 0.5, 0.1, 2000
    sigma = math.sqrt(len(sizes) / rho)
    truth = rng.integers(0, 30, size=(5, 100))
    truth[:, 50:] = 0  # many true zeros
    level1 = truth.sum(axis=1)
    n = int(level1.sum())
    noisy1 = level1 + np.rint(rng.normal(0, sigma, size=(runs, 5))).astype(np.int64)
    released1 = intopt(noisy1, np.full(runs, n))
    noisy2 = truth[None] + np.rint(rng.normal(0, sigma, size=(runs, 5, 100))).astype(np.int64)
    released2 = intopt(noisy2.reshape(runs * 5, 100), released1.ravel()).reshape(runs, 5, 100)
    err = np.abs(released2 - truth[None]).max(axis=(1, 2))
    bound = error_bound(sizes, rho, beta)[1]
    limit = binomial_upper_quantile(runs, beta, 1e-6)
    assert int((err > bound).sum()) <= limit
    assert int((err > bound / 4).sum()) > limit


def test_a_budget_too_small_to_sample_is_refused() -> None:
    from inftda_duckdb.core.noise import MAX_SIGMA2

    plan_budget(1, rho=Fraction(1) / MAX_SIGMA2)  # sigma2 = 1e8 exactly: the largest accepted
    with pytest.raises(InputError, match=r"rho is too small: .*sigma2 would be 1e\+08"):
        plan_budget(1, rho=Fraction(1) / (MAX_SIGMA2 + 1))
    with pytest.raises(InputError, match="smaller max_rows_per_unit"):
        plan_budget(3, rho=Fraction(9, 10**8), max_rows_per_unit=2)


# ------------------------------------------------------------------------------------------------
# level_weights = 'auto'

NESTED = [3, 105, 1680, 20160]  # cells per level of origin -> dest -> carrier -> month (products)


def objective(plan: BudgetPlan, nodes: list[int], target: object) -> float:
    """What auto weights minimise, from error_bound: B_d, sum_k B_k, or B_k + B_d."""
    bounds = error_bound(None, nodes=nodes, plan=plan)
    if target in (None, "leaves"):
        return bounds[-1]
    if target == "all":
        return sum(bounds)
    assert isinstance(target, int)
    return bounds[target - 1] + bounds[-1]


def split_of(shares: list[float], rho: Fraction, neighbours: str) -> BudgetPlan:
    weights = [Fraction(s).limit_denominator(10**9) for s in shares]
    return plan_budget(len(shares) - (neighbours == "add_remove"), rho=rho,
                       level_weights=weights, neighbours=neighbours)


def locally_optimal(plan: BudgetPlan, nodes: list[int], target: object) -> bool:
    """No move of 2% of one part's budget to another part lowers the objective."""
    parts = [*([plan.root_rho] if plan.root_rho is not None else []), *plan.level_rho]
    best = objective(plan, nodes, target)
    for i in range(len(parts)):
        for j in range(len(parts)):
            if i != j:
                moved = [float(p) for p in parts]
                moved[i], moved[j] = moved[i] * 0.98, moved[j] + moved[i] * 0.02
                if objective(split_of(moved, plan.rho, plan.neighbours), nodes, target) < best:
                    return False
    return True


@pytest.mark.parametrize("neighbours", NEIGHBOURS)
@pytest.mark.parametrize("target", [None, "all", 1, 2, 3])
@pytest.mark.parametrize("nodes", [NESTED, [2, 4, 8, 16], [50, 60, 70, 10**7]])
def test_auto_weights_minimise_the_bound_at_the_target(
    neighbours: str, target: object, nodes: list[int]
) -> None:
    rho = Fraction(1, 2)
    auto = plan_budget(4, rho=rho, level_weights="auto", auto_target=target, nodes=nodes,
                       neighbours=neighbours)
    uniform = plan_budget(4, rho=rho, neighbours=neighbours)
    assert objective(auto, nodes, target) <= objective(uniform, nodes, target)
    assert locally_optimal(auto, nodes, target)
    rng = np.random.default_rng(len(nodes) + (target if isinstance(target, int) else 0))
    for shares in rng.dirichlet(np.ones(4 + (neighbours == "add_remove")), size=50):
        other = split_of(list(shares), rho, neighbours)
        assert objective(auto, nodes, target) <= objective(other, nodes, target)


def test_a_wrong_exponent_is_not_optimal() -> None:
    """Negative control for the optimality checks: rho_l proportional to a_l (not a_l^(2/3))."""
    nodes, rho = NESTED, Fraction(1, 2)
    unit = plan_budget(4, rho=4)
    coef = [sum(error_bound(None, nodes=nodes, plan=unit)[k - 1] for k in range(1, 5) if k >= lv)
            for lv in range(1, 5)]  # ~ A_l for target 'all'
    wrong = split_of([a / sum(coef) for a in coef], rho, "substitute")
    assert not locally_optimal(wrong, nodes, "all")
    auto = plan_budget(4, rho=rho, level_weights="auto", auto_target="all", nodes=nodes)
    assert objective(auto, nodes, "all") < objective(wrong, nodes, "all")


@pytest.mark.parametrize("neighbours", NEIGHBOURS)
def test_auto_shares_are_exact_positive_and_short(neighbours: str) -> None:
    for rho in (Fraction(1, 3), rho_from_epsilon_delta(1, 1e-6), Fraction(7, 10**6)):
        plan = plan_budget(4, rho=rho, level_weights="auto", nodes=NESTED, neighbours=neighbours)
        parts = [*([plan.root_rho] if plan.root_rho is not None else []), *plan.level_rho]
        assert sum(parts) == rho and min(parts) > 0  # exact: the plan's invariant
        assert len(parts) == 4 + (neighbours == "add_remove")
        digits = sorted(significant_digits(p) for p in parts)
        assert digits[-2] <= 6  # all but the largest (which takes the rest) are short decimals
        assert plan.split == "auto" and plan.split_label == "auto (leaves)"


def significant_digits(x: Fraction) -> int:
    with localcontext() as ctx:
        ctx.prec = 60
        return len((Decimal(x.numerator) / Decimal(x.denominator)).normalize().as_tuple().digits)


def test_auto_weights_follow_the_public_sizes() -> None:
    """More cells at a level (a larger union bound) means more budget there; the same sizes
    always give the same split; the root (add_remove) enters the bound once, so it gets less."""
    flat = plan_budget(3, rho=1, level_weights="auto", nodes=[10, 100, 1000])
    deep = plan_budget(3, rho=1, level_weights="auto", nodes=[10, 100, 10**9])
    assert deep.level_rho[2] > flat.level_rho[2]
    assert plan_budget(3, rho=1, level_weights="auto", nodes=[10, 100, 1000]) == flat
    add = plan_budget(3, rho=1, level_weights="auto", nodes=[10, 100, 1000],
                      neighbours="add_remove")
    assert add.root_rho is not None and add.root_rho < min(add.level_rho)
    top = plan_budget(3, rho=1, level_weights="auto", auto_target=1, nodes=[10, 100, 1000])
    assert top.level_rho[0] > flat.level_rho[0] and top.split_label == "auto (level 1)"
    every = plan_budget(3, rho=1, level_weights="auto", auto_target="all", nodes=[10, 100, 1000])
    assert every.level_rho[0] > every.level_rho[2]  # level 1 is in every level's bound
    assert plan_budget(1, rho=1, level_weights="auto", nodes=[7]).level_rho == (1,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"level_weights": "auto"}, "nodes is required with level_weights 'auto'"),
        ({"level_weights": "auto", "nodes": [3, 0]}, "nodes must be a non-empty list"),
        ({"level_weights": "auto", "nodes": [3]}, "nodes must have 2 entries"),
        ({"level_weights": "auto", "nodes": [3, 9], "auto_target": 0}, "auto_target must be"),
        ({"level_weights": "auto", "nodes": [3, 9], "auto_target": 3}, "a level 1..2"),
        ({"level_weights": "auto", "nodes": [3, 9], "auto_target": "top"}, "auto_target must"),
        ({"level_weights": [1, 2], "auto_target": 1}, "only applies with level_weights"),
        ({"level_weights": "equal"}, "must be a list of numbers"),
    ],
)
def test_auto_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        plan_budget(2, rho=1, **kwargs)  # type: ignore[arg-type]


def test_level_table_shows_uniform_and_auto_beside_the_plan() -> None:
    plan = plan_budget(2, rho=1, level_weights=[1, 3])
    rows = level_table([4, 5], plan)
    uniform = error_bound([4, 5], 1)
    auto = plan_budget(2, rho=1, level_weights="auto", nodes=[4, 20])
    assert [r["split"] for r in rows] == ["weights"] * 2
    assert [r["uniform_bound"] for r in rows] == uniform
    assert [r["auto_rho_k"] for r in rows] == list(auto.level_rho)
    assert [r["auto_bound"] for r in rows] == error_bound([4, 5], None, plan=auto)
    top = level_table([4, 5], plan_budget(2, rho=1, level_weights="auto", auto_target=1,
                                          nodes=[4, 20]))
    assert [r["bound"] for r in top] == [r["auto_bound"] for r in top]  # its own target
    assert top[0]["bound"] < top[0]["uniform_bound"]
