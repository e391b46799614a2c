"""A release says what it is: the provenance record (Arrow metadata), and a release that is not
private says so in its rows, which CREATE TABLE AS and COPY keep (issue 15)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.core.provenance import MARKER, comment, provenance

pytestmark = pytest.mark.filterwarnings("ignore::inftda_duckdb.NotPrivateWarning")

RELEASE = ("inftda_release('t', ['a'], rho := 1/3, domains := {{'a': ['x', 'y']}}{extra})")


@pytest.fixture
def t(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute("CREATE TABLE t AS SELECT (['x', 'y'])[1 + i % 2] AS a FROM range(100) r(i)")
    return con


def test_python_release_metadata(t: duckdb.DuckDBPyConnection) -> None:
    out = inftda_duckdb.release(t, "t", ["a"], epsilon=1, delta="1e-8",
                                domains={"a": ["x", "y"]})
    meta = {k.decode(): v.decode() for k, v in out.schema.metadata.items()}
    assert meta["private"] == "true" and meta["why"].startswith("rho-zCDP")
    assert meta["epsilon"] == "1" and meta["delta"] == "1e-08"
    assert meta["rho"] != "" and float(meta["rho_decimal"]) == pytest.approx(float(
        __import__("fractions").Fraction(meta["rho"])), rel=1e-5)
    assert meta["ledger_id"] == "1" and meta["source"] == "memory.main.t"
    assert meta["columns"] == '["a"]' and meta["package"].startswith("inftda-duckdb ")
    assert MARKER not in out.column_names


@pytest.mark.parametrize("extra", [", seed := 1", ", domain_from_data := true"])
def test_not_private_sql_output_is_marked_through_create_table_as(
        t: duckdb.DuckDBPyConnection, tmp_path: Path, extra: str) -> None:
    # before: CREATE TABLE AS ... seed := 1 gave a table indistinguishable from a private one
    sql = RELEASE.format(extra=extra)
    sql = sql.replace("domains := {'a': ['x', 'y']}, domain_from_data", "domain_from_data")
    t.execute(f"CREATE TABLE s AS SELECT * FROM {sql}")
    marks = t.execute(f"SELECT DISTINCT {MARKER} FROM s").fetchall()
    assert len(marks) == 1 and marks[0][0].startswith("NOT PRIVATE: ")
    out = tmp_path / "s.parquet"
    t.execute(f"COPY (SELECT * FROM {sql}) TO '{out}' (FORMAT parquet)")
    assert MARKER in duckdb.sql(f"SELECT * FROM '{out}'").columns


def test_private_sql_output_has_no_marker(t: duckdb.DuckDBPyConnection) -> None:
    assert t.sql(f"SELECT * FROM {RELEASE.format(extra='')}").columns == ["a", "count"]


def test_record_and_comment_text() -> None:
    from fractions import Fraction

    record = provenance(rho=Fraction(1, 3), columns=["a", "b"], neighbours="add_remove",
                        output="rows", source="db.main.t", seed=4, ledger_id=9)
    assert record["private"] == "false" and "seed 4" in record["why"]
    assert record["rho"] == "1/3" and record["rho_decimal"] == "0.333333"
    assert record["delta"] == "1e-06" and float(record["epsilon"]) > 0
    text = comment(record)
    assert text.startswith("NOT PRIVATE release (inftda-duckdb): private=false; why=NOT PRIVATE")
    assert "ledger_id=9" in text and "privacy_unit=" not in text  # empty values left out
