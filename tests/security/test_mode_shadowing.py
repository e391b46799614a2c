"""The public-facing mode must not be discoverable through a name SQL can shadow: a macro named
like the mode's marker made every later ``load()`` on the instance curator mode (the marker
UDF could not be created, and asking for it raised a CatalogException read as "no marker")."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.duckdb import disclosure
from inftda_duckdb.duckdb.extension import load

SEEDED = ("SELECT * FROM inftda_release('t', ['dx'], rho := 1, domains := {'dx': ['a']}, "
          "seed := 1)")


def _catalog_error_macro(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """A macro of that name whose call raises DuckDB's CatalogException."""
    con.execute("CREATE TABLE helper (x INTEGER)")
    con.execute(f"CREATE MACRO {name}() AS (SELECT max(x) FROM helper)")
    con.execute("DROP TABLE helper")


SHADOWS: dict[str, Callable[[duckdb.DuckDBPyConnection, str], None]] = {
    "catalog error": _catalog_error_macro,
    "returns text": lambda con, name: con.execute(f"CREATE MACRO {name}() AS 'curator'"),
    "temp macro": lambda con, name: con.execute(f"CREATE TEMP MACRO {name}() AS 'curator'"),
    "table macro": lambda con, name: con.execute(
        f"CREATE MACRO {name}() AS TABLE SELECT 'curator' AS x"),
    "schema": lambda con, name: con.execute(f'CREATE SCHEMA "{name}"'),
    "view": lambda con, name: con.execute(f'CREATE VIEW "{name}" AS SELECT 1 AS x'),
}


@pytest.mark.parametrize("name", ["inftda_public_mode", "marker"])
@pytest.mark.parametrize("shadow", sorted(SHADOWS))
def test_a_shadowing_name_does_not_turn_the_mode_off(shadow: str, name: str) -> None:
    """Whatever was created first under the marker's name (the old fixed name, or the one in
    force now), every connection of the instance is public once ``load(mode='public')``."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 'a' AS dx FROM range(50)")
    SHADOWS[shadow](con, disclosure.MARKER if name == "marker" else name)
    try:
        load(con, mode="public")
    except inftda_duckdb.InputError as exc:  # only if the marker's own name was taken first
        assert name == "marker" and "could not be turned on" in str(exc)
        assert disclosure.is_public(con)  # this connection is, and the curator was told
        con.close()
        return
    inftda_duckdb.set_budget(con, "t", rho=10)
    for other in (con.cursor(), con.cursor()):
        load(other)  # a curator load of another connection of the same instance
        assert disclosure.is_public(other)
        with pytest.raises(duckdb.Error, match="public-facing mode"):
            other.execute(SEEDED).fetchall()
        with pytest.raises(inftda_duckdb.InputError, match="cannot be turned off"):
            load(other, mode="curator")
        other.close()
    assert con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]
    con.close()


def test_a_curator_instance_stays_curator() -> None:
    """The negative control: another instance of this process, never made public, is not."""
    public, curator = duckdb.connect(), duckdb.connect()
    load(public, mode="public")
    load(curator)
    assert disclosure.is_public(public) and not disclosure.is_public(curator)
    assert not disclosure.is_public(curator.cursor())
    public.close()
    curator.close()
