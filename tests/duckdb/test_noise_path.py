"""Privacy review (see /work/review.md): structural checks of the noise path end to end, and one
strict-xfail test per defect found. A finding's test starts passing when the fix lands; strict
xfail then fails the suite, so remove the mark together with the fix.

The structural tests intercept the sampler and the level function actually used by the SQL
release, so they check what the release does, not what the planner says. None is statistical.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from inftda_duckdb.core import topdown
from inftda_duckdb.core.accounting import (
    epsilon_from_rho,
    error_bound,
    plan_budget,
    rho_from_epsilon_delta,
)
from inftda_duckdb.core.errors import BudgetExceededError, InputError
from inftda_duckdb.core.exact import to_fraction
from inftda_duckdb.core.intopt import intopt
from inftda_duckdb.core.noise import DiscreteGaussian, address_buffer
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import Nodes, release_below
from inftda_duckdb.core.tree import Levels
from inftda_duckdb.duckdb.budgets import set_budget
from inftda_duckdb.duckdb.extension import load, release

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")

GEO = {"CA": ["LA", "SF", "SD"], "NY": ["NYC"], "TX": ["Austin", "Dallas"]}
COUNTIES = sorted({c for cs in GEO.values() for c in cs})


class Recorder:
    """Wraps DiscreteGaussian.sample and topdown.level.release_block (one block of parents of a
    level) to see every noise draw."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.samples: list[tuple[bytes, bool, Fraction, np.ndarray]] = []
        self.levels: list[dict[str, Any]] = []
        original_sample = DiscreteGaussian.sample
        original_addressed = DiscreteGaussian.sample_addressed
        original_block = topdown.level.release_block

        def sample(dist: DiscreteGaussian, source: RandomSource, ids: np.ndarray,
                   out: np.ndarray | None = None) -> np.ndarray:
            ids_arr = np.asarray(ids).astype(np.uint64)
            self.samples.append((source._key, source.private, dist.sigma2, ids_arr.copy()))
            return original_sample(dist, source, ids, out)

        def addressed(dist: DiscreteGaussian, source: RandomSource, n: int,
                      out: np.ndarray) -> np.ndarray:  # the blocks' hot path
            ids = np.asarray(address_buffer(n)).copy()
            self.samples.append((source._key, source.private, dist.sigma2, ids))
            return original_addressed(dist, source, n, out)

        def block(levels: Levels, k: int, parent_codes: np.ndarray, c: np.ndarray,
                  *args: Any) -> Any:
            out = original_block(levels, k, parent_codes, c, *args)
            first_child, width = args[3], args[4]  # after lo, hi and the truth
            record: dict[str, Any] = {
                "parents": np.asarray(parent_codes).copy(),
                "totals": np.asarray(c).copy(),
                "size": levels.sizes[k - 1],
                "sigma2": levels.noise[k - 1].sigma2,
                "key": levels.sources[k - 1]._key,
                "allowed_off": None,
                "allowed": None,
                "out_counts": out[2].copy(),
            }
            if first_child is not None:  # a nested level: each parent's allowed children
                table = levels.children[k - 1]
                assert table is not None
                widths = np.broadcast_to(np.asarray(width), c.shape)  # (ragged: one each)
                record["allowed_off"] = np.r_[0, np.cumsum(widths)]
                record["allowed"] = np.concatenate(
                    [table.children[f:f + w] for f, w in zip(first_child, widths, strict=True)]
                    or [np.zeros(0, np.int64)])
            self.levels.append(record)
            return out

        monkeypatch.setattr(DiscreteGaussian, "sample", sample)
        monkeypatch.setattr(DiscreteGaussian, "sample_addressed", addressed)
        monkeypatch.setattr(topdown.level, "release_block", block)


@pytest.fixture
def geo_con() -> Any:
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TYPE a_t AS ENUM ('x', 'y', 'z')")
    c.execute("CREATE TABLE geo (state VARCHAR, county VARCHAR)")
    c.executemany("INSERT INTO geo VALUES (?, ?)", [(s, k) for s, ks in GEO.items() for k in ks])
    pairs = [(s, k) for s, ks in GEO.items() for k in ks]
    rng = random.Random(5)
    rows = [
        (rng.choice(["x", "y", "z"]), 0, *rng.choice(pairs), rng.randrange(40)) for _ in range(600)
    ]
    c.execute("CREATE TABLE d (a a_t, b INTEGER, state VARCHAR, county VARCHAR, person INTEGER)")
    c.executemany("INSERT INTO d VALUES (?, ?, ?, ?, ?)", rows)
    yield c
    c.close()


