"""``estimator := 'least_squares'``: the two-pass estimate equals a direct least-squares solve
(the oracle, with a negative control), its integers are a function of the noisy counts alone,
any split of the tree gives the same release, the engine paths equal the numpy reference, every
output promise holds, and what is refused is refused before the charge."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import pytest

from inftda_duckdb.core import leastsquares as ls
from inftda_duckdb.core.accounting import ETA, error_bound, plan_budget, rounding
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.leastsquares import arithmetic as arithmetic_module
from inftda_duckdb.core.leastsquares.arithmetic import Arithmetic
from inftda_duckdb.core.leastsquares.forest import Forest
from inftda_duckdb.core.leastsquares.passes import Passes, Variances, combine
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_below, release_tree
from inftda_duckdb.core.tree import Allowed, Levels, Nodes, mixed_radix
from inftda_duckdb.duckdb import allocator, sqlgen
from inftda_duckdb.duckdb.extension import preview, release

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")

NEST = Allowed((0,), np.array([[0, 0, 1, 2, 2, 2], [0, 1, 1, 0, 2, 3]]))  # level 2 under level 1
NEST3 = Allowed((1,), np.array([[0, 0, 1, 1, 2, 3, 3], [0, 2, 1, 3, 0, 1, 2]]))  # level 3

TREES = {  # sizes, nested levels, neighbours, level weights
    "flat": ([3, 4, 2], {}, "substitute", None),
    "add_remove": ([3, 4, 2], {}, "add_remove", None),
    "level weights": ([2, 2, 2, 2], {}, "substitute", [1, 5, 2, 7]),
    "nested": ([3, 4, 2], {1: NEST}, "substitute", None),
    "nested, add_remove, weights": ([3, 4, 2], {1: NEST}, "add_remove", [1, 2, 3, 4]),
    "two nested levels": ([3, 4, 4], {1: NEST, 2: NEST3}, "substitute", [3, 1, 2]),
}


def _setup(name: str, seed: int = 1, rho: object = 1) -> tuple[Levels, Any, RandomSource]:
    sizes, allowed, neighbours, weights = TREES[name]
    plan = plan_budget(len(sizes), rho=rho, neighbours=neighbours, level_weights=weights)
    source = RandomSource.from_seed(seed)
    return Levels.build(sizes, plan, source, allowed), plan, source


def _public_cells(levels: Levels) -> list[list[tuple[int, ...]]]:
    """Every public cell of every level (code tuples, code order), the root first."""
    out: list[list[tuple[int, ...]]] = [[()]]
    for k in range(1, levels.depth + 1):
        table = levels.children[k - 1]
        nxt = []
        for p in out[-1]:
            if table is None:
                kids = range(levels.sizes[k - 1])
            else:
                lo, hi = table.of(np.array(p, np.int64).reshape(k - 1, 1))
                kids = [int(c) for c in table.children[lo[0]:hi[0]]]
            nxt += [(*p, c) for c in kids]
        out.append(nxt)
    return out


def direct_solve(levels: Levels, plan: Any, z0: int | None,
                 weights: list[float] | None = None) -> dict[tuple[int, ...], float]:
    """The oracle: every node's weighted least-squares estimate from all levels' noisy counts
    (the noise alone: the true counts are 0), by one dense solve of the normal equations over
    the leaves (with the total fixed to 0 when n is public). ``weights`` replace the levels'
    1 / sigma**2 (the negative control)."""
    cells = _public_cells(levels)
    leaves = cells[-1]
    rows, y, w = [], [], []
    for k in range(1, levels.depth + 1):
        codes = np.array(cells[k], np.int64).T.reshape(k, -1)
        ids = levels.addressers[k - 1].cells(codes[:-1], np.arange(codes.shape[1]), codes[-1])
        noise = levels.noise[k - 1].sample(levels.sources[k - 1], ids)
        for cell, z in zip(cells[k], noise, strict=True):
            rows.append([float(leaf[:k] == cell) for leaf in leaves])
            y.append(float(z))
            w.append(1 / float(plan.level_sigma2[k - 1]) if weights is None else weights[k - 1])
    if z0 is not None:
        rows.append([1.0] * len(leaves))
        y.append(float(z0))
        w.append(1 / float(plan.root_sigma2))
    a, wy = np.array(rows), np.array(w) * np.array(y)
    normal = a.T @ (np.array(w)[:, None] * a)
    if z0 is None:  # the total is n: a Lagrange multiplier fixes the leaves' sum
        size = len(leaves)
        kkt = np.block([[normal, np.ones((size, 1))], [np.ones((1, size)), np.zeros((1, 1))]])
        theta = np.linalg.solve(kkt, np.append(a.T @ wy, 0.0))[:size]
    else:
        theta = np.linalg.solve(normal, a.T @ wy)
    return {cell: float(sum(t for leaf, t in zip(leaves, theta, strict=True)
                            if leaf[:len(cell)] == cell))
            for level in cells for cell in level}


def two_pass(levels: Levels, plan: Any, source: RandomSource
             ) -> tuple[dict[tuple[int, ...], float], Arithmetic, int | None]:
    """The estimates ``e`` of :mod:`inftda_duckdb.core.leastsquares` before their rounding."""
    arith = ls.arithmetic_of(plan, levels.sizes, [a is not None for a in levels.allowed])
    forest = Forest.build(levels, 0, None, levels.depth, arith.cap_z)
    variances = Variances(levels, plan.root_sigma2)
    passes = Passes(forest, variances, arith)
    t, vs = passes.upward()
    z0 = ls.root_noise(plan, source)
    e0 = 0 if z0 is None else combine(z0, int(t[0]), float(vs[0]) if vs.size else 0.0,
                                      variances, arith)
    leaves = passes.downward(np.array([e0], np.int64), rounding=False, keep_last=True)
    got = {(): e0 / arith.one}
    for k, level in enumerate(_public_cells(levels)[1:], 1):
        values = leaves if k == levels.depth else forest.level(k).values
        got.update(zip(level, (values / arith.one).tolist(), strict=True))
    return got, arith, z0


@pytest.mark.parametrize("name", list(TREES))
def test_two_pass_estimate_equals_a_direct_least_squares_solve(name: str) -> None:
    levels, plan, source = _setup(name)
    got, arith, z0 = two_pass(levels, plan, source)
    want = direct_solve(levels, plan, z0)
    assert got.keys() == want.keys()
    worst = max(abs(got[c] - want[c]) for c in want)
    assert worst < 1e-9  # the solve's own float error is ~1e-12
    assert arith.eta < 1e-9  # the certified bound on the pass's arithmetic, for these plans
    assert any(abs(v) > 0.5 for v in want.values())  # not a trivial (all-zero) noise draw


def test_the_oracle_sees_wrong_weights() -> None:
    """Negative control: the same solve with every level weighted alike (ordinary least
    squares) differs from the two-pass estimate under unequal level weights."""
    levels, plan, source = _setup("level weights")
    got, _, z0 = two_pass(levels, plan, source)
    unweighted = direct_solve(levels, plan, z0, weights=[1.0] * levels.depth)
    assert max(abs(got[c] - unweighted[c]) for c in got) > 1e-2


def test_the_integers_are_those_of_the_noisy_counts() -> None:
    """Privacy: the pass runs on the noise ``Z`` and adds the truth ``q`` after; its integers
    are exactly those the same arithmetic computes from the noisy counts ``y = q + Z`` (the
    true counts cancel in every difference it multiplies), so the release is post-processing
    of the noisy counts alone."""
    levels, plan, _ = _setup("nested")
    arith = ls.arithmetic_of(plan, levels.sizes, [a is not None for a in levels.allowed])
    wide = Arithmetic(arith.bits, (10**9,) * 4, (10**9,) * 4, (10**9,) * 4, arith.eta)
    noise = Forest.build(levels, 0, None, 3, arith.cap_z)
    noisy = Forest.build(levels, 0, None, 3, arith.cap_z)
    rng = np.random.default_rng(4)
    leaves = rng.integers(0, 5000, noisy.level(3).count)  # the truth: any leaf counts
    truth = [leaves]
    for k in (2, 1):
        truth.insert(0, noisy.level(k + 1).child_sums(truth[0]))
    n = int(leaves.sum())
    for k in (1, 2, 3):
        noisy.level(k).values += truth[k - 1].astype(noisy.level(k).values.dtype)
    a = Passes(noise, Variances(levels, None), wide)
    a.upward()
    leaves_a = a.downward(np.zeros(1, np.int64), rounding=False, keep_last=True)
    b = Passes(noisy, Variances(levels, None), wide)
    b.upward()
    leaves_b = b.downward(np.array([n * arith.one], np.int64), rounding=False, keep_last=True)
    assert leaves_a is not None and leaves_b is not None
    for k in (1, 2):  # every fixed-point estimate, to the last bit
        assert np.array_equal(noisy.level(k).values,
                              noise.level(k).values + truth[k - 1] * arith.one)
    assert np.array_equal(leaves_b, leaves_a + truth[2] * arith.one)


def _half_the_cells(levels: Levels, plan: Any, rng: np.random.Generator, seed: int
                    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray], Arithmetic]:
    """Half the public leaves (random, counts 1..29), their release in one process and the
    release's arithmetic."""
    cells = _public_cells(levels)[-1]
    picked = rng.choice(len(cells), len(cells) // 2, replace=False)
    leaves = np.array([cells[i] for i in sorted(picked)], np.int64)
    counts = rng.integers(1, 30, leaves.shape[0])
    want = release_tree(leaves, counts, levels.sizes, plan, RandomSource.from_seed(seed),
                        dict(enumerate(levels.allowed)), estimator="least_squares")
    arith = ls.arithmetic_of(plan, levels.sizes, [a is not None for a in levels.allowed])
    return leaves, counts, want, arith


@pytest.mark.parametrize("name", ["nested, add_remove, weights", "two nested levels"])
@pytest.mark.parametrize("cut", [0, 1, 2])
def test_any_split_at_a_cut_equals_the_whole_tree(name: str, cut: int) -> None:
    """Spark's split: the sums below every cut cell in any batches (:func:`ls.messages`), the
    levels above (:func:`ls.top`), then each released cut node's subtree in any batch
    (:func:`ls.below`): the same release as the whole tree in one process."""
    levels, plan, source = _setup(name, seed=7)
    rng = np.random.default_rng(3)
    leaves, counts, want, arith = _half_the_cells(levels, plan, rng, 7)
    codes = ls.cut_cells(levels, cut)
    order = rng.permutation(codes.shape[1])
    sums = [ls.messages(levels, arith, cut, codes[:, part])
            for part in np.array_split(order, min(3, order.shape[0]))]
    run = ls.LeastSquares(arith, int(counts.sum()), ls.root_noise(plan, source),
                          plan.root_sigma2)
    top, root, cut_codes, e = run.top(levels, cut, codes[:, order],
                                      np.concatenate([s[0] for s in sums]),
                                      np.concatenate([s[1] for s in sums]))
    nodes = Nodes.root(root)
    if cut:
        keys = mixed_radix(leaves.T[:cut], levels.sizes[:cut], np.int64)
        prefixes, inverse = np.unique(keys, return_inverse=True)
        nodes = release_below(top, nodes, prefixes, np.bincount(inverse, counts).astype(np.int64),
                              upto=cut)
    at = np.searchsorted(mixed_radix(cut_codes, levels.sizes[:cut], np.int64),
                         mixed_radix(nodes.codes, levels.sizes[:cut], np.int64))
    out = []
    for batch in np.array_split(rng.permutation(nodes.counts.shape[0]), 2):
        if batch.size:
            below = ls.below(levels, arith, cut, nodes.codes[:, batch], e[at][batch])
            out.append(release_below(below, Nodes(nodes.codes[:, batch], nodes.counts[batch]),
                                     leaves.T, counts))
    got = np.concatenate([o.codes for o in out], axis=1).T
    got_counts = np.concatenate([o.counts for o in out])
    order = np.lexsort(got.T[::-1])
    assert np.array_equal(got[order], want[0]) and np.array_equal(got_counts[order], want[1])


@pytest.mark.parametrize(("name", "bands"), [
    ("level weights", [0, 1, 4]), ("level weights", [0, 2, 3, 4]), ("level weights", [1, 3, 4]),
    ("two nested levels", [0, 1, 3]), ("two nested levels", [0, 1, 2, 3]),
    ("nested, add_remove, weights", [0, 2, 3]), ("nested, add_remove, weights", [1, 2, 3])])
def test_any_split_into_bands_equals_the_whole_tree(name: str, bands: list[int]) -> None:
    """Spark's bands: the sums below every public cell of each band's lower level, summed band
    by band from the leaves' up (:func:`ls.messages` with ``upto``, in any batches), the levels
    above the cut (:func:`ls.top`), each band's levels below released nodes in any batch
    (:func:`ls.band`, handing on the errors of its nodes), the last band to the leaves
    (:func:`ls.below`): the same release as the whole tree in one process."""
    levels, plan, source = _setup(name, seed=11)
    rng = np.random.default_rng(4)
    leaves, counts, want, arith = _half_the_cells(levels, plan, rng, 11)

    def under(sums: ls.Sums, b: int, roots: np.ndarray) -> ls.Sums:  # the sums below roots
        mine = np.isin(mixed_radix(sums[0][:b], levels.sizes[:b], np.int64),
                       mixed_radix(roots, levels.sizes[:b], np.int64))
        return sums[0][:, mine], sums[1][mine], sums[2][mine]

    def in_batches(level: int, upto: int | None, sums: ls.Sums | None) -> ls.Sums:
        codes = ls.cut_cells(levels, level)
        order = rng.permutation(codes.shape[1])
        parts = [(codes[:, part], *ls.messages(
                     levels, arith, level, codes[:, part], upto=upto,
                     sums=None if sums is None else under(sums, level, codes[:, part])))
                 for part in np.array_split(order, min(3, order.shape[0])) if part.size]
        return (np.concatenate([p[0] for p in parts], axis=1),
                np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]))

    sums: ls.Sums | None = None
    below: dict[int, ls.Sums] = {}
    for b, e in reversed(list(itertools.pairwise(bands))):
        sums = below[b] = in_batches(b, None if e == levels.depth else e, sums)
    cut = bands[0]
    run = ls.LeastSquares(arith, int(counts.sum()), ls.root_noise(plan, source),
                          plan.root_sigma2)
    top, root, codes, e = run.top(levels, cut, *below[cut])
    nodes = Nodes.root(root)
    if cut:
        nodes = release_below(top, nodes, leaves.T, counts, upto=cut)
    for b, upto in itertools.pairwise(bands):
        keys = mixed_radix(codes, levels.sizes[:b], np.int64)
        e_nodes = e[np.searchsorted(keys, mixed_radix(nodes.codes, levels.sizes[:b], np.int64))]
        out, found = [], []
        for batch in np.array_split(rng.permutation(nodes.counts.shape[0]), 2):
            if not batch.size:
                continue
            part = Nodes(nodes.codes[:, batch], nodes.counts[batch])
            if upto == levels.depth:
                tree = ls.below(levels, arith, b, part.codes, e_nodes[batch])
            else:
                tree, c, x = ls.band(levels, arith, b, part.codes, e_nodes[batch], upto,
                                     under(below[upto], b, part.codes))
                found.append((c, x))
            out.append(release_below(tree, part, leaves.T, counts, upto=upto))
        nodes = Nodes(np.concatenate([o.codes for o in out], axis=1),
                      np.concatenate([o.counts for o in out]))
        if found:
            codes = np.concatenate([f[0] for f in found], axis=1)
            e = np.concatenate([f[1] for f in found])
            order = np.lexsort(codes[::-1])
            codes, e = codes[:, order], e[order]
    got = nodes.codes.T
    order = np.lexsort(got.T[::-1])
    assert np.array_equal(got[order], want[0]) and np.array_equal(nodes.counts[order], want[1])


