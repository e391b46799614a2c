"""plan_domains: precedence of public domains, catalog checks, nesting; check-row errors."""

from __future__ import annotations

import json
import warnings
from typing import Any

import duckdb
import pytest

from inftda_duckdb.core.checks import load_checks, raise_for_checks
from inftda_duckdb.core.domains import DomainPlan
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.request import parse_request
from inftda_duckdb.duckdb.domain import CategoricalDomainWarning, plan_domains
from inftda_duckdb.duckdb.extension import load, preview, release


@pytest.fixture
def db(con):
    con.execute("CREATE TYPE st AS ENUM ('A', 'B')")
    con.execute("CREATE TABLE t (state st, county VARCHAR, hour INTEGER, v VARCHAR)")
    con.execute("CREATE TABLE geo (State VARCHAR, county VARCHAR, other INTEGER)")
    con.execute("CREATE TABLE geo2 (county VARCHAR)")
    return con


def plan(con, columns, strict=True, **options):
    return plan_domains(parse_request("t", columns, rho=1, **options), con, strict=strict)


def test_precedence(db):
    p = plan(db, ["state", "county", "hour", "v"], domains={"hour": range(24), "v": ["x"]},
             domain_tables=["geo"])
    assert [c.kind for c in p.columns] == ["table", "table", "list", "list"]
    assert p.nestings[0].levels == (0, 1) and p.nestings[0].names == ("State", "county")
    assert p.nested_parent(1) == (0, (0,)) and p.nested_parent(0) is None
    assert p.columns[2].labels == range(24)  # a range stays a range
    assert [c.kind for c in plan(db, ["state"]).columns] == ["enum"]
    assert [c.kind for c in plan(db, ["v"], domain_from_data=True).columns] == ["data"]
    again = DomainPlan.from_json(json.loads(json.dumps(p.to_json())))
    assert again.nestings == p.nestings
    assert [c.size for c in again.columns] == [c.size for c in p.columns] == [None, None, 24, 1]
    # sizes known when planned (lists, ENUMs in the catalog): prefixes travel as keys
    assert p.key_sizes(2) is None and again.key_sizes(1) is None
    assert plan(db, ["state", "hour"], domains={"hour": range(24)}).key_sizes(2) == [2, 24]
    huge = DomainPlan.from_json({"columns": [["a", "list", 2**31], ["b", "list", 2**31]],
                                 "nestings": []})
    assert huge.key_sizes(1) == [2**31] and huge.key_sizes(2) is None  # 2**62: codes lists


def test_catalog_errors(db):
    with pytest.raises(InputError, match=r"column 'v' \(VARCHAR\) has no public domain"):
        plan(db, ["state", "v"])
    with pytest.raises(InputError, match=r"not found in t"):
        plan(db, ["state", "nope"])
    with pytest.raises(InputError, match="not found in t"):
        plan(db, ["state"], privacy_unit="person")
    with pytest.raises(InputError, match="list column 'county' in two tables"):
        plan(db, ["state", "county"], domain_tables=["geo", "geo2"])
    db.execute("CREATE TABLE unrelated (x INTEGER)")
    with pytest.raises(InputError, match="has no column named like a hierarchy column"):
        plan(db, ["state"], domain_tables=["unrelated"])
    with pytest.raises(InputError, match="names a table that was not found"):
        plan(db, ["state"], domain_tables=["missing"])
    with pytest.raises(InputError, match="source was not found"):
        plan_domains(parse_request("missing", ["a"], rho=1), db, strict=True)
    # not strict (SQL bind time): an invisible source is checked later inside DuckDB
    assert plan_domains(parse_request("missing", ["a"], rho=1), db, strict=False).columns


def checks(**column):
    base = {"type": "INTEGER", "size": 3, "bad": 0, "bad_examples": None, "dups": 0,
            "nulls": 0, "unknown": 0, "examples": None}
    return {"n": 10, "kept": 10, "columns": [base | column], "nestings": []}


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ({"type": "VARCHAR", "size": 0}, r"column 'a' \(VARCHAR\) has no public domain"),
        ({"bad": 2, "bad_examples": ["x", "y"]}, "2 values declared for column 'a'"),
        ({"dups": 1}, "lists 1 values twice"),
        ({"nulls": 4}, "column 'a' of t is NULL in 4 rows. Fix: filter"),
        ({"unknown": 5, "examples": ["7"]}, r"5 rows with values outside .*\['7'\]"),
        ({"size": 4}, "has 4 values, but had 3 when the statement was planned"),
    ],
)
def test_check_row_errors(column, message):
    request = parse_request("t", ["a"], rho=1)
    p = DomainPlan.from_json({"columns": [["a", "enum" if "type" in column else "list", 3]],
                              "nestings": []})
    with pytest.raises(InputError, match=message):
        raise_for_checks(request, p, load_checks(json.dumps(checks(**column))))


def test_drop_skips_data_errors():
    request = parse_request("t", ["a"], rho=1, unknown="drop", neighbours="add_remove")
    p = DomainPlan.from_json({"columns": [["a", "list"]], "nestings": []})
    assert raise_for_checks(request, p, load_checks(json.dumps(checks(nulls=3) | {"kept": 7}))) == 7


# ---------------------------------------------------------------------------------------------
# ENUMs of a registered pandas DataFrame: a Categorical's categories may come from the data


@pytest.fixture
def frame_con() -> Any:
    pd = pytest.importorskip("pandas")
    c = duckdb.connect()
    load(c)
    # Categorical categories inferred by pandas from the values: the one-person surname 'Zed'
    # becomes a category, and an ENUM value, of its own
    names = pd.Categorical(["Smith"] * 50 + ["Jones"] * 49 + ["Zed"])
    c.register("people", pd.DataFrame({"surname": names, "n": range(100)}))
    yield c
    c.close()


def test_a_categorical_enum_domain_warns_in_python(frame_con: Any) -> None:
    with pytest.warns(CategoricalDomainWarning, match="'surname' is the ENUM .* Categorical"):
        release(frame_con, "people", ["surname"], rho=1)
    with pytest.warns(CategoricalDomainWarning, match="categories=.*domains="):
        preview(frame_con, "people", ["surname"], rho=1)
    # declared domains come first: the ENUM is not used, nothing to warn about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release(frame_con, "people", ["surname"], rho=1,
                domains={"surname": ["Smith", "Jones", "Zed"]})


def test_a_categorical_passed_as_a_dataframe_warns(frame_con: Any) -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"surname": pd.Categorical(["a", "b", "a"])})
    with pytest.warns(CategoricalDomainWarning, match="registered DataFrame: unless"):
        release(frame_con, df, ["surname"], rho=1, source_name="frame")


def test_a_categorical_enum_domain_is_logged_from_sql(
    frame_con: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="inftda_duckdb"):
        for macro in ("inftda_release", "inftda_preview"):
            frame_con.execute(f"SELECT * FROM {macro}('people', ['surname'], rho := 1)").fetchall()
    logged = [r.getMessage() for r in caplog.records if "pandas Categorical" in r.getMessage()]
    assert len(logged) == 2 and "'people'" in logged[0] and "domains :=" in logged[0]


def test_an_enum_type_of_the_catalog_does_not_warn(con: Any) -> None:
    con.execute("CREATE TYPE s_t AS ENUM ('a', 'b')")
    con.execute("CREATE TABLE e AS SELECT (['a', 'b'])[1 + i % 2]::s_t AS s FROM range(20) r(i)")
    con.execute("CREATE TEMP VIEW ev AS SELECT * FROM e")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release(con, "e", ["s"], rho=1)
        release(con, "ev", ["s"], rho=1)
