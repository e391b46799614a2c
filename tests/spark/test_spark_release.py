"""The Spark engine's behaviour: types and names, the data checks (DuckDB's messages, nothing
charged), the ledger (once per release, refusal), determinism of the lazy result (re-evaluation,
a recomputed partition, a changed source), results written under maxResultSize = 1m, secrets in
transit, preview, argument errors and the command line."""

from __future__ import annotations

import datetime as dt
import json
import os
import warnings
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import inftda_duckdb
from inftda_duckdb.core.errors import BudgetExceededError, InputError
from inftda_duckdb.core.provenance import MARKER
from inftda_duckdb.duckdb import extension
from inftda_duckdb.duckdb.extension import NotPrivateWarning
from inftda_duckdb.ledger import REQUIRE_BUDGET, Ledger, SourceId, exact_cap
from inftda_duckdb.spark import UnencryptedTransitWarning, preview, release
from inftda_duckdb.spark.driver import _warn_transit
from inftda_duckdb.spark.ledger import ledger_of
from inftda_duckdb.spark.subtrees import FAIL_FIRST_ATTEMPT
from inftda_duckdb.spark.transit import is_local, unencrypted_settings
from inftda_duckdb.tools import cli

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

DEST = [f"d{i}" for i in range(7)]
DOMAINS = {"origin": ["EWR", "JFK", "LGA"], "dest": DEST, "hour": range(24)}
COLUMNS = ["origin", "dest", "hour"]


def trips_table(rows: int = 3000, **nulls: int) -> pa.Table:
    i = np.arange(rows)
    i = i[i % 11 != 0]
    table = pa.table({
        "origin": pa.array(np.array(["EWR", "JFK", "LGA"])[i * 7 % 3]),
        "dest": pa.array([f"d{x}" for x in i % 7]),
        "hour": pa.array((i * 13 % 24).astype(np.int32)),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=int(x)) for x in i % 3]),
        "person": pa.array(i % 50),
        "late": pa.array(i % 5 == 0),
        "at": pa.array([dt.datetime(2024, 1, 1, int(x)) for x in i % 2],
                       pa.timestamp("us", tz="UTC")),
    })
    for name, count in nulls.items():
        values = table.column(name).to_pylist()
        values[:count] = [None] * count
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pa.array(values, table.schema.field(name).type))
    return table


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger.open(str(tmp_path / "budget.duckdb"))


def charges(ledger: Any) -> list[tuple]:
    """(source key, rho, origin, seeded) of each charge (a DuckDB connection: its ledger)."""
    table = ledger_of(ledger).rows()
    return list(zip(*(table.column(c).to_pylist()
                      for c in ("source_key", "rho", "origin", "seeded")), strict=True))


def rows(frame: Any) -> list[tuple]:
    return sorted(tuple(r) for r in frame.collect())


def test_the_leaves_are_coded_flagged_and_nested_in_the_jvm(spark: Any) -> None:
    """``coded``: codes by the public domains, flags (bit k: NULL in column k, bit 32 + k:
    outside its domain), a nesting's unlisted combinations, the key only for kept leaves."""
    from types import SimpleNamespace

    from inftda_duckdb.spark.domains import Domains
    from inftda_duckdb.spark.leaves import coded

    class Stub:  # a: 1, 2; b: 3 (the nesting's coded combinations, one row per level)
        values = (pa.array(["a", "b"]), pa.array([1, 2, 3], pa.int64()))
        nests = (np.array([[0, 0, 1], [0, 1, 2]]),)
        plan = SimpleNamespace(nestings=[SimpleNamespace(levels=(0, 1))])
        sizes = (2, 3)
        nested: frozenset[int] = frozenset()  # no domain table on the executors
        frame = Domains.frame

    raw = spark.createDataFrame(pa.table({
        "r1": ["a", "b", None, "z", "b", "a"], "r2": pa.array([2, 3, 1, 1, 1, None], pa.int64()),
        "n": pa.array([5, 6, 7, 8, 9, 10], pa.int64())}))
    request = SimpleNamespace(depth=2, privacy_unit=None)
    out = coded(request, Stub(), raw).orderBy("n")  # type: ignore[arg-type]
    assert out.columns == ["key", "n", "flags", "outside"]
    got = [tuple(r) for r in out.collect()]
    assert got == [(1, 5, None, None), (5, 6, None, None), (None, 7, 1, None),
                   (None, 8, 1 << 32, None), (None, 9, None, 1),  # (b, 1) is not listed
                   (None, 10, 1 << 1, None)]


