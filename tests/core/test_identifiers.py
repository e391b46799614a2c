import duckdb
import pytest

from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.identifiers import literal, parse_qualified, quote, quote_qualified


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("trips", ("trips",)),
        ("trip data", ("trip data",)),
        ("main.trips", ("main", "trips")),
        ("db.main.trips", ("db", "main", "trips")),
        ('"my.db".main."t ""x"""', ("my.db", "main", 't "x"')),
        ('"a b"', ("a b",)),
    ],
)
def test_parse_qualified(text: str, parts: tuple[str, ...]) -> None:
    assert parse_qualified(text) == parts


@pytest.mark.parametrize("text", ["", "  ", "a..b", 'a"b', "a.b.c.d", None, 3])
def test_parse_rejects(text: object) -> None:
    with pytest.raises(InputError, match="source"):
        parse_qualified(text)


def test_quoted_names_round_trip_through_duckdb() -> None:
    con = duckdb.connect()
    weird = 'x"; DROP TABLE t; --'
    con.execute(f"CREATE TABLE {quote(weird)} ({quote('col ' + weird)} INTEGER)")
    con.execute(f"INSERT INTO {quote_qualified(('main', weird))} VALUES (1)")
    assert con.execute(f"SELECT {quote('col ' + weird)} FROM {quote(weird)}").fetchall() == [(1,)]
    assert con.execute(f"SELECT {literal(weird)}").fetchall() == [(weird,)]
