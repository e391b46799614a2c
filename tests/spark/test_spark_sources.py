"""One budget key per source, however Spark reaches it (the rule: :mod:`inftda_duckdb.spark.ledger`
and :func:`inftda_duckdb.ledger.sources.dataset`), and the key DuckDB and the command line give
the same files: a catalog table by name, by ``spark.table`` and by its files; a folder of part
files as it grows; a join with a public lookup; several datasets refused before anything runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

import inftda_duckdb
from inftda_duckdb.core.errors import BudgetExceededError, InputError
from inftda_duckdb.duckdb import extension
from inftda_duckdb.ledger import Ledger, SourceId, exact_cap
from inftda_duckdb.ledger.sources import dataset
from inftda_duckdb.spark import release
from inftda_duckdb.spark.ledger import location
from inftda_duckdb.tools import cli

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:this release used seed")]

DOMAINS = {"origin": ["EWR", "JFK", "LGA"], "hour": range(24)}
COLUMNS = ["origin", "hour"]


def trips(rows: int = 300) -> pa.Table:
    return pa.table({"origin": [["EWR", "JFK", "LGA"][i % 3] for i in range(rows)],
                     "hour": pa.array([i % 24 for i in range(rows)], pa.int32()),
                     "dest": [f"d{i % 5}" for i in range(rows)]})


def keys(book: Ledger) -> list[str]:
    return book.rows().column("source_key").to_pylist()


def test_the_dataset_rule() -> None:
    uuid = "0a1b2c3d-1111-2222-3333-444455556666"
    assert dataset(f"/d/t/part-00000-{uuid}-c000.snappy.parquet") == "/d/t"
    assert dataset("/d/t/year=2024/month=1/part-0.parquet") == "/d/t"
    assert dataset("/d/t/year=2024/notes.parquet") == "/d/t"  # any file of a partition
    assert dataset("/d/t/year=2024") == "/d/t"
    assert dataset("/d/t/000000_0") == dataset("/d/t/data_3.parquet") == "/d/t"
    assert dataset("/d/trips.parquet") == "/d/trips.parquet"  # a file people named
    assert dataset("/d/202401_01.parquet") == "/d/202401_01.parquet"
    assert dataset("s3a://b/t/part-00001.parquet") == dataset("s3a://b/t/") == "s3a://b/t"
    assert SourceId.file("/d/t/part-1.parquet") == SourceId.file("/d/t/")


def test_a_catalog_table_is_one_source_by_name_by_spark_table_and_by_its_files(
    spark: Any, tmp_path: Path
) -> None:
    """Was: 'name:spark:spark_catalog.default.t' by name, the warehouse folder as a DataFrame."""
    spark.createDataFrame(trips()).repartition(3).write.saveAsTable("trips_table")
    try:
        folder = location(spark, ["spark_catalog", "default", "trips_table"])
        assert folder is not None and os.path.isdir(folder)
        book = Ledger.open(str(tmp_path / "budget.duckdb"))
        book.set_budget([SourceId.file(folder)], exact_cap(rho=1))
        release("trips_table", COLUMNS, rho=0.25, domains=DOMAINS, ledger=book)
        release(spark.table("trips_table"), COLUMNS, rho=0.25, domains=DOMAINS, ledger=book)
        release(spark.read.parquet(folder), COLUMNS, rho=0.25, domains=DOMAINS, ledger=book)
        part = sorted(f for f in os.listdir(folder) if f.startswith("part-"))[0]
        release(spark.read.parquet(os.path.join(folder, part)), COLUMNS, rho=0.25,
                domains=DOMAINS, ledger=book)  # one part file of it: the same source
        with pytest.raises(BudgetExceededError):
            release("trips_table", COLUMNS, rho=0.25, domains=DOMAINS, ledger=book)
        assert keys(book) == ["file:" + os.path.realpath(folder)] * 4
        # DuckDB, given any of these files as 'file:PATH', charges the same source
        con = duckdb.connect()
        extension.load(con, ledger=str(tmp_path / "budget.duckdb"))
        with pytest.raises(BudgetExceededError, match="only 0"):
            extension.release(con, con.read_parquet(os.path.join(folder, part)), COLUMNS,
                              rho=0.1, domains=DOMAINS,
                              source_name="file:" + os.path.join(folder, part))
        con.close()
    finally:
        spark.sql("DROP TABLE IF EXISTS trips_table")


def test_a_folder_of_part_files_keeps_its_key_as_files_arrive(
    spark: Any, tmp_path: Path
) -> None:
    """Was: a folder of one Spark part file was charged as that file (a UUID in its name), and
    as the folder once a second file arrived."""
    folder = tmp_path / "trips"
    frame = spark.createDataFrame(trips())
    frame.coalesce(1).write.parquet(str(folder))
    book = Ledger.open(str(tmp_path / "budget.duckdb"))
    release(spark.read.parquet(str(folder)), COLUMNS, rho=0.5, domains=DOMAINS, ledger=book)
    frame.coalesce(1).write.mode("append").parquet(str(folder))
    assert len([f for f in os.listdir(folder) if f.endswith(".parquet")]) == 2
    release(spark.read.parquet(str(folder)), COLUMNS, rho=0.5, domains=DOMAINS, ledger=book)
    assert keys(book) == [SourceId.file(str(folder)).key] * 2


def test_a_partitioned_folder_is_one_source_whole_or_by_partition(
    spark: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "by_origin"
    spark.createDataFrame(trips()).write.partitionBy("dest").parquet(str(folder))
    book = Ledger.open(str(tmp_path / "budget.duckdb"))
    release(spark.read.parquet(str(folder)), COLUMNS, rho=0.5, domains=DOMAINS, ledger=book)
    release(spark.read.parquet(str(folder / "dest=d1")), COLUMNS, rho=0.5, domains=DOMAINS,
            ledger=book)
    assert keys(book) == [SourceId.file(str(folder)).key] * 2


def test_a_join_with_a_public_lookup_is_charged_to_the_private_input(
    spark: Any, tmp_path: Path
) -> None:
    """Was: keyed as the common parent folder of the trips and the lookup. The lookup listed
    in domain_tables is public; not listed, the release names both datasets and is refused
    before anything runs."""
    pq.write_table(trips(), tmp_path / "trips.parquet")
    pq.write_table(pa.table({"dest": [f"d{i}" for i in range(5)],
                             "region": ["north", "south", "north", "east", "west"]}),
                   tmp_path / "airports.parquet")
    lookup = spark.read.parquet(str(tmp_path / "airports.parquet"))
    joined = spark.read.parquet(str(tmp_path / "trips.parquet")).join(lookup, "dest")
    book = Ledger.open(str(tmp_path / "budget.duckdb"))
    with pytest.raises(InputError, match=r"source_name is required: the source reads the files "
                                         r"of 2 datasets \(.*airports.parquet, .*trips.parquet"):
        release(joined, ["origin", "region"], rho=0.5, ledger=book,
                domains={"origin": DOMAINS["origin"], "region": ["east", "north", "south",
                                                                 "west"]})
    assert keys(book) == []
    release(joined, ["origin", "region"], rho=0.5, domains={"origin": DOMAINS["origin"]},
            domain_tables=[lookup.select("region")], ledger=book)
    assert keys(book) == [SourceId.file(str(tmp_path / "trips.parquet")).key]
    # a domain table that reads every dataset of the source is the private data: refused
    with pytest.raises(InputError, match="is the private source"):
        release(joined, ["origin", "region"], rho=0.5, domains={"origin": DOMAINS["origin"]},
                domain_tables=[joined.select("region")], ledger=book)


def test_the_command_lines_agree_with_the_api(spark: Any, tmp_path: Path) -> None:
    """The Spark command line given a folder of part files, and DuckDB's given one part of it,
    charge the folder: the key set_budget('file:FOLDER') caps."""
    folder = tmp_path / "trips"
    spark.createDataFrame(trips()).repartition(2).write.parquet(str(folder))
    book = str(tmp_path / "budget.duckdb")
    con = duckdb.connect()
    extension.load(con, ledger=book)
    inftda_duckdb.set_budget(con, f"file:{folder}", rho=1)
    con.close()
    common = ["--columns", "origin,hour", "--domain", "origin=EWR,JFK,LGA", "--domain",
              "hour=0..23", "--ledger", book, "--quiet", "--seed", "1"]
    assert cli.main(["release", "--engine", "spark", "--master", "local[2]", "--input",
                     str(folder), "--rho", "0.5", "--output", str(tmp_path / "a.parquet"),
                     *common]) == 0
    part = sorted(folder.glob("part-*.parquet"))[0]
    assert cli.main(["release", "--input", str(part), "--rho", "0.5", "--output",
                     str(tmp_path / "b.parquet"), *common]) == 0
    assert cli.main(["release", "--input", str(part), "--rho", "0.5", "--output",
                     str(tmp_path / "c.parquet"), *common]) == 3  # the budget of the folder
    assert keys(Ledger.open(book)) == [SourceId.file(str(folder)).key] * 2


def test_the_spark_command_line_charges_the_dataset_its_inputs_name(tmp_path: Path) -> None:
    from argparse import Namespace

    from inftda_duckdb.tools.cli.spark import charged_as

    (tmp_path / "t").mkdir()
    folder = os.path.realpath(tmp_path / "t")
    for given in ([f"{folder}/*.parquet"], [folder], [f"{folder}/2024-*/x.csv"],
                  [f"{folder}/part-0.parquet", f"{folder}/part-1.parquet"]):
        assert charged_as(Namespace(input=given)) == f"file:{folder}", given
    assert charged_as(Namespace(input=[f"{folder}/a.parquet"])) == f"file:{folder}/a.parquet"
    with pytest.raises(InputError, match=r"--input names 2 datasets .*: a release is "
                                         "charged to one source"):
        charged_as(Namespace(input=[f"{folder}/a.parquet", f"{folder}/b.parquet"]))
    assert charged_as(Namespace(input=None)) is None
