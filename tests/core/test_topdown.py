"""release_below / release_tree: Algorithm 1's invariants, tree-addressed noise (any batching,
block size or number of workers gives the same release), wide addresses, hooks, exactness."""

from __future__ import annotations

import itertools
import pickle
import weakref
from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core import memory, noise, topdown
from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.errors import InputError, InternalError
from inftda_duckdb.core.noise import DiscreteGaussian
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import (
    Cancelled,
    LevelProgress,
    check_total,
    release_below,
    release_tree,
)
from inftda_duckdb.core.tree import (
    Addresser,
    Allowed,
    Children,
    Levels,
    Nodes,
    find_columns,
    mixed_radix,
)

TINY = Fraction(1, 200)  # N_Z(0, 1/200) is non-zero with probability < 1e-40: exact outputs


def random_leaves(rng: np.random.Generator, sizes: list[int], n: int,
                  top: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Distinct leaves (N, d) with codes < min(size, top) and counts 1..19."""
    codes = np.unique(np.column_stack([rng.integers(0, min(s, top), n) for s in sizes]), axis=0)
    return codes, rng.integers(1, 20, codes.shape[0])


def levels_for(sizes: list[int], rho: object = 1, seed: int = 1,
               allowed: dict[int, Allowed] | None = None) -> Levels:
    return Levels.build(sizes, plan_budget(len(sizes), rho=rho), RandomSource.from_seed(seed),
                        allowed)


def as_tuples(nodes: Nodes) -> list[tuple[int, ...]]:
    return [(*c, n) for c, n in zip(nodes.codes.T.tolist(), nodes.counts.tolist(), strict=True)]


def test_invariants_and_order():
    rng = np.random.default_rng(1)
    sizes = [5, 17]
    leaves, counts = random_leaves(rng, sizes, 300, top=17)
    levels = levels_for(sizes, rho=Fraction(1, 2))
    mid = release_below(levels, Nodes.root(int(counts.sum())), leaves.T, counts, upto=1)
    out = release_below(levels, mid, leaves.T, counts)
    assert (out.counts > 0).all() and out.counts.sum() == counts.sum()
    assert out.noised == (mid.counts > 0).sum() * 17  # every child of every parent
    keys = mixed_radix(out.codes, sizes, np.int64)
    assert (np.diff(keys) > 0).all()  # code order, each leaf once
    for i, parent in enumerate(mid.codes[0]):  # children add up to their parent
        assert out.counts[out.codes[0] == parent].sum() == mid.counts[i]


def test_tiny_noise_returns_the_truth():
    rng = np.random.default_rng(2)
    leaves, counts = random_leaves(rng, [4, 6, 3], 80)
    out = release_tree(leaves, counts, [4, 6, 3], plan_budget(3, rho=10**6),
                       RandomSource.from_seed(3))
    order = np.lexsort(leaves.T[::-1])
    assert np.array_equal(out[0], leaves[order]) and np.array_equal(out[1], counts[order])
    levels = Levels([4], (DiscreteGaussian(TINY),), (RandomSource.from_seed(3),), (None,))
    one = release_below(levels, Nodes.root(10), [[0, 3]], [4, 6])
    assert as_tuples(one) == [(0, 4), (3, 6)]


@pytest.mark.parametrize("sizes", [[6, 5, 4, 7], [16] * 17, [3, 2**40, 2**30]])
def test_same_release_for_any_batching_block_size_and_workers(sizes, monkeypatch):
    # tree-addressed noise: a subtree released alone, in any batch, on any number of workers
    # and in any block size, equals the same subtree inside the whole release. [16] * 17 has a
    # domain product of 2**68 (wide addresses at level 17, codes instead of keys); in
    # [3, 2**40, 2**30] levels 2 and 3 are nested (a few allowed children under each parent)
    # and level 3 passes 2**64
    rng = np.random.default_rng(4)
    leaves, counts = random_leaves(rng, sizes, 150)
    allowed = None
    if sizes[1] == 2**40:  # children 0..5 and 2**40 - 1 (never in the data) allowed
        two = np.array([np.repeat(np.arange(3), 7), np.tile([0, 1, 2, 3, 4, 5, 2**40 - 1], 3)])
        three = np.array([np.repeat(np.arange(6), 7), np.tile([0, 1, 2, 3, 4, 5, 2**30 - 9], 6)])
        allowed = {1: Allowed((0,), two), 2: Allowed((1,), three)}
        three_big = np.array([[2**40 - 1] * 7, [0, 1, 2, 3, 4, 5, 2**30 - 9]])
        allowed[2] = Allowed((1,), np.hstack([three, three_big]))
    rho = 10 if len(sizes) > 10 else 1  # fewer false children over 17 levels: a faster test
    levels = levels_for(sizes, rho=rho, seed=9, allowed=allowed)
    root = Nodes.root(int(counts.sum()))
    reference = release_below(levels, root, leaves.T, counts)
    assert reference.counts.sum() == counts.sum() and reference.codes.shape[0] == len(sizes)
    at_cut = release_below(levels, root, leaves.T, counts, upto=2)
    configs = [(1 << 16, 1 << 16, 1), (9, 7, 2), (1, 1, 5)]  # cells per block, ids per chunk
    if len(sizes) > 10:
        configs[1:] = [(200, 64, 2), (100, 50, 5)]
    for block, chunk, workers in configs:
        monkeypatch.setattr(topdown.level, "BLOCK_CELLS", block)
        monkeypatch.setattr(noise, "_CHUNK", chunk)
        again = release_below(levels, root, leaves.T[:, ::-1], counts[::-1], workers=workers)
        assert as_tuples(again) == as_tuples(reference)
        # the subtrees of the level-2 nodes in random batches, in a random order
        parts = rng.permutation(at_cut.counts.shape[0])
        pieces = []
        for batch in np.array_split(parts, 3):
            sub = Nodes(at_cut.codes[:, batch], at_cut.counts[batch])
            pieces += as_tuples(release_below(levels, sub, leaves.T, counts, workers=workers))
        assert sorted(pieces) == as_tuples(reference)
    other = release_below(levels_for(sizes, rho=rho, seed=10, allowed=allowed), root, leaves.T,
                          counts)
    assert as_tuples(other) != as_tuples(reference)


def test_blocks_shrink_for_more_workers_and_the_output_stays(monkeypatch):
    """A level is cut into blocks of at most BLOCK_CELLS cells, shrunk (down to MIN_BLOCK_CELLS)
    so that each worker gets two or more: the number of blocks follows the workers and the
    sizes, the released nodes do not (flat levels and a nested one with 1-3 children)."""
    rng = np.random.default_rng(21)
    sizes = [6, 30, 3, 40]
    leaves, counts = random_leaves(rng, sizes, 4000, top=40)
    fits = leaves[:, 2] <= leaves[:, 1] % 3  # level 3 allows children 0..(level-2 code % 3)
    leaves, counts = leaves[fits], counts[fits]
    table = np.array([[v for v in range(30) for _ in range(v % 3 + 1)],
                      [j for v in range(30) for j in range(v % 3 + 1)]])
    levels = levels_for(sizes, allowed={2: Allowed((1,), table)})
    root = Nodes.root(int(counts.sum()))
    blocks: list[int] = []
    block = topdown.level.release_block

    def counted(levels: Levels, k: int, *args: object) -> object:
        blocks.append(k)
        return block(levels, k, *args)

    monkeypatch.setattr(topdown.level, "release_block", counted)
    seen = {}
    for cells, smallest, workers in [(1 << 18, 1 << 14, 1), (1 << 18, 1 << 14, 2),
                                     (1 << 18, 1, 2), (1 << 18, 1, 7), (97, 1, 3), (5, 5, 1)]:
        monkeypatch.setattr(topdown.level, "BLOCK_CELLS", cells)
        monkeypatch.setattr(topdown.level, "MIN_BLOCK_CELLS", smallest)
        blocks.clear()
        out = release_below(levels, root, leaves.T, counts, workers=workers)
        seen[cells, smallest, workers] = (as_tuples(out), [blocks.count(k) for k in (1, 2, 3, 4)])
    reference, one_each = seen[1 << 18, 1 << 14, 1]
    assert one_each == [1, 1, 1, 1]  # one block per level (the nested level 3: a ragged one)
    assert seen[1 << 18, 1 << 14, 2][1] == one_each  # small levels: no block below 2**14 cells
    for (_, smallest, workers), (nodes, per_level) in seen.items():
        assert nodes == reference
        if smallest == 1:  # every level cut in two blocks per worker or more
            assert all(n >= min(2 * workers, 6) for n in per_level[1:]), per_level
    three = release_below(levels, root, leaves.T, counts, upto=3).counts.shape[0]
    assert seen[5, 5, 1][1][3] == three > 100  # one parent (40 cells) per block at level 4
    other = release_below(levels_for(sizes, seed=2, allowed={2: Allowed((1,), table)}), root,
                          leaves.T, counts, workers=2)
    assert as_tuples(other) != reference


def small_tree(seed: int) -> tuple[Levels, Nodes, np.ndarray, np.ndarray, np.ndarray]:
    """Levels of 4 x 3 x 5, the root, and random leaves: codes (N, 3), keys, counts."""
    sizes = [4, 3, 5]
    leaves, counts = random_leaves(np.random.default_rng(seed), sizes, 60)
    return (levels_for(sizes, rho=2), Nodes.root(int(counts.sum())), leaves,
            mixed_radix(leaves.T, sizes, np.int64), counts)


def test_keys_and_codes_give_the_same_release():
    # the SQL sends the leaves as mixed-radix keys when the domain sizes are known
    levels, root, leaves, keys, counts = small_tree(8)
    by_codes = release_below(levels, root, leaves.T, counts)
    by_keys = release_below(levels, root, keys[::-1], counts[::-1])
    assert as_tuples(by_codes) == as_tuples(by_keys)
    with pytest.raises(InternalError, match="prefix key outside its domain"):
        release_below(levels, root, np.array([0, 60]), np.array([2, 3]))
    with pytest.raises(InternalError, match="code outside its domain"):
        release_below(levels, root, np.array([[0], [0], [5]]), np.array([2]))
    with pytest.raises(InternalError, match="passes 2\\*\\*62"):
        release_below(levels_for([2**31] * 3), root, np.array([0, 1]), np.array([2, 3]))
    with pytest.raises(InputError, match="each prefix at most once"):
        release_below(levels, root, np.array([7, 7]), np.array([2, 3]))


def test_the_leaves_are_freed_before_the_last_level_gathers_its_output(monkeypatch):
    # the sorted leaves (the truth's largest array) are dropped once the last level's blocks
    # have read them, before its kept children are copied into one output matrix: that copy
    # can reuse their memory (the wide release's peak: -85 MB). The release is the same.
    levels, root, _, keys, counts = small_tree(9)
    want = as_tuples(release_below(levels, root, keys, counts))
    sorted_leaves: list[weakref.ref[np.ndarray]] = []
    alive: list[bool] = []
    sort, empty = topdown.truth._sort_by_key, memory.empty

    def keep_ref(*args: object) -> tuple[object, ...]:
        out = sort(*args)  # type: ignore[arg-type]
        sorted_leaves.append(weakref.ref(out[0]))
        return out

    def output(shape: object, dtype: object) -> np.ndarray:
        if isinstance(shape, tuple) and shape[0] == levels.depth:  # the last level's matrix
            alive.append(sorted_leaves[-1]() is not None)
        return empty(shape, dtype)  # type: ignore[arg-type]

    monkeypatch.setattr(topdown.truth, "_sort_by_key", keep_ref)
    monkeypatch.setattr(memory, "empty", output)
    for workers in (1, 2):
        got = release_below(levels, root, keys, counts, workers=workers)
        assert as_tuples(got) == want
    assert alive == [False, False]


def test_a_flat_level_keeps_a_parent_row_not_its_codes_per_child(monkeypatch):
    # the buffers a flat level fills as its blocks finish, per unit of its parents' counts (the
    # most children it can keep; every level's counts add up to the root): the child's code
    # (4 bytes), its count (8), but for the last level its true prefix (4), and its parent's
    # row (4): 20 / 16 bytes a child whatever the depth, not the k - 1 parent codes per child
    # copied out of every block (here 20, 24 and 20), nor int64 prefixes. The same release.
    # (a level's buffers hold min(its parents' total, its noised cells) children)
    levels, root, _, keys, counts = small_tree(9)
    want = as_tuples(release_below(levels, root, keys, counts))
    calls: list[tuple[object, int]] = []
    per_child: list[int] = []
    empty, level = memory.empty, topdown.release_level

    def record(shape: object, dtype: object) -> np.ndarray:
        calls.append((shape, np.dtype(dtype).itemsize))  # type: ignore[arg-type]
        return empty(shape, dtype)  # type: ignore[arg-type]

    def recorded(levels: Levels, k: int, parents: Nodes, *args: object) -> object:
        start = len(calls)
        out = level(levels, k, parents, *args)  # type: ignore[arg-type]
        cap = min(int(parents.counts.sum()), out[0].noised)
        per_child.extend(size for shape, size in calls[start:] if shape == cap)
        return out

    monkeypatch.setattr(memory, "empty", record)
    monkeypatch.setattr(topdown, "release_level", recorded)
    assert as_tuples(release_below(levels, root, keys, counts)) == want
    assert per_child == [4, 8, 4, 4] * 2 + [4, 8, 4]  # levels 1, 2 and the last


def test_the_truths_links_are_int32_below_2_31_prefixes():
    # where each prefix's children start at the level below: 4 bytes per prefix, not 8 (the
    # wide release's level 4 -> 5 links: 2.56M prefixes, 10 MB less while level 5 runs)
    _, _, _, keys, counts = small_tree(9)
    truth = topdown.truth.Truth.build(keys, counts, [4, 3, 5], 0)
    assert [f.dtype for f in truth.first] == [np.int32] * 3
    assert truth.first[-1][-1] == keys.shape[0]  # the last run ends after the last leaf


def test_pairs_of_key_and_count_give_the_same_release():
    # DuckDB sends each leaf as one int64 key * radix + count (radix > every count): the same
    # release as keys and counts, zero counts dropped, repeats refused, and the same when the
    # repacked (key << bits) | count would not fit one int64 (keys and counts then)
    levels, root, _, keys, counts = small_tree(9)
    want = as_tuples(release_below(levels, root, keys, counts))
    for radix in (20, 1000, 1024, 2**40):  # (powers of two: (key << bits) | count as sent)
        pairs = np.append(keys * radix + counts, 59 * radix)[::-1]  # a zero count, any order
        assert as_tuples(release_below(levels, root, pairs, None, radix=radix)) == want
    with pytest.raises(InputError, match="each prefix at most once"):
        release_below(levels, root, np.array([7 * 20 + 2, 7 * 20 + 3]), None, radix=20)
    with pytest.raises(InternalError, match="prefix key outside its domain"):
        release_below(levels, root, np.array([60 * 20 + 1]), None, radix=20)
    with pytest.raises(InternalError, match="within 2\\*\\*62"):
        release_below(levels, root, np.array([1]), None, radix=2**60)
    wide = [2**20, 2**11 + 1]  # 32 key bits + 31 count bits: keys and counts after all
    levels = levels_for(wide, rho=2)
    nodes = Nodes(np.array([[3, 9]], np.int32), np.array([5, 2**30]))
    keys = np.array([3 * wide[1] + 7, 9 * wide[1], 9 * wide[1] + 2048])
    counts = np.array([5, 2**30 - 4, 4])
    want = as_tuples(release_below(levels, nodes, keys, counts))
    got = release_below(levels, nodes, keys * (2**30 + 1) + counts, None, radix=2**30 + 1)
    assert as_tuples(got) == want


def test_pairs_the_caller_gives_up_are_sorted_in_place():
    # overwrite=True (DuckDB's levels call, whose Arrow input nothing reads afterwards): the
    # pairs are repacked and sorted in the caller's array, no new array of their size; the
    # same release; a read-only array is copied as before and left as it was
    levels, root, _, keys, counts = small_tree(9)
    want = as_tuples(release_below(levels, root, keys, counts))
    pairs = (keys * 1000 + counts)[::-1].copy()
    seen = []
    original = topdown.truth.Truth._from_keys.__func__

    def spy(cls, *args, **kwargs):
        truth = original(cls, *args, **kwargs)
        seen.append(truth.levels[-1].counts)
        return truth

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(topdown.truth.Truth, "_from_keys", classmethod(spy))
        got = release_below(levels, root, pairs, None, radix=1000, overwrite=True)
        assert as_tuples(got) == want
        assert np.shares_memory(seen[-1], pairs)  # sorted where it came
        order = np.argsort(keys)  # (key << 10) | count, ascending
        assert (pairs >> 10 == keys[order]).all() and (pairs & 1023 == counts[order]).all()
        frozen = (keys * 1000 + counts)[::-1].copy()
        frozen.flags.writeable = False
        before = frozen.copy()
        assert as_tuples(release_below(levels, root, frozen, None, radix=1000,
                                       overwrite=True)) == want
        assert not np.shares_memory(seen[-1], frozen) and (frozen == before).all()
        again = (keys * 1000 + counts)[::-1].copy()
        assert as_tuples(release_below(levels, root, again, None, radix=1000)) == want
        assert not np.shares_memory(seen[-1], again)  # not asked: the caller's array kept
        for radix in (1000, 1024):  # a power of two: sorted as it came, and copied first
            mine = (keys * radix + counts)[::-1].copy()  # when not given up
            for overwrite in (True, False):
                theirs = mine.copy()
                assert as_tuples(release_below(levels, root, theirs, None, radix=radix,
                                               overwrite=overwrite)) == want
                assert np.shares_memory(seen[-1], theirs) == overwrite
                assert overwrite or (theirs == mine).all()


def test_cell_addresses_are_the_tree_positions():
    # narrow levels: the mixed-radix position of the cell; wide ones: greedy limbs <= 2**64
    parents = np.array([[1, 2], [0, 4]], dtype=np.int32)  # two parents (1, 0) and (2, 4)
    narrow = Addresser([3, 5, 7])
    assert narrow.narrow
    ids = narrow.cells(parents, None, np.arange(7))
    assert ids.tolist() == [(1 * 5 + 0) * 7 + j for j in range(7)] + [
        (2 * 5 + 4) * 7 + j for j in range(7)]
    assert narrow.cells(parents, np.array([1, 0]), np.array([6, 3])).tolist() == [104, 38]
    wide = Addresser([2**40, 2**30, 3])
    assert not wide.narrow and wide.limbs == [(0, 1), (1, 3)]
    limbs = wide.cells(np.array([[5], [7]]), None, np.arange(3))
    assert limbs.tolist() == [[5, 7 * 3 + j] for j in range(3)]
    assert Addresser([2**64]).narrow and not Addresser([2**32, 2**32, 2]).narrow
    with pytest.raises(InternalError, match="more than 2\\*\\*64"):
        Addresser([2**64 + 1])


def test_wide_addresses_draw_from_the_cbc_mac():
    # wide addresses (rows of limbs) are a PRF input of their own: reproducible, independent
    # of 64-bit ids and of each other, and any limb changes the words
    src = RandomSource.from_seed(5)
    limbs = np.array([[0, 0], [0, 1], [1, 0], [2**64 - 1, 2**64 - 1], [0, 0]], dtype=np.uint64)
    w = src.words(limbs, 0, 3)
    assert np.array_equal(w[0], w[4]) and len({tuple(r) for r in w[:4].tolist()}) == 4
    assert np.array_equal(src.words(limbs[1:3], 0, 3), w[1:3])  # addressed, not batched
    assert not np.isin(w, src.words(np.arange(4, dtype=np.uint64), 0, 3)).any()
    three = src.words(np.array([[0, 0, 0]], dtype=np.uint64), 0, 3)
    assert not np.isin(three, w).any()  # the length is part of the input
    dist = DiscreteGaussian(40)
    x = dist.sample(src, limbs)
    assert x[0] == x[4] and np.array_equal(dist.sample(src, limbs[:1]), x[:1])
    with pytest.raises(InputError, match="must be 0 for wide addresses"):
        src.words(limbs, 1, 2)


def test_nested_levels_noise_exactly_the_allowed_children():
    # level 2 nested under level 1: parent a may only have the children listed for it
    table = np.array([[0, 0, 1, 2, 2, 2], [1, 3, 0, 2, 4, 5]])
    allowed = {1: Allowed((0,), table)}
    leaves = np.array([[0, 1], [0, 3], [1, 0], [2, 4]])
    counts = np.array([5, 7, 3, 9])
    for seed in range(10):
        out = release_tree(leaves, counts, [3, 6], plan_budget(2, rho=Fraction(1, 5)),
                           RandomSource.from_seed(seed), allowed)
        ok = {(a, b) for a, b in table.T.tolist()}
        assert {tuple(r) for r in out[0].tolist()} <= ok and out[1].sum() == 24
    exact = release_tree(leaves, counts, [3, 6], plan_budget(2, rho=10**6),
                         RandomSource.from_seed(1), allowed)
    assert exact[0].tolist() == leaves.tolist() and exact[1].tolist() == counts.tolist()
    # all children allowed: the same release as the dense level
    full = {1: Allowed((0,), np.array([np.repeat(np.arange(3), 6), np.tile(np.arange(6), 3)]))}
    plan = plan_budget(2, rho=Fraction(1, 3))
    dense = release_tree(leaves, counts, [3, 6], plan, RandomSource.from_seed(2))
    ragged = release_tree(leaves, counts, [3, 6], plan, RandomSource.from_seed(2), full)
    assert all(np.array_equal(a, b) for a, b in zip(dense, ragged, strict=True))
    with pytest.raises(InternalError, match="not among the allowed children"):
        release_tree([[1, 5]], [3], [3, 6], plan, RandomSource.from_seed(2), allowed)


def test_allowed_children_follow_the_domain_table():
    # parents (a, b); children c allowed under a only (a nested level keyed by level 0)
    table = np.array([[0, 4], [1, 2], [0, 1], [2, 0], [1, 3], [0, 2], [0, 1]])
    parents = np.array([[0, 0], [0, 5], [1, 1], [2, 9]], dtype=np.int32)
    children = Children(Allowed((0,), table.T), [3, 10, 5])
    lo, hi = children.of(parents.T)
    got = [children.children[a:b].tolist() for a, b in zip(lo, hi, strict=True)]
    assert got == [[1, 2, 4], [1, 2, 4], [2, 3], [0]]
    # a parent key past the table's last, between two of its keys, before its first
    for rows in ([0, 1], [0, 3], [1, 4]):
        with pytest.raises(InternalError, match="no allowed children"):
            Children(Allowed((0,), table[rows].T), [3, 10, 5]).of(parents.T)


def test_allowed_children_rows_and_true_positions():
    """A nested block's cells (each parent's allowed children) and where its true children sit
    among them, read from the table (no search of the cells); a child the parent does not allow
    is refused, also one whose code falls between two allowed ones of the table (its rank would
    name its neighbour) or outside every code."""
    table = np.array([[0, 3], [0, 7], [1, 5], [1, 9], [2, 3], [2, 5], [2, 7], [2, 9]])
    children = Children(Allowed((0,), table.T), [3, 12])
    lo, _ = children.of(np.array([[2, 0, 1]]))
    rows = children.rows(lo[:2], 2)
    assert rows.tolist() == [[3, 5], [3, 7]] and rows.dtype == np.uint64
    first = lo[:2]  # parents 2 and 0, two children each (the first two of parent 2)
    at = children.positions(first, np.array([0, 0, 1, 1]), np.array([3, 5, 3, 7]))
    assert at.tolist() == [0, 1, 0, 1]
    for code in (5, 4, 6, 11, 0):  # 5: allowed under 1 and 2 only; 4, 6: between codes
        with pytest.raises(InternalError, match="not among the allowed children"):
            children.positions(lo[1:2], np.array([0]), np.array([code]))
    # a hierarchy (each child listed once): offsets looked up by code, runs checked
    tree = Children(Allowed((0,), np.array([[0, 3], [0, 7], [1, 5], [2, 9], [2, 1], [2, 4]]).T),
                    [3, 12])
    lo, _ = tree.of(np.array([[2, 0, 1]]))
    assert tree.rows(lo, 1).ravel().tolist() == [1, 3, 5]
    at = tree.positions(lo, np.array([0, 0, 0, 1, 1, 2]), np.array([1, 4, 9, 3, 7, 5]))
    assert at.tolist() == [0, 1, 2, 0, 1, 0]
    for parent, code in ((1, 1), (1, 9), (2, 7), (0, 5), (0, 2), (2, 11)):  # other runs, none
        with pytest.raises(InternalError, match="not among the allowed children"):
            tree.positions(lo, np.array([parent]), np.array([code]))


@pytest.mark.parametrize("workers", [1, 3])
def test_nested_children_go_to_their_parents_slots_without_bound_sized_arrays(
        monkeypatch, workers):
    """A nested level's blocks take the parents by width; their kept children go straight to
    their parents' slots (parent order, codes ascending, as the dense level gives), and no
    array is sized by a bound on the children (the parents' counts or the noised cells: mapping
    such arrays cost ~38 ms at Italy-like's level 6 in a fresh process)."""
    rng = np.random.default_rng(3)
    widths = rng.integers(1, 60, 40)  # 40 parents, each its own allowed children at level 2
    table = np.array([np.repeat(np.arange(40), widths),
                      np.concatenate([np.sort(rng.choice(60, w, replace=False)) for w in widths])])
    leaves = table[:, rng.choice(table.shape[1], 30, replace=False)].T
    counts = rng.integers(10**5, 10**6, 30)  # the parents' counts pass the planned cells
    allowed = {1: Allowed((0,), table)}
    full = {1: Allowed((0,), np.array([np.repeat(np.arange(40), 60), np.tile(np.arange(60), 40)]))}
    plan = plan_budget(2, rho=100)
    sizes: list[int] = []
    inner = memory.empty

    def recorded(shape, dtype):
        sizes.append(int(np.prod(shape)))
        return inner(shape, dtype)

    monkeypatch.setattr(memory, "empty", recorded)
    monkeypatch.setattr(topdown.level, "MIN_BLOCK_CELLS", 64)  # several blocks, some ragged
    out = release_tree(leaves, counts, [40, 60], plan, RandomSource.from_seed(4), allowed,
                       workers=workers)
    planned = int(widths.sum())
    assert max(sizes) < planned // 2  # the old bound-sized arrays had min(counts, cells)
    order = np.lexsort(out[0].T[::-1])
    assert np.array_equal(order, np.arange(order.shape[0]))  # parent order, codes ascending
    # the same as every child of every parent allowed, where the kept children are the same
    # (rho 100: the true leaves, whose counts dwarf the noise)
    dense = release_tree(leaves, counts, [40, 60], plan, RandomSource.from_seed(4), full,
                         workers=workers)
    assert np.array_equal(out[0], dense[0]) and out[1].sum() == counts.sum()


@pytest.mark.parametrize("workers", [1, 3])
def test_small_nested_runs_released_in_mixed_blocks_equal_dense_blocks(monkeypatch, workers):
    """A nested level whose parents have many different numbers of children (one run of a few
    cells each) is released in mixed blocks (several widths share a block's calls); the same
    release as one dense block per run, at a nested level with a level below it (the truth
    links) and as the leaves."""
    rng = np.random.default_rng(4)
    table = np.array([(a, int(b)) for a in range(12)
                      for b in np.sort(rng.choice(20, a + 1, replace=False))])
    allowed = {1: Allowed((0,), table.T), 2: Allowed((1,), np.array(
        [(b, int(c)) for b in range(20) for c in range(b % 5 + 1)]).T)}
    leaves = np.array([(a, b, c) for a, b in table for c in range(b % 5 + 1)
                       if rng.random() < 0.4])
    counts = rng.integers(1, 300, leaves.shape[0])
    plan = plan_budget(3, rho=Fraction(1, 2))
    calls: list[int] = []  # the number of widths in each block
    mixed_block = topdown.block._mixed_block

    def spy(*args):
        calls.append(len(np.unique(args[8])))
        return mixed_block(*args)

    monkeypatch.setattr(topdown.block, "_mixed_block", spy)
    ragged = release_tree(leaves, counts, [12, 20, 5], plan, RandomSource.from_seed(6), allowed,
                          workers=workers)
    assert len(calls) >= 2 and max(calls) > 1  # both nested levels, widths sharing blocks
    calls.clear()
    tasks = topdown.level._tasks  # a block per run of equal widths: one dense matrix each
    monkeypatch.setattr(topdown.level, "_tasks",
                        lambda runs, size, nested: tasks(runs, size, False))
    dense = release_tree(leaves, counts, [12, 20, 5], plan, RandomSource.from_seed(6), allowed,
                         workers=workers)
    assert len(calls) > 2 and max(calls) == 1
    assert all(np.array_equal(a, b) for a, b in zip(ragged, dense, strict=True))
    assert ragged[1].sum() > 0


def test_nested_runs_of_several_widths_share_blocks_for_any_workers_and_block_sizes(
        monkeypatch):
    """Nested levels whose parents have 8 to 60 allowed children (mostly noise: the rows go
    through the shared _top_keys with several widths in one call) are released in blocks
    that mix widths; the output is the same for any block size and number of workers, and
    equals one dense block per width (the per-width path)."""
    rng = np.random.default_rng(21)
    widths = rng.integers(8, 61, size=40)
    table = np.array([np.repeat(np.arange(40), widths),
                      np.concatenate([np.sort(rng.choice(80, w, replace=False)) for w in widths])])
    inner = np.array([np.repeat(np.arange(80), 9), np.tile(np.arange(9), 80)])
    allowed = {1: Allowed((0,), table), 2: Allowed((1,), inner)}
    pairs = table[:, rng.choice(table.shape[1], 120, replace=False)]
    leaves = np.array([(a, b, int(c)) for a, b in pairs.T for c in rng.choice(9, 2)])
    leaves = np.unique(leaves, axis=0)
    counts = rng.integers(1, 400, leaves.shape[0])
    plan = plan_budget(3, rho=Fraction(1, 2))
    mixed = []
    runs_of = topdown.block.intopt_positive_runs

    def spy(x, runs, c):
        mixed.append(len({m for r, m in runs if r and m >= 8}))
        return runs_of(x, runs, c)

    monkeypatch.setattr(topdown.block, "intopt_positive_runs", spy)
    reference = release_tree(leaves, counts, [40, 80, 9], plan, RandomSource.from_seed(8),
                             allowed)
    assert max(mixed) > 5  # several widths in one block's shared calls
    for block, smallest, workers in [(1 << 18, 1 << 14, 2), (700, 64, 1), (300, 64, 3),
                                     (60, 8, 2)]:
        monkeypatch.setattr(topdown.level, "BLOCK_CELLS", block)
        monkeypatch.setattr(topdown.level, "MIN_BLOCK_CELLS", smallest)
        again = release_tree(leaves, counts, [40, 80, 9], plan, RandomSource.from_seed(8),
                             allowed, workers=workers)
        assert all(np.array_equal(a, b) for a, b in zip(again, reference, strict=True))
    tasks = topdown.level._tasks
    monkeypatch.setattr(topdown.level, "_tasks",
                        lambda runs, size, nested: tasks(runs, size, False))
    dense = release_tree(leaves, counts, [40, 80, 9], plan, RandomSource.from_seed(8), allowed,
                         workers=2)
    assert all(np.array_equal(a, b) for a, b in zip(dense, reference, strict=True))
    assert reference[1].sum() > 0


def test_nested_tasks_pack_runs_of_several_widths():
    """_tasks on a nested level: consecutive blocks of at most ``size`` cells (a parent wider
    than a block alone) covering every parent once, runs cut between parents."""
    rng = np.random.default_rng(3)
    widths = np.sort(rng.integers(1, 90, size=500))
    edges = [0, *(np.flatnonzero(np.diff(widths)) + 1).tolist(), 500]
    runs = [(a, b, int(widths[a])) for a, b in itertools.pairwise(edges)]
    for size in (50, 64, 1000, 1 << 18):
        tasks = topdown.level._tasks(runs, size, True)
        assert tasks[0][0] == 0 and tasks[-1][1] == 500
        assert all(t[1] == u[0] for t, u in itertools.pairwise(tasks))
        for a, b, w in tasks:
            assert w == 0 and b > a
            assert b - a == 1 or int(widths[a:b].sum()) <= size
    assert len(topdown.level._tasks(runs, 1 << 18, True)) == 1


def test_zero_children_get_noise():
    # all mass on child 0 of 50: with sigma^2 = 50, zero children are released > 0 in many runs
    # (seeded, deterministic); control: with tiny noise, never
    def hits(sigma2: object) -> int:
        runs = []
        for s in range(20):
            levels = Levels((50,), (DiscreteGaussian(sigma2),), (RandomSource.from_seed(s),),
                            (None,))
            runs.append(release_below(levels, Nodes.root(40), [[0]], [40]))
        return sum(int((out.codes != 0).any()) for out in runs)

    assert hits(50) >= 10
    assert hits(TINY) == 0


def test_release_tree_invariants_and_reproducibility():
    rng = np.random.default_rng(6)
    sizes = [4, 3, 5]
    codes, counts = random_leaves(rng, sizes, 40)
    plan = plan_budget(3, rho=1)
    a = release_tree(codes, counts, sizes, plan, RandomSource.from_seed(1))
    b = release_tree(codes[::-1], counts[::-1], sizes, plan, RandomSource.from_seed(1))
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
    assert a[1].sum() == counts.sum() and (a[1] > 0).all()
    assert (np.diff(a[0] @ np.array([15, 5, 1])) > 0).all()  # code order, no repeats
    c = release_tree(codes, counts, sizes, plan, RandomSource.from_seed(2))
    assert len(c[1]) != len(a[1]) or (c[0] != a[0]).any() or (c[1] != a[1]).any()


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
    with pytest.raises(InternalError, match="level 2 released 5 records, not the root's 4"):
        check_total(Nodes(np.zeros((2, 1), np.int32), np.array([5])), 4, 2)


@pytest.mark.parametrize("sizes", [[3, 4, 5], [10**7] * 5, [2**40, 3, 2**40]])
def test_parents_found_by_codes_even_past_int64(sizes):
    # mixed-radix keys, re-ranked before they would overflow (products up to 1e35 here)
    rng = np.random.default_rng(7)
    pool = np.column_stack([rng.integers(0, min(s, 6), 400) for s in sizes])
    parents = np.unique(pool[:20], axis=0)  # distinct, lexicographic
    wanted = np.vstack([parents[rng.integers(0, len(parents), 300)], pool[20:]])
    rows = find_columns(parents.T, wanted.T, sizes)
    index = {tuple(r): i for i, r in enumerate(parents.tolist())}
    assert rows.tolist() == [index.get(tuple(r), -1) for r in wanted.tolist()]
    assert (rows == -1).any() and (rows >= 0).any()


def test_batches_in_any_order_and_repeats_refused():
    rng = np.random.default_rng(11)
    sizes = [5, 6, 4]
    leaves, counts = random_leaves(rng, sizes, 90)
    levels = levels_for(sizes)
    mid = release_below(levels, Nodes.root(int(counts.sum())), leaves.T, counts, upto=2)
    shuffled = rng.permutation(mid.counts.shape[0])
    a = release_below(levels, mid, leaves.T, counts)
    b = release_below(levels, Nodes(mid.codes[:, shuffled], mid.counts[shuffled]), leaves.T,
                      counts)
    assert as_tuples(a) == as_tuples(b)
    twice = np.concatenate([np.arange(mid.counts.shape[0]), [0]])
    with pytest.raises(InternalError, match="lists a node twice"):
        release_below(levels, Nodes(mid.codes[:, twice], mid.counts[twice]), leaves.T, counts)
    with pytest.raises(InternalError, match="from level 2 to 1"):
        release_below(levels, mid, leaves.T, counts, upto=1)
    with pytest.raises(InputError, match="workers must be a positive integer"):
        release_below(levels, mid, leaves.T, counts, workers=0)


def test_progress_reports_are_bounded_and_end_with_all_cells(monkeypatch):
    rng = np.random.default_rng(12)
    sizes = [40, 50]
    leaves, counts = random_leaves(rng, sizes, 2000, top=50)
    monkeypatch.setattr(topdown.level, "BLOCK_CELLS", 50)  # level 2: one block per parent
    seen: list[LevelProgress] = []
    for workers in (1, 3):
        seen.clear()
        out = release_below(levels_for(sizes), Nodes.root(int(counts.sum())), leaves.T, counts,
                            workers=workers, progress=seen.append)
        two = [p for p in seen if p.level == 2]
        assert [p.level for p in seen] == sorted(p.level for p in seen)
        assert 2 <= len(two) <= 17 and two[-1].cells_done == two[-1].cells_planned
        assert two[-1].cells_planned == 50 * two[-1].parents == out.noised
        assert all(a.cells_done < b.cells_done for a, b in itertools.pairwise(two))
        assert all(p.depth == 2 and p.seconds >= 0 for p in seen)


def test_cancel_stops_between_blocks(monkeypatch):
    rng = np.random.default_rng(13)
    sizes = [40, 50]
    leaves, counts = random_leaves(rng, sizes, 2000, top=50)
    monkeypatch.setattr(topdown.level, "BLOCK_CELLS", 50)
    for workers in (1, 2):
        calls: list[int] = []

        def cancel(calls: list[int] = calls) -> bool:
            calls.append(1)
            return len(calls) > 5  # after a few blocks of level 2

        with pytest.raises(Cancelled, match="cancelled between two blocks"):
            release_below(levels_for(sizes), Nodes.root(int(counts.sum())), leaves.T, counts,
                          workers=workers, cancel=cancel)
        assert len(calls) == 6

        def boom() -> bool:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            release_below(levels_for(sizes), Nodes.root(int(counts.sum())), leaves.T, counts,
                          workers=workers, cancel=boom)
    # control: a hook that never cancels changes nothing
    quiet = release_below(levels_for(sizes), Nodes.root(int(counts.sum())), leaves.T, counts,
                          cancel=lambda: False)
    assert quiet.counts.sum() == counts.sum()


def test_levels_travel_to_workers_only_by_explicit_export():
    rng = np.random.default_rng(14)
    sizes = [3, 4, 6]
    leaves, counts = random_leaves(rng, sizes, 40)
    allowed = {2: Allowed((0,), np.array([np.repeat(np.arange(3), 4), np.tile([0, 2, 4, 5], 3)]))}
    leaves[:, 2] = np.array([0, 2, 4, 5])[leaves[:, 2] % 4]
    leaves, first = np.unique(leaves, axis=0, return_index=True)
    counts = counts[first]
    levels = levels_for(sizes, seed=3, allowed=allowed)
    with pytest.raises(TypeError, match="cannot be copied or pickled"):
        pickle.dumps(levels)
    copy = Levels.from_export(pickle.loads(pickle.dumps(levels.export())))
    root = Nodes.root(int(counts.sum()))
    assert as_tuples(release_below(copy, root, leaves.T, counts)) == as_tuples(
        release_below(levels, root, leaves.T, counts))
    assert not copy.sources[0].private  # a seeded release stays marked not private
    with pytest.raises(InputError, match="export_key returned"):
        RandomSource.from_exported_key(b"short", True)
