"""A wheel of the package (not an editable install) in a fresh virtual environment runs the demo
and one SQL release: the SQL templates and every module ship inside the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SQL_RELEASE = """
import duckdb, inftda_duckdb
from inftda_duckdb.duckdb.extension import load
from inftda_duckdb.tools.demo import load_sample
con = duckdb.connect()
load(con)
load_sample(con, "trips", 5000)
rows = con.sql("SELECT sum(count) FROM inftda_release('trips', ['origin', 'dest', 'hour'], "
               "rho := 0.5, domains := {'hour': range(24)})").fetchall()
assert rows == [(5000,)], rows
print("released from", inftda_duckdb.__file__)
"""


@pytest.mark.slow
def test_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    (wheel,) = dist.glob("inftda_duckdb-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped_sql = {n for n in names if n.startswith("inftda_duckdb/sql/") and n.endswith(".sql")}
    repo_sql = {f"inftda_duckdb/sql/{p.name}" for p in (ROOT / "sql").glob("*.sql")}
    assert repo_sql and shipped_sql == repo_sql
    package = ROOT / "inftda_duckdb"
    modules = {f"inftda_duckdb/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    assert modules <= set(names)
    assert any(n.endswith("entry_points.txt") for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=900)
    work = tmp_path / "work"  # outside the repository: nothing can be imported from the source
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    demo = subprocess.run([str(bin_dir / "inftda-duckdb"), "demo", "--rows", "20000"],
                          capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert demo.returncode == 0, demo.stderr
    assert "max_abs_error" in demo.stdout and "bound" in demo.stdout
    sql = subprocess.run([str(bin_dir / "python"), "-c", SQL_RELEASE], capture_output=True,
                         text=True, cwd=work, env=env, timeout=600)
    assert sql.returncode == 0, sql.stderr
    assert str(venv) in sql.stdout and str(ROOT) not in sql.stdout
