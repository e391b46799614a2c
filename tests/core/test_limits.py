"""Bounded work on bad input (issue 15): huge numbers and huge domains fail fast, and a release
that would noise more cells than the configured limit is refused before anything is charged.

The resource cases run in a subprocess (a fresh interpreter, so the measurement is the call's
own): CPU time of the call (robust to a loaded machine, unlike wall time) must stay under the
issue's 1 s and the peak resident memory (VmHWM, reset just before the call) under 200 MB above
the start. A watchdog kills the
subprocess at +1 GiB, so the code before the fix (which grew to GiBs) fails the test without
exhausting the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import duckdb
import pytest

from inftda_duckdb.core import limits
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.duckdb.extension import preview, release

_PROBE = textwrap.dedent(
    """
    import json, os, sys, threading, time
    import duckdb, inftda_duckdb
    from inftda_duckdb.duckdb.extension import release, preview

    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    con = duckdb.connect()
    inftda_duckdb.load(con)
    con.execute("CREATE TABLE t AS SELECT (i % 7)::INTEGER AS x, i % 3 AS y FROM range(1000) r(i)")
    start = rss_mb()

    def watchdog():
        while True:
            if rss_mb() > start + 1024:
                print(json.dumps({"killed": "memory above +1 GiB"}), flush=True)
                os._exit(3)
            time.sleep(0.01)

    threading.Thread(target=watchdog, daemon=True).start()

    def peak_mb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))

    try:  # reset the peak (VmHWM) to the current RSS: the peak below is the call's own
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    start = rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    error, rows = None, None
    try:
        result = eval(sys.argv[1])
        rows = result.num_rows if hasattr(result, "num_rows") else len(result)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
    print(json.dumps({
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "peak_mb": peak_mb() - start,
        "error": error,
        "rows": rows,
        "ledger": con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0],
    }), flush=True)
    os._exit(0)
    """
)


def probe(call: str) -> dict[str, Any]:
    """Run ``call`` (a Python expression over ``con``, ``release``, ``preview``) in a fresh
    interpreter; its CPU time, wall time, peak memory above the start, error text and result."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, call], capture_output=True, text=True, timeout=120
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"probe printed nothing: {done.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    assert "killed" not in result, result
    return result


def within_bounds(result: dict[str, Any]) -> None:
    assert result["cpu"] < 1.0, result  # the limit, in CPU seconds
    assert result["wall"] < 30, result  # a sanity bound only: the machine may be loaded
    assert result["peak_mb"] < 200, result
    assert result["ledger"] == 0, result  # nothing charged


SQL = ("con.execute(\"SELECT * FROM inftda_release('t', ['x'], {}, "
       "domains := {{'x': range(7)}})\").fetchall()")
NUMBERS = [
    ("rho := '1e-99999999'", "rho"),
    ("rho := '1e99999999'", "rho"),
    ("rho := '1e-10000000'", "rho"),
    ("epsilon := 1e300, delta := 1e-6", "epsilon"),
    ("epsilon := '1e+5000', delta := 1e-6", "epsilon"),
    ("epsilon := 1, delta := '1e-99999999'", "delta"),
]


@pytest.mark.parametrize(("args", "name"), NUMBERS)
def test_huge_numbers_from_sql_fail_fast_with_a_clear_error(args: str, name: str) -> None:
    result = probe(SQL.format(args))
    within_bounds(result)
    assert result["error"] is not None and f"InputError: {name} must be" in result["error"]
    assert "Fix:" in result["error"]


@pytest.mark.parametrize(
    "kwargs",
    ["rho='1e-99999999'", "rho=10**100000", "epsilon=1e300, delta=1e-6",
     "rho=__import__('fractions').Fraction(1, 3**100000)"],
)
def test_huge_numbers_from_python_fail_fast_with_a_clear_error(kwargs: str) -> None:
    result = probe(f"release(con, 't', ['x'], {kwargs}, domains={{'x': range(7)}})")
    within_bounds(result)
    assert result["error"] is not None and result["error"].startswith("InputError: ")


@pytest.mark.parametrize(
    ("call", "refused"),
    [
        ("release(con, 't', ['x'], rho=1, domains={'x': range(10**9)})", True),
        ("release(con, 't', ['x', 'y'], rho=1, domains={'x': range(7), 'y': range(10**9)})", True),
        ("con.execute(\"SELECT * FROM inftda_release('t', ['x'], rho := 1, "
         "domains := {'x': {'start': 0, 'stop': 1000000000}})\").fetchall()", True),
        # a preview is arithmetic on sizes: its rows, at once
        ("preview(con, 't', ['x'], rho=1, domains={'x': range(10**9)})", False),
        ("preview(con, 't', ['x'], rho=1, domains={'x': range(10**7)})", False),
        ("con.execute(\"SELECT * FROM inftda_preview('t', ['x'], rho := 1, "
         "domains := {'x': {'start': 0, 'stop': 1000000000, 'step': 1}})\").fetchall()", False),
    ],
)
def test_huge_domains_are_refused_or_previewed_without_expanding_them(
    call: str, refused: bool
) -> None:
    result = probe(call)
    within_bounds(result)
    if not refused:
        assert result["error"] is None and result["rows"] == 1, result
        return
    assert result["error"] is not None, result
    assert "cells" in result["error"] and "INFTDA_MAX_CELLS" in result["error"], result
    assert "nothing was charged" in result["error"], result


# ---------------------------------------------------------------------------------------------
# The cell limit, in process (small limits set through the environment)


