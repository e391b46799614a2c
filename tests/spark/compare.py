"""Seeded Spark == seeded DuckDB: sparse trees over wide domains, and the DuckDB side of the
comparison (one release of a seed into a fresh connection, which then serves as Spark's ledger).
Used by tests/spark/test_spark_wide_keys.py and tests/spark/test_spark_skew.py.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from inftda_duckdb.duckdb import extension

SEED = 41


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


def duckdb_rows(tables: dict[str, pa.Table], names: list[str], rho: float,
                **options: Any) -> tuple[duckdb.DuckDBPyConnection, list[tuple]]:
    """Load ``tables`` (``data`` and any domain tables) into a fresh connection and release
    ``data`` over ``names`` with :data:`SEED`: (the connection, for Spark's ledger; the released
    rows sorted, without the not-private marker column)."""
    con = duckdb.connect()
    extension.load(con)
    for name, arrow in tables.items():
        con.register(f"{name}_arrow", arrow)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_arrow")
    duck = extension.release(con, "data", names, rho=rho, seed=SEED, **options)
    return con, sorted(tuple(r.values())[:-1] for r in duck.to_pylist())


def spark_rows(result: Any) -> list[tuple]:
    """A Spark release's rows sorted, without the not-private marker column."""
    return sorted(tuple(r)[:-1] for r in result.collect())
