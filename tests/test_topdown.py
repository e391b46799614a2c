"""release_level / release_tree: Algorithm 1's invariants, batching independence, exactness."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core import topdown
from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.errors import InternalError
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_level, release_tree

TINY = Fraction(1, 200)  # N_Z(0, 1/200) is non-zero with probability < 1e-40: exact outputs


def sparse(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, codes, counts) of the non-zero entries, in a shuffled order."""
    rows, codes = np.nonzero(matrix)
    order = np.random.default_rng(0).permutation(rows.shape[0])
    return rows[order], codes[order], matrix[rows, codes][order]


def dense(out: topdown.LevelOutput, m: int) -> np.ndarray:
    y = np.zeros((len(out.offsets) - 1, m), np.int64)
    rows = np.repeat(np.arange(len(out.offsets) - 1), np.diff(out.offsets))
    y[rows, out.codes] = out.counts
    return y


def test_invariants_and_order():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 5, size=(300, 17)) * (rng.random((300, 17)) < 0.3)
    totals = truth.sum(axis=1) + rng.integers(-3, 4, size=300).clip(min=-truth.sum(axis=1))
    out = release_level(np.arange(300) * 3, totals, *sparse(truth), 17, 4,
                        RandomSource.from_seed(1))
    assert (out.counts > 0).all()
    assert (dense(out, 17).sum(axis=1) == totals).all()
    for p in range(300):  # codes ascending within each parent
        codes = out.codes[out.offsets[p] : out.offsets[p + 1]]
        assert (np.diff(codes) > 0).all()


def test_tiny_noise_returns_the_truth():
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 9, size=(50, 6))
    out = release_level(np.arange(50), truth.sum(axis=1), *sparse(truth), 6, TINY,
                        RandomSource.from_seed(3))
    assert (dense(out, 6) == truth).all()


def test_same_result_under_any_batching_and_block_size(monkeypatch):
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 3, size=(400, 9))
    pid = np.arange(400) + 1000
    src = RandomSource.from_seed(9)
    whole = dense(release_level(pid, truth.sum(1), *sparse(truth), 9, 2, src), 9)
    parts = [
        dense(release_level(pid[a:b], truth[a:b].sum(1), *sparse(truth[a:b]), 9, 2, src), 9)
        for a, b in [(0, 1), (1, 137), (137, 400)]
    ]
    assert (np.vstack(parts) == whole).all()
    # ids that are not consecutive (one more parent far away) give the same noise per id
    gapped = np.append(pid, 5000)
    extra = np.vstack([truth, truth[:1]])
    with_gap = dense(release_level(gapped, extra.sum(1), *sparse(extra), 9, 2, src), 9)
    assert (with_gap[:400] == whole).all()
    monkeypatch.setattr(topdown, "BLOCK_CELLS", 20)
    assert (dense(release_level(pid, truth.sum(1), *sparse(truth), 9, 2, src), 9) == whole).all()
    monkeypatch.setattr(topdown, "DENSE_CELLS", 50)  # densified a few parents at a time
    assert (dense(release_level(pid, truth.sum(1), *sparse(truth), 9, 2, src), 9) == whole).all()
    other = dense(release_level(pid, truth.sum(1), *sparse(truth), 9, 2,
                                RandomSource.from_seed(10)), 9)
    assert (other != whole).any()


def test_ragged_with_all_children_allowed_equals_dense():
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 4, size=(120, 7))
    src = RandomSource.from_seed(2)
    args = (np.arange(120), truth.sum(1), *sparse(truth), 7, 3, src)
    full = release_level(*args)
    allowed_off = np.arange(121) * 7
    ragged = release_level(*args, allowed_off, np.tile(np.arange(7), 120))
    for a, b in zip(full, ragged, strict=True):
        assert (a == b).all()


def test_ragged_keeps_children_inside_the_allowed_sets():
    allowed = [[0, 3], [1], [2, 4, 5]]
    off = np.array([0, 2, 3, 6])
    codes = np.concatenate([np.array(a) for a in allowed])
    for seed in range(20):
        out = release_level([0, 1, 2], [5, 7, 0], [0, 1], [3, 1], [5, 7], 6, 50,
                            RandomSource.from_seed(seed), off, codes)
        for p in range(3):
            assert set(out.codes[out.offsets[p] : out.offsets[p + 1]]) <= set(allowed[p])
        assert dense(out, 6).sum(1).tolist() == [5, 7, 0]


def test_internal_errors():
    src = RandomSource.from_seed(1)
    with pytest.raises(InternalError, match="outside"):
        release_level([0], [3], [0], [7], [3], 5, 1, src)
    with pytest.raises(InternalError, match="not among the allowed"):
        release_level([0], [3], [0], [2], [3], 5, 1, src, [0, 1], [1])
    with pytest.raises(InternalError, match="no allowed children"):
        release_level([0, 1], [3, 0], [0], [1], [3], 5, 1, src, [0, 1, 1], [1])
    with pytest.raises(InternalError, match="no parent"):
        release_level([0], [3], [1], [1], [3], 5, 1, src)
    with pytest.raises(InternalError, match="mismatched lengths"):
        release_level([0], [3], [0, 0], [1], [3], 5, 1, src)


