"""InfTDA's top-down descent (paper, Algorithm 1, left column): any batch of subtrees, in blocks.

:func:`release_below` is the one entry point every engine calls (DuckDB's levels UDF, Spark's
executors, :func:`release_tree`): given the nodes released at a cut level ``c`` (a batch of
subtrees) and the true counts below them, it releases levels ``c+1..u``. Level by level, every
child of every released parent is noised (line 5), optimised with IntOpt against the parent's
count (line 6) and kept when > 0 (lines 7-9); parents released 0 are pruned (line 3).

Noise is addressed by the tree (:mod:`~inftda_duckdb.core.tree`), so each subtree's release
depends only on its own root and the truth below it: the result is the same for any grouping of
subtrees into batches, any block size and any number of workers.

Work per level: the parents are cut into blocks of about ``BLOCK_CELLS`` noised cells; a block
draws its noise straight into one cache-sized matrix, adds its parents' true children, runs IntOpt
in place and keeps the children > 0 (densify, noise, IntOpt and keep fused; with numba, in one
compiled pass per row: :mod:`~inftda_duckdb.core.kernel`, same outputs). Blocks run on a pool of
``workers`` threads (numpy, the AES cipher and the compiled kernel release the GIL); results are
joined in order.
Memory: the truth and the released nodes (proportional to the data), plus a few blocks per worker,
whatever the number of noised cells.

The package, in the order of Algorithm 1:

- this module, the engine-neutral API: :func:`release_root` (line 1), :func:`release_below`
  (lines 2-9 below a cut), :func:`release_tree` (the whole of Algorithm 1 in memory) and
  :func:`check_total` (every level adds up to the root);
- :mod:`.truth`: the true counts below a batch (``q_C(u)`` of line 5), sorted into a forest of
  prefixes, one level of it per level to release;
- :mod:`.level`: one level (lines 3-9): its live parents, flat or nested, cut into blocks, the
  kept children gathered in code order;
- :mod:`.block`: one block of parents (lines 4-9, fused): noise (line 5), the true children,
  IntOpt (line 6) and the children > 0 kept (lines 7-9);
- :mod:`.runner`: the worker threads, progress reports and cancellation.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import leastsquares
from ..accounting import BudgetPlan
from ..errors import InternalError, bad_argument
from ..noise import DiscreteGaussian
from ..randomness import RandomSource
from ..tree import MAX_KEY_SPAN, Allowed, Levels, Nodes
from .block import BLOCK_CELLS
from .level import release_level
from .runner import CancelHook, Cancelled, LevelProgress, ProgressHook, Runner
from .truth import Sizes, Truth

IntArray = npt.NDArray[np.int64]


# ---------------------------------------------------------------------------------------------
# Algorithm 1, line 1


def release_root(n: int, plan: BudgetPlan, source: RandomSource) -> int:
    """Algorithm 1, line 1: the root is n (substitute: n is public); add_remove noises it."""
    if plan.root_sigma2 is None:
        return int(n)
    z = DiscreteGaussian(plan.root_sigma2).sample(source.derive(0), np.zeros(1, np.uint64))
    return max(0, int(n) + int(z[0]))


def check_total(nodes: Nodes, root: int, level: int) -> None:
    """The invariant of every level: its released counts add up to the root's."""
    total = int(nodes.counts.sum())
    if total != root:
        raise InternalError(f"level {level} released {total} records, not the root's {root}")


# ---------------------------------------------------------------------------------------------
# The engine-neutral API


