"""The SQL shell: statement splitting, error messages, and the shell driven through a pipe and
through a pseudo-terminal (prompts, multi-line statements, aligned box output, history)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import duckdb
import pytest

from inftda_duckdb.tools.demo import load_sample
from inftda_duckdb.tools.shell import split_statements
from inftda_duckdb.tools.status import clean_message

ROWS = 2000


def shell(db: Path, text: str) -> subprocess.CompletedProcess[str]:
    """``printf TEXT | python -m inftda_duckdb.tools.cli shell DB``."""
    return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", "shell", str(db)],
                          input=text, capture_output=True, text=True, timeout=300)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "trips.duckdb"
    with duckdb.connect(str(path)) as con:
        load_sample(con, "trips", ROWS)
    return path


def width(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def assert_box(text: str) -> None:
    """Every line of every box table in ``text`` has the width of its top border."""
    lines = text.splitlines()
    tops = [i for i, line in enumerate(lines) if line.startswith("┌")]
    assert tops, text
    for top in tops:
        end = next(i for i in range(top, len(lines)) if lines[i].startswith("└"))
        assert {width(line) for line in lines[top:end + 1]} == {width(lines[top])}, text


# ---------------------------------------------------------------------------- statement splitting


@pytest.mark.parametrize(("text", "statements", "rest"), [
    ("SELECT 1;", ["SELECT 1"], ""),
    ("SELECT 1; SELECT 2;\nSELECT", ["SELECT 1", "SELECT 2"], "\nSELECT"),
    ("SELECT ';' AS x;", ["SELECT ';' AS x"], ""),
    ("SELECT 'it''s;';", ["SELECT 'it''s;'"], ""),
    ('SELECT 1 AS ";";', ['SELECT 1 AS ";"'], ""),
    ("SELECT 1 -- not; the end\n;", ["SELECT 1 -- not; the end"], ""),
    ("SELECT /* ; */ 1;", ["SELECT /* ; */ 1"], ""),
    ("SELECT $$a;b$$;", ["SELECT $$a;b$$"], ""),
    ("SELECT 'open;", [], "SELECT 'open;"),
    (";;  ;", [], ""),
])
def test_split_statements(text: str, statements: list[str], rest: str) -> None:
    assert split_statements(text) == (statements, rest)


def test_clean_message_strips_duckdb_udf_wrapper() -> None:
    error = duckdb.InvalidInputException(
        "Invalid Input Error: Python exception occurred while executing the UDF: "
        "InputError: rho must be positive; got -1. Fix: pass rho := 0.5")
    assert clean_message(error) == "rho must be positive; got -1. Fix: pass rho := 0.5"
    other = duckdb.CatalogException("Catalog Error: Table with name nope does not exist!")
    assert clean_message(other) == str(other)


# ---------------------------------------------------------------------------- through a pipe


def test_pipe_runs_statements_and_persists(db: Path) -> None:
    result = shell(db, "SELECT 40 + 2 AS answer,\n  'multi line' AS how;\n"
                       "CREATE TABLE t AS SELECT 7 AS x; SELECT * FROM t;\n")
    assert result.returncode == 0, result.stderr
    assert "answer" in result.stdout and "42" in result.stdout and "multi line" in result.stdout
    assert "Count" not in result.stdout  # DDL prints nothing, as in DuckDB's shell
    assert_box(result.stdout)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT x FROM t").fetchall() == [(7,)]


def test_pipe_release_and_dot_commands(db: Path) -> None:
    result = shell(db, """
SELECT sum(count) AS total FROM inftda_release('trips', ['origin', 'hour'], rho := 1,
                                                domains := {'hour': range(24)});
