"""The option table (core/options.py) is the one place options are declared: every surface that
takes release or preview options agrees with it (the SQL macros, the Python functions, the
request, the Spark API)."""

from __future__ import annotations

import inspect
import re

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.core import options
from inftda_duckdb.core.request import OPTIONS as REQUEST_OPTIONS
from inftda_duckdb.core.request import parse_request

# the positional arguments every surface takes before its options
POSITIONAL = {"con", "source", "columns"}


def _keywords(function: object) -> dict[str, object]:
    params = inspect.signature(function).parameters  # type: ignore[arg-type]
    return {n: p.default for n, p in params.items()
            if n not in POSITIONAL and p.kind is not inspect.Parameter.VAR_KEYWORD}


@pytest.mark.parametrize(("surface", "function"), [
    (options.RELEASE, inftda_duckdb.release), (options.PREVIEW, inftda_duckdb.preview),
    (options.PLAN, inftda_duckdb.plan)])
def test_the_python_functions_take_exactly_the_tables_options(surface: str,
                                                             function: object) -> None:
    table = {o.name: o for o in options.of(surface, "duckdb")}
    keywords = _keywords(function)
    extra = set(keywords) - set(table) - {"origin"}  # origin: the CLI's own, not a user option
    assert not extra, f"{surface}() takes options the table lacks: {sorted(extra)}"
    assert set(table) <= set(keywords), f"missing: {sorted(set(table) - set(keywords))}"
    for name, option in table.items():
        if option.default is not None:
            assert keywords[name] == option.default, name


def test_the_request_parses_exactly_the_tables_request_options() -> None:
    assert set(REQUEST_OPTIONS) == {o.name for o in options.OPTIONS if o.request}
    with pytest.raises(inftda_duckdb.InputError, match=r"are not release options"):
        parse_request("t", ["a"], rho=1, beta=0.1)  # a preview option, not a request's


@pytest.mark.parametrize("surface", options.SURFACES)
def test_the_sql_macros_take_exactly_the_tables_options(con: duckdb.DuckDBPyConnection,
                                                        surface: str) -> None:
    """The macros' parameters, as DuckDB itself reports them, are the table's SQL options."""
    rows = con.execute(
        "SELECT parameters FROM duckdb_functions() WHERE function_name = ? "
        "AND function_type = 'table_macro'", [f"inftda_{surface}"]).fetchall()
    assert rows, f"no macro inftda_{surface}"
    got = [p for p in rows[0][0] if p not in ("source", "columns")]
    assert got == [o.name for o in options.of(surface, "duckdb", sql=True)]


def test_a_misspelled_sql_option_is_refused_by_the_macro(con: duckdb.DuckDBPyConnection) -> None:
    """Negative control for the macro test: a name outside the table is not a parameter."""
    con.execute("CREATE TABLE t AS SELECT 'a' AS x")
    with pytest.raises(duckdb.Error):
        con.execute("SELECT * FROM inftda_release('t', ['x'], rhoo := 1)").fetchall()


def test_the_spark_api_documents_its_options_from_the_table() -> None:
    pytest.importorskip("pyspark")
    from inftda_duckdb import spark

    explicit = set(_keywords(spark.release)) - {"origin"}
    for option in options.of(options.RELEASE, "spark", request=False):
        assert option.name in explicit, option.name
    for option in options.of(options.RELEASE, "spark", request=True):
        assert re.search(rf"\b{option.name}\b", spark.release.__doc__ or ""), option.name


def test_the_reference_table_lists_every_option_once() -> None:
    text = options.reference_table(options.RELEASE)  # the SQL macro's options
    for option in options.of(options.RELEASE, "duckdb", sql=True):
        assert text.count(f"| `{option.name}` |") == 1
    assert "`beta`" not in text  # a preview option
