"""Issue 14: the budget holds whatever name the data is reached by; the ledger cannot be forged or
silently reset. One test per reproduction of the issue (each failed on the code before the fix)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb import BudgetExceededError, InputError, LedgerError, load, release, set_budget
from inftda_duckdb.duckdb import allocator, api, sqlgen, udfs
from inftda_duckdb.duckdb.connections import registered
from inftda_duckdb.duckdb.registry import RELEASES
from inftda_duckdb.duckdb.sqlgen import PREFIXES, spec_json

DOM = {"x": [0, 1, 2]}
SQL_DOM = "domains := {'x': [0, 1, 2]}"


def table(con: duckdb.DuckDBPyConnection, name: str, n: int) -> None:
    con.execute(f"CREATE TABLE {name} AS SELECT (i % 3)::INTEGER AS x FROM range({n}) t(i)")


def released_total(t: object) -> int:
    return sum(t.column("count").to_pylist())  # type: ignore[attr-defined]


def charges(con: duckdb.DuckDBPyConnection, db: str = "") -> int:
    prefix = f"{db}." if db else ""
    return int(con.execute(f"SELECT count(*) FROM {prefix}inftda_ledger").fetchall()[0][0])


@pytest.fixture
def city(tmp_path: Path) -> Path:
    """city.duckdb: table trips (300 rows) with a budget of rho 1, of which 3/4 is spent."""
    path = tmp_path / "city.duckdb"
    with duckdb.connect(str(path)) as con:
        load(con)
        table(con, "trips", 300)
        set_budget(con, "trips", rho=1)
        release(con, "trips", ["x"], rho="3/4", domains=DOM)
    return path


# ---------------------------------------------------------------------------------------------
# source identity: DuckDB folds ASCII case only


@pytest.mark.parametrize(("upper", "lower"), [("Ä", "ä"), ("Σ", "σ")])
def test_unicode_case_twins_are_two_tables(upper: str, lower: str, vouched: Any) -> None:
    con = duckdb.connect()
    load(con)
    table(con, f'"{lower}"', 100)
    table(con, f'"{upper}"', 300)
    table(con, f'"{lower}2"', 100)
    assert released_total(release(con, f'"{upper}"', ["x"], rho=1, domains=DOM)) == 300
    sql = f"SELECT sum(count) FROM inftda_release('\"{upper}\"', ['x'], rho := 1, {SQL_DOM})"
    assert con.execute(sql).fetchall() == [(300,)]
    assert released_total(release(con, f'"{lower}"', ["x"], rho=1, domains=DOM)) == 100
    set_budget(con, f'"{upper}"', rho=2)  # exactly what the two releases above spent on it
    with pytest.raises(BudgetExceededError):
        release(con, f'"{upper}"', ["x"], rho="1/100", domains=DOM)
    release(con, f'"{lower}"', ["x"], rho=1, domains=DOM)  # the twin is another table
    vouched(con, f"SELECT inftda_set_budget('\"{lower}2\"', rho := 1)")
    con.execute(f"SELECT * FROM inftda_release('\"{lower}2\"', ['x'], rho := 1, {SQL_DOM})")
    with pytest.raises(duckdb.Error, match="refused"):
        con.execute(f"SELECT * FROM inftda_release('\"{lower}2\"', ['x'], rho := 1, {SQL_DOM})")


# ---------------------------------------------------------------------------------------------
# budgets on names that do not resolve


def test_budget_on_a_typo_is_an_error_naming_the_candidates(vouched: Any) -> None:
    con = duckdb.connect()
    load(con)
    table(con, "trips", 300)
    with pytest.raises(InputError, match=r"'tripz'.*trips"):
        set_budget(con, "tripz", rho=1)
    with pytest.raises(duckdb.Error, match=r"tripz.*trips"):
        vouched(con, "SELECT inftda_set_budget('tripz', rho := 1)")
    assert inftda_duckdb.budget(con).num_rows == 0


def test_budget_before_the_table_exists_needs_missing_ok_and_then_applies() -> None:
    con = duckdb.connect()
    load(con)
    with pytest.raises(InputError, match="later"):
        set_budget(con, "later", rho=1)
    set_budget(con, "later", rho=1, missing_ok=True)
    table(con, "later", 300)
    release(con, "later", ["x"], rho="3/4", domains=DOM)
    with pytest.raises(BudgetExceededError):
        release(con, "later", ["x"], rho="1/2", domains=DOM)


# ---------------------------------------------------------------------------------------------
# the same data by another file name, alias or attach mode


def assert_exhausted(city: Path, charged: int) -> None:
    """city.duckdb opened directly: ``charged`` releases in its ledger, nothing left to spend."""
    with duckdb.connect(str(city)) as con:
        load(con)
        assert charges(con) == charged
        with pytest.raises(BudgetExceededError):
            release(con, "trips", ["x"], rho="1/100", domains=DOM)


def test_renamed_and_copied_database_files_keep_their_cap(city: Path) -> None:
    renamed = city.with_name("city_backup.duckdb")
    os.rename(city, renamed)
    copied = city.with_name("copy.duckdb")
    shutil.copy(renamed, copied)
    for path in (renamed, copied):
        with duckdb.connect(str(path)) as con:
            load(con)
            for _ in range(3):
                with pytest.raises(BudgetExceededError):
                    release(con, "trips", ["x"], rho="1/2", domains=DOM)


def test_another_alias_of_the_same_file_has_the_same_cap(city: Path) -> None:
    con = duckdb.connect()
    load(con)
    con.execute(f"ATTACH '{city}' AS other_name")
    with pytest.raises(BudgetExceededError):
        release(con, "other_name.main.trips", ["x"], rho="1/2", domains=DOM)
    release(con, "other_name.main.trips", ["x"], rho="1/4", domains=DOM)  # the file's ledger
    con.close()
    assert_exhausted(city, charged=2)


def test_read_only_attach_is_refused_when_the_charge_cannot_be_kept(city: Path) -> None:
    con = duckdb.connect()
    load(con)
    con.execute(f"ATTACH '{city}' AS ro (READ_ONLY)")
    with pytest.raises(InputError, match="read-only"):
        release(con, "ro.main.trips", ["x"], rho="1/100", domains=DOM)
    with pytest.raises(duckdb.Error, match="read-only"):
        con.execute(f"SELECT * FROM inftda_release('ro.main.trips', ['x'], rho := 0.01, {SQL_DOM})")
    assert con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]
    con.close()


def test_attach_and_use_on_an_in_memory_connection_charges_the_file(city: Path) -> None:
    con = duckdb.connect()
    load(con)
    con.execute(f"ATTACH '{city}' AS city")
    con.execute("USE city")
    release(con, "trips", ["x"], rho="1/8", domains=DOM)
    con.execute(f"SELECT * FROM inftda_release('trips', ['x'], rho := '1/8', {SQL_DOM})")
    con.close()
    assert_exhausted(city, charged=3)


def test_file_data_with_an_in_memory_ledger_is_refused_unless_chosen(tmp_path: Path) -> None:
    parquet = tmp_path / "trips.parquet"
    with duckdb.connect() as con:
        table(con, "trips", 300)
        con.execute(f"COPY trips TO '{parquet}' (FORMAT parquet)")
    base = ["release", "--input", parquet, "--columns", "x", "--domain", "x=0..2", "--rho", "1",
            "--quiet"]
    refused = _cli(*base, "--output", tmp_path / "a.parquet")
    assert refused.returncode != 0 and "memory" in refused.stderr, refused.stderr
    assert not (tmp_path / "a.parquet").exists()
    chosen = _cli(*base, "--output", tmp_path / "b.parquet", "--ledger", ":memory:")
    assert chosen.returncode == 0, chosen.stderr


# ---------------------------------------------------------------------------------------------
# the CLI and Python on one ledger; a budget covering several sources


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_cli_and_python_charge_one_budget_covering_a_view_and_a_file(tmp_path: Path) -> None:
    parquet = tmp_path / "trips.parquet"
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    ledger = tmp_path / "ledger.duckdb"
    with duckdb.connect() as con:
        table(con, "trips", 300)
        con.execute(f"COPY trips TO '{parquet}' (FORMAT parquet)")
        con.execute(f"COPY trips TO '{elsewhere / 'trips.parquet'}' (FORMAT parquet)")
    with duckdb.connect(str(ledger)) as con:  # examples/etl.py: a view over the file
        load(con)
        con.execute(f"CREATE VIEW trips AS SELECT * FROM read_parquet('{parquet}')")
        set_budget(con, ["trips", f"file:{parquet}"], name="trips people", rho=1)
        release(con, "trips", ["x"], rho="3/4", domains=DOM)
    args = ["release", "--input", parquet, "--columns", "x", "--domain", "x=0..2", "--rho", "1/2",
            "--quiet", "--output", tmp_path / "out.parquet"]
    refused = _cli(*args, "--ledger", ledger)
    assert refused.returncode != 0 and "refused" in refused.stderr, refused.stderr
    refused = _cli(*args, "--db", ledger)  # the ledger in --db: the same one
    assert refused.returncode != 0 and "refused" in refused.stderr, refused.stderr
    assert not (tmp_path / "out.parquet").exists()
    other = ["release", "--input", elsewhere / "trips.parquet", "--columns", "x", "--domain",
             "x=0..2", "--rho", "1/2", "--quiet", "--output", tmp_path / "o.parquet"]
    ok = _cli(*other, "--ledger", ledger)  # another file of the same name: another source
    assert ok.returncode == 0, ok.stderr
    with duckdb.connect(str(ledger)) as con:
        load(con)
        rows = {r["budget"]: r for r in inftda_duckdb.budget(con).to_pylist()}
        assert rows["trips people"]["spent_rho_exact"] == "3/4"
        assert rows[None if None in rows else str(elsewhere / "trips.parquet")]["releases"] == 1


# ---------------------------------------------------------------------------------------------
# internal functions called by hand; query shapes that cannot run to completion


@pytest.fixture
def ab() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    load(con)
    table(con, "a", 300)
    table(con, "b", 30)
    yield con
    con.close()


def test_forged_internal_calls_error_and_charge_nothing(ab: duckdb.DuckDBPyConnection) -> None:
    n = registered(ab, "release")
    request, plan, _ = api.prepare(ab, "a", ["x"], {"rho": 1, "domains": DOM})
    spec = json.loads(spec_json(request, plan, "cli"))
    checks = json.dumps({
        "stats": {"n": 1000, "kept": 1000, "nulls1": 0, "unknown1": 0, "examples1": []},
        "columns": [{"type": "INTEGER", "size": 3, "bad": 0, "bad_examples": [], "dups": 0}],
        "nestings": []})
    for forged in (spec, {**spec, "token": "0" * 32}):
        with pytest.raises(duckdb.Error, match="internal step"):
            ab.execute(f"SELECT inftda_begin_{n}(?, ?, current_query_id())",
                       [json.dumps(forged), checks]).fetchall()
    # a statement rendered by the generator, its internal call replayed in another statement
    rendered = ab.execute(
        f"SELECT inftda_release_sql_{n}(to_json({{'source': 'a', 'columns': ['x'], 'rho': 1, "
        f"'domains': {{'x': [0, 1, 2]}}, 'current_database': 'memory', "
        "'current_schema': 'main', 'search_path': '', 'query_id': current_query_id()})::VARCHAR)"
    ).fetchall()[0][0]
    begin = rendered[rendered.index(f"inftda_begin_{n}("):]
    begin = begin[: begin.index(" AS b FROM checks")]
    with pytest.raises(duckdb.Error, match="internal step"):
        ab.execute(f"SELECT {begin.replace(', j', ', ?')}", [checks]).fetchall()
    # the levels step with a made-up release id: one call, the cut of a release in parts, a part
    for part, cut, parts in ((0, 0, 0), (-1, 1, 2), (0, 1, 2)):
        levels = (f"SELECT inftda_levels_{n}('0123', {part}, {{'k': NULL, 'key': [0, 1, 2], "
                  f"'n': [10, 10, 10]}}::{PREFIXES}, [NULL]::{PREFIXES}[], 1, {cut}, {parts})")
        with pytest.raises(duckdb.Error, match="cannot be called by hand"):
            ab.execute(levels).fetchall()
    assert charges(ab) == 0


SHAPES = [
    "SELECT * FROM range({k}) r(i), LATERAL (SELECT * FROM {rel} WHERE count > i)",
    "SELECT i, (SELECT sum(count) FROM {rel} WHERE count > i) FROM range({k}) r(i)",
    "SELECT i FROM range({k}) r(i) WHERE EXISTS (SELECT 1 FROM {rel} WHERE count > i)",
]


@pytest.mark.parametrize("k", [3, 5000])
@pytest.mark.parametrize("shape", SHAPES)
def test_correlated_release_is_refused_before_it_is_charged(
    ab: duckdb.DuckDBPyConnection, shape: str, k: int
) -> None:
    rel = f"inftda_release('a', ['x'], rho := 0.1, {SQL_DOM})"
    try:
        ab.execute(shape.format(rel=rel, k=k)).fetchall()
        ran = 1  # DuckDB 1.5 plans it once: one release, run to completion, charged once
    except duckdb.Error as exc:  # DuckDB 2.x runs it per outer row: refused before charging
        assert "correlated" in str(exc) and "this is a bug" not in str(exc)
        ran = 0
    assert ran == (0 if duckdb.__version__ >= "2" else 1)
    assert charges(ab) == ran
    assert all(not state.levels for state in RELEASES.states())  # no key kept
    ab.execute(f"SELECT * FROM {rel}").fetchall()  # an ordinary release still works
    assert charges(ab) == ran + 1


def test_a_release_in_parts_is_charged_once_by_its_first_levels_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a small memory_limit a release comes in parts (one levels call for the levels down
    to the cut, then one per run of parts): charged once, before any noise; an overspend is
    refused before any part runs; no key stays behind."""
    monkeypatch.setattr(allocator, "memory_limit", lambda _: 1 << 6)
    monkeypatch.setattr(sqlgen, "PARTS", 3)
    parts: list[int] = []
    original = udfs.release_parts
    monkeypatch.setattr(udfs, "release_parts", lambda *a: parts.append(len(a[1])) or original(*a))
    con = duckdb.connect()
    load(con)
    con.execute("CREATE TABLE t AS SELECT (i % 3)::INTEGER AS x, (i % 5)::INTEGER AS y "
                "FROM range(300) r(i)")
    set_budget(con, "t", rho=1)
    doms = "domains := {'x': [0, 1, 2], 'y': range(5)}"
    out = con.execute(f"SELECT sum(count) FROM inftda_release('t', ['x', 'y'], rho := '3/4', "
                      f"{doms})").fetchall()
    assert out == [(300,)] and sum(parts) == 3 and charges(con) == 1
    parts.clear()
    with pytest.raises(duckdb.Error, match="refused"):
        con.execute(f"SELECT * FROM inftda_release('t', ['x', 'y'], rho := '1/2', {doms})")
    assert not parts and charges(con) == 1
    assert all(not s.levels and s.tree is None for s in RELEASES.states())
    con.close()


