"""Benchmark: the Spark release vs Spark's bare leaf GROUP BY on the same Parquet (local[2]).

Targets (issues 16 and 36), measured side by side in one run:

- flat: 10M rows, 4 columns with 50 x 20 x 24 x 10 values, from Parquet: the Spark release
  (``inftda_duckdb.spark.release`` evaluated once, by writing it) takes at most 1.3x Spark's own
  bare leaf GROUP BY (written the same way); the DuckDB release on the same Parquet beside it;
- scale: the same flat tree at 1e6, 1e7 and 1e8 rows (``--scale``), release / GROUP BY per size;
- skew: 87% of the rows under one of 3 values of level 1 (the cut), 3 x 20,000 x 100 values:
  the leaves each task releases, largest against the fair share (leaves / tasks), with the
  descent split into bands (the default) and in one band (the subtrees alone, as before);
- large domain: 1e7 rows over a 2e6-value domain (``--domain-values``) x 2, declared as a
  range and as a one-column domain table: the values stay on the executors (more than
  65,536), release / GROUP BY and the driver's peak memory;
- deep: 10M rows, 5 levels x 40 values, uniform (~1e8 noised cells) completes with the driver's
  memory bounded (``spark.driver.maxResultSize=1m`` throughout; the driver's peak RSS and JVM
  heap stated), and the time per noised cell.

    python benchmarks/bench_spark.py [--rows 10000000] [--repeat 5] [--deep-rows 10000000]
        [--scale 1000000,10000000,100000000] [--skew-rows 10000000] [--domain-values 2000000]
        [--no-deep] [--no-write]

Results are written with Spark's ``noop`` sink (the whole plan runs, nothing is stored), except
the deep release, written to Parquet to count its noised cells from its own output. Writes its
section of benchmarks/RESULTS.md (headed ``## bench_spark.py``).
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
import warnings
from pathlib import Path
from typing import Any

import duckdb
from results import cpu_model, peak_rss_mb, write_section

FLAT = (50, 20, 24, 10)
DEEP = (40, 40, 40, 40, 40)
SKEW = (3, 20_000, 100)
SKEW_TASKS = 8
DRIVER_MEMORY = "2g"


SCALING = [
    "### Scaling to 1e10 rows / 1e9 leaves on a cluster (reasoned from the design and the "
    "numbers above)",
    "",
    "- **Shuffles**: two over the data, whatever the depth: the leaf GROUP BY (as Spark's bare "
    "GROUP BY: map-side partial counts, one shuffle of at most the distinct leaves per map task) "
    "and the shuffle of the pinned leaves by subtree (~24 bytes per leaf: `s`, `key`, `n`; "
    "~24 GB at 1e9 leaves, a second pass over the GROUP BY's output, not over the 1e10 rows). "
    "The summary job's shuffle carries at most 8,192 cut prefixes plus a few problem groups "
    "per map task. A release therefore costs the bare GROUP BY plus one shuffle and one "
    "pass of the leaves, plus the noise: the 1.3x target is about that second shuffle, and it "
    "shrinks as the scan grows relative to the leaves (1e10 rows over 1e9 leaves: 10 rows per "
    "leaf).",
    "- **Driver memory**: independent of rows and leaves. The driver holds the public domains "
    "of at most 65,536 values and nested domain tables (larger domains stay on the executors: "
    "the large-domain section), the true counts of at most 8,192 cut prefixes (~400 kB, so "
    "`spark.driver.maxResultSize=1m` suffices: this benchmark and every Spark test run under "
    "it), the released cut nodes and the level keys. The 1e9-leaf release needs the same "
    "driver as this one.",
    "- **Jobs per release**: constant, not one per level: reading the Parquet footers, a job "
    "for typed domain lists (none for string columns), the leaf GROUP BY's map stage (when the "
    "leaves are pinned), the summary job (checks and cut counts), and, when the result is "
    "written, one job of two stages (the shuffle by subtree, then levels c+1..d and the "
    "write). The per-level prototype ran one job per level (141 stages at d = 4 with AQE).",
    "- **Executors**: noise and IntOpt cost what `core.topdown.release_below` costs per noised "
    "cell on one core (the subtree worker adds ~5% on top of one release_below call over the "
    "same leaves), spread over all cores: ~1e10 noised cells (1e9 leaves, ~10 children per "
    "parent) at the per-cell cost measured above is a few core-hours, minutes on a few hundred "
    "cores. Memory per task is bounded by the chunk (2^20 cells) plus one subtree's leaves. "
    "Below the cut the descent is split into bands wherever a subtree may hold more than a "
    "task's fair share of leaves (by the public sizes and the released root count): the skew "
    "section shows the largest task's share with and without the split. Each band adds one "
    "shuffle of at most the prefixes of its bottom level, so a 1e9-leaf tree on a few hundred "
    "cores runs as many tasks as the leaves' bound over 2^20 (about 1,000), none holding more "
    "than its share.",
    "- **Rows**: the scale table measures release / GROUP BY from 1e6 to 1e8 rows on the same "
    "tree: the release's extra cost is the leaves' (fixed by the tree), so the ratio falls as "
    "the rows grow; 1e10 rows over the same tree adds only scan and map-side counting, which "
    "Spark's bare GROUP BY pays too.",
    "- **Ledger**: one charge per release on the driver (a DuckDB file); budgets shared with "
    "DuckDB releases through the same file.",
    "",
]


def write_parquet(path: Path, rows: int, sizes: tuple[int, ...], skewed: bool) -> None:
    """``rows`` rows of columns c1..cd (VARCHAR labels 'v<j>'), skewed or uniform, by DuckDB."""
    cols = []
    for i, size in enumerate(sizes, 1):
        u = f"hash(i, {i}) % 1000000 / 1000000.0"
        value = f"floor(pow({u}, 2) * {size})" if skewed else f"floor({u} * {size})"
        cols.append(f"'v' || {value}::INTEGER AS c{i}")
    with duckdb.connect() as con:
        con.execute("SET threads = 2")
        con.execute(f"COPY (SELECT {', '.join(cols)} FROM range({rows}) t(i)) TO "
                    f"'{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)")


def write_skewed(path: Path, rows: int) -> None:
    """``rows`` rows over SKEW: 87% under the first value of c1, the rest uniform."""
    with duckdb.connect() as con:
        con.execute("SET threads = 2")
        con.execute(
            "COPY (SELECT 'v' || CASE WHEN hash(i, 1) % 1000 < 870 THEN 0 "
            "ELSE 1 + hash(i, 4) % 2 END AS c1, "
            f"'v' || hash(i, 2) % {SKEW[1]} AS c2, 'v' || hash(i, 3) % {SKEW[2]} AS c3 "
            f"FROM range({rows}) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)")


def domains(sizes: tuple[int, ...]) -> dict[str, list[str]]:
    return {f"c{i}": [f"v{j}" for j in range(size)] for i, size in enumerate(sizes, 1)}


def session(master: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master(master).appName("bench_spark")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", DRIVER_MEMORY)
             .config("spark.driver.maxResultSize", "1m")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def noop(frame: Any) -> None:
    frame.write.format("noop").mode("overwrite").save()


def bench_flat(spark: Any, path: Path, repeat: int, ledger: str, *, warm_release: bool = True
               ) -> dict[str, Any]:
    """Interleaved runs of (Spark GROUP BY, Spark release, DuckDB GROUP BY, DuckDB release) on
    the flat tree; first a warm-up of the GROUP BY (the file cache) and, with ``warm_release``,
    of the release (the JVM's code, the Python workers)."""
    from inftda_duckdb.spark import release

    names = [f"c{i}" for i in range(1, len(FLAT) + 1)]
    doms = domains(FLAT)

    def bare() -> None:
        noop(spark.read.parquet(str(path)).groupBy(*names).count())

    stages: list[float] = []

    def spark_release() -> None:  # stages: release() returns (leaf GROUP BY, checks, levels
        start = time.perf_counter()  # 1..c on the driver), then the lazy subtree job runs
        result = release(spark.read.parquet(str(path)), names, rho=1, domains=doms,
                         ledger=con)  # the DuckDB releases' ledger: one file, one handle
        stages.append(time.perf_counter() - start)
        noop(result)

    con = duckdb.connect(ledger)
    from inftda_duckdb.duckdb.extension import load
    from inftda_duckdb.duckdb.extension import release as duck_release

    load(con)
    con.execute("SET threads = 2")
    con.execute(f"CREATE OR REPLACE VIEW flat AS SELECT * FROM read_parquet('{path}')")

    def duck_bare() -> None:
        con.execute(f"SELECT count(*) FROM (SELECT {', '.join(names)}, count(*) "
                    "FROM flat GROUP BY ALL)").fetchall()

    def duck() -> None:
        duck_release(con, "flat", names, rho=1, domains=doms)

    bare()  # warm-up: the file cache
    if warm_release:
        spark_release()  # the JVM's code, Python workers
    stages.clear()
    pairs = []
    for _ in range(repeat):
        pairs.append((timed(bare), timed(spark_release), timed(duck_bare), timed(duck)))
    con.close()
    b, r, db, dr = (statistics.median(p[i] for p in pairs) for i in range(4))
    ratios = [p[1] / p[0] for p in pairs]
    before = statistics.median(stages)
    after = statistics.median(p[1] - s for p, s in zip(pairs, stages, strict=True))
    return {"bare": b, "release": r, "ratio_medians": r / b,
            "ratio_pairs": statistics.median(ratios), "duck_bare": db, "duck": dr,
            "pairs": pairs, "before": before, "after": after}


def bench_skew(spark: Any, path: Path, ledger: str) -> dict[str, Any]:
    """The leaves each of SKEW_TASKS tasks releases (``spark_partition_id`` of the released
    rows: the last ``mapInArrow`` keeps its shuffle's partitions), largest first, and the time
    to evaluate the release, in bands (the default) and in one band (a task's share set past
    the leaves' bound: the subtrees of the cut alone)."""
    from pyspark.sql import functions as F

    from inftda_duckdb.spark import release
    from inftda_duckdb.spark.descent import SHARE_SETTING

    names = [f"c{i}" for i in range(1, len(SKEW) + 1)]
    frame = spark.read.parquet(str(path))
    found: dict[str, Any] = {"bare": timed(lambda: noop(frame.groupBy(*names).count()))}
    for mode, share in (("bands", None), ("one band", str(1 << 62))):
        if share is not None:
            spark.conf.set(SHARE_SETTING, share)
        try:
            start = time.perf_counter()
            result = release(frame, names, rho=1, domains=domains(SKEW), ledger=ledger,
                             partitions=SKEW_TASKS)
            rows = result.groupBy(F.spark_partition_id().alias("p")).count().collect()
            seconds = time.perf_counter() - start
        finally:
            spark.conf.unset(SHARE_SETTING)
        shares = sorted((r["count"] for r in rows), reverse=True)
        found[mode] = {"seconds": seconds, "shares": shares, "leaves": sum(shares)}
    return found


def bench_large_domain(spark: Any, rows: int, values: int, ledger: str) -> dict[str, Any]:
    """A release over ``item`` (``values`` values, uniform) x ``kind`` (2), from a generated
    DataFrame (cached first), its domain declared as a range and as a one-column domain table:
    the evaluated release against Spark's bare GROUP BY, and the driver's peak RSS (reset
    before each release)."""
    from pyspark.sql import functions as F

    from inftda_duckdb.spark import release, unpin

    frame = spark.range(rows).select(
        (F.xxhash64("id") % values).cast("long").alias("item"),
        F.when(F.col("id") % 3 == 0, "a").otherwise("b").alias("kind")).where("item >= 0")
    frame = frame.cache()
    frame.count()
    names = ["item", "kind"]
    found: dict[str, Any] = {"bare": timed(lambda: noop(frame.groupBy(*names).count()))}
    table = spark.range(values).selectExpr("id AS item")
    for mode in ("range", "domain table"):
        reset_peak_rss()
        start = time.perf_counter()
        doms: dict[str, Any] = {"kind": ["a", "b"]}
        if mode == "range":
            doms["item"] = range(values)
        result = release(frame, names, rho=1, domains=doms, ledger=ledger, source_name="big",
                         domain_tables=[table] if mode == "domain table" else None)
        noop(result)
        found[mode] = {"seconds": time.perf_counter() - start, "rss": peak_rss_mb()}
        unpin(result)
    found["bare_again"] = timed(lambda: noop(frame.groupBy(*names).count()))
    frame.unpersist()
    return found


def large_domain_section(found: dict[str, Any], rows: int, values: int) -> list[str]:
    bare = statistics.median([found["bare"], found["bare_again"]])
    lines = [
        f"### Large domain: {rows:,} rows over {values:,} x 2 values (kept on the executors)",
        "",
        f"Spark's bare GROUP BY {found['bare']:.2f} s before the releases, "
        f"{found['bare_again']:.2f} s after (a cached DataFrame). Every release runs under "
        "`spark.driver.maxResultSize=1m`; the domain is never collected to the driver nor "
        "shipped in a task.",
        "",
        "| domain declared as | release (evaluated) | release / GROUP BY | driver peak RSS |",
        "|---|---|---|---|",
    ]
    for mode in ("range", "domain table"):
        m = found[mode]
        lines.append(f"| {mode} | {m['seconds']:.2f} s | {m['seconds'] / bare:.2f} | "
                     f"{m['rss']:.0f} MB |")
    return [*lines, ""]


def reset_peak_rss() -> None:
    """Start a new high-water mark of this process's RSS (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def bench_deep(spark: Any, path: Path, out: Path, ledger: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from inftda_duckdb.spark import release
    from inftda_duckdb.spark.subtrees import CUT_CELLS

    names = [f"c{i}" for i in range(1, len(DEEP) + 1)]
    frame = spark.read.parquet(str(path))
    bare = timed(lambda: noop(frame.groupBy(*names).count()))
    reset_peak_rss()
    start = time.perf_counter()
    result = release(frame, names, rho=1, domains=domains(DEEP), ledger=ledger)
    planned = time.perf_counter() - start
    result.write.mode("overwrite").parquet(str(out))
    seconds = time.perf_counter() - start
    driver_rss = peak_rss_mb()
    written = spark.read.parquet(str(out))
    # cells noised at level k = (released nodes at level k-1) x 40, and the released nodes of
    # a level are the distinct prefixes of the released leaves
    parents = [1] + [
        written.select(*names[:k]).distinct().count() for k in range(1, len(DEEP))
    ]
    noised = sum(p * size for p, size in zip(parents, DEEP, strict=True))
    leaves, total = written.agg(F.count("*"), F.sum("count")).collect()[0]
    return {"bare": bare, "release": seconds, "driver_part": planned, "noised": noised,
            "parents": parents, "leaves": leaves, "total": total, "cut_cells": CUT_CELLS,
            "rss": driver_rss}


def scale_section(spark: Any, folder: Path, scale: list[int], args: Any, flat: dict[str, Any],
                  ledger: str) -> list[str]:
    """The flat tree at each row count: median pairs (3 runs up to 1e7 rows, 1 past it; the
    flat section's own runs at its row count)."""
    lines = [
        "### Scale: the flat tree (50 x 20 x 24 x 10) from 1e6 to 1e8 rows",
        "",
        "| rows | runs | Spark GROUP BY | Spark release | release / GROUP BY | "
        "DuckDB GROUP BY | DuckDB release | DuckDB ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rows in scale:
        if rows == args.rows:
            r, runs = flat, args.repeat
        else:
            path = folder / f"flat_{rows}.parquet"
            write_parquet(path, rows, FLAT, skewed=True)
            runs = 3 if rows <= 10_000_000 else 1
            r = bench_flat(spark, path, runs, ledger, warm_release=False)
            path.unlink()
        lines.append(
            f"| {rows:,} | {runs} | {r['bare']:.2f} s | {r['release']:.2f} s | "
            f"{r['ratio_medians']:.2f} | {r['duck_bare']:.2f} s | {r['duck']:.2f} s | "
            f"{r['duck'] / r['duck_bare']:.2f} |")
    return [
        *lines,
        "",
        "Ratio of the medians of interleaved runs after a warm-up GROUP BY (the file cache); "
        "the release's warm-up (the JVM's code) is the flat section's.",
        "",
    ]


def skew_section(found: dict[str, Any], rows: int) -> list[str]:
    lines = [
        f"### Skew: {rows:,} rows, 3 x 20,000 x 100 values, 87% under one value of level 1",
        "",
        f"Spark's bare GROUP BY {found['bare']:.2f} s. Released leaves per task "
        f"({SKEW_TASKS} tasks), largest first; fair share = leaves / {SKEW_TASKS}.",
        "",
        "| descent | release (evaluated) | leaves | largest task / fair share | "
        "leaves per task |",
        "|---|---|---|---|---|",
    ]
    for mode in ("bands", "one band"):
        m = found[mode]
        fair = m["leaves"] / SKEW_TASKS
        lines.append(f"| {mode} | {m['seconds']:.2f} s | {m['leaves']:,} | "
                     f"{m['shares'][0] / fair:.2f} | {', '.join(f'{x:,}' for x in m['shares'])} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--deep-rows", type=int, default=10_000_000)
    parser.add_argument("--scale", default="1000000,10000000,100000000",
                        help="row counts of the scale table (comma-separated; empty: none)")
    parser.add_argument("--skew-rows", type=int, default=10_000_000, help="0: no skew section")
    parser.add_argument("--domain-values", type=int, default=2_000_000,
                        help="values of the large-domain section's domain (0: no section)")
    parser.add_argument("--no-deep", action="store_true")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import pyspark

    lines = [
        f"`python benchmarks/bench_spark.py --rows {args.rows} --repeat {args.repeat} "
        f"--deep-rows {args.deep_rows} --scale {args.scale} --skew-rows {args.skew_rows} "
        f"--domain-values {args.domain_values}` on "
        f"{datetime.date.today()}: {cpu_model()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, PySpark "
        f"{pyspark.__version__}, DuckDB {duckdb.__version__}; master {args.master}, "
        f"spark.driver.memory {DRIVER_MEMORY}, spark.driver.maxResultSize 1m. The machine is "
        "shared with other engineers' jobs: medians of interleaved runs.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ledger = str(folder / "ledger.duckdb")
        flat = folder / "flat.parquet"
        write_parquet(flat, args.rows, FLAT, skewed=True)
        spark = session(args.master)
        r = bench_flat(spark, flat, args.repeat, ledger)
        lines += [
            f"### Flat: {args.rows:,} rows, 50 x 20 x 24 x 10, from Parquet",
            "",
            "| engine | bare leaf GROUP BY | release | release / GROUP BY |",
            "|---|---|---|---|",
            f"| Spark local[2] | {r['bare']:.2f} s | {r['release']:.2f} s | "
            f"{r['ratio_medians']:.2f} (median of pair ratios {r['ratio_pairs']:.2f}) |",
            f"| DuckDB (2 threads) | {r['duck_bare']:.2f} s | {r['duck']:.2f} s | "
            f"{r['duck'] / r['duck_bare']:.2f} |",
            "",
            "Runs (Spark GROUP BY, Spark release, DuckDB GROUP BY, DuckDB release, s): "
            + "; ".join("/".join(f"{x:.2f}" for x in p) for p in r["pairs"]),
            "",
            f"Spark release by stage (medians): {r['before']:.2f} s until `release()` returns "
            "(the leaf GROUP BY, pinned, the summary job with the checks and the cut counts, "
            f"the charge, levels 1..c on the driver), {r['after']:.2f} s evaluating it (the "
            "shuffle by subtree and levels c+1..d on the executors, written to Spark's noop "
            "sink).",
            "",
        ]
        print("\n".join(lines))
        scale = [int(x) for x in args.scale.split(",") if x.strip()]
        if scale:
            section = scale_section(spark, folder, scale, args, r, ledger)
            print("\n".join(section))
            lines += section
        if args.skew_rows:
            skewed = folder / "skewed.parquet"
            write_skewed(skewed, args.skew_rows)
            section = skew_section(bench_skew(spark, skewed, ledger), args.skew_rows)
            print("\n".join(section))
            lines += section
        if args.domain_values:
            found = bench_large_domain(spark, args.rows, args.domain_values, ledger)
            section = large_domain_section(found, args.rows, args.domain_values)
            print("\n".join(section))
            lines += section
        if not args.no_deep:
            deep = folder / "deep.parquet"
            write_parquet(deep, args.deep_rows, DEEP, skewed=False)
            dr = bench_deep(spark, deep, folder / "deep_out.parquet", ledger)
            per_cell = dr["release"] / dr["noised"] * 1e9
            subtrees = dr["release"] - dr["driver_part"]
            lines += [
                f"### Deep: {args.deep_rows:,} rows, 5 levels x 40 values, uniform",
                "",
                f"- release (written to Parquet) {dr['release']:.1f} s, of which "
                f"{dr['driver_part']:.1f} s before the lazy subtree job (leaf GROUP BY, checks, "
                f"levels above the cut); bare GROUP BY {dr['bare']:.1f} s",
                f"- noised cells {dr['noised']:,} (released parents per level "
                f"{dr['parents']}); {per_cell:.0f} ns per noised cell end to end, "
                f"{subtrees / dr['noised'] * 1e9:.0f} ns in the subtree job ({subtrees:.1f} s: "
                f"shuffle, sort, Arrow, levels 3-5, Parquet), wall time on 2 cores; "
                f"{dr['leaves']:,} released leaves, total {dr['total']:,}",
                f"- driver memory: the driver's Python process peaked at {dr['rss']:.0f} MB RSS "
                f"during the deep release (its high-water mark reset before it); JVM heap "
                f"capped at {DRIVER_MEMORY} (local mode: the same JVM runs the tasks); results "
                f"reaching the driver capped at 1 MB; at most {dr['cut_cells']:,} cells at the "
                "cut level",
                "",
            ]
            print("\n".join(lines[-6:]))
        spark.stop()
    lines += SCALING
    if not args.no_write:
        write_section("bench_spark.py", lines)


if __name__ == "__main__":
    main()
