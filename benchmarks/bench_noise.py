"""Throughput of the exact discrete Gaussian sampler, side by side with peers, on one core.

Run: ``python benchmarks/bench_noise.py [--opendp-n 100000] [--no-write]``.

Measures, in one run pinned to one CPU: inftda_duckdb.core.noise with the secure AES source,
OpenDP's exact discrete Gaussian (``then_gaussian`` on an int vector; if importable; not a
dependency), and
``numpy.rint(normal)`` (NOT exact: an unsafe speed ceiling). Also table setup time and the
peak memory of ``add_noise`` on 1e7 counts (tracemalloc plus the arrays from Arrow's pool).
Prints a table and replaces the ``bench_noise.py`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import math
import os
import platform
import time
import tracemalloc
import weakref
from fractions import Fraction

import cryptography
import numpy as np
from results import cpu_model, write_section

from inftda_duckdb.core import memory, noise
from inftda_duckdb.core.noise import DiscreteGaussian, add_noise
from inftda_duckdb.core.randomness import RandomSource

SIGMA2S = [Fraction(1, 2), Fraction(4), Fraction(40), Fraction(400), Fraction(10**6)]


def best_rate(fn, n: int, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()  # CPU time of this process, pinned to one core
        fn()
        best = min(best, time.process_time() - start)
    return n / best


def opendp_sampler(sigma2: Fraction):
    try:
        import opendp.prelude as dp
    except ImportError:
        return None, None
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int)
    from importlib.metadata import version

    return space >> dp.m.then_gaussian(scale=math.sqrt(sigma2)), version("opendp")


@contextlib.contextmanager
def arrow_peak():
    """[live, peak] bytes of the arrays inftda_duckdb.core.memory takes from Arrow's pool (invisible
    to tracemalloc) while the block runs."""
    state, original = [0, 0], memory.empty

    def tracked(shape, dtype):
        a = original(shape, dtype)
        if a.nbytes >= memory.MIN_BYTES:
            state[0] += a.nbytes
            state[1] = max(state[1], state[0])
            weakref.finalize(a, lambda n=a.nbytes: state.__setitem__(0, state[0] - n))
        return a

    memory.empty = tracked
    try:
        yield state
    finally:
        memory.empty = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1 << 20, help="samples per inftda/rint run")
    parser.add_argument("--opendp-n", type=int, default=100_000, help="samples per OpenDP run")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    source = RandomSource.secure()
    ids = np.arange(args.n, dtype=np.uint64)
    rng = np.random.default_rng()
    rows = []
    opendp_version = None
    for sigma2 in SIGMA2S:
        noise._tables.cache_clear()
        start = time.process_time()
        dist = DiscreteGaussian(sigma2)
        setup_ms = (time.process_time() - start) * 1e3
        ours = best_rate(lambda d=dist: d.sample(source, ids), args.n, 5)
        sd = math.sqrt(sigma2)
        ceiling = best_rate(
            lambda s=sd: np.rint(rng.normal(0.0, s, args.n)).astype(np.int64), args.n, 5
        )
        meas, opendp_version = opendp_sampler(sigma2)
        peer = None
        if meas is not None:
            zeros = [0] * args.opendp_n
            peer = best_rate(lambda m=meas, z=zeros: m(z), args.opendp_n, 1)
        rows.append((sigma2, setup_ms, ours, peer, ceiling))
        print(
            f"sigma2={sigma2}: setup {setup_ms:.1f} ms, inftda {ours / 1e6:.1f} M/s, "
            f"opendp {peer or float('nan'):.0f}/s, rint {ceiling / 1e6:.1f} M/s",
            flush=True,
        )

    mem = []
    for block in (1 << 16, 1 << 20):
        counts = np.zeros(10**7, dtype=np.int64)
        tracemalloc.start()
        with arrow_peak() as arrow:
            start = time.process_time()
            add_noise(counts, 4, source, block=block)
            seconds = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1] + arrow[1]
        tracemalloc.stop()
        mem.append((block, peak, counts.size / seconds))
        print(
            f"add_noise 1e7 counts, block {block}: peak {peak / 2**20:.1f} MiB, "
            f"{counts.size / seconds / 1e6:.1f} M/s",
            flush=True,
        )
    if not args.no_write:
        write_results(rows, mem, opendp_version, args)


def write_results(rows, mem, opendp_version, args) -> None:
    cpu = cpu_model()
    fmt = lambda r: f"{r / 1e6:.1f}M" if r >= 1e6 else f"{r / 1e3:.0f}k"  # noqa: E731
    table = [
        f"| {s} | {setup:.1f} | {fmt(ours)} | {fmt(peer) if peer else 'n/a'} | {fmt(ceil)} | "
        f"{f'{ours / peer:.0f}x' if peer else 'n/a'} | {ceil / ours:.1f}x |"
        for s, setup, ours, peer, ceil in rows
    ]
    lines = [
        f"Command: `python benchmarks/bench_noise.py` ({dt.date.today().isoformat()}). "
        f"Machine: {cpu}, nproc {os.cpu_count()}, pinned to one core. Python "
        f"{platform.python_version()}, numpy {np.__version__}, cryptography "
        f"{cryptography.__version__}, opendp {opendp_version or 'not installed'}. "
        f"Samples per CPU-second (process_time; the machine was shared), best of 5 runs of "
        f"{args.n} samples (OpenDP: one run of {args.opendp_n}); inftda uses the secure "
        "AES-256 source; setup = exact tables, cold.",
        "",
        "| sigma^2 | setup ms | inftda exact | OpenDP exact | rint(normal) (NOT exact) "
        "| inftda / OpenDP | rint / inftda |",
        "|---|---|---|---|---|---|---|",
        *table,
        "",
        "`add_noise` on 1e7 int64 counts (80 MB, allocated before tracing), sigma^2 = 4: peak "
        "of everything else (tracemalloc, plus the arrays taken from Arrow's pool).",
        "",
        "| block | peak MiB | samples/s |",
        "|---|---|---|",
        *(f"| {b} | {p / 2**20:.1f} | {fmt(r)} |" for b, p, r in mem),
        "",
    ]
    write_section("bench_noise.py", lines)


if __name__ == "__main__":
    main()
