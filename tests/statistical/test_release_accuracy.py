"""Accuracy of whole releases on synthetic data with known truth (paper, Theorem 1).

Most runs use the pure-numpy ``release_tree``, which a seeded DuckDB release equals exactly
(tests/duckdb/test_release.py); a few go through DuckDB where the round trip is the point.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb
import numpy as np
import pytest

from inftda_duckdb.core.accounting import error_bound, plan_budget
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_tree

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore:this release used seed:UserWarning"),
]


def level_errors(tc, tn, rc, rn, d):
    """Max |true - released| over all k-prefixes (zeros included), for k = 1..d."""
    errors = []
    for k in range(1, d + 1):
        keys = np.vstack([tc[:, :k], rc[:, :k]])
        _, inv = np.unique(keys, axis=0, return_inverse=True)
        diff = np.bincount(inv.ravel(), weights=np.concatenate([tn, -rn]))
        errors.append(float(np.abs(diff).max()))
    return errors


def product_data(sizes, rng, zero_fraction=0.0, scale=30.0):
    grids = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
    codes = np.stack([g.ravel() for g in grids], axis=1)
    counts = (rng.pareto(3, len(codes)) * scale).astype(np.int64) + 1
    counts[rng.random(len(codes)) < zero_fraction] = 0
    keep = counts > 0
    return codes[keep], counts[keep]


def test_errors_within_theorem_1_bound():
    # Theorem 1: for each level k, P[max error <= bound_k] >= 1 - beta = 0.95. We check that at
    # least 95% of R = 200 seeded runs are within the bound at every level. False-failure rate:
    # the observed coverage is 100% with the largest error at most 1/2 of the bound; if the
    # true per-level coverage were only 99%, P[fewer than 190 of 200 covered] < 1e-4 (binomial
    # tail), so this test fails spuriously with probability < 1e-4 per level (< 4e-4 in all).
    # Negative control: the bound scaled by 0.1 must be violated in more than 5% of runs.
    rng = np.random.default_rng(0)
    sizes = [5, 4, 6]
    codes, counts = product_data(sizes, rng, zero_fraction=0.5)
    rho = Fraction(1, 2)
    bound = np.array(error_bound(sizes, rho, 0.05))
    plan = plan_budget(3, rho=rho)
    errors = np.array(
        [
            level_errors(codes, counts, *release_tree(codes, counts, sizes, plan,
                                                      RandomSource.from_seed(s)), 3)
            for s in range(200)
        ]
    )
    coverage = (errors <= bound).mean(axis=0)
    assert (coverage >= 0.95).all(), (coverage, bound, errors.max(axis=0))
    control = (errors <= 0.1 * bound).mean(axis=0)
    assert (control < 0.95).all(), control


def rms_errors(sizes, rho, runs, seed0=0, depth_levels=None):
    """Root-mean-square error of every released k-prefix count vs the truth, per level."""
    rng = np.random.default_rng(1)
    codes, counts = product_data(sizes, rng, scale=2000.0)  # large counts: no clipping at 0
    counts += 1000
    d = len(sizes)
    plan = plan_budget(d, rho=rho)
    sq = np.zeros(d)
    cells = np.zeros(d)
    for s in range(seed0, seed0 + runs):
        rc, rn = release_tree(codes, counts, sizes, plan, RandomSource.from_seed(s))
        for k in range(1, d + 1):
            keys = np.vstack([codes[:, :k], rc[:, :k]])
            _, inv = np.unique(keys, axis=0, return_inverse=True)
            diff = np.bincount(inv.ravel(), weights=np.concatenate([counts, -rn]))
            sq[k - 1] += float((diff**2).sum())
            cells[k - 1] += diff.shape[0]
    return np.sqrt(sq / cells)


def test_error_scales_like_sqrt_d_over_rho():
    # sigma^2 = d / rho: quadrupling rho halves every level's error; quadrupling d at the same
    # rho doubles level 1's error. Tolerance [1.8, 2.2]: each RMS is estimated from >= 4,000
    # squared errors (relative standard error <= 1.2%, so the ratio's <= 1.7%); the 10% margin
    # is ~6 standard errors (false-failure rate < 1e-8), and the discrete Gaussian's variance
    # equals sigma^2 to within 1e-10 at these sigma (>= 5). Negative control: doubling rho gives
    # a ratio of ~1.41, outside the interval.
    sizes = [40, 10, 10]
    base = rms_errors(sizes, Fraction(1, 50), 100)
    quad = rms_errors(sizes, Fraction(4, 50), 100, seed0=1000)
    double = rms_errors(sizes, Fraction(2, 50), 100, seed0=2000)
    ratio = base / quad
    assert ((ratio > 1.8) & (ratio < 2.2)).all(), ratio
    control = base / double
    assert ((control < 1.6) & (control > 1.25)).all(), control
    # depth: level 1 of a 12-level tree at rho vs a 3-level tree at rho (sigma^2 x 4)
    deep = rms_errors([40, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], Fraction(1, 50), 100, seed0=3000)
    shallow = rms_errors([40, 1, 1], Fraction(1, 50), 100, seed0=4000)
    assert 1.8 < deep[0] / shallow[0] < 2.2, (deep[0], shallow[0])


def random_case(rng):
    d = int(rng.integers(1, 11))
    sizes = [int(x) for x in rng.integers(1, 7, size=d)]
    n_leaves = int(rng.integers(0, 60))
    codes = np.unique(np.column_stack([rng.integers(0, s, n_leaves) for s in sizes]), axis=0)
    counts = rng.integers(1, 50 if rng.random() < 0.5 else 3, size=len(codes))
    return sizes, codes.reshape(-1, d), counts


def test_invariants_on_hundreds_of_random_releases():
    # deterministic (seeded) cases: random domains, depth 1-10, sparse and dense, both neighbours
    rng = np.random.default_rng(2)
    for case in range(300):
        sizes, codes, counts = random_case(rng)
        d = len(sizes)
        neighbours = "add_remove" if case % 3 == 0 else "substitute"
        rho = Fraction(int(rng.integers(1, 100)), 50)
        plan = plan_budget(d, rho=rho, neighbours=neighbours)
        rc, rn = release_tree(codes, counts, sizes, plan, RandomSource.from_seed(case))
        assert rc.shape == (len(rn), d)
        assert (rn > 0).all()
        assert ((rc >= 0) & (rc < np.array(sizes))).all()
        assert len(np.unique(rc, axis=0)) == len(rc)
        if neighbours == "substitute":
            assert rn.sum() == counts.sum()


def test_sql_releases_keep_invariants_and_equal_reference(con):
    # 20 random releases through DuckDB: the seeded SQL release equals release_tree exactly
    rng = np.random.default_rng(3)
    for case in range(20):
        sizes, codes, counts = random_case(rng)
        d = len(sizes)
        cols = [f"c{j}" for j in range(d)]
        rows = np.repeat(codes, counts, axis=0)
        con.execute(f"CREATE OR REPLACE TABLE r ({', '.join(c + ' INTEGER' for c in cols)})")
        if len(rows):
            con.executemany(f"INSERT INTO r VALUES ({', '.join('?' * d)})", rows.tolist())
        doms = "{" + ", ".join(f"'{c}': range({s})" for c, s in zip(cols, sizes, strict=True)) + "}"
        got = con.execute(
            # a seeded release carries its not-private marker column: compare the rest
            f"SELECT * EXCLUDE (inftda_not_private) FROM inftda_release('r', {cols}, rho := 0.3, "
            f"domains := {doms}, seed := {case})"
        ).fetchall()
        rc, rn = release_tree(codes, counts, sizes, plan_budget(d, rho=Fraction(3, 10)),
                              RandomSource.from_seed(case))
        assert got == [(*c, n) for c, n in zip(rc.tolist(), rn.tolist(), strict=True)]


def test_false_positives_outside_the_true_support(con):
    # sparse data (10 of 2,000 leaves non-zero) at small rho: zero cells get noise, so the output
    # has leaves outside the true support. Control: at a huge rho the support is exact.
    con.execute(
        "CREATE TABLE s AS SELECT i % 5 AS a, (i * 7) % 20 AS b, (i * 3) % 20 AS c "
        "FROM range(10) t(i), range(30)"
    )
    truth = set(con.execute("SELECT DISTINCT a, b, c FROM s").fetchall())
    doms = "domains := {'a': range(5), 'b': range(20), 'c': range(20)}"
    outside = 0
    for _ in range(5):
        out = con.execute(
            f"SELECT a, b, c FROM inftda_release('s', ['a', 'b', 'c'], rho := 0.1, {doms})"
        ).fetchall()
        outside += len(set(out) - truth)
    assert outside > 0
    exact = con.execute(
        f"SELECT a, b, c FROM inftda_release('s', ['a', 'b', 'c'], rho := 1e6, {doms})"
    ).fetchall()
    assert set(exact) == truth


def test_duckdb_release_is_fresh_each_time(con):
    con.execute("CREATE TABLE f AS SELECT i % 4 AS a FROM range(400) t(i)")
    q = "SELECT * FROM inftda_release('f', ['a'], rho := 0.05, domains := {'a': range(4)})"
    results = {tuple(con.execute(q).fetchall()) for _ in range(5)}
    assert len(results) > 1
    assert isinstance(con, duckdb.DuckDBPyConnection)
