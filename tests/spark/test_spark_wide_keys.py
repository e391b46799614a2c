"""Keys and codes stay exact integers for every domain size: seeded Spark == seeded DuckDB on
sparse trees whose product of domain sizes is below 2**53, in [2**53, 2**62) (one mixed-radix
BIGINT key per leaf, past float64's exact integers) and past 2**62 (codes per level: the
``k1..kd`` path), below and past 2**64 (cells addressed by limbs).

At rho 1e4 the noise is 0 (every sigma^2 below 1e-3), so the DuckDB release of a seed is the
true histogram itself: every true leaf with its count. At rho 1 the noise is real and both
engines must still draw the same release; the numpy reference (``release_tree``, no engine
glue) must agree with both.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_tree
from inftda_duckdb.duckdb import extension
from inftda_duckdb.spark import release as spark_release

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

SEED = 41
SHAPES = {  # sizes per level, by the range of the product of the domain sizes
    "below 2**53: 4 levels of 2000": ([2000] * 4, 0, 53),  # 1.6e13
    "[2**53, 2**62): 5 levels of 2000": ([2000] * 5, 53, 62),  # 3.2e16
    "[2**53, 2**62): 6 levels of 500": ([500] * 6, 53, 62),  # 1.6e16
    "[2**62, 2**64): 5 levels of 6000": ([6000] * 5, 62, 64),  # 7.8e18
    "past 2**64: 6 levels of 2000": ([2000] * 6, 64, 128),  # 6.4e19
}


def _values(k: int, size: int) -> list[Any]:
    """Level k's domain: integers with gaps on odd levels, strings on even ones (the codes
    are never the values)."""
    if k % 2:
        return [7 * i + 3 for i in range(size)]
    return [f"v{k}-{i}" for i in range(size)]


def sparse_tree(sizes: list[int], seed: int = 3) -> tuple[list[list[Any]], np.ndarray,
                                                          np.ndarray]:
    """(values, leaf codes (N, d), true counts): ~300 distinct leaves under a few shared
    prefixes, with codes spread over the whole domain (most keys far above 2**53), the last
    and first codes of every level included."""
    rng = np.random.default_rng(seed)
    d = len(sizes)
    tops = rng.integers(0, sizes[0], 6)
    tops[:2] = [0, sizes[0] - 1]
    codes = np.stack([rng.integers(0, s, 300) for s in sizes], axis=1)
    codes[:, 0] = tops[rng.integers(0, tops.shape[0], 300)]
    codes[:40, 1] = codes[0, 1]  # a shared 2-prefix with many leaves below it
    codes[0] = [s - 1 for s in sizes]  # the largest key of the domain
    codes[1] = 0
    leaves = np.unique(codes, axis=0)
    counts = rng.integers(1, 6, leaves.shape[0])
    assert leaves.shape[1] == d
    return [_values(k, s) for k, s in enumerate(sizes)], leaves, counts


def table(values: list[list[Any]], leaves: np.ndarray, counts: np.ndarray) -> pa.Table:
    rows = np.repeat(leaves, counts, axis=0)
    return pa.table({f"c{k}": pa.array([values[k][c] for c in rows[:, k]])
                     for k in range(leaves.shape[1])})


def as_rows(values: list[list[Any]], leaves: np.ndarray, counts: np.ndarray) -> list[tuple]:
    return sorted((*(values[k][c] for k, c in enumerate(row)), int(n))
                  for row, n in zip(leaves.tolist(), counts.tolist(), strict=True))


@pytest.mark.parametrize("rho", [1e4, 1.0])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_seeded_spark_equals_duckdb_for_every_domain_size(spark: Any, shape: str,
                                                          rho: float) -> None:
    sizes, lo, hi = SHAPES[shape]
    assert 2**lo <= math.prod(sizes) < 2**hi
    values, leaves, counts = sparse_tree(sizes)
    names = [f"c{k}" for k in range(len(sizes))]
    domains = {n: values[k] for k, n in enumerate(names)}
    data = table(values, leaves, counts)
    con = duckdb.connect()
    extension.load(con)
    con.register("data_arrow", data)
    con.execute("CREATE TABLE data AS SELECT * FROM data_arrow")
    duck = extension.release(con, "data", names, rho=rho, domains=domains, seed=SEED)
    got_duck = sorted(tuple(r.values())[:-1] for r in duck.to_pylist())  # without the marker
    result = spark_release(spark.createDataFrame(data), names, rho=rho, domains=domains,
                           seed=SEED, ledger=con, source_name="data")
    got_spark = sorted(tuple(r)[:-1] for r in result.collect())
    plan = plan_budget(len(sizes), rho=rho, neighbours="substitute")
    out, n = release_tree(leaves, counts, sizes, plan, RandomSource.from_seed(SEED))
    expected = as_rows(values, out, n)
    truth = as_rows(values, leaves, counts)
    if rho >= 1e4:  # no noise: every true leaf, exactly
        assert got_duck == truth
    else:
        assert got_duck != truth and sum(r[-1] for r in got_duck) == int(counts.sum())
    assert got_duck == expected  # the engine-free reference
    assert got_spark == got_duck
    con.close()


@pytest.mark.parametrize("rho", [1e4, 1.0])
def test_a_domain_table_whose_levels_pass_2_63_is_checked_by_codes(spark: Any,
                                                                   rho: float) -> None:
    """A hierarchy of 8 levels of 300 values (a domain table of 300 chains): the product of its
    levels' sizes (6.6e19) has no BIGINT key, so Spark checks the listed combinations by their
    code columns (was: ARITHMETIC_OVERFLOW in the data checks' job)."""
    d, m = 8, 300
    rng = np.random.default_rng(1)
    chains = np.stack([rng.permutation(m) for _ in range(d)])  # chain i: codes chains[:, i]
    names = [f"c{k}" for k in range(d)]
    geo = pa.table({n: pa.array(chains[k] * 3 + 1) for k, n in enumerate(names)})
    pick = np.repeat(rng.choice(m, 120, replace=False), rng.integers(1, 6, 120))
    data = pa.table({n: pa.array(chains[k][pick] * 3 + 1) for k, n in enumerate(names)})
    assert m**d >= 2**63
    con = duckdb.connect()
    extension.load(con)
    for name, arrow in (("data", data), ("geo", geo)):
        con.register(f"{name}_arrow", arrow)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_arrow")
    duck = extension.release(con, "data", names, rho=rho, domain_tables=["geo"], seed=SEED)
    got_duck = sorted(tuple(r.values())[:-1] for r in duck.to_pylist())
    result = spark_release(spark.createDataFrame(data), names, rho=rho, seed=SEED,
                           domain_tables=[spark.createDataFrame(geo)], ledger=con,
                           source_name="data")
    got_spark = sorted(tuple(r)[:-1] for r in result.collect())
    if rho >= 1e4:
        leaves, counts = np.unique(pick, return_counts=True)
        assert got_duck == sorted((*(int(x) for x in chains[:, i] * 3 + 1), int(c))
                                  for i, c in zip(leaves, counts, strict=True))
    assert got_spark == got_duck
    con.close()
