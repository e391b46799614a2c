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

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_tree
from inftda_duckdb.spark import release as spark_release

from .compare import SEED, as_rows, duckdb_rows, spark_rows, sparse_tree, table

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

SHAPES = {  # sizes per level, by the range of the product of the domain sizes
    "below 2**53: 4 levels of 2000": ([2000] * 4, 0, 53),  # 1.6e13
    "[2**53, 2**62): 5 levels of 2000": ([2000] * 5, 53, 62),  # 3.2e16
    "[2**53, 2**62): 6 levels of 500": ([500] * 6, 53, 62),  # 1.6e16
    "[2**62, 2**64): 5 levels of 6000": ([6000] * 5, 62, 64),  # 7.8e18
    "past 2**64: 6 levels of 2000": ([2000] * 6, 64, 128),  # 6.4e19
}


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
    con, got_duck = duckdb_rows({"data": data}, names, rho, domains=domains)
    got_spark = spark_rows(spark_release(spark.createDataFrame(data), names, rho=rho,
                                         domains=domains, seed=SEED, ledger=con,
                                         source_name="data"))
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
    con, got_duck = duckdb_rows({"data": data, "geo": geo}, names, rho, domain_tables=["geo"])
    got_spark = spark_rows(spark_release(spark.createDataFrame(data), names, rho=rho, seed=SEED,
                                         domain_tables=[spark.createDataFrame(geo)], ledger=con,
                                         source_name="data"))
    if rho >= 1e4:
        leaves, counts = np.unique(pick, return_counts=True)
        assert got_duck == sorted((*(int(x) for x in chains[:, i] * 3 + 1), int(c))
                                  for i, c in zip(leaves, counts, strict=True))
    assert got_spark == got_duck
    con.close()