@pytest.fixture
def t(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute("CREATE TABLE t AS SELECT (i % 10)::INTEGER a, (i % 30)::INTEGER b "
                "FROM range(40) r(i)")
    return con


def test_max_cells_defaults_to_memory_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("INFTDA_MAX_CELLS", raising=False)
    default = limits.max_cells()
    assert default == limits.physical_memory() // limits.BYTES_PER_CELL
    monkeypatch.setenv("INFTDA_MAX_CELLS", "1000")
    assert limits.max_cells() == 1000
    for bad in ("0", "-5", "lots", "1e99999999"):
        monkeypatch.setenv("INFTDA_MAX_CELLS", bad)
        with pytest.raises(InputError, match="INFTDA_MAX_CELLS"):
            limits.max_cells()


def test_level_bound_uses_nodes_and_the_public_total() -> None:
    # dense levels: parents at level k-1 are at most min(nodes_{k-1}, n)
    assert limits.level_cells([10, 30], [10, 300], None) == [10, 300]
    assert limits.level_cells([10, 30], [10, 300], 4) == [10, 120]
    assert limits.level_cells([10, 30], [10, 300], 0) == [0, 0]
    # a nested level never noises more cells than it has nodes
    assert limits.level_cells([10, 30], [10, 45], 20) == [10, 45]


@pytest.mark.parametrize(
    ("a", "fits", "why"),
    [
        (10, 300, "10 parents x 30 values"),  # 10 x 30 = 300 nodes at level 2
        (100, 1200, "40 parents x 30 values"),  # 100 x 30 nodes, but n = 40: at most 40 parents
    ],
)
def test_a_release_past_the_limit_is_refused_with_the_numbers_before_charging(
    t: duckdb.DuckDBPyConnection, charges: Callable[[], int], monkeypatch: pytest.MonkeyPatch,
    a: int, fits: int, why: str,
) -> None:
    domains = {"a": range(a), "b": range(30)}
    monkeypatch.setenv("INFTDA_MAX_CELLS", str(fits - 1))
    with pytest.raises(InputError) as info:
        release(t, "t", ["a", "b"], rho=1, domains=domains)
    text = str(info.value)
    for part in (f"{fits:,} cells at level 2 (column 'b': {why})", f"limit of {fits - 1:,}",
                 "INFTDA_MAX_CELLS", "nothing was charged"):
        assert part in text
    assert charges() == 0
    monkeypatch.setenv("INFTDA_MAX_CELLS", str(fits))
    release(t, "t", ["a", "b"], rho=1, domains=domains)
    assert charges() == 1


def test_a_domain_larger_than_the_limit_is_refused_when_planned(
    t: duckdb.DuckDBPyConnection, charges: Callable[[], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFTDA_MAX_CELLS", "20")
    for call in (
        lambda: release(t, "t", ["b"], rho=1, domains={"b": range(30)}),
        lambda: t.execute(
            "SELECT * FROM inftda_release('t', ['b'], rho := 1, domains := {'b': range(30)})"
        ).fetchall(),
    ):
        with pytest.raises((InputError, duckdb.Error), match="30 cells at level 1"):
            call()
    assert charges() == 0


def test_a_domain_past_32_bit_codes_is_refused_when_planned_whatever_the_limit(
    t: duckdb.DuckDBPyConnection, charges: Callable[[], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # codes are 32-bit: a cell limit that lets 2**31 + 1 values through still refuses them,
    # at once (before, the range was expanded: DuckDB ran out of memory after ~110 s)
    monkeypatch.setenv("INFTDA_MAX_CELLS", str(10**12))
    for call in (
        lambda: release(t, "t", ["b"], rho=1, domains={"b": range(2**31 + 1)}),
        lambda: t.execute(
            "SELECT * FROM inftda_release('t', ['b'], rho := 1, domains := {'b': "
            "{'start': 0, 'stop': 2147483649, 'step': 1}})"
        ).fetchall(),
    ):
        with pytest.raises((InputError, duckdb.Error),
                           match=r"column 'b' \(level 1\) has 2,147,483,649 values.*32-bit"):
            call()
    assert charges() == 0


def test_add_remove_decides_after_the_noised_root_and_says_it_charged(
    t: duckdb.DuckDBPyConnection, charges: Callable[[], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from inftda_duckdb.core.errors import ReleaseAbortedError

    # nodes bound 100 x 30 = 3000 > limit; the noised root (~40 at rho 1e6) gives ~1200
    monkeypatch.setenv("INFTDA_MAX_CELLS", "1250")
    release(t, "t", ["a", "b"], rho=10**6, neighbours="add_remove",
            domains={"a": range(100), "b": range(30)})
    assert charges() == 1
    monkeypatch.setenv("INFTDA_MAX_CELLS", "1000")
    with pytest.raises(ReleaseAbortedError) as info:
        release(t, "t", ["a", "b"], rho=10**6, neighbours="add_remove",
                domains={"a": range(100), "b": range(30)})
    text = str(info.value)
    assert "was charged" in text and "rho 1000000" in text and "1,000" in text
    assert info.value.charged
    assert charges() == 2
    # a limit the nodes bound already meets needs no noised root: decided before charging
    monkeypatch.setenv("INFTDA_MAX_CELLS", "3000")
    release(t, "t", ["a", "b"], rho=1, neighbours="add_remove",
            domains={"a": range(100), "b": range(30)})


def test_preview_reports_the_cells_and_the_limit(
    t: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFTDA_MAX_CELLS", "100")
    table = preview(t, "t", ["a", "b"], rho=1, domains={"a": range(10), "b": range(30)})
    assert table.column("nodes").to_pylist() == [10, 300]
    assert table.column("max_cells").to_pylist() == [100, 100]
