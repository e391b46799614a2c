"""The DuckDB engine's entry point: ``load(con)``, then ``release()`` / ``preview()`` from Python
or ``inftda_release`` / ``inftda_preview`` from SQL; what the front ends import.

Where each part lives:

- :mod:`.registration`: :func:`load`, the UDFs and TEMP table macros of a connection;
- :mod:`.statements`: the release and preview statements and their capability tokens, rendered
  for Python or at bind time for the SQL macros;
- :mod:`.udfs`: the bodies DuckDB calls while a statement runs (begin, levels, parts, preview);
- :mod:`.arrow_io`: the true leaves in and the released leaves out, as Arrow;
- :mod:`.registry`: the releases in progress and the Python calls waiting on them;
- :mod:`.api`: :func:`release`, :func:`preview`, :func:`plan` and :func:`run_release` (shared
  with the CLI);
- :mod:`.errorbars`: :func:`intervals` and the SQL error bars; :mod:`.planner`: ``inftda_plan``;
- :mod:`.stopping`: :func:`cancel`, :func:`interrupt` and :func:`statement` (Ctrl-C).
"""

from __future__ import annotations

from ..core.provenance import NotPrivateWarning
from .api import Released, plan, preview, release, run_release
from .errorbars import intervals
from .registration import load
from .registry import Progress
from .sqlgen import fragments
from .stopping import cancel, interrupt, statement

__all__ = ["NotPrivateWarning", "Progress", "Released", "cancel", "fragments", "interrupt",
           "intervals", "load", "plan", "preview", "release", "run_release", "statement"]
