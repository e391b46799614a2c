"""The reference in docs/ is complete and correct against the code: the option tables (between
``<!-- options:NAME -->`` and ``<!-- /options -->``) list exactly the parameters of the SQL macros
and the flags of ``inftda-duckdb release``; every SQL function and CLI command has a section.
And the two claims of the docs that need more than the docs' own blocks: ``run_all.py`` works,
and DuckDB's own CLI (the newest on PyPI, 1.5.x) opens the files written with storage version
v1.5.0 (marker ``slow``: they install packages or run benchmarks)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import duckdb
import pytest

from inftda_duckdb import load

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def region(page: str, name: str) -> set[str]:
    """The names in the first column of the option table ``name`` of ``page``."""
    text = (REFERENCE / page).read_text()
    body = re.search(rf"<!-- options:{name} -->\n(.*?)<!-- /options -->", text, re.S)
    assert body, f"{page} has no options:{name} region"
    names: set[str] = set()
    for line in body[1].splitlines()[2:]:
        first = line.split("|")[1]
        names.update(re.findall(r"`(-{0,2}[a-z_-]+)", first))
    return names


def macro_parameters(name: str) -> set[str]:
    with duckdb.connect() as con:
        load(con)
        rows = con.execute("SELECT parameters FROM duckdb_functions() "
                           "WHERE function_name = ?", [name]).fetchall()
    return set(rows[0][0])


def test_the_sql_option_tables_list_every_parameter() -> None:
    assert region("sql.md", "release") == macro_parameters("inftda_release")
    assert region("sql.md", "preview") == macro_parameters("inftda_preview")
    assert region("sql.md", "plan") == macro_parameters("inftda_plan")


def test_the_cli_option_table_lists_every_release_flag() -> None:
    from inftda_duckdb.tools.cli import build_parser

    release = parser_commands(build_parser())["release"]
    flags = {s for action in release._actions for s in action.option_strings
             if s.startswith("--") and s != "--help"}
    assert region("cli.md", "cli-release") == flags


def test_every_sql_function_and_cli_command_has_a_section() -> None:
    from inftda_duckdb.tools.cli import build_parser

    sql = (REFERENCE / "sql.md").read_text()
    with duckdb.connect() as con:
        load(con)
        names = {r[0] for r in con.execute(
            "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE 'inftda%' "
            "AND function_type IN ('macro', 'table_macro')").fetchall()}
    assert names and all(f"`{n}(" in sql for n in names), names
    cli = (REFERENCE / "cli.md").read_text()
    commands = set(parser_commands(build_parser()))
    assert all(f"`inftda-duckdb {c}" in cli for c in commands), commands
    python = (REFERENCE / "python.md").read_text()
    import inftda_duckdb

    public = {n for n in inftda_duckdb.__all__ if n[0].islower() and n != "__version__"}
    assert all(f"`{n}(" in python for n in public), public


def parser_commands(parser: Any) -> dict[str, Any]:
    """The subcommands of the CLI's argparse parser, by name."""
    return dict(parser._subparsers._group_actions[0].choices)


@pytest.mark.slow
def test_run_all_regenerates_a_whole_dated_file(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick",
                    "--only", "bench_ledger", "--out", str(out)], check=True, cwd=ROOT,
                   timeout=1800, capture_output=True)
    text = out.read_text()
    assert text.startswith("# Benchmark results\n\nRegenerated whole by `python benchmarks/"
                           "run_all.py --quick --only bench_ledger` on ")
    assert re.findall(r"^## .*$", text, re.M) == ["## bench_ledger.py"]


@pytest.mark.slow
def test_duckdb_cli_1_5_opens_files_written_with_storage_version_1_5(tmp_path: Path) -> None:
    """The setting the CLI-and-ETL how-to documents; a file of storage v2.0 is the control."""
    venv.create(tmp_path / "venv", with_pip=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    subprocess.run([str(tmp_path / "venv" / "bin" / "pip"), "install", "-q", "duckdb-cli"],
                   check=True, env=env, timeout=900, capture_output=True)
    cli = str(tmp_path / "venv" / "bin" / "duckdb")
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("v1.5."), version.stdout  # the newest CLI on PyPI

    def write(name: str, config: dict[str, str]) -> Path:
        path = tmp_path / name
        with duckdb.connect(str(path), config=config) as con:
            load(con)  # the ledger inside the database
            con.execute("CREATE TABLE t AS SELECT range % 3 AS a FROM range(300)")
            con.execute("SELECT * FROM inftda_release('t', ['a'], rho := 1, "
                        "domains := {'a': range(3)})").fetchall()
        return path

    readable = write("v15.duckdb", {"storage_compatibility_version": "v1.5.0"})
    newest = write("v20.duckdb", {})
    ok = subprocess.run([cli, "-readonly", "-csv", str(readable), "-c",
                         "SELECT count(*) FROM inftda_ledger"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.split() == ["count_star()", "1"], ok
    if duckdb.__version__.startswith("2."):
        control = subprocess.run([cli, "-readonly", str(newest), "-c", "SELECT 1"],
                                 capture_output=True, text=True)
        assert control.returncode != 0 and "version number" in control.stderr, control


def test_the_sql_option_tables_are_generated_from_the_option_table() -> None:
    """docs/reference/sql.md's option regions are core/options.py rendered (one place for each
    text): `python -m inftda_duckdb.tools.reference` rewrites them."""
    from inftda_duckdb.tools import reference

    assert reference.main(["--docs", str(REFERENCE), "--check"]) == 0
    page = (REFERENCE / "sql.md").read_text()
    edited = page.replace("exploration only", "exploration, only")  # negative control
    assert reference.regenerate(edited, ("release", "preview")) != edited
