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



@pytest.fixture
def db(files: Path, tmp_path: Path) -> Path:
    """This test's own copy of the sample database (trips, a budget of 10)."""
    copy = tmp_path / "t.duckdb"
    copy.write_bytes((files / "trips.duckdb").read_bytes())
    return copy


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
    assert err.splitlines()[-1].startswith(  # after the notice that no budget covers it
        "Error: rho 0.25 on trips.parquet was charged, ledger id 1 (that budget is spent) but "
        "nothing was written: "), err
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


def test_shell_says_what_a_statement_charged(db: Path) -> None:
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


def test_public_shell_refuses_private_tables(db: Path, files: Path) -> None:
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


def test_misspelled_parameter_explained_wherever_duckdb_raises_it(tmp_path: Path) -> None:
    # DuckDB's binder error listed the macro's candidates; no word of which name was wrong
    import inftda_duckdb

    con = duckdb.connect()
    load(con)
    con.execute("CREATE TABLE t AS SELECT 1 AS a")
    for run in (con.sql, con.execute):
        with pytest.raises(duckdb.BinderException) as info:
            run("SELECT * FROM inftda_release('t', ['a'],\n rhoo := 2)")
        assert (inftda_duckdb.explain(info.value) or "").startswith(
            "inftda_release has no parameter rhoo (did you mean rho?)")  # found in the frame
    assert inftda_duckdb.explain(ValueError("x")) is None
    assert "DuckDB does not say which" in (duckdb_hint(str(info.value)) or "")
    script = tmp_path / "s.py"  # uncaught in a script: a note under DuckDB's message
    script.write_text("import duckdb, inftda_duckdb\ncon = duckdb.connect()\n"
                      "inftda_duckdb.load(con)\ncon.execute('CREATE TABLE t AS SELECT 1 AS a')\n"
                      "con.sql(\"SELECT * FROM inftda_preview('t', ['a'], \"\n"
                      "        \"epsilonn := 1)\")\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1
    assert "\ninftda_duckdb: inftda_preview has no parameter epsilonn (did you mean epsilon?). " \
           "Valid parameters: source, columns, rho, epsilon, " in result.stderr, result.stderr
    assert result.stderr.rstrip().endswith(
        "Fix: spell the parameter as listed, e.g. inftda_preview(..., rho := 0.5)")


def test_misspelled_parameter_explained_in_ipython_and_jupysql() -> None:
    pytest.importorskip("IPython")
    pytest.importorskip("sql")  # jupysql
    code = ("from IPython.testing.globalipapp import start_ipython\nip = start_ipython()\n"
            "for cell in ('import duckdb, inftda_duckdb\\ncon = duckdb.connect()\\n"
            "inftda_duckdb.load(con)\\ncon.execute(\"CREATE TABLE t AS SELECT 1 AS a\")', "
            "'con.sql(\"SELECT * FROM inftda_release(\\'t\\', [\\'a\\'], rhoo := 2)\")', "
            "'%load_ext sql', '%sql con', "
            "'%sql SELECT * FROM inftda_release(\\'t\\', [\\'a\\'], rhoo := 2)'):\n"
            "    ip.run_cell(cell, store_history=True)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    said = "inftda_duckdb: inftda_release has no parameter rhoo (did you mean rho?)"
    assert (result.stdout + result.stderr).count(said) == 2, result.stdout + result.stderr


# ------------------------------------------------------------ budgets the user did not know


def test_a_source_no_budget_covers_is_said_once(db: Path, files: Path, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    # a copy of the data was charged to a new, uncapped key without a word
    con = duckdb.connect(str(db))
    try:
        load(con)
        con.execute("CREATE TABLE copy AS SELECT * FROM trips")
        with caplog.at_level("WARNING", logger="inftda_duckdb"):
            release(con, "copy", ["hour"], rho=0.25, domains={"hour": range(24)})
            release(con, "copy", ["hour"], rho=0.25, domains={"hour": range(24)})  # once
        assert [r.getMessage() for r in caplog.records] == [
            "no budget covers t.main.copy: rho 0.25 was charged to it without a cap (a copy or "
            "an export of data is a new source, with its own account). Fix: cap it with "
            "set_budget(con, 't.main.copy', rho=...), or refuse every release no budget covers "
            "with require_budget(con)"]
        con.execute("CREATE TABLE copy2 AS SELECT * FROM trips")
        caplog.clear()
        with caplog.at_level("WARNING", logger="inftda_duckdb"):
            con.sql("SELECT * FROM inftda_release('copy2', ['hour'], rho := 0.25, "
                    "domains := {'hour': range(24)})").fetchall()
            con.sql("SELECT * FROM inftda_release('trips', ['hour'], rho := 0.25, "
                    "domains := {'hour': range(24)})").fetchall()  # covered: nothing said
        assert [r.getMessage()[:57] for r in caplog.records] == [
            "no budget covers t.main.copy2: rho 0.25 was charged to it"]
        assert "require_budget(con) from Python (or SELECT inftda_require_budget() in " \
               "inftda-duckdb shell)" in caplog.records[0].getMessage()
    finally:
        con.close()
    ledger = tmp_path / "l.duckdb"
    result = cli("release", "--input", "trips.parquet", "--columns", "hour", "--domain",
                 "hour=0..23", "--rho", "0.25", "--output", tmp_path / "o.parquet", "--ledger",
                 ledger, "--quiet", cwd=files)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"WARNING: no budget covers {files / 'trips.parquet'}: rho "
                                    "0.25 was charged to it without a cap")
    assert result.stderr.rstrip().endswith(
        f"Fix: cap it with inftda-duckdb budget --ledger {ledger} --set "
        f"file:{files / 'trips.parquet'} --rho ..., or refuse every release no budget covers "
        f"with inftda-duckdb budget --ledger {ledger} --require-budget on")


def test_budget_hints_work_where_the_caller_stands(db: Path, files: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    over = ("SELECT * FROM inftda_release('trips', ['hour'], rho := 50, "
            "domains := {'hour': range(24)})")
    con = duckdb.connect(str(db))
    try:
        load(con)
        with pytest.raises(duckdb.Error) as info:
            con.sql(over).fetchall()  # the hint was SELECT inftda_set_budget(...): refused
    finally:
        con.close()
    first = str(info.value).splitlines()[0]  # DuckDB 1.5 appends the Python stack ("At:")
    assert first.endswith("raise the budget with set_budget(con, 't.main.trips', "
                          "rho=...) from Python (or SELECT inftda_set_budget("
                          "'t.main.trips', rho := ...) in inftda-duckdb shell)")
    shell = cli("shell", db, "-c", over)
    assert shell.returncode == 3
    assert shell.stderr.rstrip().endswith(
        "raise the budget with SELECT inftda_set_budget('t.main.trips', rho := ...)")
    ledger = tmp_path / "l.duckdb"
    release_args = ["release", "--input", "trips.parquet", "--columns", "hour", "--domain",
                    "hour=0..23", "--output", tmp_path / "o.parquet", "--quiet"]
    assert cli("budget", "--ledger", ledger, "--set", f"file:{files / 'trips.parquet'}",
               "--rho", "1").returncode == 0
    named = cli(*release_args, "--rho", "5", "--ledger", ledger, cwd=files)
    monkeypatch.setenv("INFTDA_LEDGER", str(ledger))
    from_env = cli(*release_args, "--rho", "5", cwd=files)
    for refused in (named, from_env):  # was: inftda-duckdb budget DATABASE --set ...
        assert refused.returncode == 3, refused.stderr
        assert refused.stderr.rstrip().endswith(
            f"raise the budget with inftda-duckdb budget --ledger {ledger} --set "
            f"file:{files / 'trips.parquet'} --rho ..."), refused.stderr


def test_spark_failure_after_the_charge_exits_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # Spark's command line said exit 2 (input error) for a write that failed after the charge
    pytest.importorskip("pyspark")
    import json
    import types

    from inftda_duckdb.tools.cli import spark as spark_command

    record = {"rho": "1/4", "source": "file:/data/trips.parquet", "ledger_id": "7",
              "private": "true"}
    result = types.SimpleNamespace(schema=[types.SimpleNamespace(
        metadata={"inftda": json.dumps(record)})], write=None)
    fake = types.SimpleNamespace(sparkContext=types.SimpleNamespace(master="local[1]"))

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spark_command, "session", lambda master: (fake, False))
    monkeypatch.setattr(spark_command, "source", lambda spark, args: "trips")
    monkeypatch.setattr(spark_command, "release", lambda *a, **k: result)
    monkeypatch.setattr(spark_command, "run_tagged", full)
    status = main(["release", "--engine", "spark", "--table", "trips", "--columns", "hour",
                   "--rho", "1/4", "--domain", "hour=0..23", "--into-table", "out",
                   "--ledger", str(tmp_path / "l.duckdb"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 4, err
    assert err == ("Error: rho 0.25 on file:/data/trips.parquet was charged, ledger id 7 (that "
                   "budget is spent) but nothing was written: [Errno 28] No space left on "
                   "device. Fix: remove the cause and release again (a new release, charged "
                   "again)\n")


def test_a_release_statement_run_again_is_said(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    # jupysql's %%sql --save re-ran (and re-charged) the release wherever it was used, silently
    q = ("SELECT * FROM inftda_release('trips', ['hour'], rho := 0.25, "
         "domains := {'hour': range(24)})")
    with duckdb.connect(str(db)) as con:
        load(con)
        with caplog.at_level("WARNING", logger="inftda_duckdb"):
            con.sql(q).fetchall()
            con.sql(q.replace("0.25", "0.5")).fetchall()  # another statement: nothing said
            assert caplog.records == []
            con.sql(f"WITH dp AS ({q}) SELECT count(*) FROM dp").fetchall()
    assert [r.getMessage() for r in caplog.records] == [
        "this release statement ran before on this connection, and ran again: a new release "
        "with fresh noise, charged again (rho 0.25 on t.main.trips). A saved query (jupysql's "
        "%%sql --save) runs it again wherever it is used. Fix: keep one result, CREATE TABLE "
        "name AS SELECT * FROM inftda_release(...), and query the table"]
