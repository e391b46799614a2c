"""What the ledger costs: a charge with 1 and with 10,000 rows in the ledger, the whole-chain check
(first use in a process, `ledger --verify`), a shared ledger file, and the fixed cost of a
100-row release with an empty and with a 10,000-row ledger, measured side by side in one run.
With ``--postgres URL`` (an empty database; the postgres extra), also a shared ledger file beside
a ledger on that PostgreSQL server, charges alternating.

Run:  python benchmarks/bench_ledger.py [--rows 10000] [--repeat 41] [--postgres URL]
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
from bench_release import FLAT, enum_table, one_row, queries
from results import write_section

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
    """Median wall ms of each function, the functions run in turn (A B A B ...); also, under
    ``cpu <name>``, the median CPU ms of the process (all threads: steadier on shared cores)."""
    times: dict[str, list[float]] = {k: [] for k in fs}
    cpu: dict[str, list[float]] = {k: [] for k in fs}
    for _ in range(repeat):
        for k, f in fs.items():
            start, used = time.perf_counter(), time.process_time()
            f()
            times[k].append(time.perf_counter() - start)
            cpu[k].append(time.process_time() - used)
    out = {k: statistics.median(v) * 1000 for k, v in times.items()}
    out.update({f"cpu {k}": statistics.median(v) * 1000 for k, v in cpu.items()})
    return out


def row(what: str, t: dict[str, float], a: str, b: str) -> str:
    """A table row: wall (CPU) ms of a and b, and the ratio b / a of the wall times."""
    return (f"| {what} | {t[a]:.2f} ({t['cpu ' + a]:.2f}) ms | {t[b]:.2f} ({t['cpu ' + b]:.2f}) "
            f"ms | {t[b] / t[a]:.2f} |")


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=41)
    p.add_argument("--postgres", help="an empty PostgreSQL database: compare its ledger")
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
    out.append("Wall time, median (CPU time of the process, median).")
    out.append("")
    out.append("| ledger in the database (in memory) | 1 row | "
               f"{n:,} rows | ratio |\n|---|---|---|---|")
    out.append(row("one charge (verify new rows, decide, append)", t, "1", "n"))

    def cold(ledger: Ledger) -> Callable[[], object]:
        def run() -> object:
            store._STATES.clear()  # as a new process: the whole chain is checked
            return ledger.charge(charge())
        return run

    t = interleaved({"1": cold(small), "n": cold(big)}, max(repeat // 4, 5))
    out.append(row("first charge of a process (whole chain checked)", t, "1", "n"))
    t = interleaved({"1": small.verify, "n": big.verify}, max(repeat // 4, 5))
    out.append(row("verify() / `ledger --verify`", t, "1", "n"))
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
        out.append(row("one charge", t, "1", "n"))

    if args.postgres:
        out += ["", *server(args.postgres, n, repeat)]

    empty_con, full_con = duckdb.connect(), duckdb.connect()
    for c in (empty_con, full_con):
        load(c)
        columns = enum_table(c, "t", 100, FLAT, skewed=True)  # bench_release's fixed-cost table
    fill(Ledger.in_database(full_con, "memory", path=None, read_only=False), n)
    q = one_row(queries("t", columns)[1])
    for c in (empty_con, full_con):
        c.execute(q).fetchall()
    t = interleaved({"empty": lambda: empty_con.execute(q).fetchall(),
                     "full": lambda: full_con.execute(q).fetchall()}, repeat)
    out.append("")
    out.append("| fixed cost of a release (bench_release's: 4 ENUM columns, 100 rows) | "
               f"empty ledger | {n:,}-row ledger | ratio |\n|---|---|---|---|")
    out.append(row("one release", t, "empty", "full"))
    print("\n".join(out))
    write_section("bench_ledger.py", out)


def server(url: str, n: int, repeat: int) -> list[str]:
    """A shared ledger file and a ledger on a PostgreSQL server, both holding ``n`` rows:
    one charge, and the first charge of a process (the whole chain fetched and checked)."""
    with tempfile.TemporaryDirectory() as folder:
        on_file, on_server = Ledger.file(os.path.join(folder, "l.duckdb")), Ledger.open(url)
        start = time.perf_counter()
        for ledger in (on_file, on_server):
            fill(ledger, n)
        filled = time.perf_counter() - start

        def cold(ledger: Ledger) -> Callable[[], object]:
            def run() -> object:
                store._STATES.clear()
                return ledger.charge(charge())
            return run

        t = interleaved({"file": lambda: on_file.charge(charge()),
                         "server": lambda: on_server.charge(charge())}, repeat)
        c = interleaved({"file": cold(on_file), "server": cold(on_server)}, max(repeat // 4, 5))
    return [f"| {n:,}-row ledger | ledger file | PostgreSQL server | ratio |\n|---|---|---|---|",
            row("one charge", t, "file", "server"),
            row("first charge of a process (whole chain checked)", c, "file", "server"),
            "", f"(filling both took {filled:.1f} s; the server: {Ledger.open(url).location})"]


if __name__ == "__main__":
    main(sys.argv[1:])
