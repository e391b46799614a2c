"""A UDF outliving the connection that registered it: DuckDB keeps only a borrowed reference
to a Python UDF's function, and its name is instance-wide. After a cursor that loaded the
package was closed, any connection calling the functions (through the macros every cursor
finds in the default database, or a numbered UDF by name) crashed the process with SIGSEGV.

Each case runs in a child process, so a crash fails the test instead of ending the run."""

from __future__ import annotations

import subprocess
import sys

import pytest

SETUP = """
import gc, duckdb
from inftda_duckdb.duckdb.extension import load
con = duckdb.connect()
con.execute("CREATE TABLE t AS SELECT 'a' AS dx FROM range(50)")
load(con{mode})
cur = con.cursor()
load(cur)
names = [r[0] for r in cur.execute(
    "SELECT function_name FROM duckdb_functions() WHERE database_name = 'system' AND "
    "function_name LIKE 'inftda_%' AND function_type = 'scalar'").fetchall()]
cur.close()
del cur
gc.collect()
other = con.cursor()  # loads nothing: finds the macros of the default database
"""


def _one(sql: str) -> str:
    return f"""
try:
    other.execute({sql!r}).fetchall()
except duckdb.Error as exc:
    print("refused:", str(exc).splitlines()[0])
"""


CALLS = {
    "preview macro": _one("SELECT * FROM inftda_preview('t', ['dx'], rho := 1, "
                          "domains := {'dx': ['a']})"),
    "release macro": _one("SELECT * FROM inftda_release('t', ['dx'], rho := 1, "
                          "domains := {'dx': ['a']})"),
    "budget macro": _one("SELECT * FROM inftda_budget()"),
    "every UDF by name": """
for name in names:
    for args in ("", "NULL", "NULL, NULL", "NULL, NULL, NULL"):
        try:
            other.execute(f"SELECT {name}({args})").fetchall()
        except duckdb.Error:
            pass
""",
}


@pytest.mark.parametrize("mode", ["", ", mode='public'"], ids=["curator", "public"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_calls_after_the_loading_cursor_closed_do_not_crash(call: str, mode: str) -> None:
    code = SETUP.format(mode=mode) + CALLS[call] + "print('alive')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip().endswith("alive")
