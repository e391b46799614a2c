"""parse_request: every option validated with a message naming the rule and the fix."""

from __future__ import annotations

import datetime as dt
import json
from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.request import from_json, label, parse_request


def ok(**options):
    return parse_request("trips", ["a", "b"], **({"rho": 1} | options))


def test_defaults_and_roundtrip():
    r = ok(rho="1/3", domains={"B": range(3)}, domain_tables="geo", level_weights=[1, 2])
    assert r.rho == Fraction(1, 3) and r.epsilon is None
    assert r.domains == {"b": range(3)}  # matched case-insensitively; a range stays a range
    assert r.domain_tables == (("geo",),)
    assert r.level_weights == (1, 2)
    assert (r.output, r.neighbours, r.unknown, r.max_rows_per_unit) == (
        "counts", "substitute", "error", 1)
    assert r.private and not ok(seed=3).private and not ok(domain_from_data=True).private
    assert from_json(r.to_json()) == r
    full = ok(seed=5, neighbours="add_remove", unknown="drop", output="rows",
              privacy_unit="p", max_rows_per_unit=4, domain_tables=['s."my geo"'],
              domains={"a": ["x", "y"], "b": range(10**6, -3, -7)})
    assert from_json(full.to_json()) == full
    asserted = ok(privacy_unit="p", rows_per_unit_public=True)
    assert from_json(asserted.to_json()) == asserted and not asserted.noised_root


