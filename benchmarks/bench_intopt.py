"""Benchmark IntOpt: a whole level at once, one wide parent, linearity, and side by side with the
paper's pseudocode transcription (the test oracle) and inf-tda 0.1's ``int_opt``.

Run: ``python benchmarks/bench_intopt.py [--inftda-python /tmp/inftda-venv/bin/python]``.
inf-tda runs in its own environment (it needs opendp 0.12), called through a subprocess on the
same inputs. Prints a table and replaces the ``bench_intopt.py`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from results import cpu_model, write_section

from inftda_duckdb.core.intopt import intopt, intopt_ragged

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "core"))
from test_intopt import paper_intopt  # noqa: E402  (the oracle lives with the tests)

LOAD = ""
INFTDA_SCRIPT = """
import json, sys, time
import numpy as np
from InfTDA.optimization import int_opt
x = np.load(sys.argv[1]); c = np.load(sys.argv[2])
t = time.perf_counter()
out = [np.asarray(int_opt(row, int(total))).astype(np.int64) for row, total in zip(x, c)]
seconds = time.perf_counter() - t
np.save(sys.argv[3], np.stack(out))
print(json.dumps({"seconds": seconds}))
"""


def level(rng: np.random.Generator, parents: int, m: int, sigma: float = 3.0) -> tuple:
    """Noisy child counts around sparse true counts, and noisy-but-consistent parent totals."""
    truth = np.where(rng.random((parents, m)) < 0.5, 0, rng.pareto(3.0, (parents, m)) * 20)
    truth = truth.astype(np.int64)
    x = truth + np.rint(rng.normal(0, sigma, truth.shape)).astype(np.int64)
    c = np.maximum(truth.sum(axis=1) + np.rint(rng.normal(0, sigma, parents)).astype(np.int64), 0)
    return x, c


CPU: list[float] = []  # CPU seconds of the last best() call (robust to other load on the machine)


def best(f: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs; the best CPU time goes to CPU[-1]."""
    times, cpu = [], []
    for _ in range(repeat):
        t, p = time.perf_counter(), time.process_time()
        f()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - p)
    CPU.append(min(cpu))
    return min(times)


