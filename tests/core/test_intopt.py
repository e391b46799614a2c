"""IntOpt: equal to a plain transcription of the paper's pseudocode, optimal, valid, and strict."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inftda_duckdb.core.intopt as intopt_module
from inftda_duckdb.core import intopt_blocks, intopt_closed_form
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.intopt import intopt, intopt_ragged

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


def int64_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No block is solved in int32 (the release path's and the closed form's choice)."""
    for module in (intopt_blocks, intopt_closed_form):
        monkeypatch.setattr(module, "INT32_LIMIT", 0.0)


def paper_intopt(x: list[int], c: int, max_visits: int | None = None) -> list[int] | None:
    """Algorithm 1, right column, line by line, in Python integers (the oracle).

    Returns None when more than ``max_visits`` visits would be needed (the loop is O(c)).
    """
    x = [int(v) for v in x]
    m = len(x)
    z = [max(-((sum(x) - c) // m), -xi) for xi in x]  # line 2: ceil((c - sum x) / m)
    t = max(abs(zi) for zi in z)  # line 3
    order = sorted(range(m), key=lambda i: x[i])  # line 4 (Python's sort is stable)
    j = 0  # line 5
    visits = 0
    while sum(z) > c - sum(x):  # line 6
        delta = sum(z) - c + sum(x)  # line 7
        z[order[j]] = max(z[order[j]] - delta, -x[order[j]], -t)  # line 8
        j = (j + 1) % m  # line 9
        if j == 0:  # lines 10-11
            t += 1
        visits += 1
        if max_visits is not None and visits > max_visits:
            return None
    return [xi + zi for xi, zi in zip(x, z, strict=True)]  # line 12


def optimum(x: list[int], c: int) -> int:
    """The optimum: the smallest integer alpha with x_i + alpha >= 0 for all i and
    sum max(0, x_i - alpha) <= c <= sum (x_i + alpha)."""

    def feasible(alpha: int) -> bool:
        return (
            min(x) + alpha >= 0
            and sum(max(0, v - alpha) for v in x) <= c <= sum(v + alpha for v in x)
        )

    lo, hi = 0, max(abs(v) for v in x) + c + 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if feasible(mid) else (mid + 1, hi)
    return lo


def check_valid(y: np.ndarray, c: np.ndarray) -> None:
    assert y.dtype == np.int64
    assert (y >= 0).all()
    assert [int(v) for v in y.sum(axis=-1)] == [int(v) for v in c]


def random_rows(rng: np.random.Generator, n: int, m: int, scale: int) -> tuple[np.ndarray, ...]:
    """Rows mixing the regimes: c far above, near, and far below sum(x); negatives; ties."""
    x = rng.integers(-scale, 2 * scale, size=(n, m))
    flavour = rng.random(n)
    x[flavour < 0.1] = -np.abs(x[flavour < 0.1])  # all negative (or zero)
    x[(flavour >= 0.1) & (flavour < 0.15)] = 0  # all zero
    ties = (flavour >= 0.15) & (flavour < 0.35)
    x[ties] = x[ties] // max(1, scale // 2)  # few distinct values: many ties
    sums = np.maximum(x.sum(axis=1), 0)
    kind = rng.integers(0, 4, size=n)
    c = np.where(
        kind == 0, rng.integers(0, 3 * scale * m + 1, size=n),
        np.where(kind == 1, sums * 3 + rng.integers(0, 5, size=n),
                 np.where(kind == 2, sums // 4, np.maximum(sums + rng.integers(-5, 6, size=n), 0))),
    )
    return x, c


# ------------------------------------------------------------------------------------------------
# Equal to the oracle.


def test_batch_of_many_small_rows_equals_oracle() -> None:
    """>= 1e5 random rows, m = 1..8, through the dense and the ragged form."""
    rng = np.random.default_rng(20250101)
    checked = 0
    for m in range(1, 9):
        x, c = random_rows(rng, 12_500, m, 12)
        y = intopt(x, c, block_cells=997)  # many blocks, odd boundaries
        check_valid(y, c)
        for p in range(x.shape[0]):
            assert y[p].tolist() == paper_intopt(x[p].tolist(), int(c[p])), (x[p], c[p])
        checked += x.shape[0]
        offsets = np.arange(x.shape[0] + 1) * m
        assert np.array_equal(intopt_ragged(x.ravel(), offsets, c, block_cells=1 << 12), y.ravel())
    assert checked >= 100_000


@pytest.mark.parametrize("int32", [True, False])
def test_positive_entries_equal_intopt_on_both_integer_widths(
        int32: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """intopt_positive (the release's fused IntOpt + keep) returns exactly intopt's entries > 0,
    in code order, and the row sums; int32 arithmetic (small values) and int64 agree."""
    if not int32:
        int64_only(monkeypatch)
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, m = int(rng.integers(1, 80)), int(rng.integers(1, 70))
        x, c = random_rows(rng, n, m, 15)
        if rng.random() < 0.3:  # dense data: the step-5 form
            x = x + int(rng.integers(0, 60))
        y = intopt(x, c)
        flat, values, sums = intopt_module.intopt_positive(x.copy(), c)
        assert np.array_equal(flat, np.flatnonzero(y > 0))
        assert np.array_equal(values, y.ravel()[flat]) and np.array_equal(sums, y.sum(axis=1))
    huge = np.array([[2**61, -(2**61), 3]], dtype=np.int64)  # the Python-integer rows
    flat, values, sums = intopt_module.intopt_positive(huge.copy(), np.array([5]))
    y = intopt(huge, np.array([5]))
    assert np.array_equal(values, y.ravel()[flat]) and sums.tolist() == [5]


def test_kept_entries_put_in_flat_order_by_one_sort_or_an_argsort() -> None:
    """The sparse rows' kept entries come back in flat order with their values: by one sort of
    (position, value) packed in an int64 when both fit, else by an argsort; the same either
    way, values up to the largest parent count included."""
    rng = np.random.default_rng(2)
    for cells, cmax in [(1 << 18, 1000), (1 << 18, 2**40), (1 << 30, 2**40), (7, 1)]:
        flat = rng.choice(min(cells, 1 << 20), min(cells, 500), replace=False).astype(np.int64)
        vals = rng.integers(1, cmax + 1, flat.shape[0])
        vals[0] = cmax
        order = np.argsort(flat)
        got = intopt_blocks._by_position(flat.copy(), vals.copy(), np.zeros(3, np.int64),
                                         cells, cmax)
        assert np.array_equal(got[0], flat[order]) and np.array_equal(got[1], vals[order])


@pytest.mark.parametrize("int32", [True, False])
def test_sparse_rows_from_their_top_keys_equal_intopt(
        int32: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sparse rows (a few large counts among noise, as at a nested level's leaves) are solved
    from their TOP largest keys when those decide the row, else by the general form from the
    same sorted keys: both equal intopt, ties and rows narrower than TOP included, and both
    branches are taken (rows with many counts above the noise are not decided by their top).
    A block whose top keys leave most rows undecided (level 4 of the wide workload) is solved
    whole, in place, by the general form: that path is taken too, with the same integers."""
    if not int32:
        int64_only(monkeypatch)
    seen = {"decided": 0, "undecided": 0, "in place": 0}
    top_keys, sparse_rows = intopt_blocks._top_keys, intopt_blocks._sparse_rows

    def spy(*args: object) -> tuple[np.ndarray, ...]:
        out = top_keys(*args)  # type: ignore[arg-type]
        n_rows = args[0].shape[1]  # type: ignore[attr-defined]  # (the top keys: (top, P))
        seen["undecided"] += out[3].shape[0]
        seen["decided"] += n_rows - out[3].shape[0]
        return out

    def spy_rows(*args: object) -> tuple[np.ndarray, ...] | None:
        out = sparse_rows(*args)  # type: ignore[arg-type]
        seen["in place"] += out is None
        return out

    monkeypatch.setattr(intopt_blocks, "_top_keys", spy)
    monkeypatch.setattr(intopt_blocks, "_sparse_rows", spy_rows)
    rng = np.random.default_rng(11)
    for _ in range(400):
        n, m = int(rng.integers(1, 60)), int(rng.integers(1, 90))
        x = rng.integers(-6, 7, size=(n, m))  # the noise
        if rng.random() < 0.3:
            x //= 4  # few distinct values: ties
        big = rng.random((n, m)) < rng.choice([0.01, 0.05, 0.3])  # the true counts
        x[big] += rng.integers(1, 3000, size=int(big.sum()))
        c = np.maximum(np.maximum(x, 0).sum(axis=1) + rng.integers(-15, 16, size=n), 0)
        y = intopt(x, c)
        flat, values, sums = intopt_module.intopt_positive(x.copy(), c)
        assert np.array_equal(flat, np.flatnonzero(y > 0))
        assert np.array_equal(values, y.ravel()[flat]) and np.array_equal(sums, y.sum(axis=1))
    assert seen["decided"] > 1000 and seen["undecided"] > 100 and seen["in place"] > 10, seen
    for p in range(8):  # the oracle itself on a few such rows
        row = np.r_[rng.integers(-6, 7, size=30), [500, 3, 40]][rng.permutation(33)]
        c1 = int(np.maximum(row, 0).sum()) - p
        y1 = intopt_module.intopt_positive(row[None].copy(), np.array([c1]))
        dense = np.zeros(33, np.int64)
        dense[y1[0]] = y1[1]
        assert dense.tolist() == paper_intopt(row.tolist(), c1)


@pytest.mark.parametrize("int32", [True, False])
def test_runs_of_several_widths_in_one_call_equal_intopt_run_by_run(
        int32: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """intopt_positive_runs (a nested level's block: rows of several widths, each run a dense
    matrix, one after the other) equals intopt run by run: sparse runs share one _top_keys
    call (rows of different widths in one call) and one _solve_dense of the rows left
    undecided (padded to the widest), dense runs and narrow runs get intopt_positive, small
    ones the ragged form, values too large for int64 sums too; every branch is taken."""
    if not int32:
        int64_only(monkeypatch)
    seen = {"shared widths": 0, "padded": 0, "solo": 0, "ragged": 0, "unsafe": 0}
    top_keys, solve_dense = intopt_blocks._top_keys, intopt_blocks.solve_dense
    positive, ragged = intopt_blocks.intopt_positive, intopt_blocks.ragged_block

    def spy_top(*args: object) -> tuple[np.ndarray, ...]:
        m = args[5]
        seen["shared widths"] += not isinstance(m, int) and np.unique(m).size > 1  # type: ignore
        return top_keys(*args)  # type: ignore[arg-type]

    def spy_solve(*args: object) -> np.ndarray:
        seen["padded"] += len(args) > 3 and args[3] is not None and np.unique(args[3]).size > 1
        return solve_dense(*args)  # type: ignore[arg-type]

    def spy_positive(*args: object) -> tuple[np.ndarray, ...]:
        seen["solo"] += 1
        return positive(*args)  # type: ignore[arg-type]

    def spy_ragged(*args: object) -> np.ndarray:
        seen["ragged"] += 1
        return ragged(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(intopt_blocks, "_top_keys", spy_top)
    monkeypatch.setattr(intopt_blocks, "solve_dense", spy_solve)
    monkeypatch.setattr(intopt_blocks, "intopt_positive", spy_positive)
    monkeypatch.setattr(intopt_blocks, "ragged_block", spy_ragged)
    monkeypatch.setattr(intopt_blocks, "_SOLO_CELLS", 100)
    rng = np.random.default_rng(17)
    for trial in range(250):
        runs = [(int(rng.integers(0, 40)), int(rng.integers(1, 70)))
                for _ in range(int(rng.integers(1, 7)))]
        xs, cs = [], []
        for rows, m in runs:
            x = rng.integers(-6, 7, size=(rows, m))  # the noise
            if rng.random() < 0.3:
                x //= 4  # few distinct values: ties
            big = rng.random((rows, m)) < rng.choice([0.01, 0.05, 0.3, 1.0])  # the true counts
            x[big] += rng.integers(1, 3000, size=int(big.sum()))
            c = np.maximum(np.maximum(x, 0).sum(axis=1) + rng.integers(-15, 16, size=rows), 0)
            if rng.random() < 0.1:
                c[:] = rng.integers(0, 3, size=rows)
            xs.append(x)
            cs.append(c)
        if trial % 25 == 0:
            xs[0][:, :1] += 2**59  # int64 sums could overflow: the ragged form in Python ints
            seen["unsafe"] += xs[0].size > 0
        want = [intopt(x, c) if x.size else x for x, c in zip(xs, cs, strict=True)]
        y = np.concatenate([w.ravel() for w in want]).astype(np.int64)
        c_all = np.concatenate(cs).astype(np.int64)
        x_all = np.concatenate([x.ravel() for x in xs]).astype(np.int64)
        flat, values, sums = intopt_module.intopt_positive_runs(x_all, runs, c_all)
        assert np.array_equal(flat, np.flatnonzero(y > 0)), trial
        assert np.array_equal(values, y[flat]) and np.array_equal(sums, c_all), trial
    assert all(v > 0 for v in seen.values()), seen


def test_ragged_with_mixed_lengths_and_empty_rows_equals_oracle() -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 12, size=20_000)
    lengths[:3] = [1, 0, 40]
    c = rng.integers(0, 80, size=lengths.size)
    c[lengths == 0] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = rng.integers(-15, 25, size=int(offsets[-1]))
    y = intopt_ragged(values, offsets, c, block_cells=1000)
    for p in range(lengths.size):
        row = values[offsets[p] : offsets[p + 1]].tolist()
        expected = paper_intopt(row, int(c[p])) if row else []
        assert y[offsets[p] : offsets[p + 1]].tolist() == expected
    sums = np.add.reduceat(y, offsets[:-1])[lengths > 0]
    assert sums.tolist() == c[lengths > 0].tolist()


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    x=st.lists(st.integers(-60, 120), min_size=1, max_size=14),
    c=st.integers(0, 2000),
)
def test_property_equals_oracle(x: list[int], c: int) -> None:
    expected = paper_intopt(x, c)
    assert intopt(np.array([x]), np.array([c]))[0].tolist() == expected
    assert intopt_ragged(np.array(x), np.array([0, len(x)]), np.array([c])).tolist() == expected


@pytest.mark.parametrize(
    ("x", "c"),
    [
        ([5], 0), ([-5], 3), ([0], 0), ([7], 7),  # m = 1
        ([3, 1, 2], 0), ([0, 0, 0], 0), ([0, 0, 0, 0], 7),  # c = 0, all zero
        ([-3, -1, -4, -1], 2), ([-9, -9, -9], 0), ([-2, -7], 100),  # all negative
        ([2, 2, 2, 2, 2], 3), ([1, 1, 0, 0, 1], 2), ([4, 4, 4], 20),  # ties
        ([1000, 0, 0, 0], 0), ([1000, 1, 2, 3], 10), ([0, 1, 2], 10**6),  # c << sum, c >> sum
        ([5, -5, 5, -5], 0), ([10, -1, 10, -1], 19),
    ],
)
def test_edges_equal_oracle(x: list[int], c: int) -> None:
    y = intopt(np.array([x], dtype=np.int64), np.array([c]))
    check_valid(y, np.array([c]))
    assert y[0].tolist() == paper_intopt(x, c)


def test_dense_data_rows_equal_oracle() -> None:
    """Dense data (every child well above the noise, c near sum x): the rows of step 5, mixed in
    one block with rows that take the general form (a small child), both signs of T, ties."""
    rng = np.random.default_rng(11)
    n, m = 20_000, 10
    x = rng.poisson(30, (n, m)) + rng.integers(-4, 5, (n, m))
    x[::7, 3] = rng.integers(-2, 3, x[::7].shape[0])  # a child near 0: the general form
    x[1::5] = x[1::5] // 8 * 8  # ties
    c = np.maximum(x.sum(axis=1) + rng.integers(-25, 26, n), 0)
    target = c - x.sum(axis=1)
    q = -(-target // m)
    step5 = x.min(axis=1) >= np.maximum(q, -(target // m))
    assert 0.5 < step5.mean() < 0.95  # both kinds of rows, in the same blocks
    assert (target[step5] > 0).any() and (target[step5] < 0).any() and (target[step5] == 0).any()
    y = intopt(x, c)
    check_valid(y, c)
    for p in range(n):
        assert y[p].tolist() == paper_intopt(x[p].tolist(), int(c[p])), (x[p], c[p])


def test_ties_are_visited_in_index_order() -> None:
    # Equal counts: the earliest indices are lowered first (stable ascending sort, line 4).
    assert intopt(np.array([[3, 3, 3, 3]]), np.array([10])).tolist() == [[2, 2, 3, 3]]
    assert intopt(np.array([[1, 1, 1]]), np.array([1])).tolist() == [[0, 0, 1]]


def test_near_int64_range_equals_oracle_without_overflow() -> None:
    """Values near +-2**63 (exact Python-integer path), where the oracle ends quickly."""
    rng = np.random.default_rng(3)
    ran = 0
    cases = []
    for _ in range(400):
        m = int(rng.integers(1, 7))
        base = int(rng.choice([I64_MAX - 50, I64_MIN + 50, 2**62, -(2**62), 0]))
        x = [base + int(v) for v in rng.integers(-50, 1, size=m)] if base > 0 else [
            base + int(v) for v in rng.integers(0, 50, size=m)
        ]
        if base == 0:  # mixed signs at both ends of the range
            choices = [I64_MAX - int(rng.integers(0, 9)), I64_MIN + int(rng.integers(0, 9)), 3]
            x = [int(rng.choice(choices)) for _ in range(m)]
        total = sum(x)
        c = int(rng.choice([0, I64_MAX, min(max(total, 0), I64_MAX), int(rng.integers(0, 100))]))
        cases.append((x, c))
    for x, c in cases:
        y = intopt(np.array([x], dtype=np.int64), np.array([c], dtype=np.int64))
        check_valid(y, np.array([c], dtype=object))
        assert int(np.abs(y[0].astype(object) - np.array(x, dtype=object)).max()) == optimum(x, c)
        expected = paper_intopt(x, c, max_visits=20_000)
        if expected is not None:
            ran += 1
            assert y[0].tolist() == expected, (x, c)
    assert ran >= 200


def test_object_path_equals_int64_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    x, c = random_rows(rng, 5000, 6, 30)
    lengths = rng.integers(1, 9, size=3000)
    values = rng.integers(-20, 40, size=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rc = rng.integers(0, 100, size=lengths.size)
    fast = intopt(x, c), intopt_ragged(values, offsets, rc)
    solved = intopt_closed_form._solve
    kinds: list[object] = []

    def spy(xs: np.ndarray, *args: object) -> object:
        kinds.append(xs.dtype)
        return solved(xs, *args)

    monkeypatch.setattr(intopt_closed_form, "_solve", spy)
    monkeypatch.setattr(intopt_closed_form, "SAFE_LIMIT", 0.0)  # every row takes the exact path
    slow = intopt(x, c), intopt_ragged(values, offsets, rc)
    assert kinds and all(k == np.dtype(object) for k in kinds)  # the exact path ran
    assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])


def test_mixed_safe_and_huge_rows_in_one_block() -> None:
    x = np.array([[1, 2, 3], [I64_MAX, 0, I64_MIN], [4, -1, 0], [2**62, 2**62, 5]])
    c = np.array([2, 10, 3, I64_MAX])
    y = intopt(x, c)
    for p in range(4):
        assert y[p].tolist() == paper_intopt(x[p].tolist(), int(c[p]), max_visits=10_000)
    offsets = np.array([0, 3, 6, 9, 12])
    assert np.array_equal(intopt_ragged(x.ravel(), offsets, c), y.ravel())


# ------------------------------------------------------------------------------------------------
# Optimal, valid, block-independent.


def test_optimal_against_closed_form() -> None:
    rng = np.random.default_rng(5)
    for m, scale in [(1, 50), (3, 1000), (10, 10**6), (40, 10**12)]:
        x, c = random_rows(rng, 1500, m, scale)
        y = intopt(x, c)
        check_valid(y, c)
        dist = np.abs(y - x).max(axis=1)
        for p in range(x.shape[0]):
            assert int(dist[p]) == optimum(x[p].tolist(), int(c[p]))


def test_optimality_check_rejects_a_suboptimal_answer() -> None:
    # Negative control for the closed form: a valid but non-optimal vector has a larger distance.
    x, c = [5, 5, -2], 6
    assert optimum(x, c) == 2  # IntOpt: [3, 3, 0]
    assert max(abs(a - b) for a, b in zip([6, 0, 0], x, strict=True)) > optimum(x, c)
    assert intopt(np.array([x]), np.array([c])).tolist() == [[3, 3, 0]]


def test_block_size_does_not_change_the_result() -> None:
    rng = np.random.default_rng(9)
    x, c = random_rows(rng, 3000, 17, 40)
    reference = intopt(x, c)
    for block in (1, 17, 1000, 1 << 22):
        assert np.array_equal(intopt(x, c, block_cells=block), reference)
        offsets = np.arange(x.shape[0] + 1) * 17
        ragged = intopt_ragged(x.ravel(), offsets, c, block_cells=block)
        assert np.array_equal(ragged, reference.ravel())


def test_one_wide_row_and_other_integer_dtypes() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(-5, 20, size=(1, 5000)).astype(np.int32)
    c = np.array([20_000], dtype=np.uint16)
    y = intopt(x, c)
    check_valid(y, c)
    assert y[0].tolist() == paper_intopt(x[0].tolist(), 20_000)


def test_empty_inputs() -> None:
    assert intopt(np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)).shape == (0, 3)
    assert intopt(np.zeros((2, 0), dtype=np.int64), np.zeros(2, dtype=np.int64)).shape == (2, 0)
    none = np.zeros(0, np.int64)
    assert intopt_ragged(none, np.zeros(3, np.int64), np.zeros(2, np.int64)).size == 0


# ------------------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize(
    ("x", "c", "match"),
    [
        (np.array([[1.0, 2.0]]), np.array([3]), "x must be a matrix .* of integers"),
        (np.array([[1, np.nan]]), np.array([3]), "float64"),
        (np.array([[True, False]]), np.array([1]), "bool"),
        (np.array([[1, 2]], dtype=object), np.array([3]), "object"),
        (np.array([1, 2]), np.array([3]), "x must be a matrix"),
        (np.array([[1, 2]]), np.array([3.0]), "c must be a 1-D array of integers"),
        (np.array([[1, 2]]), np.array([3, 4]), "one total per row"),
        (np.array([[1, 2], [3, 4]]), np.array([3, -1]), r"c\[1\] must be >= 0"),
        (np.zeros((1, 0), dtype=np.int64), np.array([2]), r"c\[0\] must be 0 for a parent with no"),
        (np.array([[2**63]], dtype=np.uint64), np.array([1]), "must fit in int64"),
    ],
)
def test_bad_dense_input(x: np.ndarray, c: np.ndarray, match: str) -> None:
    with pytest.raises(InputError, match=match) as info:
        intopt(x, c)
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize(
    ("offsets", "c", "match"),
    [
        ([0, 2], [1, 1], "len\\(c\\) \\+ 1 entries"),
        ([1, 3], [1], "start at 0"),
        ([0, 2], [1], "end at len\\(values\\)"),
        ([0, 3, 2, 3], [1, 1, 1], "non-decreasing"),
        ([0, 0, 3], [1, 1], r"c\[0\] must be 0 for a parent with no children"),
        ([0.0, 3.0], [1], "offsets must be a 1-D array of integers"),
    ],
)
def test_bad_ragged_input(offsets: list[float], c: list[int], match: str) -> None:
    with pytest.raises(InputError, match=match):
        intopt_ragged(np.array([1, 2, 3]), np.array(offsets), np.array(c))
