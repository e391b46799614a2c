"""benchmarks/RESULTS.md: each benchmark script owns one section, headed ``## <script name>``."""

from __future__ import annotations

import platform
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def write_section(name: str, body: list[str]) -> None:
    """Replace (or append) the ``## name`` section, keeping every other section as it is."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
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
    RESULTS.write_text("\n".join(lines).rstrip() + "\n")


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo (else what platform knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            names = (line.split(":", 1)[1] for line in f if line.startswith("model name"))
            return next(names).strip()
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()
