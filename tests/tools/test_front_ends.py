"""Front ends that say what happened (issues 33 and 35): each test asserts what a person reads
(the text, the exit status, what was charged) and failed before its change."""

from __future__ import annotations

import io
import readline
import subprocess
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from inftda_duckdb import load, release, set_budget
from inftda_duckdb.core.errors import ReleaseInterrupted, duckdb_hint, number, shown
from inftda_duckdb.core.topdown import LevelProgress
from inftda_duckdb.duckdb import progress as engine_progress
from inftda_duckdb.duckdb.progress import ScanProgress
from inftda_duckdb.tools import shell as shell_module
from inftda_duckdb.tools.cli import main
from inftda_duckdb.tools.demo import load_sample
from inftda_duckdb.tools.status import error_text

ORIGINS = "origin=Manhattan,Brooklyn,Queens,Bronx,Staten Island"


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("front")
    with duckdb.connect(str(folder / "trips.duckdb")) as con:
        load(con)
        load_sample(con, "trips", 2000)
        con.execute(f"COPY trips TO '{folder / 'trips.parquet'}' (FORMAT parquet)")
        set_budget(con, "trips", rho=10)
    return folder


def ledger_count(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return int(con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])


# ------------------------------------------------------------------------------- numbers


def test_numbers_for_people_decimal_first() -> None:
    assert number(Fraction(1, 2)) == "0.5" and number(Fraction(1, 3)) == "~0.333333"
    assert number(Fraction(1, 3), "down") == "0.333333" and number(Fraction(2, 3), "down") == \
        "0.666666"  # never above the value: it can be passed back as a request
    assert shown([Fraction(1), Fraction(2, 3)]) == "[1, 2/3]"  # was [Fraction(1, 1), ...]


# ------------------------------------------------------------------------ the command line


def test_argparse_error_is_one_line_with_a_suggestion() -> None:
    result = cli("release", "--input", "x.parquet", "--columns", "a", "--neighbours", "subst")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr  # was 15 lines of usage first
    assert result.stderr.startswith("Error: argument --neighbours: invalid choice")
    assert "Did you mean substitute?" in result.stderr
    rho = cli("release", "--input", "x.parquet", "--columns", "a", "--rho", "x")
    assert rho.stderr.startswith("Error: --rho must be a finite number")  # named once


def test_names_the_user_wrote(files: Path) -> None:
    common = ["release", "--input", "trips.parquet", "--rho", "0.5", "--output", "out.parquet",
              "--ledger", ":memory:", "--quiet"]
    unit = cli(*common, "--columns", "origin,hour", "--domain", ORIGINS, "--domain",
               "hour=0..23", "--privacy-unit", "nope", cwd=files)
    assert unit.returncode == 2
    assert unit.stderr.startswith("Error: --privacy-unit not found in trips.parquet; got 'nope'")
    typo = cli(*common, "--columns", "origin,hourr", cwd=files)
    assert "Error: --columns not found in trips.parquet; got ['hourr']. Fix: did you mean " \
           "hour?" in typo.stderr  # was: not found in inftda_source_ce43a834...
    weights = cli(*common, "--columns", "origin,dest,hour", "--level-weights", "1,2", cwd=files)
    assert "--level-weights must have 3 weights, one per level; got [1, 2]" in weights.stderr


def test_domain_range_stays_a_range(files: Path) -> None:
    # D7: was expanded into a list of 10**9 values until the process was killed
    preview = cli("preview", "--input", "trips.parquet", "--columns", "hour", "--rho", "0.5",
                  "--domain", "hour=0..999999999", "--format", "csv", cwd=files)
    assert preview.returncode == 0, preview.stderr
    assert ",hour,1000000000," in preview.stdout
    wide = cli("release", "--input", "trips.parquet", "--columns", "hour", "--rho", "0.5",
               "--domain", "hour=0..99999999999", "--output", "o.parquet", "--ledger",
               ":memory:", cwd=files)
    assert wide.returncode == 2 and "internal error" not in wide.stderr  # was exit 1, "a bug"
    assert "100,000,000,000 values, above the 2,147,483,648" in wide.stderr


