"""A nesting domain table too large for the driver (more than DRIVER_VALUES rows) over the
first levels of the hierarchy stays on the executors (:mod:`inftda_duckdb.spark.spread`): its
rows are coded and checked there, the allowed children of the levels above the cut (at most
the cut's cells) come to the driver, and those below travel with the subtrees in the shuffle.
The seeded release equals DuckDB's, in one band and in many."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from inftda_duckdb.core.errors import InputError
from inftda_duckdb.duckdb import extension
from inftda_duckdb.spark import release as spark_release
from inftda_duckdb.spark.descent import SHARE_SETTING
from inftda_duckdb.spark.spread import DRIVER_VALUES
from inftda_duckdb.spark.subtrees import CUT_CELLS

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

COLUMNS = ["state", "county", "tract", "hour"]
HOURS = list(range(24))


def geography(counties: int = 40, tracts: int = 78) -> pa.Table:
    """50 states, ``counties`` counties each (names shared across states), 2 to ``tracts``
    tracts each (random): ~80,000 rows, above DRIVER_VALUES."""
    rng = np.random.default_rng(21)
    rows = [(f"s{s:02d}", f"c{c:03d}", int(t)) for s in range(50) for c in range(counties)
            for t in range(rng.integers(2, tracts + 1))]
    assert len(rows) > DRIVER_VALUES
    return pa.table({"state": [r[0] for r in rows], "county": [r[1] for r in rows],
                     "tract": pa.array([r[2] for r in rows], pa.int64())})


def people(geo: pa.Table, n: int = 4000) -> pa.Table:
    rng = np.random.default_rng(22)
    at = rng.integers(0, geo.num_rows, n)
    return pa.table({"state": geo.column("state").take(at), "county": geo.column("county")
                     .take(at), "tract": geo.column("tract").take(at),
                     "hour": pa.array(rng.integers(0, 24, n), pa.int32())})


def duckdb_with(data: pa.Table, geo: pa.Table) -> duckdb.DuckDBPyConnection:
    """A connection holding ``data`` and the domain table ``geo``."""
    con = duckdb.connect()
    extension.load(con)
    for name, table in (("data", data), ("geo", geo)):
        con.register("arrow", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")
        con.unregister("arrow")
    return con


def duckdb_release(data: pa.Table, geo: pa.Table, **options: Any
                   ) -> tuple[duckdb.DuckDBPyConnection, list[tuple]]:
    con = duckdb_with(data, geo)
    out = extension.release(con, "data", COLUMNS, rho=2, seed=17, domain_tables=["geo"],
                            **options)
    return con, sorted(tuple(r.values()) for r in out.to_pylist())


@pytest.mark.parametrize("bands", [False, True])
@pytest.mark.parametrize("counties", [40, 200])
def test_a_large_nesting_stays_on_the_executors_and_equals_duckdb(
        spark: Any, counties: int, bands: bool, driver_traffic: dict[str, int], tmp_path: Path
) -> None:
    """40 counties a state: the cut is level 2 (2,000 counties), the tracts' allowed children
    travel with the subtrees; 200: the cut is level 1 (10,000 counties are more than
    CUT_CELLS), and the counties' too. With bands, each band's levels bring theirs."""
    geo = geography(counties, 78 if counties == 40 else 14)
    data = people(geo)
    con, duck = duckdb_release(data, geo, domains={"hour": HOURS})
    if bands:  # subtrees of more than 500 leaves are split: bands of the levels below the cut
        spark.conf.set(SHARE_SETTING, "500")
    try:
        result = spark_release(spark.createDataFrame(data), COLUMNS, rho=2, seed=17,
                               domains={"hour": HOURS}, ledger=con, source_name="data",
                               domain_tables=[spark.createDataFrame(geo)])
        result.write.parquet(str(tmp_path / "out"))
    finally:
        spark.conf.unset(SHARE_SETTING)
    con.close()
    got = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "out").to_pylist())
    assert got == duck
    assert driver_traffic["rows"] <= CUT_CELLS, driver_traffic  # the counties above the cut
    assert driver_traffic["job_bytes"] < 200_000, driver_traffic  # 80,000 tracts: ~2 MB


@pytest.mark.parametrize(("case", "match"), [
    ("defects", r"domain table \S+ has 2 rows with a NULL or a value outside the domains of "
                r"\(state, county, tract\)"),
    ("orphans", r"s50"),
])
def test_checks_of_a_large_nesting_say_what_duckdb_says(spark: Any, case: str, match: str
                                                        ) -> None:
    geo = geography()
    data = people(geo, 200)
    options: dict[str, Any] = {"domains": {"hour": HOURS}}
    if case == "defects":
        tract = geo.column("tract").to_pylist()
        tract[5] = None
        state = geo.column("state").to_pylist()
        state[9] = None
        geo = geo.set_column(2, "tract", pa.array(tract, pa.int64())).set_column(
            0, "state", pa.array(state))
    else:  # a declared state the table does not list
        options["domains"]["state"] = [f"s{s:02d}" for s in range(51)]
    con = duckdb_with(data, geo)
    with pytest.raises(InputError) as duck:
        extension.release(con, "data", COLUMNS, rho=1, domain_tables=["geo"], **options)
    with pytest.raises(InputError) as sparked:
        spark_release(spark.createDataFrame(data), COLUMNS, rho=1, ledger=con,
                      source_name="data", domain_tables=[spark.createDataFrame(geo)], **options)
    assert con.execute("SELECT count(*) FROM inftda_ledger").fetchone() == (0,)
    con.close()
    text = str(sparked.value)
    assert re.search(match, text), text
    duck_text = str(duck.value).replace("memory.main.geo", "domain_tables[0]")
    assert re.sub(r"\(e\.g\..*?\)", "", text) == re.sub(r"\(e\.g\..*?\)", "", duck_text)
