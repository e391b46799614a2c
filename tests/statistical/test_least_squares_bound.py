"""Estimator 'least_squares': no release exceeds its bound (Theorem 1 plus the rounding term,
:func:`~inftda_duckdb.core.accounting.error_bound`) in 1,200 seeded releases of two trees.

The bound at level k holds with probability at least 1 - beta for each (release, level). At
``BETA`` = 1e-7 over 1,200 releases x 4 levels x 2 trees (9,600 pairs) a union bound gives a
false-failure rate of at most 9.6e-4 for the assertion that none exceeds it. Negative control:
the same errors against 5% of the noise terms (the rounding term kept) must exceed it in some
release: the check can fail. (Observed: the largest error is a fifth of the bound at level 1, a
sixteenth at the leaves; the union bound over every cell is loose.)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core.accounting import error_bound, plan_budget, rounding
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_tree
from inftda_duckdb.core.tree import Allowed

from .test_release_accuracy import level_errors

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore:this release used seed:UserWarning"),
]

BETA = 1e-7
RELEASES = 600  # per tree and neighbouring relation (1,200 per tree)


def _tree(nested: bool) -> tuple[list[int], dict[int, Allowed], list[int], np.ndarray,
                                 np.ndarray]:
    """Four levels of 4 x 5 x 6 x 8 values (level 2 nested under level 1 for ``nested``),
    half the leaves zero, Pareto counts; returns sizes, allowed, public cells, leaves, counts."""
    rng = np.random.default_rng(11 if nested else 10)
    sizes = [4, 5, 6, 8]
    allowed: dict[int, Allowed] = {}
    pairs = [(a, b) for a in range(4) for b in range(5)]
    if nested:
        pairs = [(a, b) for a, b in pairs if b <= a + 1]
        allowed = {1: Allowed((0,), np.array(pairs).T)}
    codes = np.array([(a, b, c, e) for a, b in pairs for c in range(6) for e in range(8)])
    counts = (rng.pareto(3, len(codes)) * 30).astype(np.int64) + 1
    keep = rng.random(len(codes)) < 0.5
    cells = [4, len(pairs), len(pairs) * 6, len(pairs) * 48]
    return sizes, allowed, cells, codes[keep], counts[keep]


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_no_least_squares_release_exceeds_its_bound(nested: bool) -> None:
    sizes, allowed, cells, codes, counts = _tree(nested)
    worst = np.zeros(4)
    control = 0
    for neighbours in ("substitute", "add_remove"):
        plan = plan_budget(4, rho=Fraction(1, 2), neighbours=neighbours)
        bound = np.array(error_bound(None, None, BETA, nodes=cells, plan=plan,
                                     estimator="least_squares"))
        round_off = np.array([rounding(k, plan, "least_squares") for k in range(1, 5)])
        errors = np.array([
            level_errors(codes, counts, *release_tree(
                codes, counts, sizes, plan, RandomSource.from_seed(seed), allowed,
                estimator="least_squares"), 4)
            for seed in range(RELEASES)])
        assert (errors <= bound).all(), (neighbours, errors.max(axis=0), bound)
        worst = np.maximum(worst, errors.max(axis=0) / bound)
        control += int((errors > round_off + 0.05 * (bound - round_off)).any(axis=1).sum())
    assert worst.max() < 1
    assert control > 0  # negative control: 5% of the noise terms is exceeded
