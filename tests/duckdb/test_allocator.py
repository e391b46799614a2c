"""DuckDB's allocator purges freed memory while a large release's levels run; the setting is
restored afterwards, also on errors, and small releases leave it alone."""

from __future__ import annotations

import duckdb
import pytest

from inftda_duckdb.core.errors import InternalError
from inftda_duckdb.duckdb import allocator, udfs
from inftda_duckdb.duckdb.extension import load

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")

RELEASE = ("SELECT count(*) FROM inftda_release('t', ['a', 'b'], rho := 1, "
           "domains := {'a': range(10), 'b': range(10)}, seed := 1)")


def setting(con: duckdb.DuckDBPyConnection) -> bool:
    with con.cursor() as cur:
        return bool(cur.execute(f"SELECT current_setting('{allocator.SETTING}')").fetchall()[0][0])


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TABLE t AS SELECT (i % 10)::INTEGER AS a, (i // 10 % 10)::INTEGER AS b "
              "FROM range(500) r(i)")
    yield c
    c.close()


@pytest.fixture
def seen(con, monkeypatch) -> list[bool]:
    """The setting as the core (release_below) sees it, one entry per levels call."""
    out: list[bool] = []
    original = udfs.release_below

    def spy(*args, **kwargs):
        out.append(setting(con))
        return original(*args, **kwargs)

    monkeypatch.setattr(udfs, "release_below", spy)
    return out


def test_a_large_release_purges_while_its_core_runs_and_restores_the_setting(
        con, seen, monkeypatch):
    monkeypatch.setattr(allocator, "MIN_CELLS", 1)  # every release counts as large
    assert setting(con) is False
    con.execute(RELEASE).fetchall()
    assert seen == [True]
    assert setting(con) is False


def test_a_small_release_leaves_the_setting_alone(con, seen):
    con.execute(RELEASE).fetchall()  # 100 domain cells < MIN_CELLS
    assert seen == [False]
    assert setting(con) is False


def test_the_users_own_value_is_kept(con, seen, monkeypatch):
    monkeypatch.setattr(allocator, "MIN_CELLS", 1)
    con.execute(f"SET GLOBAL {allocator.SETTING} = true")
    con.execute(RELEASE).fetchall()
    assert seen == [True]
    assert setting(con) is True


def test_the_setting_is_restored_when_the_core_fails(con, monkeypatch):
    monkeypatch.setattr(allocator, "MIN_CELLS", 1)
    seen = []

    def broken(*args, **kwargs):
        seen.append(setting(con))
        raise InternalError("a broken core")

    monkeypatch.setattr(udfs, "release_below", broken)
    with pytest.raises(duckdb.Error, match="a broken core"):
        con.execute(RELEASE).fetchall()
    assert seen == [True]
    assert setting(con) is False


def test_nested_users_restore_once_when_the_last_leaves(con):
    # two releases of one connection at once (threads): the value read by the first is
    # restored when the last one ends, not before
    with allocator.returning_memory(con, allocator.MIN_CELLS):
        with allocator.returning_memory(con, allocator.MIN_CELLS):
            assert setting(con) is True
        assert setting(con) is True
    assert setting(con) is False
    assert not allocator._USERS


def test_the_decision_depends_on_public_domains_only(con, seen, monkeypatch):
    # Regression: it was taken on the number of true leaves, which another connection could
    # read off the instance-wide setting during the release (uncharged); the domains are public
    monkeypatch.setattr(allocator, "MIN_CELLS", 50)  # both releases: 10 x 10 domain cells
    con.execute("CREATE TABLE few AS SELECT (i % 10)::INTEGER AS a, 0::INTEGER AS b "
                "FROM range(500) r(i)")  # 10 true leaves, where t has 100
    con.execute(RELEASE).fetchall()
    con.execute(RELEASE.replace("'t'", "'few'")).fetchall()
    assert seen == [True, True]