def test_names_types_and_provenance(spark: Any, ledger: Any) -> None:
    frame = spark.createDataFrame(trips_table())
    with pytest.warns(NotPrivateWarning, match="seed := 3"):
        out = release(frame, ["Origin", "DAY", "hour", "late", "at"], rho=1, seed=3,
                      ledger=ledger, source_name="trips",
                      domains={"Origin": DOMAINS["origin"], "hour": range(24),
                               "DAY": ["2024-01-01", "2024-01-02", "2024-01-03"],
                               "late": [False, True],
                               "at": ["2024-01-01T00:00:00", "2024-01-01T01:00:00"]})
    assert out.columns == ["Origin", "DAY", "hour", "late", "at", "count", MARKER]  # as asked
    assert [f.dataType.simpleString() for f in out.schema.fields] == [
        "string", "date", "int", "boolean", "timestamp", "bigint", "string"]
    got = rows(out)
    assert {r[1] for r in got} <= {dt.date(2024, 1, d) for d in (1, 2, 3)}
    assert {r[3] for r in got} <= {False, True}
    assert {r[4].hour for r in got} <= {0, 1}
    assert sum(r[-2] for r in got) == 2727  # substitute: n is public and kept exactly
    meta = json.loads(out.schema["count"].metadata["inftda"])
    assert (meta["private"], meta["seed"], meta["engine"], meta["rho"]) == (
        "false", "3", "spark", "1")
    assert meta["source"] == "trips" and meta["ledger_id"] == "1"
    assert {r[-1] for r in got} == {meta["why"]}  # every row says why it is not private
    assert charges(ledger) == [("name:trips", "1", "spark-python", True)]


def both_errors(spark: Any, table: pa.Table, **options: Any) -> tuple[str, str, int]:
    """The InputError of the same release on DuckDB and on Spark, and the ledger rows left."""
    con = duckdb.connect()
    extension.load(con)
    con.register("arrow", table)
    con.execute("CREATE TABLE trips AS SELECT * FROM arrow")
    with pytest.raises(InputError) as duck:
        extension.release(con, "trips", COLUMNS, rho=1, **options)
    with pytest.raises(InputError) as sparked:
        release(spark.createDataFrame(table), COLUMNS, rho=1, ledger=con, source_name="trips",
                **options)
    count = len(charges(con))
    con.close()
    return str(duck.value), str(sparked.value), count


@pytest.mark.parametrize(("case", "table", "options", "match"), [
    ("NULLs", {"dest": 3}, {}, r"column 'dest' of trips is NULL in 3 rows\. Fix"),
    ("undeclared", {}, {"domains": {**DOMAINS, "dest": DEST[:5]}},
     r"column 'dest' of trips has \d+ rows with values outside its declared domain \(e\.g\. "
     r"\['d5', 'd6'\]\)"),
    ("bad label", {}, {"domains": {**DOMAINS, "hour": [0, "x", 2]}},
     r"1 values declared for column 'hour' in domains are not valid INT\w* values "
     r"\(e\.g\. \['x'\]\)"),
    ("NULL units", {"person": 4}, {"privacy_unit": "person"},
     r"privacy_unit 'person' of trips is NULL in 4 rows"),
])
def test_data_checks_give_duckdbs_messages_and_charge_nothing(
    spark: Any, case: str, table: dict[str, int], options: dict[str, Any], match: str
) -> None:
    options = {"domains": DOMAINS, **options}
    duck, sparked, charged = both_errors(spark, trips_table(**table), **options)
    assert charged == 0
    import re
    assert re.search(match, sparked), sparked
    if case == "bad label":  # the types are named by each engine (INTEGER / INT)
        duck = duck.replace("INTEGER", "INT")
    assert sparked == duck


