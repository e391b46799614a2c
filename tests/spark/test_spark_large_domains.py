"""Large public domains under ``spark.driver.maxResultSize=1m`` (the fixture's session): a
domain of 200,000 values, declared as a range of a BIGINT column (cast by Spark), a list of
strings, read from a domain table or from the data, stays on the executors: its codes are
ranked there, the leaves are coded and the released codes decoded by joins, and no job brings
it to the driver or ships it in a task (:mod:`inftda_duckdb.spark.spread`); the seeded release
equals DuckDB's."""

from __future__ import annotations

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
from inftda_duckdb.spark import preview as preview_spark
from inftda_duckdb.spark import release as spark_release
from inftda_duckdb.spark import unpin
from inftda_duckdb.spark.sessions import result_limit

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

SIZE = 200_000


def test_the_session_limits_results_to_1m(spark: Any) -> None:
    assert result_limit(spark) == 1 << 20


@pytest.mark.parametrize("declared", ["range", "domain table"])
def test_a_domain_of_200000_values_within_max_result_size_1m(spark: Any, declared: str,
                                                            tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    data = pa.table({"item": pa.array(rng.integers(0, SIZE, 2000), pa.int64()),
                     "kind": pa.array(rng.choice(["a", "b", "c"], 2000))})
    domains: dict[str, Any] = {"kind": ["a", "b", "c"]}
    tables: list[Any] = []
    if declared == "range":
        domains["item"] = range(SIZE)
    else:
        tables = [spark.range(SIZE).selectExpr("id AS item")]
    con = duckdb.connect()
    extension.load(con)
    con.register("data_arrow", data)
    con.execute("CREATE TABLE data AS SELECT * FROM data_arrow")
    duck = extension.release(con, "data", ["item", "kind"], rho=1.0, seed=12,
                             domains={"item": range(SIZE), "kind": ["a", "b", "c"]})
    result = spark_release(spark.createDataFrame(data), ["item", "kind"], rho=1.0, seed=12,
                           domains=domains, domain_tables=tables, ledger=con,
                           source_name="data")
    result.write.parquet(str(tmp_path / "out"))  # its rows would pass maxResultSize too
    got = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "out").to_pylist())
    con.close()
    assert got == sorted(tuple(r.values()) for r in duck.to_pylist())


@pytest.mark.filterwarnings("ignore:domain_from_data read the domains")
@pytest.mark.parametrize("declared", ["range", "strings", "domain table", "data"])
def test_a_domain_of_200000_values_never_reaches_the_driver(
        spark: Any, declared: str, driver_traffic: dict[str, int], tmp_path: Path) -> None:
    """The release's collections stay small (the checks, the counts above the cut) and its
    tasks carry no domain: 200,000 int64 values would be 1.6 MB in a task and 200,000 rows on
    the driver. Rows output too, so that the decoding join is also checked for it. (The data's
    own domain: 100,000 rows hold about 78,700 distinct values, above DRIVER_VALUES.)"""
    rows = 100_000 if declared == "data" else 3000
    rng = np.random.default_rng(9)
    items = rng.integers(0, SIZE, rows)
    labels = [f"sku-{i:06d}" for i in range(SIZE)]
    column = pa.array([labels[i] for i in items]) if declared == "strings" else \
        pa.array(items, pa.int64())
    data = pa.table({"item": column, "kind": pa.array(rng.choice(["a", "b"], rows))})
    domains: dict[str, Any] = {"kind": ["a", "b"]}
    tables: list[Any] = []
    options: dict[str, Any] = {}
    if declared == "range":
        domains["item"] = range(SIZE)
    elif declared == "strings":
        domains["item"] = labels
    elif declared == "domain table":
        tables = [spark.range(SIZE).selectExpr("id AS item")]
    else:
        options["domain_from_data"] = True
    con = duckdb.connect()
    extension.load(con)
    con.register("data_arrow", data)
    con.execute("CREATE TABLE data AS SELECT * FROM data_arrow")
    duck_domains = dict(domains)
    if declared == "domain table":
        duck_domains["item"] = range(SIZE)
    duck = extension.release(con, "data", ["item", "kind"], rho=1.0, seed=13, output="rows",
                             domains=duck_domains, **options)
    result = spark_release(spark.createDataFrame(data), ["item", "kind"], rho=1.0, seed=13,
                           domains=domains, domain_tables=tables, ledger=con, output="rows",
                           source_name="data", **options)
    result.write.parquet(str(tmp_path / "out"))
    got = pq.read_table(tmp_path / "out")
    con.close()
    assert driver_traffic["rows"] < 1000, driver_traffic
    assert driver_traffic["job_bytes"] < 200_000, driver_traffic
    assert sorted(tuple(r.values()) for r in got.to_pylist()) == \
        sorted(tuple(r.values()) for r in duck.to_pylist())


LARGE = 100_000  # above DRIVER_VALUES: each case below takes the executors' path