GEO_RELEASE = (
    "SELECT * FROM inftda_release('d', ['a', 'b', 'state', 'county'], rho := 40, "
    "domains := {'b': [0]}, domain_tables := ['geo'], neighbours := 'add_remove', "
    "level_weights := [1, 2, 3, 4, 5])"
)


# ---------------------------------------------------------------------------------------------
# Q1-Q3: what the release actually noises (normal tests: correct behaviour, pinned)


def test_every_cell_noised_once_with_distinct_ids_fresh_keys_and_accounted_sigma(
    geo_con: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add_remove, 4 levels (ENUM, a |X_k| = 1 level, a nested pair), distinct level weights:
    sigma_k^2 = 1 / (2 rho_k) with rho_k = rho w_k / 15 (sensitivity 1), the root noised once
    with id 0 under its own key, every child of every released parent noised exactly once
    (zeros included), no (key, id) pair drawn twice, fresh secure keys per release."""
    rec = Recorder(monkeypatch)
    out = geo_con.execute(GEO_RELEASE).fetchall()
    rho, weights = Fraction(40), [1, 2, 3, 4, 5]
    sigma2 = [1 / (2 * rho * w / 15) for w in weights]  # root first
    sizes = [3, 1, 3, len(COUNTIES)]

    assert all(private for _, private, _, _ in rec.samples)  # never a seeded source
    by_sigma: dict[Fraction, list[tuple[bytes, np.ndarray]]] = defaultdict(list)
    for key, _, s2, ids in rec.samples:
        by_sigma[s2].append((key, ids))
    assert set(by_sigma) == set(sigma2)
    ((root_key, root_ids),) = by_sigma[sigma2[0]]
    assert root_ids.tolist() == [0]
    level_keys = []
    for k in range(1, 5):
        keys = {key for key, _ in by_sigma[sigma2[k]]}
        assert len(keys) == 1  # one key per level
        level_keys.append(keys.pop())
        ids = np.concatenate([i for _, i in by_sigma[sigma2[k]]])
        assert np.unique(ids).size == ids.size  # no id drawn twice within the level
    assert len({root_key, *level_keys}) == 5  # root and levels use distinct keys

    # every child of every released parent is noised (dense: |X_k| each; nested: the allowed)
    released_prev: list[int] | None = None
    for k in range(1, 5):
        calls = [c for c in rec.levels if c["sigma2"] == sigma2[k]]
        parents = np.concatenate([c["parents"] for c in calls], axis=1)
        totals = np.concatenate([c["totals"] for c in calls])
        assert len({tuple(p) for p in parents.T.tolist()}) == totals.size  # each parent once
        assert all(c["size"] == sizes[k - 1] for c in calls)
        if released_prev is not None:  # the parents are exactly the released children (> 0)
            assert sorted(totals.tolist()) == sorted(released_prev)
            assert all(t > 0 for t in totals)
        noised = sum(ids.size for _, ids in by_sigma[sigma2[k]])
        if k == 4:  # nested: each parent's allowed counties, as geo lists them
            lists = {tuple(sorted(COUNTIES.index(x) for x in ks)) for ks in GEO.values()}
            for c in calls:
                off, allowed = c["allowed_off"], c["allowed"]
                for p in range(off.size - 1):
                    assert tuple(allowed[off[p] : off[p + 1]].tolist()) in lists
            assert noised == sum(c["allowed"].size for c in calls)
        else:
            assert noised == totals.size * sizes[k - 1]
        released_prev = np.concatenate([c["out_counts"] for c in calls]).tolist()
    assert sorted(r[-1] for r in out) == sorted(released_prev or [])

    # a second release in the same process gets entirely fresh keys
    first_keys = {key for key, _, _, _ in rec.samples}
    rec.samples.clear()
    geo_con.execute(GEO_RELEASE).fetchall()
    assert first_keys.isdisjoint({key for key, _, _, _ in rec.samples})


def test_two_releases_in_one_statement_have_independent_keys(
    geo_con: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder(monkeypatch)
    q = "SELECT * FROM inftda_release('d', ['a'], rho := 1)"
    geo_con.execute(f"SELECT * FROM ({q}) UNION ALL SELECT * FROM ({q})").fetchall()
    keys = [key for key, _, _, _ in rec.samples]
    assert len(keys) == 2 and keys[0] != keys[1]
    assert geo_con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(2,)]


@pytest.mark.parametrize(
    "sql",
    [
        "EXECUTE p",  # prepared statement, executed: charged each time
        "SELECT * FROM v",  # a view over the macro: charged per execution
        "COPY (SELECT * FROM inftda_release('d', ['a'], rho := 1)) TO '/dev/null'",
        "EXPLAIN ANALYZE SELECT * FROM inftda_release('d', ['a'], rho := 1)",
    ],
)
def test_no_execution_escapes_the_ledger(geo_con: Any, sql: str) -> None:
    geo_con.execute("PREPARE p AS SELECT * FROM inftda_release('d', ['a'], rho := 1)")
    geo_con.execute("CREATE TEMP VIEW v AS SELECT * FROM inftda_release('d', ['a'], rho := 1)")
    geo_con.execute(sql).fetchall()
    geo_con.execute(sql).fetchall()
    assert geo_con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(2,)]


def test_substitute_sigma_from_epsilon_delta_with_units_and_weights(
    geo_con: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """substitute, m = 2, public row counts, epsilon/delta, weights 1:3 -> sigma_k^2 = m^2 /
    rho_k exactly, with the rho charged equal to the sum of the rho_k the noise protects; the
    root is not noised (the curator asserted every unit's row count is public)."""
    rec = Recorder(monkeypatch)
    release(
        geo_con,
        "d",
        ["a", "state"],
        epsilon=1,
        delta=1e-6,
        level_weights=[1, 3],
        domain_tables=["geo"],
        privacy_unit="person",
        max_rows_per_unit=2,
        rows_per_unit_public=True,
    )
    rho = rho_from_epsilon_delta(1, Fraction(1, 10**6))
    expected = [Fraction(4) / (rho * w / 4) for w in (1, 3)]
    assert sorted({s2 for _, _, s2, _ in rec.samples}) == sorted(expected)
    assert len({key for key, _, _, _ in rec.samples}) == 2  # two levels; no root draw
    (charged,) = geo_con.execute("SELECT rho FROM inftda_ledger").fetchall()[0]
    assert Fraction(charged) == rho == sum(rho * w / 4 for w in (1, 3))


def test_no_seeded_source_without_an_explicit_seed(
    geo_con: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(seed: int) -> RandomSource:
        raise AssertionError("a seeded source was created for an unseeded release")

    monkeypatch.setattr(RandomSource, "from_seed", classmethod(lambda cls, seed: refuse(seed)))
    geo_con.execute(
        "SELECT * FROM inftda_release('d', ['a', 'state'], rho := 1, "
        "domain_tables := ['geo'], privacy_unit := 'person')"
    ).fetchall()
    assert geo_con.execute("SELECT private, seeded FROM inftda_ledger").fetchall() == [
        (True, False)
    ]


# ---------------------------------------------------------------------------------------------
# Q7, Q8: IntOpt against an independent transcription; the bound; conversions


def _paper(x: list[int], c: int) -> list[int]:
    """Algorithm 1, right column, transcribed independently of tests/core/test_intopt.py."""
    m, s = len(x), sum(x)
    z = [max(math.ceil(Fraction(c - s, m)), -xi) for xi in x]
    t = max(abs(v) for v in z)
    order = sorted(range(m), key=lambda i: (x[i], i))
    j = 0
    while sum(z) > c - s:
        d = sum(z) - c + s
        i = order[j]
        z[i] = max(z[i] - d, -x[i], -t)
        j = (j + 1) % m
        if j == 0:
            t += 1
    return [a + b for a, b in zip(x, z, strict=True)]


def test_intopt_equals_an_independent_transcription() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        m = rng.randint(1, 7)
        x = [rng.randint(-9, 12) for _ in range(m)]
        c = rng.randint(0, 30)
        assert intopt(np.array([x]), np.array([c]))[0].tolist() == _paper(x, c)


def test_error_bound_is_the_two_sided_theorem_1() -> None:
    sizes, rho, beta = [4, 5, 6], Fraction(1, 2), 0.05
    got = error_bound(sizes, rho, beta)
    d = 3
    for k in range(1, d + 1):
        want = sum(
            math.sqrt(8 * d / float(rho) * math.log(2 * k * math.prod(sizes[:lvl]) / beta))
            for lvl in range(1, k + 1)
        )
        assert got[k - 1] == pytest.approx(want, rel=1e-12)
    plan = plan_budget(d, rho=rho, neighbours="add_remove")
    assert plan.root_sigma2 == (d + 1) / (2 * rho)  # root share rho / (d + 1), sensitivity 1
    s2 = [float(s) for s in (plan.root_sigma2, *plan.level_sigma2)]
    got = error_bound(sizes, None, beta, plan=plan)
    for k in range(1, d + 1):
        want = math.sqrt(2 * s2[0] * math.log(2 * (k + 1) / beta)) + sum(
            math.sqrt(8 * s2[lvl] * math.log(2 * (k + 1) * math.prod(sizes[:lvl]) / beta))
            for lvl in range(1, k + 1)
        )
        assert got[k - 1] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("eps", "delta"), [(1, 1e-6), (0.1, 1e-8), (10, 1e-5), ("1/3", "1e-9")])
def test_epsilon_delta_conversion_is_conservative(eps: object, delta: object) -> None:
    """Bun-Steinke by name (the conversion in force, CKS: tests/core/test_conversion.py)."""
    rho = rho_from_epsilon_delta(eps, delta, "bun-steinke-2016")
    e, dl = (to_fraction(v, "v", "") for v in (eps, delta))
    with localcontext() as ctx:
        ctx.prec = 80
        r = Decimal(rho.numerator) / Decimal(rho.denominator)
        big_l = (Decimal(dl.denominator) / Decimal(dl.numerator)).ln()
        implied = r + 2 * (r * big_l).sqrt()
        assert implied <= Decimal(e.numerator) / Decimal(e.denominator)
    assert epsilon_from_rho(rho, delta, "bun-steinke-2016") >= float(implied)


# ---------------------------------------------------------------------------------------------
# Findings (strict xfail until fixed)


def _two_db_con() -> Any:
    c = duckdb.connect()
    load(c)
    c.execute("ATTACH ':memory:' AS db2")
    c.execute("CREATE TABLE db2.main.t AS SELECT (['a', 'b'])[1 + i % 2] AS x FROM range(200) r(i)")
    set_budget(c, "db2.main.t", rho=1)
    return c


def test_finding1_use_database_cannot_bypass_the_budget() -> None:
    c = _two_db_con()
    c.execute("USE db2")
    with pytest.raises((BudgetExceededError, InputError, duckdb.Error)):
        c.execute(
            "SELECT * FROM inftda_release('t', ['x'], rho := 5, domains := {'x': ['a', 'b']})"
        ).fetchall()


def test_finding1_search_path_cannot_bypass_the_budget() -> None:
    c = duckdb.connect()
    load(c)
    c.execute("CREATE SCHEMA s")
    c.execute("CREATE TABLE s.t AS SELECT (['a', 'b'])[1 + i % 2] AS x FROM range(200) r(i)")
    set_budget(c, "s.t", rho=1)
    c.execute("SET search_path = 's'")
    with pytest.raises((BudgetExceededError, InputError, duckdb.Error)):
        c.execute(
            "SELECT * FROM inftda_release('t', ['x'], rho := 5, domains := {'x': ['a', 'b']})"
        ).fetchall()


def test_finding1_temp_table_shadowing_cannot_bypass_the_budget() -> None:
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TABLE t AS SELECT 'a' AS x")
    c.execute("CREATE TEMP TABLE t AS SELECT (['a', 'b'])[1 + i % 2] AS x FROM range(200) r(i)")
    set_budget(c, "t", rho=1)  # resolved with TEMP visible: temp.main.t
    with pytest.raises((BudgetExceededError, InputError, duckdb.Error)):
        c.execute(
            "SELECT * FROM inftda_release('t', ['x'], rho := 5, domains := {'x': ['a', 'b']})"
        ).fetchall()


@pytest.mark.parametrize("namesake", ["CREATE TEMP TABLE T AS SELECT 'b' AS x",
                                      "CREATE TEMP VIEW T AS SELECT 'b' AS x", "register"])
def test_a_temp_namesake_of_an_unqualified_source_is_refused_before_the_charge(
    namesake: str,
) -> None:
    # resolved at bind time outside TEMP (memory.main.t); the statement's check finds the
    # TEMP table or view (a registered Arrow table too) the caller's binder would read (name
    # folded: T), charging nothing
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TABLE t AS SELECT 'a' AS x")
    if namesake == "register":
        c.register("T", pa.table({"x": ["b"]}))
    else:
        c.execute(namesake)
    with pytest.raises(duckdb.Error, match="names two objects"):
        c.execute(
            "SELECT * FROM inftda_release('t', ['x'], rho := 1, domains := {'x': ['a', 'b']})"
        ).fetchall()
    assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]
    c.execute("SELECT * FROM inftda_release('memory.main.t', ['x'], rho := 1, "
              "domains := {'x': ['a', 'b']})").fetchall()  # qualified: no namesake
    assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(1,)]