@pytest.fixture
def trips(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute("CREATE TABLE t AS SELECT (hash(i, 1) % 6)::INTEGER AS a, "
                "(hash(i, 2) % 5)::INTEGER AS b, (hash(i, 3) % 12)::INTEGER AS c, "
                "(i % 700)::INTEGER AS person FROM range(3000) r(i) WHERE hash(i, 4) % 3 > 0")
    return con


DOMS = {"a": range(6), "b": range(5), "c": range(12)}


def _reference(con: duckdb.DuckDBPyConnection, seed: int, **options: Any) -> list[tuple]:
    leaves = con.execute("SELECT a, b, c, count(*) AS n FROM t GROUP BY ALL").fetchnumpy()
    plan = plan_budget(3, **options)
    codes, counts = release_tree(np.column_stack([leaves["a"], leaves["b"], leaves["c"]]),
                                 leaves["n"], [6, 5, 12], plan, RandomSource.from_seed(seed),
                                 estimator="least_squares")
    return [(*r, n) for r, n in zip(codes.tolist(), counts.tolist(), strict=True)]


def _released(table: Any) -> list[tuple]:
    return sorted(tuple(r[c] for c in ("a", "b", "c", "count")) for r in table.to_pylist())


@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
def test_duckdb_equals_the_numpy_reference_in_one_call_and_in_parts(
        trips: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch,
        neighbours: str) -> None:
    want = _reference(trips, 5, rho=Fraction(1, 2), neighbours=neighbours)
    options = dict(rho="1/2", domains=DOMS, seed=5, neighbours=neighbours,
                   estimator="least_squares")
    one = release(trips, "t", ["a", "b", "c"], **options)
    assert _released(one) == want
    n = trips.execute("SELECT count(*) FROM t").fetchone()[0]
    total = sum(r[-1] for r in want)
    assert total == n if neighbours == "substitute" else abs(total - n) < 50
    assert min(r[-1] for r in want) > 0
    meta = one.schema.metadata
    assert meta[b"estimator"] == b"least_squares" and meta[b"mechanism"] == b"InfTDA"
    monkeypatch.setattr(allocator, "memory_limit", lambda _: 1 << 10)  # a release in parts
    monkeypatch.setattr(sqlgen, "PARTS", 7)
    assert _released(release(trips, "t", ["a", "b", "c"], **options)) == want


def test_the_output_is_consistent_at_every_level(trips: duckdb.DuckDBPyConnection) -> None:
    """Non-negative integers whose every level adds up to its parents (the released rows
    output: one row per synthetic record), with a privacy unit (the total noised)."""
    table = release(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS, seed=2,
                    privacy_unit="person", max_rows_per_unit=3, estimator="least_squares")
    rows = table.to_pylist()
    assert rows and all(r["count"] > 0 for r in rows)
    rows_out = release(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS, seed=2,
                       privacy_unit="person", max_rows_per_unit=3, output="rows",
                       estimator="least_squares")
    assert rows_out.num_rows == sum(r["count"] for r in rows)


def test_preview_reports_the_estimators_bound_and_cells(trips: duckdb.DuckDBPyConnection) -> None:
    rows = preview(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS, estimator="least_squares",
                   neighbours="add_remove").to_pylist()
    default = preview(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS,
                      neighbours="add_remove").to_pylist()
    assert [r["estimator"] for r in rows] == ["least_squares"] * 4
    assert [r["noised_cells"] for r in rows] == [1, 6, 30, 360]  # every public cell
    assert [r["noised_cells"] for r in default] == [1, None, None, None]  # data-dependent
    plan = plan_budget(3, rho=1, neighbours="add_remove")
    for r, d in zip(rows[1:], default[1:], strict=True):
        k = r["level"]
        assert r["bound"] == pytest.approx(d["bound"] + k * (1 + 2 * ETA) + 0.5 + ETA)
        assert r["bound"] == pytest.approx(
            error_bound(None, None, 0.05, nodes=[6, 30, 360], plan=plan,
                        estimator="least_squares")[k - 1])
    assert rows[0]["bound"] == pytest.approx(default[0]["bound"] + 0.5 + ETA)
    assert rounding(2, plan_budget(3, rho=1), "inftda") == 0.0


def test_every_public_cell_must_fit_the_limit_before_the_charge(
        trips: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch) -> None:
    """InfTDA noises the children of released parents; the least-squares estimator noises
    all 360 leaf cells, above a limit of 300: refused, nothing charged (the same request
    with the default estimator runs)."""
    monkeypatch.setenv("INFTDA_MAX_CELLS", "300")
    options = dict(rho=1, domains={"a": range(6), "b": range(5), "c": range(12)})
    with pytest.raises(InputError, match=r"'least_squares' noises every public cell.*level 3 "
                       r"\(column 'c'\) has 360.*nothing was charged"):
        release(trips, "t", ["a", "b", "c"], estimator="least_squares", **options)
    assert trips.execute("SELECT count(*) FROM inftda_ledger").fetchone()[0] == 0
    monkeypatch.setenv("INFTDA_MAX_CELLS", "400")
    release(trips, "t", ["a", "b", "c"], estimator="least_squares", **options)
    assert trips.execute("SELECT count(*) FROM inftda_ledger").fetchone()[0] == 1


def test_arithmetic_that_cannot_be_certified_is_refused(
        trips: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten levels of 50 values whose noise scales alternate by 10**6: errors of the upper
    levels' sums are amplified level after level past :data:`ETA` (refused when planned); and a
    release whose certified error passes the limit (here a limit lowered below it) is refused
    before the charge."""
    plan = plan_budget(10, rho=10, level_weights=[1, 1e-6] * 5)
    wild = ls.arithmetic_of(plan, [50] * 10, [False] * 10)
    assert wild.eta > ETA
    with pytest.raises(InputError, match=r"cannot certify its arithmetic"):
        wild.check()
    monkeypatch.setattr(arithmetic_module, "ETA", 1e-15)
    with pytest.raises(InputError, match=r"cannot certify its arithmetic.*nothing was charged"):
        release(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS, estimator="least_squares")
    assert trips.execute("SELECT count(*) FROM inftda_ledger").fetchone()[0] == 0


def test_an_unknown_estimator_names_the_argument_and_the_choices(
        trips: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match=r"estimator must be one of inftda, least_squares; "
                       r"got 'lsq'. Fix: pass estimator='least_squares'"):
        release(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS, estimator="lsq")
    got = trips.execute("SELECT count(*) FROM inftda_release('t', ['a', 'b', 'c'], rho := 1, "
                        "domains := {'a': range(6), 'b': range(5), 'c': range(12)}, "
                        "estimator := 'least_squares')").fetchone()
    assert got[0] > 0  # the SQL macro takes the option too


def test_the_default_estimator_is_inftda(trips: duckdb.DuckDBPyConnection) -> None:
    a = release(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS, seed=9)
    b = release(trips, "t", ["a", "b", "c"], rho=1, domains=DOMS, seed=9, estimator="inftda")
    assert a.to_pylist() == b.to_pylist() and a.schema.metadata[b"estimator"] == b"inftda"


def test_the_arithmetic_is_the_same_on_every_engine() -> None:
    """The fixed point and the caps are exact integer functions of public numbers: equal for
    equal plans, whatever the process (Spark ships its driver's anyway)."""
    plan = plan_budget(4, epsilon=1, delta=1e-6, level_weights="auto", nodes=[3, 12, 48, 96])
    a = ls.arithmetic_of(plan, [3, 4, 4, 2], [False, True, False, False])
    b = ls.arithmetic_of(plan, [3, 4, 4, 2], [False, True, False, False])
    assert a == b and 8 <= a.bits <= 40 and a.eta <= ETA
    assert all(isinstance(c, int) for c in (*a.cap_z, *a.cap_t, *a.cap_d))


def test_the_command_line_takes_the_estimator(tmp_path: Any) -> None:
    """``--estimator`` reaches the preview's bound and the release (its provenance)."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", *args],
                              capture_output=True, text=True, cwd=tmp_path, timeout=300)

    shown = cli("preview", "--domain-sizes", "3,4,5", "--rho", "1", "--estimator",
                "least_squares", "--format", "csv")
    assert shown.returncode == 0, shown.stderr
    bounds = error_bound([3, 4, 5], 1, 0.05, estimator="least_squares")
    assert all(f"{b:.6g}"[:6] in shown.stdout for b in bounds)
    with duckdb.connect(str(tmp_path / "t.db")) as con:
        con.execute("CREATE TABLE t AS SELECT range % 3 AS a, range % 5 AS b FROM range(900)")
    done = cli("release", "--db", "t.db", "--table", "t", "--columns", "a,b", "--domain",
               "a=0..2", "--domain", "b=0..4", "--rho", "1", "--estimator", "least_squares",
               "--output", "out.parquet")
    assert done.returncode == 0, done.stderr
    assert pq.read_table(tmp_path / "out.parquet").schema.metadata[b"estimator"] == \
        b"least_squares"


def test_the_pass_can_be_stopped_between_blocks() -> None:
    """Every block of noised cells calls the engine's stop hook first (a cancelled release
    stops there, before the next block): here the hook raises at its third call."""
    levels, plan, _ = _setup("nested")
    arith = ls.arithmetic_of(plan, levels.sizes, [a is not None for a in levels.allowed])
    calls: list[int] = []

    def stop() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ls.whole(levels, arith, 100, None, None, stop)
    assert len(calls) == 3
    run = ls.LeastSquares(arith, 100, None, None)
    assert run.whole(levels, lambda: None)[1] == 100