def release_below(
    levels: Levels,
    nodes: Nodes,
    truth: npt.ArrayLike,
    counts: npt.ArrayLike | None,
    *,
    upto: int | None = None,
    workers: int = 1,
    progress: ProgressHook | None = None,
    cancel: CancelHook | None = None,
    radix: int | None = None,
    overwrite: bool = False,
) -> Nodes:
    """Algorithm 1, lines 2-9, below a cut: release levels ``c+1..upto`` of a batch of subtrees.

    ``nodes`` are released nodes of level ``c = nodes.codes.shape[0]`` (any of them, each once;
    ``Nodes.root(n)`` for the whole tree). ``truth``/``counts`` are the true counts of the
    prefixes below them at some level ``t >= upto`` (``upto`` defaults to the leaves): codes
    (t, N) (one row per level), or, with ``t = upto``, mixed-radix keys (N,) when the domain
    product up to ``upto`` is below 2**62; the non-zero ones suffice, in any order, each prefix
    once; prefixes under other nodes are ignored. Returns the released nodes of level ``upto``
    below ``nodes``, in code order.

    The result for a subtree depends only on its root, the truth below it and ``levels``: any
    split of a level's nodes into batches (run anywhere, in any order) gives the same nodes.
    ``workers`` threads release the blocks of each level; ``progress`` and ``cancel`` are the
    hooks of :data:`ProgressHook` and :data:`CancelHook`. With ``radix`` (> every count, and
    the domain product up to ``upto`` times ``radix`` below 2**62), ``truth`` holds each prefix
    as one int64 ``key * radix + count`` and ``counts`` is ignored: half the memory of keys and
    counts, as DuckDB sends the leaves. ``overwrite``: ``truth`` is the call's own scratch (a
    private copy nothing reads afterwards, as DuckDB hands its levels call the leaves): the
    pairs are repacked and sorted in it instead of in a new array of their size (no fresh
    memory to fault in, one array of the leaves' size less at the peak).
    """
    top, depth = int(nodes.codes.shape[0]), levels.depth
    upto = depth if upto is None else int(upto)
    if not 0 <= top <= upto <= depth:
        raise InternalError(f"release_below from level {top} to {upto} of a {depth}-level tree")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise bad_argument("workers", workers, "must be a positive integer", "pass e.g. 4")
    counts_arr = None if radix is not None else np.asarray(counts, dtype=np.int64)
    if counts_arr is not None and counts_arr.size and counts_arr.min() < 0:
        raise bad_argument("counts", int(counts_arr.min()), "must be >= 0",
                           "pass the true (non-negative) counts")
    truth_arr = np.asarray(truth)
    t = truth_arr.shape[0] if truth_arr.ndim == 2 else upto
    if not upto <= t <= depth:
        raise InternalError(f"true counts of level {t} to release down to level {upto}")
    truth_t = Truth.build(truth_arr, counts_arr, levels.sizes[:t], top, radix, overwrite)
    nodes = _sorted(nodes, levels.sizes[:top])
    parent_truth = truth_t.match(nodes.codes)
    runner = Runner(depth, workers, progress, cancel)
    for k in range(top + 1, upto + 1):
        nodes, parent_truth = release_level(levels, k, nodes, parent_truth, truth_t, runner,
                                            k == upto)
    return nodes


def release_tree(
    leaf_codes: npt.ArrayLike,
    leaf_counts: npt.ArrayLike,
    domain_sizes: Sizes,
    plan: BudgetPlan,
    source: RandomSource,
    allowed: dict[int, Allowed] | None = None,
    *,
    workers: int = 1,
    estimator: str = "inftda",
) -> tuple[IntArray, IntArray]:
    """The whole of Algorithm 1 in memory: returns the released leaves (codes (M, d), counts).

    ``leaf_codes`` (N, d) are the codes of the non-zero leaves (any order, no repeats) and
    ``leaf_counts`` their true counts; ``allowed[k]`` lists the public children of a nested
    level k (0-based). The result lists the released leaves in code order and equals the
    DuckDB (and Spark) release with the same source. ``estimator``: ``'inftda'`` (the paper's)
    or ``'least_squares'`` (the integer pass on least-squares estimates:
    :mod:`~inftda_duckdb.core.leastsquares`).
    """
    d = len(domain_sizes)
    codes = np.asarray(leaf_codes, dtype=np.int64).reshape(-1, d)
    counts = np.asarray(leaf_counts, dtype=np.int64)
    levels = Levels.build(domain_sizes, plan, source, allowed)
    if estimator == leastsquares.NAME:
        nested = [a is not None for a in levels.allowed]
        arith = leastsquares.arithmetic_of(plan, domain_sizes, nested)
        arith.check()
        levels, root = leastsquares.whole(levels, arith, int(counts.sum()),
                                          leastsquares.root_noise(plan, source), plan.root_sigma2)
    else:
        root = release_root(int(counts.sum()), plan, source)
    nodes = release_below(levels, Nodes.root(root), codes.T, counts, workers=workers)
    check_total(nodes, root, d)
    return nodes.codes.T.astype(np.int64), nodes.counts


def _sorted(nodes: Nodes, sizes: Sizes) -> Nodes:
    """The nodes in code order (an engine may pass a batch in any order); repeats refused."""
    codes = nodes.codes
    if codes.shape[1] < 2 or codes.shape[0] == 0:
        return nodes
    order = np.lexsort(codes[::-1])
    if not (np.diff(order) == 1).all():
        codes = codes[:, order]
        nodes = Nodes(codes, nodes.counts[order])
    same = np.ones(codes.shape[1] - 1, bool)
    for row in codes:
        same &= row[1:] == row[:-1]
    if same.any():
        raise InternalError("a batch lists a node twice")
    return nodes


__all__ = [
    "BLOCK_CELLS", "MAX_KEY_SPAN", "Allowed", "CancelHook", "Cancelled", "LevelProgress", "Levels",
    "Nodes", "ProgressHook", "check_total", "release_below", "release_root", "release_tree",
]