# ---------------------------------------------------------------------------------------------
# the ledger cannot be edited or reset silently


EDITS = {
    "insert": "INSERT INTO inftda_ledger SELECT * REPLACE ('-100' AS rho, id + 100 AS id) "
              "FROM inftda_ledger",
    "update": "UPDATE inftda_ledger SET rho = '-100'",
    "update_budget": "UPDATE inftda_budgets SET rho = '100'",
    "insert_valid": "INSERT INTO inftda_ledger BY NAME SELECT * REPLACE (seq + 100 AS seq, "
                    "sha256(to_json({'seq': seq + 100, 'id': id, 'at': epoch_us(started_at), "
                    "'source': source, 'key': source_key, 'columns': columns, 'neighbours': "
                    "neighbours, 'unit': privacy_unit, 'm': max_rows_per_unit, 'rho': rho, "
                    "'delta': printf('%.17g', delta), 'output': output, 'seeded': seeded, "
                    "'data_domain': data_domain, 'private': private, 'origin': origin, "
                    "'conversion': conversion})::VARCHAR) AS digest) FROM inftda_ledger",
    "delete": "DELETE FROM inftda_ledger",
    "drop": "DROP TABLE inftda_ledger",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_ledger_edits_are_blocked_or_refuse_every_release(city: Path, edit: str) -> None:
    done = True
    with duckdb.connect(str(city)) as con:
        try:
            con.execute(EDITS[edit])
        except duckdb.Error:
            done = False  # blocked outright (a CHECK constraint): the budget still holds
    with duckdb.connect(str(city)) as con:
        load(con)
        with pytest.raises((BudgetExceededError, InputError)):
            release(con, "trips", ["x"], rho="1/2", domains=DOM)
        table(con, "fresh", 30)
        if done:  # an edit that went through is detected: a broken ledger refuses everything
            with pytest.raises(LedgerError, match="ledger"):
                release(con, "fresh", ["x"], rho="1/100", domains=DOM)
        assert done or edit not in ("delete", "drop", "insert_valid")


def test_set_budget_is_refused_inside_an_open_transaction(city: Path) -> None:
    with duckdb.connect(str(city)) as con:
        load(con)
        con.execute("BEGIN")
        with pytest.raises(InputError, match="transaction"):
            set_budget(con, "trips", rho=5)
        with pytest.raises(InputError, match="transaction"):
            inftda_duckdb.require_budget(con, False)
        con.execute("ROLLBACK")
        with pytest.raises(BudgetExceededError):
            release(con, "trips", ["x"], rho="1/2", domains=DOM)


def test_the_refusal_leaves_the_callers_transaction_intact(city: Path) -> None:
    # the old check probed with a second BEGIN, whose failure aborted the caller's transaction:
    # its uncommitted work was lost
    with duckdb.connect(str(city)) as con:
        load(con)
        con.execute("CREATE TABLE work (i INTEGER)")
        con.execute("BEGIN")
        con.execute("INSERT INTO work VALUES (1)")
        with pytest.raises(InputError, match="transaction"):
            set_budget(con, "trips", rho=5)
        con.execute("INSERT INTO work VALUES (2)")
        con.execute("COMMIT")
        assert con.execute("SELECT count(*) FROM work").fetchall() == [(2,)]


SETTERS = ["SELECT inftda_set_budget('trips', rho := 5)",
           "SELECT inftda_require_budget(required := false)"]


@pytest.mark.parametrize("sql", SETTERS)
def test_sql_setters_inside_begin_rollback_are_refused_and_change_nothing(
    city: Path, sql: str,
) -> None:
    import io

    from inftda_duckdb.tools.shell import Shell

    with duckdb.connect(str(city)) as con:
        load(con)
        inftda_duckdb.require_budget(con)
        before = inftda_duckdb.budget(con).to_pylist()
        err = io.StringIO()
        shell = Shell(con, io.StringIO(), err, interactive=True)
        assert shell.execute("BEGIN")
        assert not shell.execute(sql)
        assert "refused inside an open transaction" in err.getvalue()
        assert shell.execute("ROLLBACK")
        assert inftda_duckdb.budget(con).to_pylist() == before
        with pytest.raises(BudgetExceededError):  # the cap and require_budget both still hold
            release(con, "trips", ["x"], rho="1/2", domains=DOM)
        table(con, "other", 30)
        with pytest.raises(BudgetExceededError, match="no budget covers it"):
            release(con, "other", ["x"], rho="1/100", domains=DOM)
        assert shell.execute(sql)  # outside a transaction the shell runs it (negative control)
        if "set_budget" in sql:
            assert inftda_duckdb.budget(con).to_pylist() != before
        else:
            release(con, "other", ["x"], rho="1/100", domains=DOM)


@pytest.mark.parametrize("sql", SETTERS)
def test_sql_setters_refuse_where_nobody_checked_for_a_transaction(city: Path, sql: str) -> None:
    # a SQL function cannot tell BEGIN ... from autocommit: unvouched, it refuses either way
    with duckdb.connect(str(city)) as con:
        load(con)
        inftda_duckdb.require_budget(con)
        before = inftda_duckdb.budget(con).to_pylist()
        for begin in (False, True):
            if begin:
                con.execute("BEGIN")
            with pytest.raises(duckdb.Error, match="cannot tell whether it runs inside"):
                con.execute(sql).fetchall()
            if begin:
                con.execute("ROLLBACK")
        assert inftda_duckdb.budget(con).to_pylist() == before


def test_a_voucher_belongs_to_one_connection_and_one_statement(city: Path) -> None:
    from inftda_duckdb.duckdb.budgets import outside_transaction

    with duckdb.connect(str(city)) as con:
        load(con)
        other = con.cursor()
        other.execute("BEGIN")
        sql = SETTERS[0]
        with outside_transaction(con, sql):  # vouches for con, not for the cursor inside BEGIN
            with pytest.raises(duckdb.Error, match="cannot tell whether it runs inside"):
                other.execute(sql).fetchall()
            con.execute(sql).fetchall()  # negative control: the vouched connection may
        other.execute("ROLLBACK")
        with pytest.raises(duckdb.Error, match="cannot tell whether it runs inside"):
            con.execute(sql).fetchall()  # the voucher died with the block
        with (pytest.raises(InputError, match="exactly one statement"),
              outside_transaction(con, f"BEGIN; {sql}")):
            pass


# ---------------------------------------------------------------------------------------------
# one ledger shared by two processes on two data files


WORKER = textwrap.dedent("""
    import sys, duckdb
    from fractions import Fraction
    from inftda_duckdb import load, release, BudgetExceededError
    con = duckdb.connect(sys.argv[1])
    con.execute("SET enable_progress_bar = false")
    load(con, ledger=sys.argv[2])
    ok = 0
    for _ in range(8):
        try:
            release(con, "trips", ["x"], rho=Fraction(1, 7), domains={"x": [0, 1, 2]})
            ok += 1
        except BudgetExceededError:
            pass
    print(ok)
""")


def test_two_processes_on_two_data_files_share_one_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "budget.duckdb"
    files = [tmp_path / "a.duckdb", tmp_path / "b.duckdb"]
    for path in files:
        with duckdb.connect(str(path)) as con:
            table(con, "trips", 300)
    with duckdb.connect() as con:
        load(con, ledger=str(ledger))
        con.execute(f"ATTACH '{files[0]}' AS a")
        con.execute(f"ATTACH '{files[1]}' AS b")
        set_budget(con, ["a.main.trips", "b.main.trips"], name="people", rho=1)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(f), str(ledger)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for f in files]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(int(out.split()[-1]) for out, _ in outs) == 7  # floor(1 / (1/7)): no overspend
    with duckdb.connect(str(ledger), read_only=True) as con:
        spent = [Fraction(r) for (r,) in con.execute("SELECT rho FROM inftda_ledger").fetchall()]
    assert sum(spent) == 1
