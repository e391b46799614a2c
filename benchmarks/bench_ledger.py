"""What the ledger costs: a charge with 1 and with 10,000 rows in the ledger, the whole-chain check
(first use in a process, `ledger --verify`), a shared ledger file, and the fixed cost of a
100-row release with an empty and with a 10,000-row ledger, measured side by side in one run.

Run:  python benchmarks/bench_ledger.py [--rows 10000] [--repeat 41]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction

import duckdb

from inftda_duckdb.duckdb.extension import load
from inftda_duckdb.ledger import store
from inftda_duckdb.ledger.sources import SourceId
from inftda_duckdb.ledger.store import Charge, Ledger

SOURCE = SourceId.named("bench")


def charge() -> Charge:
    return Charge(SOURCE, ("a", "b"), "substitute", Fraction(1, 10**6), None, 1, "counts",
                  False, False, "python")


def fill(ledger: Ledger, rows: int) -> None:
    for _ in range(rows):
        ledger.charge(charge())


def median_ms(f: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def interleaved(fs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median ms of each function, the functions run in turn (A B A B ...)."""
    times: dict[str, list[float]] = {k: [] for k in fs}
    for _ in range(repeat):
        for k, f in fs.items():
            start = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def release_table(con: duckdb.DuckDBPyConnection) -> None:
    labels = "'a','b','c','d','e','f','g','h','i','j'"
    con.execute(f"CREATE TYPE IF NOT EXISTS e10 AS ENUM ({labels})")
    con.execute("CREATE OR REPLACE TABLE t AS SELECT "
                + ", ".join(f"([{labels}])[1 + (hash(i, {k}) % 10)::BIGINT]::e10 AS c{k}"
                            for k in range(1, 5))
                + " FROM range(100) r(i)")


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=41)
    args = p.parse_args(argv)
    n, repeat = args.rows, args.repeat
    out = [f"Command: `python benchmarks/bench_ledger.py {' '.join(argv)}` "
           f"({datetime.date.today()}). Python {platform.python_version()}, duckdb "
           f"{duckdb.__version__}, {os.cpu_count()} cores (shared: medians, side by side).", ""]

    small_con, big_con = duckdb.connect(), duckdb.connect()
    small = Ledger.in_database(small_con, "memory", path=None, read_only=False)
    big = Ledger.in_database(big_con, "memory", path=None, read_only=False)
    fill(small, 1)
    start = time.perf_counter()
    fill(big, n)
    filled = time.perf_counter() - start
    t = interleaved({"1": lambda: small.charge(charge()),
                     "n": lambda: big.charge(charge())}, repeat)
    out.append("| ledger in the database (in memory) | 1 row | "
               f"{n:,} rows | ratio |\n|---|---|---|---|")
    out.append(f"| one charge (verify new rows, decide, append) | {t['1']:.2f} ms | "
               f"{t['n']:.2f} ms | {t['n'] / t['1']:.2f} |")

    def cold(ledger: Ledger) -> Callable[[], object]:
        def run() -> object:
            store._STATES.clear()  # as a new process: the whole chain is checked
            return ledger.charge(charge())
        return run

    t = interleaved({"1": cold(small), "n": cold(big)}, max(repeat // 4, 5))
    out.append(f"| first charge of a process (whole chain checked) | {t['1']:.2f} ms | "
               f"{t['n']:.2f} ms | {t['n'] / t['1']:.2f} |")
    t = interleaved({"1": small.verify, "n": big.verify}, max(repeat // 4, 5))
    out.append(f"| verify() / `ledger --verify` | {t['1']:.2f} ms | {t['n']:.2f} ms | "
               f"{t['n'] / t['1']:.2f} |")
    out.append("")
    out.append(f"Filling {n:,} rows one charge at a time took {filled:.1f} s "
               f"({filled / n * 1000:.2f} ms a charge).")

    with tempfile.TemporaryDirectory() as folder:
        f_small = Ledger.file(os.path.join(folder, "small.duckdb"))
        f_big = Ledger.file(os.path.join(folder, "big.duckdb"))
        fill(f_small, 1)
        big_con.execute(f"ATTACH '{os.path.join(folder, 'big.duckdb')}' AS f")
        big_con.execute("COPY FROM DATABASE memory TO f")  # the same 10,000-row chain, as a file
        big_con.execute("DETACH f")
        t = interleaved({"1": lambda: f_small.charge(charge()),
                         "n": lambda: f_big.charge(charge())}, max(repeat // 2, 5))
        out.append("")
        out.append(f"| shared ledger file (attached per charge, committed to disk) | 1 row | "
                   f"{n:,} rows | ratio |\n|---|---|---|---|")
        out.append(f"| one charge | {t['1']:.2f} ms | {t['n']:.2f} ms | {t['n'] / t['1']:.2f} |")

    empty_con, full_con = duckdb.connect(), duckdb.connect()
    for c in (empty_con, full_con):
        load(c)
        release_table(c)
    fill(Ledger.in_database(full_con, "memory", path=None, read_only=False), n)
    q = ("SELECT count(*), sum(count) FROM inftda_release('t', ['c1', 'c2', 'c3', 'c4'], "
         "rho := 1)")
    for c in (empty_con, full_con):
        c.execute(q).fetchall()
    t = interleaved({"empty": lambda: empty_con.execute(q).fetchall(),
                     "full": lambda: full_con.execute(q).fetchall()}, repeat)
    out.append("")
    out.append("| fixed cost of a release (4 ENUM columns, 100 rows; as in bench_release) | "
               f"empty ledger | {n:,}-row ledger | ratio |\n|---|---|---|---|")
    out.append(f"| one release | {t['empty']:.1f} ms | {t['full']:.1f} ms | "
               f"{t['full'] / t['empty']:.2f} |")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