def _both(spark: Any, data: pa.Table, tables: dict[str, pa.Table], **options: Any
          ) -> tuple[str, str, int]:
    """The InputError of one release on DuckDB and on Spark (domain tables by name on DuckDB,
    as DataFrames on Spark), and the ledger rows left: none."""
    con = duckdb.connect()
    extension.load(con)
    for name, table in {"data": data, **tables}.items():
        con.register("arrow", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")
        con.unregister("arrow")
    frames = [spark.createDataFrame(t) for t in tables.values()]
    with pytest.raises(InputError) as duck:
        extension.release(con, "data", ["item", "kind"], rho=1, domain_tables=list(tables) or
                          None, **options)
    with pytest.raises(InputError) as sparked:
        spark_release(spark.createDataFrame(data), ["item", "kind"], rho=1, ledger=con,
                      source_name="data", domain_tables=frames or None, **options)
    charged = con.execute("SELECT count(*) FROM inftda_ledger").fetchone()
    con.close()
    return str(duck.value), str(sparked.value), int(charged[0]) if charged else 0


def _items(top: int) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table({"item": pa.array(rng.integers(0, top, 500), pa.int64()),
                     "kind": pa.array(rng.choice(["a", "b"], 500))})


@pytest.mark.parametrize(("case", "match"), [
    ("bad labels", r"2 values declared for column 'item' in domains are not valid BIGINT "
                   r"values \(e\.g\. \['x1', 'x2'\]\)"),
    ("duplicates", r"item"),
    ("undeclared", r"column 'item' of data has \d+ rows with values outside its declared "
                   r"domain \(e\.g\. \['100\d\d\d', "),
    ("table defects", r"domain table .* 2 rows"),
])
def test_checks_of_a_domain_on_the_executors_say_what_duckdb_says(
        spark: Any, case: str, match: str) -> None:
    import re
    kinds = {"kind": ["a", "b"]}
    tables: dict[str, pa.Table] = {}
    data, options = _items(LARGE), {"domains": {**kinds, "item": range(LARGE)}}
    if case == "bad labels":
        labels = [str(i) for i in range(LARGE)]
        labels[7], labels[LARGE - 3] = "x1", "x2"
        options["domains"]["item"] = labels
        data = _items(7)
    elif case == "duplicates":
        options["domains"]["item"] = [*map(str, range(LARGE)), "05"]  # 5 twice as a BIGINT
    elif case == "undeclared":
        data = _items(2 * LARGE)
    else:
        texts = [str(i) for i in range(LARGE)]
        texts[3], texts[9] = "three", None  # type: ignore[call-overload]
        tables["items"] = pa.table({"item": pa.array(texts, pa.string())})
        options["domains"] = kinds
        data = _items(3)
    duck, sparked, charged = _both(spark, data, tables, **options)
    assert charged == 0
    assert re.search(match, sparked, re.S), sparked
    if case in ("duplicates", "undeclared"):
        assert sparked == duck
    else:  # DuckDB quotes the examples in an order of its own, and names a table by its name
        duck = duck.replace("memory.main.items", "domain_tables[0]")
        assert re.sub(r"\(e\.g\..*?\)", "", sparked) == re.sub(r"\(e\.g\..*?\)", "", duck)


def test_preview_with_domains_on_the_executors_equals_duckdbs(spark: Any) -> None:
    """No ranking in a preview: the sizes come from one count each."""
    data = _items(10)
    labels = [f"i{i}" for i in range(LARGE)]
    table = pa.table({"kind": pa.array([f"k{i}" for i in range(LARGE + 5)])})
    con = duckdb.connect()
    extension.load(con)
    data = data.set_column(0, "item", pa.array([labels[i] for i in
                                                data.column("item").to_pylist()]))
    con.register("arrow", data)
    con.execute("CREATE TABLE data AS SELECT * FROM arrow")
    con.register("kinds_arrow", table)
    con.execute("CREATE TABLE kinds AS SELECT * FROM kinds_arrow")
    duck = extension.preview(con, "data", ["item", "kind"], rho=1, domains={"item": labels},
                             domain_tables=["kinds"])
    frame = spark.createDataFrame(data)
    sparked = preview_spark(frame, ["item", "kind"], rho=1, domains={"item": labels},
                            domain_tables=[spark.createDataFrame(table)])
    con.close()
    assert sparked.to_pylist() == duck.to_pylist()
    assert sparked.column("domain_size").to_pylist() == [LARGE, LARGE + 5]


def test_unpin_frees_the_ranking_of_a_domain_table(spark: Any, tmp_path: Path) -> None:
    con = duckdb.connect()
    extension.load(con)
    result = spark_release(spark.createDataFrame(_items(LARGE)), ["item", "kind"], rho=1,
                           seed=3, domains={"kind": ["a", "b"]}, ledger=con, source_name="d",
                           domain_tables=[spark.range(LARGE).selectExpr("id AS item")])
    result.write.parquet(str(tmp_path / "out"))
    assert unpin(result) == 2  # the leaves and the ranking of the domain table
    con.close()


def test_a_domain_table_that_changes_during_the_release_is_refused_before_the_charge(
        spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The codes come from a ranking made after the checks counted the values; had the table
    changed in between, every code above the change would shift. Simulated: the checks count
    one value fewer than the ranking finds."""
    from inftda_duckdb.spark import spread

    counted = spread.of_table

    def one_fewer(rows: Any) -> Any:
        found, defects, examples = counted(rows)
        found.size -= 1
        return found, defects, examples

    monkeypatch.setattr(spread, "of_table", one_fewer)
    con = duckdb.connect()
    extension.load(con)
    with pytest.raises(InputError, match=r"changed while the release read it: 99,999 distinct "
                                         r"values when checked, 100,000 when coded; nothing"):
        spark_release(spark.createDataFrame(_items(10)), ["item", "kind"], rho=1,
                      domains={"kind": ["a", "b"]}, ledger=con, source_name="d",
                      domain_tables=[spark.range(LARGE).selectExpr("id AS item")])
    assert con.execute("SELECT count(*) FROM inftda_ledger").fetchone() == (0,)
    con.close()
