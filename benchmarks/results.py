"""benchmarks/RESULTS.md: each benchmark script owns one section, headed ``## <script name>``.

The file is regenerated whole by ``python benchmarks/run_all.py``, which names the file its
scripts write into (the environment variable ``INFTDA_RESULTS``); a script run alone prints its
section and writes nothing, so the file never mixes sections of different runs.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
TARGET = "INFTDA_RESULTS"  # set by run_all.py: the file being regenerated


def write_section(name: str, body: list[str]) -> None:
    """Replace (or append) the ``## name`` section of the file run_all.py is regenerating,
    keeping its other sections; outside run_all.py, print where the figures would go."""
    target = os.environ.get(TARGET)
    if not target:
        print(f"(not written: {RESULTS.name} is regenerated whole by "
              "`python benchmarks/run_all.py`)", flush=True)
        return
    results = Path(target)
    text = results.read_text() if results.exists() else "# Benchmark results\n"
    lines = text.splitlines()
    start = next((i for i, x in enumerate(lines) if x.strip() == f"## {name}"), None)
    new = [f"## {name}", "", *body]
    if start is None:
        lines = [*lines, "", *new]
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        lines = lines[:start] + new + ([""] if end < len(lines) else []) + lines[end:]
    results.write_text("\n".join(lines).rstrip() + "\n")


def finish(name: str, body: list[str], started: float, write: bool) -> None:
    """End a benchmark: the total time, the section printed, and written unless ``write`` is
    False (``--no-write``)."""
    body += [f"Total benchmark time: {time.time() - started:.0f} s.", ""]
    print("\n".join(body), flush=True)
    if write:
        write_section(name, body)


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo (else what platform knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            names = (line.split(":", 1)[1] for line in f if line.startswith("model name"))
            return next(names).strip()
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def peak_rss_mb() -> float:
    """This process's peak RSS since exec (VmHWM; ru_maxrss would include the forking parent).

    Standard library only: the inf-tda peer script imports it inside the peer's own venv.
    """
    with open("/proc/self/status") as f:
        status = f.read().splitlines()
    for line in status:
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
