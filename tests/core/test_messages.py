"""Fix texts in the language of the interface in use: one message, rendered for SQL, Python or
the command line; values of the caller are shown only when they are plain data."""

from __future__ import annotations

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.core.errors import (
    InputError,
    bad_argument,
    call,
    opt,
    render,
    shown,
    speaking,
    unknown_parameters,
)

FIX = (f"pass {opt('domains', {'hour': range(24)})} with {opt('neighbours', 'add_remove')}, "
       f"{opt('domain_from_data', True)}, then {call('set_budget', 'trips', rho=...)}")


@pytest.mark.parametrize(("interface", "expected"), [
    ("sql", "pass domains := {'hour': range(24)} with neighbours := 'add_remove', "
            "domain_from_data := true, then SELECT inftda_set_budget('trips', rho := ...)"),
    ("python", "pass domains={'hour': range(24)} with neighbours='add_remove', "
               "domain_from_data=True, then set_budget(con, 'trips', rho=...)"),
    ("cli", "pass --domain hour=0..23 with --neighbours add_remove, --domain-from-data, then "
            "inftda-duckdb budget DATABASE --set trips --rho ..."),
])
def test_one_message_three_languages(interface: str, expected: str) -> None:
    import inftda_duckdb.tools.cli  # noqa: F401 - registers the CLI's renderer

    assert render(FIX, interface) == expected
    with speaking(interface):
        assert str(bad_argument("rho", -1, "must be positive", FIX)).endswith(expected)


def test_each_interface_gets_its_language(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE t AS SELECT 1 AS hour")
    with pytest.raises(InputError, match=r"domains=\{'hour': \.\.\.\}"):
        inftda_duckdb.release(con, "t", ["hour"], rho=1)
    with pytest.raises(duckdb.Error, match=r"domains := \{'hour': \.\.\.\}") as info:
        con.sql("SELECT * FROM inftda_release('t', ['hour'], rho := 1)").fetchall()
    assert "domains=" not in str(info.value)


def test_objects_are_never_printed() -> None:
    class Loud:
        def __repr__(self) -> str:
            raise AssertionError("repr must not be called")

    assert shown(Loud()).startswith("<a ")
    assert shown([1, "a", None]) == "[1, 'a', None]"
    assert shown("x" * 500).endswith("...") and len(shown("x" * 500)) == 200


def test_misspelled_sql_parameter_is_named(con: duckdb.DuckDBPyConnection) -> None:
    # before: DuckDB's bare 'does not support the supplied arguments'
    from inftda_duckdb.tools.status import clean_message

    con.execute("CREATE TABLE t AS SELECT 1 AS hour")
    sql = "SELECT * FROM inftda_release('t', ['hour'], rho := 1, domain := {'hour': [1]})"
    with pytest.raises(duckdb.Error) as info:
        con.sql(sql)
    text = clean_message(info.value, sql)
    assert text.startswith("inftda_release has no parameter domain (did you mean domains?)")
    assert "Valid parameters: source, columns, rho, epsilon" in text
    assert unknown_parameters("inftda_release", "source, rho := NULL", "SELECT 1") is None
