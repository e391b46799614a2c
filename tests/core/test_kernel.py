"""The compiled kernel (core/kernel/, numba): the same integers as the numpy path everywhere.

IntOpt against intopt_positive, intopt and the paper's procedure on random and adversarial rows;
the noise table lookup against numpy's; seeded releases (flat and nested, 1-3 workers) equal with
INFTDA_KERNEL=numba and =numpy; the selection (auto, numpy, numba, refusals) and that a small
release never imports numba. Tests needing numba skip, with the reason, when it is absent (a
dependency: only a broken install lacks it). Loading it safely: tests/core/test_kernel_loading.py.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import pytest
from test_intopt import paper_intopt

from inftda_duckdb.core import kernel, noise, topdown
from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.intopt import intopt, intopt_positive, intopt_positive_runs
from inftda_duckdb.core.noise import DiscreteGaussian
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_below, release_tree
from inftda_duckdb.core.tree import Allowed, Levels, Nodes

HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(
    not HAS_NUMBA, reason="the compiled kernel needs numba (a dependency: reinstall the package)")
I64_MAX = 2**63 - 1


@pytest.fixture
def use(monkeypatch):
    """``use('numba')`` / ``use('numpy')``: the kernel choice for what follows."""
    def choose(which: str) -> None:
        monkeypatch.setenv(kernel.ENV, which)
    return choose


def kernel_rows(x: np.ndarray, c: np.ndarray, pos=None, add=None):
    """The kernel on the rows of ``x`` (densified by pos/add first)."""
    z = np.zeros(0, np.int64)
    assert kernel.wanted(x.size)  # INFTDA_KERNEL=numba: loaded
    flat = np.ascontiguousarray(x, dtype=np.int64).reshape(-1).copy()
    return kernel.intopt_kept(flat, x.shape[1], np.asarray(c, np.int64),
                              z if pos is None else pos, z if add is None else add)


def numpy_rows(x: np.ndarray, c: np.ndarray):
    return intopt_positive(np.array(x, dtype=np.int64), np.asarray(c, np.int64))


def dense(result, shape) -> np.ndarray:
    out = np.zeros(shape[0] * shape[1], np.int64)
    out[result[0]] = result[1]
    return out.reshape(shape)


def assert_same(x: np.ndarray, c: np.ndarray) -> None:
    got, want = kernel_rows(x, c), numpy_rows(x, c)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == np.int64 and np.array_equal(a, b), (x.tolist(), c.tolist())
    assert np.array_equal(dense(got, x.shape), intopt(x, c))
    assert (np.diff(got[0]) > 0).all() and (got[1] > 0).all()


def rows(rng: np.random.Generator, n_rows: int, m: int, kind: str):
    if kind == "noisy":  # level-5-like: a few small true counts plus discrete-Gaussian-like noise
        x = rng.integers(-6, 7, (n_rows, m))
        x[rng.random((n_rows, m)) < 0.1] += rng.integers(1, 5)
        c = rng.integers(0, 3 * m // 4 + 2, n_rows)
    elif kind == "dense":  # large counts, every child well above the noise (step 5)
        x = rng.integers(900, 1100, (n_rows, m))
        c = x.sum(axis=1) + rng.integers(-3 * m, 3 * m, n_rows)
    elif kind == "wide":  # values far apart: the rows sort their keys
        x = rng.integers(-(10**9), 10**9, (n_rows, m))
        c = rng.integers(0, 10**9, n_rows)
    elif kind == "ties":  # few distinct values: ties everywhere
        x = rng.integers(-2, 3, (n_rows, m)) * rng.integers(1, 4)
        c = rng.integers(0, 2 * m + 1, n_rows)
    elif kind == "negative":
        x = -rng.integers(1, 50, (n_rows, m))
        c = rng.integers(0, 50, n_rows)
    else:  # zero totals
        x = rng.integers(-20, 40, (n_rows, m))
        c = np.zeros(n_rows, np.int64)
    return x.astype(np.int64), np.maximum(c, 0).astype(np.int64)


@needs_numba
@pytest.mark.parametrize("kind", ["noisy", "dense", "wide", "ties", "negative", "zero"])
def test_kernel_equals_intopt_on_random_rows(kind, use):
    use("numba")
    rng = np.random.default_rng(17)
    for m in [1, 2, 3, 4, 5, 7, 16, 40, 41, 64, 127, 300]:
        for _ in range(3):
            x, c = rows(rng, int(rng.integers(1, 40)), m, kind)
            assert_same(x, c)


@needs_numba
def test_kernel_equals_the_papers_procedure(use):
    use("numba")
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(3000):
        m = int(rng.integers(1, 8))
        x = rng.integers(-8, 12, m).astype(np.int64)
        c = int(rng.integers(0, 30))
        want = paper_intopt(x.tolist(), c, max_visits=10_000)
        if want is None:
            continue
        got = dense(kernel_rows(x[None, :], np.array([c])), (1, m))[0]
        assert got.tolist() == want, (x.tolist(), c)
        checked += 1
    assert checked > 2500


@needs_numba
def test_kernel_adversarial_rows(use):
    use("numba")
    # ties in every order, m = 1, c = 0, all negative, one huge child, rows on each side of
    # the int64 guard (4 m + 4) (B + 1) < 2**62 (past it: the exact path, Python integers)
    cases = [
        ([[0, 0, 0, 0]], [3]), ([[5, 5, 5, 5, 5]], [0]), ([[7]], [0]), ([[-7]], [4]),
        ([[3, 1, 3, 1, 3]], [2]), ([[-1, -1, -1]], [0]), ([[10**6, -5, -5, -5]], [10**6]),
        ([[2, 2, -2, -2]], [1]), ([[0, 1, 0, 1, 0, 1]], [5]), ([[4] * 40], [200]),
    ]
    for x, c in cases:
        assert_same(np.array(x, np.int64), np.array(c, np.int64))
    for m in [1, 3, 40]:
        edge = (1 << 62) // (4 * m + 4) - 2  # the largest B on the int64 side of the guard
        for b in [edge - 1, edge, edge + 1, edge + 5, 2**62, I64_MAX // 2, I64_MAX]:
            x = np.full((2, m), b, np.int64)
            x[1] = -b + np.arange(m)
            x[1, 0] = b
            c = np.array([min(b, I64_MAX), 0], np.int64)
            assert_same(x, c)
            assert_same(-x[:, ::-1].copy(), np.array([0, min(b, I64_MAX)], np.int64))


@needs_numba
def test_kernel_densifies_like_numpy(use):
    use("numba")
    rng = np.random.default_rng(9)
    for m in [1, 6, 40]:
        x, c = rows(rng, 50, m, "noisy")
        pos = np.flatnonzero(rng.random(x.size) < 0.2)
        add = rng.integers(1, 30, pos.size)
        want = x.reshape(-1).copy()
        want[pos] += add
        c = want.reshape(x.shape).sum(axis=1).clip(0)
        got = kernel_rows(x, c, pos, add)
        for a, b in zip(got, numpy_rows(want.reshape(x.shape), c), strict=True):
            assert np.array_equal(a, b)


@needs_numba
@pytest.mark.parametrize("sigma2", [Fraction(1, 3), 5, 1000, 10**8])
def test_noise_lookup_equals_numpys(sigma2, use):
    # 10**8: a third of the words need the bucket search; 12-bit words (small sigma2 only:
    # slow otherwise): ties with a threshold, the exact refinement
    ids = np.arange(40_000, dtype=np.uint64) * np.uint64(7919)
    for bits in [63, 12] if sigma2 in (5, Fraction(1, 3)) else [63]:
        dist = DiscreteGaussian(sigma2, _word_bits=bits)
        use("numpy")
        want = dist.sample(RandomSource.from_seed(4), ids)
        use("numba")
        got = dist.sample(RandomSource.from_seed(4), ids)
        assert np.array_equal(got, want)
        out = np.empty(ids.size, np.int64)
        noise.address_buffer(ids.size)[:] = ids
        assert np.array_equal(dist.sample_addressed(RandomSource.from_seed(4), ids.size, out),
                              want)


@needs_numba
@pytest.mark.parametrize("n, lo, hi", [(0, 3, 30), (1, 3, 30), (2, 0, 1), (500, 2, 11),
                                       (5000, 3, 21), (70_000, 3, 30), (70_000, 5, 62)])
def test_kernel_sort_equals_numpys(n, lo, hi, use):
    # 1, 2, 3 and 7 passes of the radix sort (the odd ones end in its scratch array); values
    # distinct above bit lo, random below it (the counts of the truth's sorted pairs)
    rng = np.random.default_rng(n + lo + hi)
    keys = rng.choice(2 ** (hi - lo), size=n, replace=False) if hi - lo < 30 else \
        np.unique(rng.integers(0, 2 ** (hi - lo), n))
    a = (keys.astype(np.int64) << lo) | rng.integers(0, 1 << lo, keys.size)
    want = np.sort(a)
    use("numba")
    kernel.sort(a, lo, hi)
    assert a.dtype == np.int64 and np.array_equal(a, want)
    use("numpy")
    b = np.ascontiguousarray(want[::-1])
    kernel.sort(b, lo, hi)
    assert np.array_equal(b, want)


@needs_numba
@pytest.mark.parametrize("which", ["numpy", "numba"])
def test_the_truths_one_pass_refuses_a_repeated_prefix(which, use):
    # the leaves as pairs key * radix + count go up one level in one compiled pass: a key
    # listed twice (unbounded sensitivity) is refused there as on numpy's path
    use(which)
    levels = Levels.build([8, 8], plan_budget(2, rho=1), RandomSource.from_seed(1))
    pairs = np.array([7 * 20 + 2, 5 * 20 + 1, 7 * 20 + 3, 63 * 20 + 4])
    with pytest.raises(InputError, match="each prefix at most once"):
        release_below(levels, Nodes.root(10), pairs, None, radix=20)
    got = release_below(levels, Nodes.root(10), np.delete(pairs, 2), None, radix=20)
    assert got.counts.sum() == 10


def random_leaves(rng: np.random.Generator, sizes: list[int], n: int):
    codes = np.unique(np.column_stack([rng.integers(0, s, n) for s in sizes]), axis=0)
    return codes, rng.integers(1, 30, codes.shape[0])


@needs_numba
@pytest.mark.parametrize("nested", [False, True])
def test_seeded_releases_equal_with_and_without_the_kernel(nested, use, monkeypatch):
    rng = np.random.default_rng(3)
    sizes = [4, 9, 40, 30]
    allowed = None
    if nested:  # level 3 nested under level 2: 1..40 allowed children per parent
        per = [np.sort(rng.choice(40, int(rng.integers(1, 41)), replace=False)) for _ in range(9)]
        table = np.array([np.repeat(np.arange(9), [p.size for p in per]), np.concatenate(per)])
        allowed = {2: Allowed((1,), table)}
        ok = {(a, b) for a, b in table.T.tolist()}
    leaves, counts = random_leaves(rng, sizes, 3000)
    if nested:
        keep = np.array([(a, b) in ok for a, b in leaves[:, 1:3].tolist()])
        leaves, counts = leaves[keep], counts[keep]
    plan = plan_budget(4, rho=Fraction(1, 2))
    use("numpy")
    want = release_tree(leaves, counts, sizes, plan, RandomSource.from_seed(8), allowed)
    levels = Levels.build(sizes, plan, RandomSource.from_seed(8), allowed)
    mid = release_below(levels, Nodes.root(int(want[1].sum())), leaves.T, counts, upto=2)
    below = release_below(levels, mid, leaves.T, counts)
    use("numba")
    solved: list[int] = []  # the widths the kernel solved, from per-child arrays
    from_leaves: list[int] = []  # ... and straight from the sorted leaves (the last level)

    def spy(real: Any, into: list[int]) -> Any:
        def solve(x: np.ndarray, width: int, *rest: Any) -> Any:
            into.append(width)
            return real(x, width, *rest)
        return solve

    monkeypatch.setattr(kernel, "intopt_kept", spy(kernel.intopt_kept, solved))
    monkeypatch.setattr(kernel, "intopt_pairs", spy(kernel.intopt_pairs, from_leaves))
    for workers in [1, 2, 3]:
        for block in [1 << 18, 997]:
            monkeypatch.setattr(topdown.level, "BLOCK_CELLS", block)
            monkeypatch.setattr(topdown.level, "MIN_BLOCK_CELLS", min(block, 1 << 14))
            got = release_tree(leaves, counts, sizes, plan, RandomSource.from_seed(8), allowed,
                               workers=workers)
            assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
            again = release_below(levels, mid, leaves.T, counts, workers=workers)
            assert np.array_equal(again.codes, below.codes)
            assert np.array_equal(again.counts, below.counts)
    other = release_tree(leaves, counts, sizes, plan, RandomSource.from_seed(9), allowed)
    assert not all(np.array_equal(a, b) for a, b in zip(other, want, strict=True))
    # a nested level's blocks run in the kernel too, run by run (level 3's widths: 1..40); the
    # last level's read the leaves in the kernel, but from per-child arrays when it stops at a
    # cut (upto=2: level 2 keeps the links to the truth below)
    assert set(solved) >= {4, 9} and bool(set(solved) - set(sizes)) == nested
    assert set(from_leaves) == {30} and (nested or 30 not in solved)


@needs_numba
@pytest.mark.parametrize("kind", ["noisy", "dense", "wide", "ties", "negative", "zero"])
def test_kernel_runs_equal_intopt_positive_runs(kind, use):
    """A nested block's runs of equal widths (1..300), densified, solved in the kernel run by
    run: the same integers as intopt_positive_runs on the whole block."""
    use("numba")
    rng = np.random.default_rng(23)
    for _ in range(20):
        widths = np.sort(rng.integers(1, 301, int(rng.integers(1, 6))))
        parts = [rows(rng, int(rng.integers(1, 40)), int(w), kind) for w in np.unique(widths)]
        runs = [(x.shape[0], x.shape[1]) for x, _ in parts]
        x = np.concatenate([x.reshape(-1) for x, _ in parts])
        c = np.concatenate([c for _, c in parts])
        pos = np.sort(rng.choice(x.size, int(rng.integers(0, x.size // 4 + 1)), replace=False))
        add = rng.integers(1, 5, pos.size)
        want_x = x.copy()
        want_x[pos] += add
        want = intopt_positive_runs(want_x, runs, c)
        got = topdown.block._kernel_runs(x.copy(), runs, c, pos, add)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == np.int64 and np.array_equal(a, b)


@needs_numba
def test_auto_uses_the_kernel_on_large_blocks_only_once_loaded(use, monkeypatch):
    use("auto")
    monkeypatch.setattr(kernel, "LOAD_CELLS", 1 << 62)
    assert kernel.wanted(1) is False
    monkeypatch.setattr(kernel, "LOAD_CELLS", 0)
    monkeypatch.setattr(kernel, "FIRST_LOAD_CELLS", 0)
    kernel.warm_up(1 << 20)
    for thread in kernel._STARTED:
        thread.join(120)
    assert kernel.wanted(kernel.MIN_CELLS) is True
    assert kernel.wanted(kernel.MIN_CELLS - 1) is False
    use("numpy")
    assert kernel.wanted(1 << 30) is False


def test_choice_is_checked_and_a_missing_numba_is_explained(use, monkeypatch):
    use("fastest")
    with pytest.raises(InputError, match=r"INFTDA_KERNEL.*must be one of auto, numba, numpy"):
        kernel.wanted(1 << 20)
    use("numba")
    monkeypatch.setattr(kernel, "_COMPILED", {})
    monkeypatch.setattr(kernel, "_MISSING", ["No module named 'numba'"])
    with pytest.raises(InputError, match=r"needs numba.*did not load.*numba.*unset INFTDA_KERNEL"):
        kernel.wanted(1)
    use("auto")  # without numba, auto is the numpy path: same outputs
    assert kernel.wanted(1 << 30) is False
    kernel.warm_up(1 << 40)


def test_a_small_release_never_imports_numba():
    # the fixed cost of a 100-row release: no numba import, no compilation (fresh process)
    code = textwrap.dedent("""
        import sys, duckdb, inftda_duckdb
        con = duckdb.connect()
        inftda_duckdb.load(con)
        con.execute("CREATE TYPE a AS ENUM ('x', 'y', 'z'); CREATE TYPE b AS ENUM ('p', 'q')")
        con.execute("CREATE TABLE t AS SELECT (['x','y','z'])[1 + i % 3]::a AS a, "
                    "(['p','q'])[1 + i % 2]::b AS b FROM range(100) r(i)")
        inftda_duckdb.set_budget(con, 't', rho=10)
        n = con.execute("SELECT count(*) FROM inftda_release('t', ['a', 'b'], rho := 1)").fetchone()
        print(n[0] > 0, 'numba' in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False"], (out.stdout, out.stderr[-2000:])


def counted_loads(use: Any, monkeypatch: pytest.MonkeyPatch, large: list[int]) -> list[int]:
    """``auto``, numba not loaded, ``large`` the process's earlier large levels: each load is
    counted (in the returned list) instead of run."""
    use("auto")
    loads: list[int] = []
    for name, value in (("_COMPILED", {}), ("_MISSING", []), ("_STARTED", []), ("_LARGE", large)):
        monkeypatch.setattr(kernel, name, value, raising=False)
    monkeypatch.setattr(kernel, "_load", lambda: loads.append(1))
    monkeypatch.setattr(kernel, "LOAD_CELLS", 100_000)
    return loads


def joined() -> None:
    for thread in kernel._STARTED:
        thread.join(30)


def test_auto_loads_numba_only_for_a_flat_level_that_plans_enough_cells(use, monkeypatch):
    # Regression (the Italy-like benchmark, slower in a fresh process): the load was
    # decided from a bound over all levels that multiplied by a nested level's whole domain, so
    # a release whose largest flat level plans few cells paid numba's import (holding the GIL)
    loads = counted_loads(use, monkeypatch, [1])  # not the process's first large level
    # level 1 flat (2 values), level 2 nested (2 allowed children of 1,000), level 3 flat (1,000)
    table = np.array([[0, 0, 1, 1], [0, 1, 2, 3]])
    allowed = {1: Allowed((0,), table)}
    leaves = np.array([[0, 0, 5], [0, 1, 7], [1, 2, 9], [1, 3, 11]])
    counts = np.full(4, 2_500)
    plan = plan_budget(3, rho=Fraction(1, 2))
    release_tree(leaves, counts, [2, 1000, 1000], plan, RandomSource.from_seed(1), allowed)
    joined()
    assert loads == []  # level 3 plans at most 4 x 1,000 cells
    # control: a flat level planning >= LOAD_CELLS cells starts the load
    release_tree(leaves[:, [0, 2]], counts, [2, 100_000], plan_budget(2, rho=Fraction(1, 2)),
                 RandomSource.from_seed(1))
    joined()
    assert loads == [1]


def test_auto_loads_numba_at_a_processs_second_large_level_or_a_huge_first(use, monkeypatch):
    # Regression (the wide benchmark, one release in a fresh process): loading numba at the
    # first level of >= LOAD_CELLS cells made that release no faster and raised its peak
    # memory (benchmarks/RESULTS.md); the first large level of a process stays on numpy
    # unless it plans >= FIRST_LOAD_CELLS cells, the next one loads it (outputs are the same)
    loads = counted_loads(use, monkeypatch, [])
    monkeypatch.setattr(kernel, "FIRST_LOAD_CELLS", 1_000_000, raising=False)
    leaves, counts = np.array([[0, 5], [1, 7]]), np.full(2, 2_500)
    plan = plan_budget(2, rho=Fraction(1, 2))
    release_tree(leaves, counts, [2, 1000], plan, RandomSource.from_seed(1))  # 2,000 cells
    release_tree(leaves, counts, [2, 100_000], plan, RandomSource.from_seed(1))  # 200,000
    joined()
    assert loads == []  # the process's first large level
    release_tree(leaves, counts, [2, 100_000], plan, RandomSource.from_seed(1))
    joined()
    assert loads == [1]  # its second
    # control: a first large level of >= FIRST_LOAD_CELLS cells loads it at once
    monkeypatch.setattr(kernel, "_STARTED", [])
    monkeypatch.setattr(kernel, "_LARGE", [], raising=False)
    release_tree(leaves, counts, [2, 500_000], plan, RandomSource.from_seed(1))
    joined()
    assert loads == [1, 1]


@pytest.mark.parametrize("problem", ["a bad choice", "numba forced but missing"])
def test_a_bad_kernel_setting_is_refused_before_the_charge(problem, use, monkeypatch, con,
                                                           charges):
    # Regression: the setting was read first by the first block, after the budget was charged
    if problem == "a bad choice":
        use("fastest")
        message = r"INFTDA_KERNEL.*must be one of auto, numba, numpy"
    else:
        use("numba")
        monkeypatch.setattr(kernel, "_COMPILED", {})
        monkeypatch.setattr(kernel, "_MISSING", ["No module named 'numba'"])
        message = r"needs numba.*did not load"
    con.execute("CREATE TYPE ab AS ENUM ('a', 'b')")
    con.execute("CREATE TABLE t AS SELECT (['a', 'b'])[1 + i % 2]::ab AS x FROM range(40) r(i)")
    with pytest.raises(duckdb.Error, match=message):
        con.execute("SELECT * FROM inftda_release('t', ['x'], rho := 1)").fetchall()
    assert charges() == 0
    use("numpy")  # control: the same release runs and is charged once
    con.execute("SELECT * FROM inftda_release('t', ['x'], rho := 1)").fetchall()
    assert charges() == 1