def test_zero_children_get_noise():
    # all mass on child 0 of 50: with sigma^2 = 50, zero children are released > 0 in many runs
    # (seeded, deterministic: 13 of 20 here); control: with tiny noise, never
    def hits(sigma2: object) -> int:
        runs = [
            release_level([0], [40], [0], [0], [40], 50, sigma2, RandomSource.from_seed(s))
            for s in range(20)
        ]
        return sum(int((out.codes != 0).any()) for out in runs)

    assert hits(50) >= 10
    assert hits(TINY) == 0


def test_release_tree_invariants_and_reproducibility():
    rng = np.random.default_rng(6)
    sizes = [4, 3, 5]
    codes = np.unique(np.column_stack([rng.integers(0, s, 40) for s in sizes]), axis=0)
    counts = rng.integers(1, 20, len(codes))
    plan = plan_budget(3, rho=1)
    a = release_tree(codes, counts, sizes, plan, RandomSource.from_seed(1))
    b = release_tree(codes[::-1], counts[::-1], sizes, plan, RandomSource.from_seed(1))
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
    assert a[1].sum() == counts.sum() and (a[1] > 0).all()
    assert (np.diff(a[0] @ np.array([15, 5, 1])) > 0).all()  # code order, no repeats
    c = release_tree(codes, counts, sizes, plan, RandomSource.from_seed(2))
    assert len(c[1]) != len(a[1]) or (c[0] != a[0]).any() or (c[1] != a[1]).any()
    exact = release_tree(codes, counts, sizes, plan_budget(3, rho=10**6), RandomSource.from_seed(1))
    assert (exact[0] == codes[np.lexsort(codes.T[::-1])]).all()


def test_release_tree_add_remove_and_empty():
    plan = plan_budget(2, rho=Fraction(1, 10), neighbours="add_remove")
    roots = {
        int(release_tree([[0, 0]], [100], [2, 2], plan, RandomSource.from_seed(s))[1].sum())
        for s in range(10)
    }
    assert len(roots) > 1  # the root count is noised
    empty = release_tree(np.zeros((0, 2)), np.zeros(0), [3, 3], plan_budget(2, rho=1),
                         RandomSource.from_seed(1))
    assert empty[0].shape == (0, 2) and empty[1].shape == (0,)


@pytest.mark.parametrize("sizes", [[3, 4, 5], [10**7] * 5, [2**40, 3, 2**40]])
def test_parents_found_by_codes_even_past_int64(sizes):
    # mixed-radix keys, re-ranked before they would overflow (products up to 1e35 here)
    rng = np.random.default_rng(7)
    pool = np.column_stack([rng.integers(0, min(s, 6), 400) for s in sizes])
    parents = np.unique(pool[:20], axis=0)  # distinct, lexicographic
    wanted = np.vstack([parents[rng.integers(0, len(parents), 300)], pool[20:]])
    rows = topdown._find_rows(parents.T, wanted.T, sizes)
    index = {tuple(r): i for i, r in enumerate(parents.tolist())}
    assert rows.tolist() == [index.get(tuple(r), -1) for r in wanted.tolist()]
    assert (rows == -1).any() and (rows >= 0).any()


def test_allowed_children_follow_the_domain_table():
    # parents (a, b); children c allowed under a only (a nested level keyed by level 0)
    table = np.array([[0, 4], [1, 2], [0, 1], [2, 0], [1, 3], [0, 2]])
    parents = np.array([[0, 0], [0, 5], [1, 1], [2, 9]], dtype=np.int32)
    offsets, codes = topdown._allowed_children(parents.T, topdown.Allowed((0,), table.T),
                                               [3, 10, 5])
    got = [codes[offsets[i]:offsets[i + 1]].tolist() for i in range(4)]
    assert got == [[1, 2, 4], [1, 2, 4], [2, 3], [0]]


def test_prefixes_as_keys_equal_prefixes_as_codes():
    # the SQL sends a level's prefixes as mixed-radix keys when the sizes are known
    rng = np.random.default_rng(8)
    sizes = [4, 3, 5]
    leaves = np.unique(rng.integers(0, 3, size=(60, 3)), axis=0)  # codes < every size
    counts = rng.integers(1, 9, leaves.shape[0])
    plan = plan_budget(3, rho=2)
    nodes = topdown.Nodes.root(int(counts.sum()))
    for k in range(1, 4):
        pref, inv = np.unique(leaves[:, :k], axis=0, return_inverse=True)
        n = np.bincount(inv.ravel(), weights=counts).astype(np.int64)
        keys = np.zeros(pref.shape[0], np.int64)
        for j in range(k):
            keys = keys * sizes[j] + pref[:, j]
        src = RandomSource.from_seed(k)
        by_codes = topdown.release_children(nodes, pref.T, n, sizes[:k], plan.level_sigma2[k - 1],
                                            src)
        by_keys = topdown.release_children(nodes, keys[::-1], n[::-1], sizes[:k],
                                           plan.level_sigma2[k - 1], src)
        assert np.array_equal(by_codes.codes, by_keys.codes)
        assert np.array_equal(by_codes.counts, by_keys.counts)
        nodes = by_keys
    level1 = topdown.Nodes(np.array([[0, 1, 2]], np.int32), np.array([2, 2, 1]))
    with pytest.raises(InternalError, match="prefix key outside its domain"):
        topdown.release_children(level1, np.array([0, 12]), np.array([2, 3]), [3, 4], 1,
                                 RandomSource.from_seed(1))
    with pytest.raises(InternalError, match="passes 2\\*\\*62"):
        topdown.release_children(level1, np.array([0, 1]), np.array([2, 3]), [2**31, 2**31], 1,
                                 RandomSource.from_seed(1))
