"""Error bars, measured: over many seeded releases of a small tree with known truth, intervals
miss the truth in at most beta of the releases, are not vacuous, and a planned rho meets its
target; a few releases through DuckDB check that SQL and Python give these very intervals.

Most releases run through ``core.topdown.release_tree`` (a seeded DuckDB release equals it,
tests/duckdb/test_release.py); ``intervals`` is ``[max(0, c - h), c + h]`` with ``h =
half_width(bound)``, computed here from the same core functions the engines call.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb
import numpy as np
import pytest

import inftda_duckdb
from inftda_duckdb.core import errorbars as eb
from inftda_duckdb.core.accounting import joint_bounds, plan_budget
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.targets import plan_target
from inftda_duckdb.core.topdown import release_tree

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore:this release used seed:UserWarning"),
]

SIZES = [3, 4, 5]
CELLS = [3, 12, 60]
BETA = 0.2
RUNS = 1200
# The tests assert an observed miss fraction <= BETA over RUNS releases. Theorem 1 says the true
# fraction is at most BETA; the union bounds behind it make it far smaller in practice (0 misses
# in 13,000+ audited releases). False-failure rate: if the true fraction were as high as 0.15,
# P[more than 0.2 * 1200 = 240 misses] = P[Binomial(1200, 0.15) > 240] < 2e-6 (a tail 4.9
# standard deviations out); at the fractions observed (< 0.01) it is below 1e-100.


def tree(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The small tree's non-zero leaves (counts well above the noise, so the errors are the
    noise's and not the clipping at 0's; about a third of the cells are 0)."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.arange(s) for s in SIZES], indexing="ij")
    codes = np.stack([g.ravel() for g in grids], axis=1)
    counts = rng.integers(50, 400, len(codes))
    counts[rng.random(len(codes)) < 0.3] = 0
    keep = counts > 0
    return codes[keep], counts[keep]


def prefix_errors(codes, counts, rc, rn, k):
    """Per k-prefix of the domain (every one, released or not): (true, released)."""
    radix = np.cumprod([1, *SIZES[:k][::-1]])[::-1][1:]  # mixed radix of the first k codes
    n = int(np.prod(SIZES[:k]))
    true = np.bincount(codes[:, :k] @ radix, weights=counts, minlength=n)
    released = np.bincount(rc[:, :k] @ radix, weights=rn, minlength=n)
    return true.astype(np.int64), released.astype(np.int64)


def releases(plan, runs=RUNS, seed0=0):
    codes, counts = tree()
    for s in range(seed0, seed0 + runs):
        rc, rn = release_tree(codes, counts, SIZES, plan, RandomSource.from_seed(s))
        yield codes, counts, rc, rn


def misses(true, released, half):
    lower = np.maximum(released - half, 0)
    upper = released + half
    return bool(((true < lower) | (true > upper)).any())


@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
def test_intervals_of_every_level_cover_the_truth_in_1_minus_beta_of_releases(neighbours):
    """Each level alone (Theorem 1) and all levels on the one event of levels 1..3, over
    1,200 releases at beta = 0.2 (false-failure rate above). Negative control: intervals a
    tenth as wide miss in more than beta of the releases at every level."""
    plan = plan_budget(3, rho=Fraction(1, 20), neighbours=neighbours)
    alone = [eb.half_width(joint_bounds(CELLS, plan, BETA, k)[k]) for k in (1, 2, 3)]
    together = [eb.half_width(b) for b in joint_bounds(CELLS, plan, BETA, 3)[1:]]
    narrow = [max(h // 10, 1) for h in alone]
    miss_alone = np.zeros(3)
    miss_joint = 0
    miss_narrow = np.zeros(3)
    worst = np.zeros(3)
    for codes, counts, rc, rn in releases(plan):
        any_joint = False
        for k in (1, 2, 3):
            true, released = prefix_errors(codes, counts, rc, rn, k)
            worst[k - 1] = max(worst[k - 1], np.abs(true - released).max())
            miss_alone[k - 1] += misses(true, released, alone[k - 1])
            any_joint |= misses(true, released, together[k - 1])
            miss_narrow[k - 1] += misses(true, released, narrow[k - 1])
        miss_joint += any_joint
    assert (miss_alone / RUNS <= BETA).all(), (miss_alone, alone, worst)
    assert miss_joint / RUNS <= BETA, (miss_joint, together, worst)
    assert (miss_narrow / RUNS > BETA).all(), (miss_narrow, narrow, worst)
    # not vacuous: an interval is at most 2 * the level's bound wide
    for k in (1, 2, 3):
        assert 2 * alone[k - 1] <= 2 * joint_bounds(CELLS, plan, BETA, k)[k]


def sum_bound(cells, level, per, bounds, released_prefixes):
    """The recursion of docs/explanation/error-bars.md for a set ``cells`` of level-``level``
    prefixes (tuples of codes), per group of ``per`` levels: {group: (n_cells, bound)};
    ``released_prefixes[j]``: the j-prefixes the release has (for counting known children).
    An independent implementation of what ``inftda_sum`` computes in SQL."""
    fs = {c: bounds[level] for c in cells}
    fc = {c: 0.0 for c in cells}
    known = {c: c in released_prefixes[level] for c in cells}
    size = {c: 1 for c in cells}
    for j in range(level, per, -1):
        parents: dict[tuple, list] = {}
        for c in fs:
            parents.setdefault(c[:j - 1], []).append(c)
        nfs, nfc, nknown, nsize = {}, {}, {}, {}
        for p, children in parents.items():
            g = sum(fs[c] for c in children)
            h = sum(fc[c] for c in children) + max(
                SIZES[j - 1] - sum(known[c] for c in children), 0) * bounds[j]
            nfs[p] = min(g, bounds[j - 1] + h)
            nfc[p] = min(h, bounds[j - 1] + g)
            nknown[p] = p in released_prefixes[j - 1]
            nsize[p] = sum(size[c] for c in children)
        fs, fc, known, size = nfs, nfc, nknown, nsize
    return {p: (size[p], fs[p]) for p in fs}


def random_set(rng, level):
    """A random set of level-``level`` prefixes: whole subtrees, scattered cells, or almost
    all cells of a parent (the shapes the recursion treats differently)."""
    every = [tuple(int(x) for x in c) for c in np.ndindex(*SIZES[:level])]
    shape = rng.integers(3)
    if shape == 0:  # whole subtrees under one or two level-1 codes
        picked = set(rng.choice(SIZES[0], size=rng.integers(1, 3), replace=False).tolist())
        return [c for c in every if c[0] in picked]
    if shape == 1:  # scattered
        return [c for c in every if rng.random() < 0.2] or every[:1]
    return [c for c in every if c[-1] != int(rng.integers(SIZES[level - 1]))]  # all but one


def test_sums_over_sets_of_cells_cover_the_truth_in_1_minus_beta_of_releases():
    """The interval of a sum over a set of level-3 cells (one total, and per level-1 group),
    a fresh random set per release, on the event of levels 1..3 at beta = 0.2: misses in at
    most beta of 1,200 releases (false-failure rate above). Negative control: intervals a
    tenth as wide as one level-3 cell's miss in more than beta (a sum's bound grows with its
    cells; its error mostly does not)."""
    plan = plan_budget(3, rho=Fraction(1, 20))
    bounds = joint_bounds(CELLS, plan, BETA, 3)
    rng = np.random.default_rng(7)
    miss = narrow = 0
    for codes, counts, rc, rn in releases(plan, seed0=10_000):
        cells = random_set(rng, 3)
        have = [{()}] + [{tuple(int(x) for x in r[:j]) for r in rc} for j in (1, 2, 3)]
        truth = {tuple(int(x) for x in c): int(n) for c, n in zip(codes, counts, strict=True)}
        out = {tuple(int(x) for x in c): int(n) for c, n in zip(rc, rn, strict=True)}
        any_miss = any_narrow = False
        for per in (0, 1):
            for group, (_, bound) in sum_bound(cells, 3, per, bounds, have).items():
                inside = [c for c in cells if c[:per] == group]
                t = sum(truth.get(c, 0) for c in inside)
                r = sum(out.get(c, 0) for c in inside)
                half = eb.half_width(bound)
                any_miss |= not max(r - half, 0) <= t <= r + half
                any_narrow |= abs(t - r) > eb.half_width(bounds[3]) // 10
        miss += any_miss
        narrow += any_narrow
    assert miss / RUNS <= BETA, miss
    assert narrow / RUNS > BETA, narrow


def test_the_planned_rho_meets_its_target_in_1_minus_beta_of_releases():
    """plan_target's rho, released 1,200 times: the largest error at the targeted level is at
    most the target in at least 1 - beta = 0.8 of the releases (the false-failure rate is the
    one above, for misses). Negative control: a hundredth of that rho (noise 10 times larger)
    meets it in fewer than 1 - beta of the releases (about a third: the bound is some 8 times
    the typical largest error)."""
    target = 40.0
    planned = plan_target(CELLS, {3: target}, BETA)
    assert planned.bounds[2] <= target
    met = low = 0
    cheap = plan_budget(3, rho=planned.rho / 100, level_weights=planned.level_weights)
    for codes, counts, rc, rn in releases(planned.budget):
        true, released = prefix_errors(codes, counts, rc, rn, 3)
        met += np.abs(true - released).max() <= target
    for codes, counts, rc, rn in releases(cheap, seed0=50_000):
        true, released = prefix_errors(codes, counts, rc, rn, 3)
        low += np.abs(true - released).max() <= target
    assert met / RUNS >= 1 - BETA, met
    assert low / RUNS < 1 - BETA, low


def test_sql_and_python_give_the_same_intervals_and_they_cover_the_truth():
    """A handful of seeded DuckDB releases of the small tree: inftda_intervals (SQL, by its
    ledger id), intervals() on the Arrow table and on the table give the same rows; each level's
    intervals cover the truth (at beta = 0.2 a miss has probability < 0.2 per release; the
    observed fraction in the 1,200 releases above is below 0.01), and inftda_sum matches the
    reference recursion."""
    codes, counts = tree()
    con = duckdb.connect()
    inftda_duckdb.load(con)
    rows = [(int(a), int(b), int(c)) for (a, b, c), n in zip(codes, counts, strict=True)
            for _ in range(int(n))]
    con.execute("CREATE TABLE t(a INTEGER, b INTEGER, c INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    domains = {"a": range(3), "b": range(4), "c": range(5)}
    for seed in range(5):
        released = inftda_duckdb.release(con, "t", ["a", "b", "c"], rho=0.05, domains=domains,
                                         seed=seed)
        rid = int(released.schema.metadata[b"ledger_id"])
        con.register("arrow_release", released)
        con.execute(f"CREATE OR REPLACE TABLE r{seed} AS SELECT * FROM arrow_release")
        con.unregister("arrow_release")
        for k in (1, 2, 3):
            sql = con.sql(f"SELECT * FROM inftda_intervals('r{seed}', level := {k}, "
                          f"beta := {BETA}, release := {rid})").fetchall()
            arrow = inftda_duckdb.intervals(con, released, level=k, beta=BETA)
            table = inftda_duckdb.intervals(con, f"r{seed}", level=k, beta=BETA, release=rid)
            assert sql == [tuple(r.values()) for r in arrow.to_pylist()]
            assert sql == [tuple(r.values()) for r in table.to_pylist()]
            half = int(arrow.schema.metadata[b"half_width"])
            assert all(up - low <= 2 * half for *_, low, up in sql)
            truth = {tuple(r[:k]): r[k] for r in con.execute(
                f"SELECT {', '.join('abc'[:k])}, count(*) FROM t GROUP BY ALL").fetchall()}
            for *prefix, _, low, up in sql:
                assert low <= truth.get(tuple(prefix), 0) <= up
        con.execute(f"CREATE OR REPLACE VIEW s AS SELECT a, b, c FROM r{seed} WHERE c <> 2 "
                    "UNION SELECT 0, 0, 4")
        got = con.sql(f"SELECT cells, bound FROM inftda_sum('r{seed}', 's', level := 3, "
                      f"beta := {BETA}, release := {rid})").fetchall()
        cells = [tuple(r) for r in con.execute("SELECT * FROM s").fetchall()]
        have = [{()}] + [{tuple(r[:j]) for r in con.execute(f"SELECT a, b, c FROM r{seed}")
                          .fetchall()} for j in (1, 2, 3)]
        want = sum_bound(cells, 3, 0, joint_bounds(CELLS, plan_budget(3, rho=Fraction(1, 20)),
                                                   BETA, 3), have)[()]
        assert got[0][0] == want[0]
        assert got[0][1] == pytest.approx(want[1], rel=1e-12)