def test_a_range_domain_is_never_expanded() -> None:
    """range(10**18) is parsed in microseconds (issue 15: range(10**9) grew to GiBs); SQL's
    form {'start': ..., 'stop': ..., 'step': ...} is the same range."""
    huge = range(-(10**18), 10**18, 3)
    r = parse_request("t", ["a"], rho=1, domains={"a": huge})
    assert r.domains["a"] is huge
    assert json.loads(r.to_json())["domains"] == {
        "a": {"start": -(10**18), "stop": 10**18, "step": 3}}
    sql_form = {"a": {"start": -(10**18), "stop": 10**18, "step": 3}}
    assert parse_request("t", ["a"], rho=1, domains=sql_form).domains["a"] == huge


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        (range(5, 5), "must not be empty"),
        (range(2**63 - 3, 2**63 + 3), "BIGINT"),
        (range(-(2**64), 0, 2**40), "BIGINT"),
        ({"start": 0}, "must be a list of values or {'start'"),
        ({"start": 0, "stop": 5, "by": 1}, "must be a list of values or {'start'"),
        ({"start": 0, "stop": 5.5}, "integer start, stop"),
        ({"start": 0, "stop": 5, "step": 0}, "non-zero integer step"),
        ([None, *range(100)], "must not contain NULL; got '\\[None, 0, 1,"),
    ],
)
def test_bad_range_domains(domain: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_request("t", ["a"], rho=1, domains={"a": domain})


def test_rows_per_unit_public_is_an_explicit_assertion() -> None:
    unit = {"privacy_unit": "p"}
    assert ok(**unit).noised_root and not ok().noised_root
    assert ok(neighbours="add_remove").noised_root
    # the noised root takes the first weight, and 'drop' no longer changes a published total
    assert ok(**unit, level_weights=[1, 2, 3]).level_weights == (1, 2, 3)
    assert ok(**unit, unknown="drop").unknown == "drop"
    with pytest.raises(InputError, match=r"3 weights, one per level and the root first"):
        ok(**unit, level_weights=[1, 2])
    with pytest.raises(InputError, match="with neighbours 'substitute'"):
        ok(**unit, rows_per_unit_public=True, unknown="drop")
    for bad, message in [
        ({"rows_per_unit_public": True}, "applies only with a privacy_unit"),
        ({**unit, "neighbours": "add_remove", "rows_per_unit_public": True}, "applies only"),
        ({**unit, "rows_per_unit_public": "yes"}, "must be true or false"),
    ]:
        with pytest.raises(InputError, match=message):
            ok(**bad)


def test_epsilon_delta_form():
    r = parse_request("t", ["a"], epsilon=1, delta=1e-6)
    assert r.rho is None and r.epsilon == 1 and r.delta == Fraction(1, 10**6)


def test_labels():
    assert label(True) == "true" and label(3) == "3" and label(0.5) == "0.5"
    assert label(dt.date(2024, 1, 2)) == "2024-01-02" and label(np.int64(7)) == "7"
    with pytest.raises(InputError, match="NaN"):
        label(float("nan"))
    with pytest.raises(InputError, match="must be strings, numbers"):
        label(object())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rho": None}, "rho must be given"),
        ({"rho": -1}, "rho must be a positive finite number; got -1"),
        ({"rho": float("inf")}, "rho must be a positive finite number"),
        ({"rho": "x"}, "rho must be a finite number"),
        ({"rho": True}, "rho must be a finite number"),
        ({"rho": None, "epsilon": 1}, "rho must be given"),
        ({"rho": None, "epsilon": 1, "delta": 1}, "delta must be below 1"),
        ({"rho": None, "epsilon": 0, "delta": 0.1}, "epsilon must be a positive"),
        ({"epsilon": 1, "delta": 0.1}, "rho must be given alone"),
        ({"output": "csv"}, "output must be one of counts, rows"),
        ({"neighbours": "x"}, "neighbours must be one of"),
        ({"unknown": "x"}, "unknown must be one of error, drop"),
        ({"unknown": "drop"}, "with neighbours 'substitute'"),
        ({"seed": 1.5}, "seed must be a non-negative integer"),
        ({"seed": True}, "seed must be a non-negative integer"),
        ({"domain_from_data": "yes"}, "domain_from_data must be true or false"),
        ({"level_weights": [1]}, "must have 2 weights, one per level"),
        ({"level_weights": [1, 1], "neighbours": "add_remove"}, "the root first"),
        ({"level_weights": [1, 0]}, "level_weights must be a positive"),
        ({"level_weights": "1,1"}, "level_weights must be a list"),
        ({"privacy_unit": ""}, "privacy_unit must be a column name"),
        ({"max_rows_per_unit": 0, "privacy_unit": "p"}, "max_rows_per_unit must be a positive"),
        ({"max_rows_per_unit": 2}, "needs privacy_unit"),
        ({"domains": ["a"]}, "domains must map column names"),
        ({"domains": {"c": [1]}}, "names a column that is not in columns"),
        ({"domains": {"a": "xyz"}}, "must be a list of values"),
        ({"domains": {"a": []}}, "must not be empty"),
        ({"domains": {"a": [1, None]}}, "must not contain NULL"),
        ({"domains": {"a": [1, "1"]}}, "must not repeat a value"),
        ({"domain_tables": ["g", "G"][:1] * 2}, "must not repeat a table"),
        ({"domain_tables": 3}, "must be a list of table names"),
        ({"colour": 1}, "are not release options"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(InputError, match=message):
        ok(**options)


@pytest.mark.parametrize(
    ("source", "columns", "message"),
    [
        ("", ["a"], "source must be a non-empty"),
        (3, ["a"], "source must be a non-empty"),
        ("a.b.c.d", ["a"], "must be name, schema.name"),
        ("t", [], "columns must not be empty"),
        ("t", "a", "columns must be a list"),
        ("t", ["a", "A"], "must not repeat a column .A, a."),
        ("t", ["a", ""], "must all be non-empty strings"),
        ("t", [f"c{i}" for i in range(33)], "at most 32 columns"),
        ("t", ["Count"], "named 'count'"),
    ],
)
def test_bad_source_and_columns(source, columns, message):
    with pytest.raises(InputError, match=message):
        parse_request(source, columns, rho=1)


def test_count_column_allowed_with_rows_output():
    assert parse_request("t", ["count"], rho=1, output="rows").columns == ("count",)


def test_from_json_junk():
    with pytest.raises(InputError, match="not valid JSON"):
        from_json("{")
    with pytest.raises(InputError, match="must be a JSON object"):
        from_json("[1]")


def test_auto_weights_and_their_target():
    three = ["origin", "dest", "carrier"]
    r = parse_request("t", three, rho=1, level_weights="auto")
    assert (r.level_weights, r.auto_target) == ("auto", "leaves")
    assert from_json(r.to_json()) == r
    assert parse_request("t", three, rho=1, level_weights="AUTO").level_weights == "auto"
    for given, level in [("Dest", 2), (1, 1), ("all", "all"), ("LEAVES", "leaves"),
                         (3, "leaves"), ("carrier", "leaves")]:
        r = parse_request("t", three, rho=1, level_weights="auto", auto_target=given)
        assert r.auto_target == level, given
        assert from_json(r.to_json()) == r
    assert ok().auto_target is None and ok(level_weights=[1, 2]).auto_target is None


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"auto_target": 1}, "auto_target only applies with level_weights 'auto'"),
        ({"level_weights": [1, 1], "auto_target": "a"}, "only applies with level_weights"),
        ({"level_weights": "auto", "auto_target": "c"}, "auto_target must be 'leaves', 'all'"),
        ({"level_weights": "auto", "auto_target": 0}, r"a level 1\.\.2"),
        ({"level_weights": "auto", "auto_target": True}, "auto_target must be"),
        ({"level_weights": "uniform"}, "must be a list of numbers or 'auto'"),
    ],
)
def test_auto_errors(options, match):
    with pytest.raises(InputError, match=match):
        ok(**options)


def test_a_column_named_like_a_target_keyword_needs_the_level_number():
    with pytest.raises(InputError, match="is both a keyword and a hierarchy column"):
        parse_request("t", ["all", "b"], rho=1, level_weights="auto", auto_target="all")
    r = parse_request("t", ["all", "b"], rho=1, level_weights="auto", auto_target=1)
    assert r.auto_target == 1
