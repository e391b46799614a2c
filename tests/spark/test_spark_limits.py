"""Limits of the Spark engine known from public sizes: refused before the charge, or adapted to
(never a failure on the executors after the budget is spent).

- A domain of more than 2**31 values: codes are 32-bit (Spark's INT code columns, the executors'
  decoding); refused when the release is planned, whatever the cell limit, nothing charged.
- Wide values: an output batch of a string or binary column holds at most ``OUT_BYTES`` (Arrow's
  32-bit offsets overflow at 2 GiB, e.g. 2**16 rows of a 40 kB value): fewer rows per batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")  # the spark extra (the engine's modules import PySpark)

from inftda_duckdb.core import limits
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.tree import Nodes
from inftda_duckdb.ledger import Ledger
from inftda_duckdb.spark import subtrees
from inftda_duckdb.spark.subtrees import OUT_ROWS, SubtreeJob

WIDE = 2**31 + 1


def test_a_domain_past_32_bit_codes_is_refused_whatever_the_cell_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(limits.ENV, str(10**12))
    with pytest.raises(InputError) as info:
        limits.check_domain("zip", 2, WIDE)
    text = str(info.value)
    for part in ("column 'zip' (level 2)", f"{WIDE:,} values", f"{2**31:,}", "32-bit",
                 "nothing was charged", "Fix: split the column"):
        assert part in text
    limits.check_domain("zip", 2, 2**31)  # codes 0..2**31 - 1 fit
    # resolved sizes (a domain table, the data): refused even when only the noised root
    # could decide the cells (root None), so always before the charge
    with pytest.raises(InputError, match="32-bit"):
        limits.check_cells(["a", "zip"], [3, WIDE], [3, 3 * WIDE], None)


@pytest.mark.spark
def test_spark_refuses_a_domain_past_32_bit_codes_before_the_charge(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from inftda_duckdb.spark import release

    monkeypatch.setenv(limits.ENV, str(10**12))  # the cell limit would let it through
    book = Ledger.open(str(tmp_path / "budget.duckdb"))
    frame = spark.createDataFrame(pa.table({"x": pa.array(np.arange(50) % 7)}))
    with pytest.raises(InputError, match=r"has 2,147,483,649 values.*nothing was charged"):
        release(frame, ["x"], rho=1, domains={"x": range(WIDE)}, ledger=book,
                source_name="t")
    assert book.rows().num_rows == 0


def test_output_batches_stay_within_arrow_offsets_for_wide_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wide = pa.array(["x" * 40_000, "y", "z"])
    assert OUT_ROWS * 40_000 >= 2**31  # 2**16 rows of it: past Arrow's 32-bit offsets

    def job(values: tuple[pa.Array, ...]) -> SubtreeJob:
        return SubtreeJob(cut=0, levels={}, values=values, names=("h", "s")[:len(values)],
                          rows=False, keyed=True)

    assert job((pa.array([1, 2]), pa.array(["a", "bb"]))).batch_rows == OUT_ROWS
    assert job((pa.array([1, 2]), wide)).batch_rows == subtrees.OUT_BYTES // 40_000
    monkeypatch.setattr(subtrees, "OUT_BYTES", 100_000)  # 2 rows of the wide value a batch
    nodes = Nodes(np.array([[0, 1, 1, 2, 2], [0, 0, 1, 1, 2]], np.int32),
                  np.array([5, 1, 2, 3, 4], np.int64))
    values = (pa.array([10, 20, 30]), wide)
    batches = list(job(values)._decoded(nodes))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert all(b.column(1).nbytes <= 100_000 for b in batches)
    got = pa.Table.from_batches(batches).to_pylist()
    assert got == [{"h": values[0][int(a)].as_py(), "s": wide[int(b)].as_py(), "count": int(n)}
                   for a, b, n in zip(*nodes.codes, nodes.counts, strict=True)]
