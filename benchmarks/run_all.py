"""Regenerate benchmarks/RESULTS.md whole: every benchmark script, one run, one date.

    python benchmarks/run_all.py                     # full size; replaces RESULTS.md at the end
    python benchmarks/run_all.py --quick             # small sizes, to check that all of it runs
    python benchmarks/run_all.py --only bench_noise  # some scripts (comma-separated names)

The scripts run one after another, each in its own process, each writing its ``## <script>``
section into a new file (``results.write_section``, told where by ``INFTDA_RESULTS``) under one
header: the date, the machine, the versions and the command. Only a full run (no ``--quick``, no
``--only``) that every script finished replaces RESULTS.md, at once; anything else is written to
``--out`` (default: a file in the temporary folder, named at the end), so RESULTS.md never mixes
sections of different runs. A script that fails stops the run and leaves RESULTS.md as it was.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import RESULTS, TARGET, cpu_model

HERE = Path(__file__).resolve().parent
# script -> its arguments for --quick. bench_paper first: it installs the inf-tda 0.1 peer's
# virtualenv that bench_intopt uses too.
SCRIPTS: dict[str, list[str]] = {
    "bench_paper": ["--quick"],
    "bench_noise": ["--n", "65536", "--opendp-n", "2000"],
    "bench_intopt": [],
    "bench_release": ["--quick"],
    "bench_ledger": ["--rows", "200", "--repeat", "5"],
    "bench_accuracy": ["--quick"],
    "bench_least_squares": ["--quick"],
    "bench_spark": ["--rows", "200000", "--repeat", "1", "--no-deep", "--scale", "100000",
                    "--skew-rows", "200000"],
}


def versions() -> str:
    import duckdb
    import numpy

    found = [f"Python {platform.python_version()}", f"duckdb {duckdb.__version__}",
             f"numpy {numpy.__version__}"]
    for name in ("numba", "pyarrow", "pyspark"):
        try:
            found.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def header(command: str, started: datetime.datetime) -> str:
    memory = "unknown"
    try:
        line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in x)
        memory = f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except (OSError, StopIteration):
        pass
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    return "\n".join([
        "# Benchmark results",
        "",
        f"Regenerated whole by `{command}` on {started:%Y-%m-%d} (started {started:%H:%M} UTC): "
        "every section below is from this one run.",
        f"Machine: {os.cpu_count()} cores ({cpu_model()}), {memory} RAM, {platform.platform()}. "
        f"{versions()}. Load average at the start: {load}.",
        "These are the only measured figures of the project: the docs and docstrings state "
        "contracts and point here. The machine may be shared: each section says how it "
        "measured (side by side, medians, best of).",
        "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a check, not figures)")
    parser.add_argument("--only", help=f"comma-separated scripts, of: {', '.join(SCRIPTS)}")
    parser.add_argument("--out", type=Path, help="write here (a full run: RESULTS.md)")
    args = parser.parse_args()
    chosen = list(SCRIPTS) if not args.only else [s.removesuffix(".py").strip()
                                                  for s in args.only.split(",")]
    unknown = [s for s in chosen if s not in SCRIPTS]
    if unknown:
        parser.error(f"--only: no benchmark {', '.join(unknown)} (known: {', '.join(SCRIPTS)})")
    partial = args.quick or bool(args.only)
    final = args.out or (Path(tempfile.gettempdir()) / "RESULTS-partial.md" if partial
                         else RESULTS)
    command = ("python benchmarks/run_all.py" + (" --quick" if args.quick else "")
               + (f" --only {','.join(chosen)}" if args.only else ""))
    started = datetime.datetime.now(datetime.UTC)
    work = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    work.write_text(header(command, started))
    env = dict(os.environ, **{TARGET: str(work)})
    for script in chosen:
        extra = SCRIPTS[script] if args.quick else []
        print(f"[{time.strftime('%H:%M:%S')}] {script}.py {' '.join(extra)}", flush=True)
        result = subprocess.run([sys.executable, str(HERE / f"{script}.py"), *extra], env=env,
                                cwd=HERE.parent, check=False)
        if result.returncode != 0:
            work.unlink()
            print(f"{script}.py failed (exit status {result.returncode}): {final} left as it "
                  "was", file=sys.stderr)
            return 1
    seconds = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
    with work.open("a") as f:
        f.write(f"\nThe whole run took {seconds / 60:.1f} minutes.\n")
    work.replace(final)
    print(f"wrote {final}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
