"""The executors' functions without Spark: :class:`SubtreeJob` fed Arrow batches
the way ``mapInArrow`` feeds them (any partitioning of the subtrees, any batch size, any chunk),
against ``release_tree`` and a row-by-row transcription. Fast: no SparkSession."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_below, release_root, release_tree
from inftda_duckdb.core.tree import Levels, Nodes, mixed_radix
from inftda_duckdb.spark.subtrees import SubtreeJob, _cells_bound, choose_cut, export_below

pytestmark = pytest.mark.spark


def _inputs(seed: int, sizes: list[int], rows: int, cut: int, neighbours: str):
    rng = np.random.default_rng(seed)
    codes = np.stack([np.minimum(rng.geometric(0.4, rows) - 1, s - 1) for s in sizes])
    leaves, counts = np.unique(codes, axis=1, return_counts=True)
    plan = plan_budget(len(sizes), rho=0.5, neighbours=neighbours)
    source = RandomSource.from_seed(seed)
    levels = Levels.build(sizes, plan, source)
    root = release_root(int(counts.sum()), plan, source)
    keys = mixed_radix(leaves, sizes, np.int64)
    span = int(np.prod(sizes[cut:]))
    nodes = Nodes.root(root)
    if cut:  # the driver's part: the true counts of the cut prefixes
        prefix, inverse = np.unique(keys // span, return_inverse=True)
        nodes = release_below(levels, nodes, prefix, np.bincount(inverse, weights=counts)
                              .astype(np.int64), upto=cut)
    s_nodes = mixed_radix(nodes.codes, sizes[:cut], np.int64)
    return leaves, counts, plan, source, levels, keys, span, nodes, s_nodes


@pytest.mark.parametrize("seed", range(6))
def test_subtree_job_equals_release_tree_on_any_partitioning(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    sizes = [int(s) for s in rng.integers(2, 6, int(rng.integers(2, 5)))]
    cut = int(rng.integers(0, len(sizes)))
    neighbours = ["substitute", "add_remove"][seed % 2]
    leaves, counts, plan, _, levels, keys, span, nodes, s_nodes = _inputs(
        seed, sizes, int(rng.integers(50, 3000)), cut, neighbours)
    s = np.concatenate([s_nodes, keys // span])
    node = np.concatenate([np.ones(s_nodes.shape[0], bool), np.zeros(keys.shape[0], bool)])
    key = np.concatenate([np.zeros(s_nodes.shape[0], np.int64), keys])
    n = np.concatenate([nodes.counts, counts])
    values = tuple(pa.array([f"x{k}_{j}" for j in range(m)]) for k, m in enumerate(sizes))
    names = tuple(f"c{k}" for k in range(len(sizes)))
    job = SubtreeJob(cut, export_below(levels, cut), values, names, rows=False, keyed=True,
                     chunk_cells=int(rng.integers(1, 200)))
    parts = int(rng.integers(1, 5))
    where = s % parts  # any function of the subtree: one partition per task
    got = []
    for p in range(parts):
        mine = np.flatnonzero(where == p)
        order = mine[np.lexsort((rng.random(mine.shape[0]), s[mine]))]  # sorted by subtree only
        table = pa.table({"s": s[order], "node": node[order],
                          "key": pa.array(key[order], mask=node[order]), "n": n[order]})
        batches = table.to_batches(max_chunksize=int(rng.integers(1, 50)))
        for batch in job(iter(batches)):
            got += [tuple(r.values()) for r in batch.to_pylist()]
    codes, out = release_tree(leaves.T, counts, sizes, plan, RandomSource.from_seed(seed))
    expected = [(*(values[k][c].as_py() for k, c in enumerate(row)), int(x))
                for row, x in zip(codes.tolist(), out.tolist(), strict=True)]
    assert sorted(got) == expected


def test_subtree_job_rows_output_and_a_root_released_zero() -> None:
    sizes = [3, 4]
    _, counts, _, _, levels, keys, span, nodes, s_nodes = _inputs(
        1, sizes, 200, 1, "substitute")
    values = (pa.array(["a", "b", "c"]), pa.array([10, 20, 30, 40], pa.int32()))
    job = SubtreeJob(1, export_below(levels, 1), values, ("x", "y"), rows=True, keyed=True)
    table = pa.table({"s": np.concatenate([s_nodes, keys // span]),
                      "node": np.r_[np.ones(s_nodes.shape[0], bool), np.zeros(keys.shape[0], bool)],
                      "key": pa.array(np.r_[np.zeros(s_nodes.shape[0], np.int64), keys],
                                      mask=np.r_[np.ones(s_nodes.shape[0], bool),
                                                 np.zeros(keys.shape[0], bool)]),
                      "n": np.r_[nodes.counts, counts]})
    table = table.sort_by("s")
    rows = [r for b in job(iter(table.to_batches())) for r in b.to_pylist()]
    assert len(rows) == 200 and set(rows[0]) == {"x", "y"}
    # the root released 0 (add_remove): no node row has a count, nothing is released
    empty = pa.table({"s": [0], "node": [True], "key": pa.array([None], pa.int64()),
                      "n": [0]})
    job0 = SubtreeJob(0, export_below(levels, 0), values, ("x", "y"), rows=False, keyed=True)
    assert [b.num_rows for b in job0(iter(empty.to_batches()))] == []


def test_exported_levels_carry_no_key_above_the_cut() -> None:
    levels = Levels.build([3, 4, 5], plan_budget(3, rho=1), RandomSource.from_seed(3))
    data = export_below(levels, 2)
    full = levels.export()
    assert data["keys"][2] == full["keys"][2]
    assert data["keys"][0] != full["keys"][0] and data["keys"][1] != full["keys"][1]
    assert "key" not in repr(SubtreeJob(2, data, (), (), False, True)).lower().replace(
        "keyed", "")


def test_cut_and_chunk_bound() -> None:
    assert choose_cut([50, 1000, 24000, 240000], [50, 20, 24, 10]) == 2
    assert choose_cut([40, 1600, 64000, 2560000, 10**8], [40] * 5) == 2
    assert choose_cut([10**5, 10**6], [10**5, 10]) == 0
    # a node released with count 3 below levels of 40: 40 + min(3, 40) * 40 + 3 * 40 cells
    assert _cells_bound([40, 40, 40])(np.array([3, 10**6])) == (40 + 120 + 120) + (
        40 + 1600 + 64000)


def test_rows_output_never_builds_a_chunks_rows_in_one_array() -> None:
    """A node released with 2**40 records: its rows come in batches of ``batch_rows``, the
    first at once (was: ``np.repeat`` of the whole chunk, 8 TiB, a MemoryError)."""
    import itertools

    values = (pa.array(["a", "b", "c"]), pa.array([10, 20, 30, 40], pa.int32()))
    job = SubtreeJob(0, {}, values, ("x", "y"), rows=True, keyed=True)
    out = Nodes(np.array([[0, 2, 2], [1, 0, 3]], np.int32),
                np.array([3, 2**40, 5], np.int64))
    first = list(itertools.islice(job._decoded(out), 2))
    assert [b.num_rows for b in first] == [job.batch_rows] * 2
    assert first[0].to_pylist()[:4] == [{"x": "a", "y": 20}] * 3 + [{"x": "c", "y": 10}]
    small = Nodes(out.codes, np.array([3, 4, 5], np.int64))
    job = SubtreeJob(0, {}, values, ("x", "y"), rows=True, keyed=True, chunk_cells=4)
    object.__setattr__(job, "batch_rows", 5)  # batches that split a node's rows
    rows = [tuple(r.values()) for b in job._decoded(small) for r in b.to_pylist()]
    assert rows == [("a", 20)] * 3 + [("c", 10)] * 4 + [("c", 40)] * 5
    counts = SubtreeJob(0, {}, values, ("x", "y"), rows=False, keyed=True)
    assert [r["count"] for b in counts._decoded(small) for r in b.to_pylist()] == [3, 4, 5]