def test_finding2_source_as_its_own_domain_table_is_refused() -> None:
    c = duckdb.connect()
    load(c)
    c.execute(
        "CREATE TABLE p AS SELECT * FROM (VALUES ('CA', 'LA'), ('CA', 'SF'), "
        "('NY', 'NYC')) v(state, county), range(5)"
    )
    with pytest.raises((InputError, duckdb.Error)):
        c.execute(
            "SELECT * FROM inftda_release('p', ['state', 'county'], rho := 1, "
            "domain_tables := ['p'])"
        ).fetchall()
    with pytest.raises(InputError, match="domain_from_data"):  # any spelling of the source
        release(c, "p", ["state", "county"], rho=1, domain_tables=["memory.main.P"])
    assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]


def test_finding3_null_privacy_units_are_not_pooled() -> None:
    c = duckdb.connect()
    load(c)
    c.execute(
        "CREATE TABLE p AS SELECT (['a', 'b'])[1 + i % 2] AS x, "
        "CASE WHEN i < 40 THEN NULL ELSE i END AS person FROM range(100) r(i)"
    )
    # the fix chosen: refuse NULL units before charging, naming the column, the count and the fix
    with pytest.raises(duckdb.Error, match=r"privacy_unit 'person' .* NULL in 40 rows.*Fix"):
        c.execute(
            "SELECT * FROM inftda_release('p', ['x'], rho := 1, seed := 1, "
            "domains := {'x': ['a', 'b']}, privacy_unit := 'person')"
        ).fetchall()
    assert c.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]
    # unknown := 'drop' (add_remove) drops exactly those rows: a huge budget keeps the total
    # within a few units of the 60 identified rows (not 61: no NULL row is kept as a unit)
    with pytest.warns(UserWarning):
        total = release(c, "p", ["x"], rho=10**6, seed=1, domains={"x": ["a", "b"]},
                        privacy_unit="person", unknown="drop", neighbours="add_remove")
    assert abs(sum(total.column("count").to_pylist()) - 60) <= 1
    # without privacy units the same rows are all released (negative control of the count)
    with pytest.warns(UserWarning):
        total = release(c, "p", ["x"], rho=10**6, seed=1, domains={"x": ["a", "b"]},
                        neighbours="add_remove")
    assert abs(sum(total.column("count").to_pylist()) - 100) <= 1


def test_finding4_a_budget_too_small_to_sample_is_refused_before_charging(geo_con: Any) -> None:
    with pytest.raises(duckdb.Error, match="sigma2"):
        geo_con.execute("SELECT * FROM inftda_release('d', ['a'], rho := 1e-9)").fetchall()
    assert geo_con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]


def test_finding5_release_below_refuses_duplicate_prefixes() -> None:
    src = RandomSource.from_seed(3)
    levels = Levels.build([2], plan_budget(1, rho=1000), src)
    root = Nodes.root(100)
    with pytest.raises(InputError, match="must list each prefix at most once"):
        release_below(levels, root, [[0, 0]], [50, 30])
    with pytest.raises(InputError, match="counts must be >= 0"):
        release_below(levels, root, [[0]], [-5])
    # unsorted but distinct codes are fine
    out = release_below(levels, root, [[1, 0]], [30, 70])
    assert out.counts.sum() == 100