.tables
.schema trips
.budget
.ledger
.help
.quit
SELECT 'after quit' AS never;
""")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f" {ROWS} │" in out  # released counts sum to the public row count
    assert "trips" in out and "CREATE TABLE" in out and "Dot commands" in out
    assert "spent_rho" in out and "[origin, hour]" in out, out
    assert "after quit" not in out
    assert_box(out)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(1,)]


def test_pipe_stops_at_the_first_error(db: Path) -> None:
    result = shell(db, "SELECT 1 AS one;\nSELECT * FROM nope;\nCREATE TABLE never AS SELECT 1;\n")
    assert result.returncode == 2  # an input error
    assert result.stderr.startswith("Error: ") and "nope" in result.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        names = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "never" not in names


def test_pipe_release_error_is_clean(db: Path) -> None:
    result = shell(db, "SELECT * FROM inftda_release('trips', ['origin'], rho := -1);\n")
    assert result.returncode == 2
    assert result.stderr.startswith("Error: ") and "rho" in result.stderr
    assert "Python exception occurred" not in result.stderr
    assert "rho := 0.5" in result.stderr  # the fix speaks SQL
    assert shell(db, ".frobnicate\n").returncode == 2


# ---------------------------------------------------------------------------- through a terminal


def read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 60) -> None:
    """Read from ``fd`` into ``seen`` until ``marker`` appears after the current end."""
    start = len(seen)
    deadline = time.monotonic() + timeout
    while marker not in seen[start:]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out waiting for {marker!r}; got {bytes(seen)!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"EOF before {marker!r}; got {bytes(seen)!r}")
            seen += chunk


def test_pseudo_terminal_prompts_multiline_box_and_history(db: Path, tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    history = tmp_path / "history"
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="dumb", INFTDA_DUCKDB_HISTORY=str(history), COLUMNS="100")
    process = subprocess.Popen([sys.executable, "-m", "inftda_duckdb.tools.cli", "shell", str(db)],
                               stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen = bytearray()
    try:
        read_until(master, b"inftda> ", seen)
        assert b".help" in seen  # the banner
        os.write(master, b"SELECT origin, count(*) AS n\n")
        read_until(master, b"...> ", seen)  # the continuation prompt
        os.write(master, b"FROM trips GROUP BY origin ORDER BY n DESC;\n")
        read_until(master, b"inftda> ", seen)
        os.write(master, b"SELECT * FROM nope;\n")
        read_until(master, b"inftda> ", seen)  # an error does not end an interactive shell
        os.write(master, b".quit\n")
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    text = seen.decode("utf-8", "replace").replace("\r\n", "\n")
    assert "Manhattan" in text and "Error:" in text and "nope" in text
    box = text[text.index("┌"): text.index("┘") + 1]
    assert_box(box)
    assert "SELECT origin, count(*) AS n" in history.read_text()


# ---------------------------------------------------------------------------- -c, .read, .mode


def run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", "shell",
                           *map(str, args)], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def test_command_option_modes_and_read(db: Path, tmp_path: Path) -> None:
    # before: the shell had no -c, .mode or .read
    result = run(db, "-c", "SELECT 40 + 2 AS answer", "--format", "csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "answer\n42\n"
    script = tmp_path / "script.sql"
    script.write_text(".mode json\nCREATE TABLE dp AS SELECT * FROM inftda_release('trips', "
                      "['origin'], rho := 1/4);\nSELECT sum(count) AS n FROM dp;\n")
    result = run(db, "-c", f".read {script}", "-c", ".ledger")
    assert result.returncode == 0, result.stderr
    assert '"n": 2000' in result.stdout and '"rho_decimal": "0.25"' in result.stdout
    assert '"rho": "1/4"' in result.stdout
    failed = run(db, "-c", f".read {tmp_path / 'missing.sql'}", "-c", "SELECT 1")
    assert failed.returncode == 2 and failed.stdout == ""


def test_exit_status_of_a_refused_release(db: Path) -> None:
    result = run(db, "-c", "SELECT inftda_set_budget('trips', rho := 0);",
                 "-c", "SELECT * FROM inftda_release('trips', ['origin'], rho := 1)")
    assert result.returncode == 3, result.stderr
    assert "refused" in result.stderr and "SELECT inftda_set_budget('memory" not in result.stderr


def test_misspelled_parameter_names_the_valid_ones(db: Path) -> None:
    result = run(db, "-c", "SELECT * FROM inftda_release('trips', ['origin'], rho := 1, "
                 "domain := {'hour': range(24)})")
    assert result.returncode == 2
    assert "inftda_release has no parameter domain (did you mean domains?)" in result.stderr
    assert "Valid parameters: source, columns, rho" in result.stderr