def test_failure_after_the_charge_has_its_own_status(files: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # D8: the output could not be written after the charge: was exit 2, "nothing was charged"
    from inftda_duckdb.tools.cli import release as release_command

    def broken(*args: object) -> list[str]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(release_command, "write_release", broken)
    ledger = tmp_path / "ledger.duckdb"
    status = main(["release", "--input", str(files / "trips.parquet"), "--columns", "hour",
                   "--rho", "1/4", "--domain", "hour=0..23", "--output",
                   str(tmp_path / "out.parquet"), "--ledger", str(ledger), "--quiet"])
    err = capsys.readouterr().err
    assert status == 4, err
    assert err.startswith("Error: rho 0.25 on trips.parquet was charged, ledger id 1 "
                          "(that budget is spent) but nothing was written: "), err
    assert "No space left on device" in err and ledger_count(ledger) == 1
    assert not (tmp_path / "out.parquet").exists()
    assert "4    failed after the release was charged" in cli("release", "--help").stdout


def test_release_line_and_provenance_name_the_file_not_the_folder(files: Path) -> None:
    out = files / "named.parquet"
    result = cli("release", "--input", "trips.parquet", "--columns", "hour", "--epsilon", "1",
                 "--delta", "1e-6", "--domain", "hour=0..23", "--output", out, "--ledger",
                 ":memory:", "--overwrite", cwd=files)
    assert result.returncode == 0, result.stderr
    # decimal first: was "rho 12177985179769186447/500000000000000000000 (~0.024356)"
    assert "released 24 rows: charged rho ~0.024356 on trips.parquet, ledger id 1" in \
        result.stderr
    with duckdb.connect() as con:
        meta = dict(con.execute("SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
                                [str(out)]).fetchall())
    assert meta["source"] == "trips.parquet"  # was the curator's absolute path
    assert meta["rho"].count("/") == 1  # exact in the metadata


# ------------------------------------------------------------------------------- the shell


def test_each_dash_c_is_one_command(files: Path) -> None:
    # D14: the two were glued into "SELECT 1 SELECT 2" (a syntax error)
    result = cli("shell", "-c", "SELECT 41 + 1 AS a", "-c", "SELECT 'two' AS b", "--format",
                 "csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "a\n42\nb\ntwo\n"


def test_shell_says_what_a_statement_charged(files: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    db.write_bytes((files / "trips.duckdb").read_bytes())
    result = cli("shell", db, "-c",
                 "CREATE TABLE dp AS SELECT * FROM inftda_release('trips', ['origin'], "
                 "rho := 0.5)")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "charged rho 0.5 on t.main.trips (ledger id 1)\n"  # was silent


def test_shell_interrupt_after_the_charge_says_it_was_charged(files: Path,
                                                              tmp_path: Path) -> None:
    # D6: "nothing was charged" while the ledger showed the charge
    text = error_text(ReleaseInterrupted("the release was interrupted after its budget was "
                                         "charged (rho 1/2 on t is spent, as the ledger "
                                         "records); nothing was returned", True))
    assert "after its budget was charged" in text and "nothing was charged" not in text

    class Stopped(io.StringIO):  # Ctrl-C while the result prints, after the charge
        def write(self, s: str) -> int:
            raise KeyboardInterrupt

    con = duckdb.connect(str(files / "trips.duckdb"))
    try:
        load(con)
        err = io.StringIO()
        sh = shell_module.Shell(con, Stopped(), err, interactive=True)
        sh.seen = set()
        before = con.execute("SELECT coalesce(max(id), 0) FROM inftda_ledger").fetchall()[0][0]
        sh.seen = {(r["ledger"], r["id"]) for r in con.sql(
            "SELECT * FROM inftda_releases()").to_arrow_table().to_pylist()}
        assert not sh.execute("SELECT * FROM inftda_release('trips', ['origin'], rho := 0.5)")
    finally:
        con.close()
    assert err.getvalue().endswith("Error: interrupted (Ctrl-C): the release was charged "
                                   f"(rho 0.5 on trips.main.trips (ledger id {before + 1}): its "
                                   "budget is spent) but nothing was returned\n")
    assert sh.status == 130


def test_public_shell_refuses_private_tables(files: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    db.write_bytes((files / "trips.duckdb").read_bytes())
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE VIEW v AS SELECT * FROM trips")
        con.execute("CREATE MACRO leak() AS (SELECT count(*) FROM trips)")
    public = ["shell", db, "--public", "--format", "csv", "-c"]
    for sql in ("SELECT count(*) FROM trips", "SELECT count(*) FROM v",
                "SELECT (SELECT count(*) FROM main.trips)", "SELECT leak()",
                "WITH trips AS (SELECT 1) SELECT * FROM trips",
                "SELECT * FROM read_parquet('trips.parquet')", "SELECT * FROM duckdb_tables()",
                "EXPLAIN SELECT * FROM trips", "COPY trips TO 'x.csv'",
                "CREATE TABLE x AS SELECT * FROM trips"):
        result = cli(*public, sql, cwd=files)
        assert result.returncode == 2, (sql, result.stdout)  # was 0 and the true count
        assert result.stderr.startswith("Error: the public shell refuses "), (sql, result.stderr)
        assert "2000" not in result.stdout
    released = cli(*public, "CREATE TABLE dp AS SELECT * FROM inftda_release('trips', "
                   "['origin'], rho := 0.5, domains := {'origin': ['Manhattan', 'Brooklyn', "
                   "'Queens', 'Bronx', 'Staten Island']})", "-c", "SELECT count(*) AS n FROM dp",
                   cwd=files)
    assert released.returncode == 0, released.stderr
    assert released.stdout == "n\n5\n" and "charged rho 0.5" in released.stderr
    assert "released or declared public tables" in cli("shell", "--help").stdout


def test_shell_read_and_schema_of_what_does_not_exist(tmp_path: Path) -> None:
    missing = cli("shell", "-c", ".read nope.sql", cwd=tmp_path)
    assert missing.returncode == 2  # was a raw "[Errno 2] No such file or directory: ..."
    assert missing.stderr == ("Error: .read cannot read nope.sql: No such file or directory. "
                              "Fix: check the path (relative to the folder the shell was "
                              "started in)\n")
    schema = cli("shell", "-c", ".schema nope")
    assert schema.returncode == 2 and schema.stdout == ""  # was an empty table, status 0
    assert schema.stderr == "Error: .schema: no table or view named nope. Fix: .tables lists " \
        "them\n"


def test_a_multi_line_statement_is_one_history_entry() -> None:
    readline.clear_history()
    for line in ("SELECT 1", "  + 1", "AS two;"):
        readline.add_history(line)
    shell_module._one_entry(readline, ["SELECT 1", "  + 1", "AS two;"])
    assert readline.get_current_history_length() == 1
    assert readline.get_history_item(1) == "SELECT 1\n  + 1\nAS two;"  # up-arrow: the whole


# ------------------------------------------------------------------------- Python and SQL


def test_forgotten_load_and_misspelled_parameter_are_explained() -> None:
    missing = ("Catalog Error: Scalar Function with name inftda_release_sql_3 does not exist!\n"
               'Did you mean "inftda_require_budget"?')
    assert duckdb_hint(missing).endswith(
        "Fix: call inftda_duckdb.load(con), or use inftda-duckdb shell")
    con = duckdb.connect()
    load(con)
    con.execute("CREATE TABLE t AS SELECT 1 AS a")
    sql = "SELECT * FROM inftda_release('t', ['a'], rhoo := 2)"
    with pytest.raises(duckdb.BinderException) as info:
        con.sql(sql)
    assert duckdb_hint(str(info.value), sql).startswith(
        "inftda_release has no parameter rhoo (did you mean rho?)")
    result = cli("shell", "-c", "CREATE TABLE t AS SELECT 1 AS a", "-c", sql)
    assert result.stderr.startswith("Error: inftda_release has no parameter rhoo (did you mean "
                                    "rho?)")


def test_progress_from_the_first_second(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # the hook fired only for the levels, after the scan (21 s of a 25 s release)
    monkeypatch.setattr(engine_progress, "FIRST", 0.2)
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 7)::INT AS a, (i % 5)::INT AS b "
                "FROM range(1000) t(i)")
    con.create_function("slow", lambda x: time.sleep(0.002) or x, ["INTEGER"], "INTEGER",
                        side_effects=True)  # a source that takes seconds to read
    con.execute("CREATE VIEW v AS SELECT slow(a) AS a, b FROM t")
    seen: list[ScanProgress | LevelProgress] = []
    release(con, "v", ["a", "b"], rho=1, domains={"a": range(7), "b": range(5)},
            progress=seen.append)
    assert isinstance(seen[0], ScanProgress) and seen[0].seconds < 1.0
    assert [type(p) for p in seen][-2:] == [LevelProgress, LevelProgress]
    first_level = next(i for i, p in enumerate(seen) if isinstance(p, LevelProgress))
    assert all(isinstance(p, LevelProgress) for p in seen[first_level:])
    # a notebook shows it by default, as lines on stderr
    monkeypatch.setattr("inftda_duckdb.duckdb.api.in_notebook", lambda: True)
    capsys.readouterr()
    release(con, "v", ["a", "b"], rho=1, domains={"a": range(7), "b": range(5)})
    err = capsys.readouterr().err
    assert "] reading the data: " in err and "] level 2/2: " in err
    assert threading.active_count() < 50
