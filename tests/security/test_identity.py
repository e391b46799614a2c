"""A database's identity, the key its budgets are kept under (issue 33, D4): ``DELETE FROM
inftda_identity`` (or UPDATE, DROP) gave the database a new identity, so the budget it had
spent no longer applied, and ``ledger --verify`` still said ok, even with a keyed ledger.

The ledger's chain now records the identity of each database whose sources it charges or
budgets (the ledger inside a database: that database's; a ledger file: each database file's,
by its path); a changed identity is refused (nothing charged, nothing silently reset) and
reported by ``verify_ledger`` / ``ledger --verify``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb import BudgetExceededError, LedgerError
from inftda_duckdb.duckdb import catalog
from inftda_duckdb.duckdb.extension import load
from inftda_duckdb.ledger import chain

DOM = {"x": [0, 1]}
TAMPER = {
    "DELETE": "DELETE FROM inftda_identity",
    "UPDATE id": "UPDATE inftda_identity SET id = 'f00d' || id",
    "DROP": "DROP TABLE inftda_identity",
    "DROP and recreate": "CREATE OR REPLACE TABLE inftda_identity AS SELECT 'f00d' AS id, "
                         "now() AS created_at, NULL::VARCHAR AS ledger_id, "
                         "NULL::VARCHAR AS ledger",
}


def _open(db: Path, ledger: Path | None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(db))
    load(con, ledger=None if ledger is None else str(ledger))
    return con


def _spend(db: Path, ledger: Path | None) -> None:
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT i % 2 AS x FROM range(200) r(i)")
    con = _open(db, ledger)
    inftda_duckdb.set_budget(con, "t", rho=1)
    inftda_duckdb.release(con, "t", ["x"], rho=1, domains=DOM)  # the whole budget
    with pytest.raises(BudgetExceededError):
        inftda_duckdb.release(con, "t", ["x"], rho="1/2", domains=DOM)
    con.close()


@pytest.fixture(params=["in the database", "ledger file"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Path | None]:
    return lambda: None if request.param == "in the database" else tmp_path / "budget.duckdb"


@pytest.fixture(params=["unkeyed", "keyed"])
def keyed(request: pytest.FixtureRequest, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "keyed":
        key = tmp_path / "ledger.key"
        key.write_bytes(b"k" * 32)
        monkeypatch.setenv(chain.KEY_FILE, str(key))


@pytest.mark.parametrize("tamper", sorted(TAMPER))
def test_a_changed_identity_is_refused_and_reported(tamper: str, where: Callable[[], Path],
                                                    keyed: None, tmp_path: Path) -> None:
    db, ledger = tmp_path / "data.duckdb", where()
    _spend(db, ledger)
    with duckdb.connect(str(db)) as plain:  # by hand, without the package
        plain.execute(TAMPER[tamper])
    try:
        con = _open(db, ledger)
    except LedgerError as exc:  # an emptied identity table is refused at once
        assert "inftda_identity" in str(exc)
    else:
        with pytest.raises(LedgerError, match="identity"):  # released afresh before
            inftda_duckdb.release(con, "t", ["x"], rho="1/2", domains=DOM)
        with pytest.raises(duckdb.Error, match="LedgerError: the identity"):
            con.execute("SELECT * FROM inftda_release('t', ['x'], rho := 0.5, "
                        "domains := {'x': [0, 1]})").fetchall()
        with pytest.raises(LedgerError, match="identity"):  # a fresh budget neither
            inftda_duckdb.set_budget(con, "t", rho=5)
        con.close()
    with duckdb.connect(str(db), read_only=True) as con:  # as `ledger --verify` opens it
        if ledger is not None:
            catalog.choose(con, str(ledger))
        reports = inftda_duckdb.verify_ledger(con).to_pylist()
    assert reports and not all(r["ok"] for r in reports), reports
    assert any("identity" in (r["problem"] or "") for r in reports)


def test_ledger_verify_on_the_command_line_fails(tmp_path: Path, capsys: Any) -> None:
    from inftda_duckdb.tools.cli import main

    db = tmp_path / "data.duckdb"
    _spend(db, None)
    assert main(["ledger", str(db), "--verify"]) == 0
    with duckdb.connect(str(db)) as plain:
        plain.execute(TAMPER["UPDATE id"])
    capsys.readouterr()
    assert main(["ledger", str(db), "--verify"]) != 0
    assert "identity" in capsys.readouterr().err


def test_copies_renames_and_a_restored_identity_keep_the_budget(where: Callable[[], Path],
                                                                tmp_path: Path) -> None:
    """The negative controls: the identity follows the file (copied, renamed), and the fix the
    refusal names (the recorded identity put back) makes the spent budget apply again."""
    db, ledger = tmp_path / "data.duckdb", where()
    _spend(db, ledger)
    for moved in (tmp_path / "copy.duckdb", tmp_path / "renamed.duckdb"):
        shutil.copy(db, moved) if moved.name == "copy.duckdb" else db.rename(moved)
        con = _open(moved, ledger)
        with pytest.raises(BudgetExceededError):
            inftda_duckdb.release(con, "t", ["x"], rho="1/2", domains=DOM)
        assert all(r["ok"] for r in inftda_duckdb.verify_ledger(con).to_pylist())
        con.close()
    db = tmp_path / "renamed.duckdb"
    with duckdb.connect(str(db)) as plain:
        known = plain.execute("SELECT id FROM inftda_identity").fetchall()[0][0]
        plain.execute(TAMPER["DELETE"])
        plain.execute(f"INSERT INTO inftda_identity VALUES ('{known}', now(), NULL, NULL)")
    con = _open(db, ledger)
    with pytest.raises(BudgetExceededError):
        inftda_duckdb.release(con, "t", ["x"], rho="1/2", domains=DOM)
    con.close()


def test_an_identity_moved_with_its_ledger_is_still_checked(tmp_path: Path) -> None:
    """``ledger --move-to``: the identity the database's own ledger recorded moves with its
    rows, under the database file's path, so the shared ledger checks it from then on."""
    from inftda_duckdb.tools.cli import main

    db, shared = tmp_path / "data.duckdb", tmp_path / "shared.duckdb"
    _spend(db, None)
    assert main(["ledger", str(db), "--move-to", str(shared)]) == 0
    con = _open(db, shared)
    with pytest.raises(BudgetExceededError):  # the budget moved, spent
        inftda_duckdb.release(con, "t", ["x"], rho="1/2", domains=DOM)
    con.close()
    with duckdb.connect(str(db)) as plain:
        plain.execute(TAMPER["UPDATE id"])
    con = _open(db, shared)
    with pytest.raises(LedgerError, match="identity"):
        inftda_duckdb.release(con, "t", ["x"], rho="1/2", domains=DOM)
    con.close()