def test_unknown_drop_and_missing_domains(spark: Any, ledger: Any) -> None:
    frame = spark.createDataFrame(trips_table(dest=10))
    out = release(frame, COLUMNS, rho=1, domains={**DOMAINS, "dest": DEST[:5]}, seed=1,
                  unknown="drop", neighbours="add_remove", ledger=ledger, source_name="trips")
    assert {r[1] for r in rows(out)} <= set(DEST[:5])
    with pytest.raises(InputError, match=r"column 'dest' \(STRING\) has no public domain"):
        release(frame, COLUMNS, rho=1, domains={"origin": ["EWR"], "hour": range(24)},
                ledger=ledger, source_name="trips")
    with pytest.raises(InputError, match="is the private source trips itself"):
        release(frame, COLUMNS, rho=1, domain_tables=[frame], domains={"hour": range(24)},
                ledger=ledger, source_name="trips")
    with pytest.raises(InputError, match=r"columns not found in trips; got \['nope'\]"):
        release(frame, ["origin", "nope"], rho=1, ledger=ledger, source_name="trips")
    assert len(charges(ledger)) == 1


def test_one_budget_for_a_file_on_both_engines(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DuckDB release and a Spark release of the same Parquet file, charged to one ledger
    file, draw from one budget: the release that would overspend is refused (nothing charged,
    no noise drawn), on either engine. INFTDA_LEDGER names the ledger for both."""
    path = tmp_path / "trips.parquet"
    pq.write_table(trips_table(), path)
    book = tmp_path / "budget.duckdb"
    monkeypatch.setenv("INFTDA_LEDGER", str(book))
    duck = duckdb.connect()
    extension.load(duck)  # the ledger of INFTDA_LEDGER
    inftda_duckdb.set_budget(duck, f"file:{path}", rho=1)

    def on_duckdb(rho: float) -> None:
        extension.release(duck, duck.read_parquet(str(path)), COLUMNS, rho=rho, domains=DOMAINS,
                          source_name=f"file:{path}")

    def on_spark(rho: float) -> None:  # no ledger=: INFTDA_LEDGER; the file is the source
        release(spark.read.parquet(str(path)), COLUMNS, rho=rho, domains=DOMAINS)

    on_spark(0.5)
    with pytest.raises(BudgetExceededError, match=r"requests rho 0.6 .* only 0.5 "):
        on_duckdb(0.6)  # DuckDB sees what Spark spent
    on_duckdb(0.3)
    with pytest.raises(BudgetExceededError, match=r"requests rho 0.5 .* only 0.2 "):
        on_spark(0.5)  # and Spark what DuckDB spent
    key = SourceId.file(str(path)).key
    assert [(c[0], c[1], c[2]) for c in charges(str(book))] == [
        (key, "1/2", "spark-python"), (key, "3/10", "python")]
    duck.close()


def test_budgets_over_several_sources_and_require_budget(spark: Any, ledger: Ledger) -> None:
    frame = spark.createDataFrame(trips_table())
    ledger.set_budget([SourceId.named("riders"), SourceId.named("drivers")], exact_cap(rho=1),
                      name="trip people")
    release(frame, COLUMNS, rho=0.75, domains=DOMAINS, ledger=ledger, source_name="riders")
    with pytest.raises(BudgetExceededError, match="trip people"):
        release(frame, COLUMNS, rho=0.5, domains=DOMAINS, ledger=ledger,
                source_name="name:drivers")  # another source, the same budget
    ledger.set_setting(REQUIRE_BUDGET, "true")
    with pytest.raises(BudgetExceededError, match="no budget covers it"):
        release(frame, COLUMNS, rho=0.1, domains=DOMAINS, ledger=ledger, source_name="other")
    assert [c[0] for c in charges(ledger)] == ["name:riders"]


def _with_trips(con: Any) -> Any:
    extension.load(con)
    con.register("arrow", trips_table())
    con.execute("CREATE TEMP TABLE trips AS SELECT * FROM arrow")
    return con


def test_reevaluation_same_rows_no_charge_even_after_the_data_changed(
    spark: Any, ledger: Any, tmp_path: Path
) -> None:
    path = tmp_path / "trips.parquet"
    pq.write_table(trips_table(), path)
    frame = spark.read.parquet(str(path))
    out = release(frame, COLUMNS, rho=2, domains=DOMAINS, ledger=ledger)  # secure noise
    first = rows(out)
    assert rows(out) == first  # evaluated again: the same rows
    pq.write_table(trips_table(6000), path)  # the source changes under the released DataFrame
    spark.catalog.clearCache()
    assert rows(out) == first  # still the pinned leaves, the same noise
    assert out.agg(F.sum("count")).collect()[0][0] == 2727
    assert len(charges(ledger)) == 1 and charges(ledger)[0][0] == SourceId.file(str(path)).key
    # negative controls: a new release reads the new data and draws fresh noise
    fresh = rows(release(spark.read.parquet(str(path)), COLUMNS, rho=2, domains=DOMAINS,
                         ledger=ledger))
    assert sum(r[-1] for r in fresh) == 5454 and fresh != first
    assert len(charges(ledger)) == 2


def test_a_recomputed_partition_gives_the_same_rows(
    spark: Any, ledger: Any, tmp_path: Path
) -> None:
    frame = spark.createDataFrame(trips_table())
    out = release(frame, COLUMNS, rho=2, domains=DOMAINS, ledger=ledger, source_name="t",
                  partitions=2)
    first = rows(out)
    marks = tmp_path / "failed"
    marks.mkdir()
    spark.sparkContext.setLocalProperty(FAIL_FIRST_ATTEMPT, str(marks))
    try:
        again = rows(out)
    finally:
        spark.sparkContext.setLocalProperty(FAIL_FIRST_ATTEMPT, None)
    assert len(os.listdir(marks)) == 2  # both subtree tasks failed once and were rerun
    assert again == first
    assert len(charges(ledger)) == 1


def test_written_not_collected_under_max_result_size_1m(
    spark: Any, ledger: Any, tmp_path: Path
) -> None:
    n = 150_000
    frame = spark.range(n).select(
        (F.col("id") % 97).cast("int").alias("a"),
        (F.col("id") * 7 % 101).cast("int").alias("b"),
        (F.col("id") * 13 % 60).cast("int").alias("c"),
    )
    assert spark.conf.get("spark.driver.maxResultSize") == "1m"
    out = release(frame, ["a", "b", "c"], rho=50, ledger=ledger, source_name="big",
                  domains={"a": range(97), "b": range(101), "c": range(60)})
    out.write.parquet(str(tmp_path / "out.parquet"))
    written = spark.read.parquet(str(tmp_path / "out.parquet"))
    total, cells = written.agg(F.sum("count"), F.count("*")).collect()[0]
    assert total == n and cells > 100_000  # a few MB of rows
    with pytest.raises(Exception, match="maxResultSize"):  # negative control: collecting fails
        written.toArrow()


def test_transit_settings_named_for_cluster_masters() -> None:
    conf = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true",
            "spark.io.encryption.enabled": "true"}
    for master in ("local", "local[2]", "local[*]", "local[2, 2]"):
        assert is_local(master) and unencrypted_settings(master, {}.get) == []
    for master in ("yarn", "spark://host:7077", "k8s://https://h:443", "local-cluster[2,1,1024]"):
        assert not is_local(master)
        assert unencrypted_settings(master, {}.get) == [
            "spark.authenticate=true", "spark.network.crypto.enabled=true",
            "spark.io.encryption.enabled=true"]
        assert unencrypted_settings(master, conf.get) == []
        tls = {"spark.ssl.rpc.enabled": "true", "spark.io.encryption.enabled": "TRUE"}
        assert unencrypted_settings(master, tls.get) == []
        half = {"spark.network.crypto.enabled": "true"}
        assert unencrypted_settings(master, half.get) == [
            "spark.authenticate=true", "spark.io.encryption.enabled=true"]


class _FakeSession:
    def __init__(self, master: str, conf: dict[str, str]) -> None:
        self.sparkContext = type("Context", (), {"master": master})()
        self.conf = type("Conf", (), {"get": lambda _, key, default=None: conf.get(key, default)})()


def test_release_warns_on_a_cluster_without_encryption() -> None:
    with pytest.warns(UnencryptedTransitWarning, match=r"spark://h:7077.*--conf spark\.io"):
        _warn_transit(_FakeSession("spark://h:7077", {"spark.authenticate": "true",
                                                      "spark.network.crypto.enabled": "true"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_transit(_FakeSession("local[4]", {}))
        _warn_transit(_FakeSession("yarn", {"spark.authenticate": "true",
                                            "spark.network.crypto.enabled": "true",
                                            "spark.io.encryption.enabled": "true"}))


def test_preview_equals_duckdbs(spark: Any) -> None:
    con = _with_trips(duckdb.connect())
    geo = pa.table({"origin": ["EWR", "EWR", "JFK", "LGA"], "dest": ["d0", "d1", "d2", "d3"]})
    con.register("geo_arrow", geo)
    con.execute("CREATE TABLE geo AS SELECT * FROM geo_arrow")
    options = {"rho": 0.5, "level_weights": [1, 2, 3], "domains": {"hour": range(24)}}
    duck = extension.preview(con, "trips", COLUMNS, domain_tables=["geo"], **options)
    sparked = preview(spark.createDataFrame(trips_table()), COLUMNS,
                      domain_tables=[spark.createDataFrame(geo)], **options)
    assert sparked.to_pylist() == duck.to_pylist()
    assert [r["nodes"] for r in sparked.to_pylist()] == [3, 4, 96]


def test_argument_errors(spark: Any, ledger: Any) -> None:
    frame = spark.createDataFrame(trips_table())
    with pytest.raises(InputError, match="ledger must be a ledger file on the driver"):
        release(frame, COLUMNS, rho=1, domains=DOMAINS, source_name="t")
    with pytest.raises(InputError, match="source_name is required for a DataFrame that reads no"):
        release(frame, COLUMNS, rho=1, domains=DOMAINS, ledger=ledger)
    with pytest.raises(InputError, match="partitions must be a positive integer"):
        release(frame, COLUMNS, rho=1, domains=DOMAINS, ledger=ledger, partitions=0)
    with pytest.raises(InputError, match="source must be a Spark DataFrame or a table name"):
        release(42, COLUMNS, rho=1, ledger=ledger)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="source was not found"):
        release("no_such_table", COLUMNS, rho=1, ledger=ledger)
    with pytest.raises(InputError, match=r"rho is too small"):
        release(frame, COLUMNS, rho=1e-12, domains=DOMAINS, ledger=ledger, source_name="t")
    assert charges(ledger) == []


def test_command_line(spark: Any, tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "data"
    data.mkdir()
    table = trips_table()
    pq.write_table(table.slice(0, 1000), data / "part-1.parquet")
    pq.write_table(table.slice(1000), data / "part-2.parquet")
    ledger = tmp_path / "budget.duckdb"
    out = tmp_path / "trips_dp.parquet"
    args = ["release", "--engine", "spark", "--master", "local[2]", "--input",
            str(data / "part-1.parquet"), str(data / "part-2.parquet"), "--columns",
            "origin,dest,hour", "--rho", "1", "--domain", "origin=EWR,JFK,LGA",
            "--domain", "dest=" + ",".join(DEST), "--domain", "hour=0..23", "--ledger", str(ledger),
            "--output", str(out), "--seed", "4"]
    assert cli.main(args) == 0
    assert "NOT PRIVATE" in capsys.readouterr().err
    written = spark.read.parquet(str(out))
    assert written.agg(F.sum("count")).collect()[0][0] == table.num_rows
    record = json.loads((tmp_path / "trips_dp.parquet.provenance.json").read_text())
    assert (record["private"], record["engine"], record["seed"]) == ("false", "spark", "4")
    assert [c[::2] for c in charges(str(ledger))] == [(SourceId.file(str(data)).key,
                                                       "spark-cli")]
    assert cli.main(args) == 2  # the output exists: an input error
    assert "already exists" in capsys.readouterr().err
    at = args.index("--ledger")
    assert cli.main([*args[:at], *args[at + 2:-4], "--output", str(tmp_path / "x.parquet")]) == 2
    assert "--ledger is required with --engine spark" in capsys.readouterr().err
    assert cli.main(["preview", "--engine", "spark", "--input", str(data / "part-1.parquet"),
                     "--columns", "origin,hour", "--rho", "1", "--domain", "origin=EWR,JFK,LGA",
                     "--domain", "hour=0..23"]) == 0
    printed = capsys.readouterr().out
    assert "origin" in printed and "hour" in printed


def test_a_long_range_is_previewed_by_its_ends_as_on_duckdb(spark: Any) -> None:
    con = _with_trips(duckdb.connect())
    frame = spark.createDataFrame(trips_table())
    options: dict[str, Any] = {"rho": 1, "domains": {**DOMAINS, "hour": range(0, 10**7)}}
    duck = extension.preview(con, "trips", COLUMNS, **options)
    sparked = preview(frame, COLUMNS, **options)
    assert sparked.to_pylist() == duck.to_pylist()
    assert sparked.column("domain_size").to_pylist() == [3, 7, 10**7]
    # an end that is not an INT: the same error on both engines (types named by each)
    options["domains"]["hour"] = range(0, 2**40, 2**20)
    with pytest.raises(InputError) as duck_error:
        extension.preview(con, "trips", COLUMNS, **options)
    with pytest.raises(InputError) as spark_error:
        preview(frame, COLUMNS, **options)
    assert "1099510579200" in str(spark_error.value)
    assert str(spark_error.value) == str(duck_error.value).replace("INTEGER", "INT")
    con.close()


def test_the_cell_limit_refuses_as_on_duckdb_and_charges_nothing(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = spark.createDataFrame(trips_table())
    monkeypatch.setenv("INFTDA_MAX_CELLS", "100")
    for domains, match in [
        (DOMAINS, r"up to 504 cells at level 3 \(column 'hour': 21 parents x 24 values\)"),
        ({**DOMAINS, "hour": range(1000)}, r"column 'hour': its domain alone has 1,000 values"),
    ]:
        con = _with_trips(duckdb.connect())
        with pytest.raises(InputError) as duck:
            extension.release(con, "trips", COLUMNS, rho=1, domains=domains)
        with pytest.raises(InputError, match=match) as sparked:
            release(frame, COLUMNS, rho=1, domains=domains, ledger=con, source_name="trips")
        assert str(sparked.value) == str(duck.value)
        assert "nothing was charged" in str(sparked.value) and charges(con) == []
        con.close()


def test_catalog_tables_as_source_and_domain_table(spark: Any, ledger: Any) -> None:
    table = trips_table()
    pairs = sorted({(r["origin"], r["dest"]) for r in table.select(["origin", "dest"]).to_pylist()})
    pairs.append(("EWR", "zz"))  # a public combination absent from the data
    spark.createDataFrame(table).createOrReplaceTempView("spark_trips")
    geo = pa.table({"origin": [p[0] for p in pairs], "dest": [p[1] for p in pairs]})
    spark.createDataFrame(geo).createOrReplaceTempView("spark_geo")
    try:
        out = release("spark_trips", COLUMNS, rho=1, domain_tables=["spark_geo"], seed=2,
                      domains={"hour": range(24)}, ledger=ledger)
        got = rows(out)
    finally:
        spark.catalog.dropTempView("spark_trips")
        spark.catalog.dropTempView("spark_geo")
    assert {(r[0], r[1]) for r in got} <= set(pairs)
    assert sum(r[3] for r in got) == table.num_rows  # substitute: n is public
    assert charges(ledger)[0][0] == "name:spark_trips"


def test_a_bad_kernel_setting_is_refused_before_the_spark_charge(
        spark: Any, ledger: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    frame = spark.createDataFrame(trips_table())
    monkeypatch.setenv("INFTDA_KERNEL", "fastest")
    with pytest.raises(InputError, match=r"INFTDA_KERNEL.*must be one of auto, numba, numpy"):
        release(frame, COLUMNS, rho=1, domains=DOMAINS, ledger=ledger, source_name="trips")
    assert len(charges(ledger)) == 0
    monkeypatch.setenv("INFTDA_KERNEL", "numpy")  # control: charged once
    release(frame, COLUMNS, rho=1, domains=DOMAINS, ledger=ledger, source_name="trips")
    assert len(charges(ledger)) == 1


def test_the_budget_is_refused_before_any_job_reads_the_data(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Budget first, on Spark as on DuckDB (core.release.check's order): a release its budget
    refuses is refused before the data job, so a source with rows outside its declared domain
    gets the budget refusal (DuckDB's very text), never the data error; nothing is charged."""
    bad = pa.table({"a": ["1", "2", "9", "17", "3", "9"], "b": ["x"] * 6})
    options: dict[str, Any] = {"rho": 1, "domains": {"a": ["1", "2", "3"], "b": ["x"]}}
    book = Ledger.open(str(tmp_path / "budget.duckdb"))
    book.set_budget([SourceId.named("bad")], exact_cap(rho=1e-6))
    duck = duckdb.connect()
    extension.load(duck, ledger=str(tmp_path / "budget.duckdb"))
    with pytest.raises(BudgetExceededError) as on_duckdb:
        extension.release(duck, bad, ["a", "b"], source_name="bad", **options)
    jobs: list[str] = []
    monkeypatch.setattr("inftda_duckdb.spark.leaves.summary",
                        lambda *a, **k: jobs.append("data") or pytest.fail("the data was read"))
    with pytest.raises(BudgetExceededError) as on_spark:
        release(spark.createDataFrame(bad), ["a", "b"], ledger=book, source_name="bad",
                **options)
    assert str(on_spark.value) == str(on_duckdb.value)
    assert "outside" not in str(on_spark.value) and not jobs
    assert book.rows().num_rows == 0  # nothing charged on either engine
    duck.close()


@pytest.mark.parametrize("setting", ["inftda.spark.taskLeaves", "inftda.spark.chunkCells"])
def test_a_bad_spark_setting_is_refused_before_the_charge(spark: Any, ledger: Any,
                                                           setting: str) -> None:
    """Both settings are read before the budget is charged (a task's share was read only when
    the levels below the cut were laid out, after the charge)."""
    spark.conf.set(setting, "lots")
    try:
        with pytest.raises(InputError, match=rf"{setting} must be a positive integer; got "
                                             r"'lots'\. Fix: unset it, or spark\.conf\.set"):
            release(spark.createDataFrame(trips_table()), COLUMNS, rho=1, domains=DOMAINS,
                    ledger=ledger, source_name="trips")
    finally:
        spark.conf.unset(setting)
    assert charges(ledger) == []