def inftda(python: str, x: np.ndarray, c: np.ndarray, timeout: float) -> tuple[float, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, n) for n in ("x.npy", "c.npy", "y.npy")]
        np.save(paths[0], x)
        np.save(paths[1], c)
        done = subprocess.run(
            [python, "-c", INFTDA_SCRIPT, *paths],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])["seconds"], np.load(paths[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inftda-python", default="/tmp/inftda-venv/bin/python")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()
    global LOAD
    LOAD = " ".join(f"{v:.2f}" for v in os.getloadavg())
    rng = np.random.default_rng(2025)
    rows: list[tuple[str, str, str]] = []

    def report(what: str, value: str, note: str = "") -> None:
        rows.append((what, value, note))
        print(f"{what:58s} {value:>14s}  {note}")

    # 1. A whole level: 1e6 parents x 24 children.
    x, c = level(rng, 1_000_000, 24)
    t_dense = best(lambda: intopt(x, c))
    report(
        "intopt, 1e6 parents x 24 children (s)",
        f"{t_dense:.3f}",
        f"target <= 2 s; CPU {CPU[-1]:.3f} s",
    )
    offsets = np.arange(x.shape[0] + 1, dtype=np.int64) * 24
    t_rag = best(lambda: intopt_ragged(x.ravel(), offsets, c))
    report("intopt_ragged, same level (s)", f"{t_rag:.3f}", f"CPU {CPU[-1]:.3f} s")

    # 2. One parent with 1e6 children.
    wide, wide_c = level(rng, 1, 1_000_000)
    t_wide = best(lambda: intopt(wide, wide_c))
    report(
        "intopt, 1 parent x 1e6 children (s)",
        f"{t_wide:.3f}",
        f"target <= 0.5 s; CPU {CPU[-1]:.3f} s",
    )
    t_wide_r = best(lambda: intopt_ragged(wide[0], np.array([0, wide.shape[1]]), wide_c))
    report("intopt_ragged, 1 parent x 1e6 children (s)", f"{t_wide_r:.3f}")

    # 3. Linearity: time per cell at three sizes.
    for parents in (10_000, 100_000, 1_000_000):
        xs, cs = (x[:parents], c[:parents])
        t = best(lambda xs=xs, cs=cs: intopt(xs, cs))
        report(
            f"  per cell, {parents:>9,} x 24 (ns)",
            f"{t / xs.size * 1e9:.1f}",
            f"CPU {CPU[-1] / xs.size * 1e9:.1f} ns",
        )
    for m in (10_000, 100_000, 1_000_000):
        t = best(lambda m=m: intopt(wide[:, :m], wide_c * m // 1_000_000))
        cpu_ns = CPU[-1] / m * 1e9
        report(f"  per cell, 1 x {m:>9,} (ns)", f"{t / m * 1e9:.1f}", f"CPU {cpu_ns:.1f} ns")

    # 4. Side by side with the oracle transcription (smaller sizes).
    small_x, small_c = x[:2000], c[:2000]
    pairs = list(zip(small_x.tolist(), small_c.tolist(), strict=True))
    t_oracle = best(lambda: [paper_intopt(r, v) for r, v in pairs], 1)
    t_ours = best(lambda: intopt(small_x, small_c))
    same = all(
        intopt(small_x, small_c)[p].tolist() == paper_intopt(small_x[p].tolist(), int(small_c[p]))
        for p in range(2000)
    )
    report("oracle transcription, 2000 x 24 (s)", f"{t_oracle:.3f}", f"identical output: {same}")
    report("intopt, 2000 x 24 (s)", f"{t_ours:.4f}", f"speed-up x{t_oracle / t_ours:,.0f}")
    one_x, one_c = level(rng, 1, 2000)
    t_oracle1 = best(lambda: paper_intopt(one_x[0].tolist(), int(one_c[0])), 1)
    t_ours1 = best(lambda: intopt(one_x, one_c))
    report("oracle transcription, 1 x 2000 (s)", f"{t_oracle1:.3f}")
    report("intopt, 1 x 2000 (s)", f"{t_ours1:.5f}", f"speed-up x{t_oracle1 / t_ours1:,.0f}")

    # 5. inf-tda 0.1's int_opt (its own venv), same inputs.
    inftda_version = "not available"
    if os.path.exists(args.inftda_python):
        inftda_version = (
            subprocess.run(
                [
                    args.inftda_python,
                    "-c",
                    "import importlib.metadata as m; "
                    "print(m.version('inf-tda'), m.version('opendp'))",
                ],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            or "not available"
        )
    if inftda_version != "not available":
        for name, (ix, ic) in {
            "20000 x 24": (x[:20_000], c[:20_000]),
            "1 x 1e5": level(rng, 1, 100_000),
        }.items():
            t_peer, y_peer = inftda(args.inftda_python, ix, ic, timeout=900)
            ours = intopt(ix, ic)
            t_mine = best(lambda ix=ix, ic=ic: intopt(ix, ic))
            agree = float(np.mean(np.all(y_peer == ours, axis=1)))
            dist_peer = np.abs(y_peer - ix).max(axis=1)
            dist_ours = np.abs(ours - ix).max(axis=1)
            report(
                f"inf-tda 0.1 int_opt, {name} (s)",
                f"{t_peer:.3f}",
                f"ours {t_mine:.4f} s, speed-up x{t_peer / t_mine:,.0f}",
            )
            report(
                f"  same vector as the paper's procedure, {name}",
                f"{agree:.1%}",
                f"same distance: {bool(np.all(dist_peer == dist_ours))}",
            )
    report("inf-tda / opendp versions", inftda_version)

    if not args.no_write:
        write_results(rows, inftda_version)


def write_results(rows: list[tuple[str, str, str]], inftda_version: str) -> None:
    cpu = cpu_model()
    lines = [
        f"Command: `python benchmarks/bench_intopt.py` ({dt.date.today().isoformat()}). "
        f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}; inf-tda/opendp: {inftda_version} (separate venv, subprocess). "
        f"Load average before the run: {LOAD}. "
        "Best of 3 runs (oracle: 1); wall time, and process CPU time (the machine was shared). "
        "Inputs: child counts = sparse Pareto truth + rounded "
        "N(0, 9) noise, parent totals = true total + noise.",
        "",
        "| measurement | value | note |",
        "|---|---|---|",
        *(f"| {w.strip()} | {v} | {n} |" for w, v, n in rows),
        "",
    ]
    write_section("bench_intopt.py", lines)


if __name__ == "__main__":
    main()
