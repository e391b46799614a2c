"""DuckDB's own errors about the package's SQL, explained where DuckDB lets us.

DuckDB raises a binder error for a misspelled macro parameter (``rhoo := 2``) or a macro whose
functions this process never registered (``load()`` forgotten after a restart) before any of the
package's code runs, and its Python API has no hook to change that text. So the explanation
(:func:`~inftda_duckdb.core.errors.duckdb_hint`) is given where the error surfaces:

- :func:`explain`: ``inftda_duckdb.explain(exc)`` for an error the caller caught; the statement
  is taken from ``sql`` or found in the frame that raised it;
- uncaught in a script or the Python prompt: :func:`install` (called by ``load()``) chains
  ``sys.excepthook``, which adds the explanation as a note under DuckDB's message;
- IPython and Jupyter (``con.sql``, jupysql's ``%sql``, which may re-raise DuckDB's error as a
  ``RuntimeError``): a custom exception handler prints it after the traceback, reading the
  statement from the cell.
"""

from __future__ import annotations

import linecache
import sys
import traceback
from types import TracebackType
from typing import Any

import duckdb

from ..core.errors import duckdb_hint


def _duckdb_error(exc: BaseException | None) -> BaseException | None:
    """``exc`` or its cause when it is a DuckDB error (jupysql wraps DuckDB's errors)."""
    for e in (exc, getattr(exc, "__cause__", None)):
        if isinstance(e, duckdb.Error):
            return e
    return None


def _statement(tb: TracebackType | None) -> str:
    """Text that may hold the failed statement: in each frame of ``tb`` (the caller's, and
    DuckDB's own Python layers where it has them), the strings that name the package's SQL and
    the source of the call that raised (the whole expression, over several lines)."""
    parts: list[str] = []
    for frame, summary in zip(traceback.walk_tb(tb), traceback.extract_tb(tb), strict=True):
        parts += [v for v in frame[0].f_locals.values() if isinstance(v, str) and "inftda_" in v]
        if summary.lineno:
            last = summary.end_lineno or summary.lineno
            parts += [linecache.getline(summary.filename, n)
                      for n in range(summary.lineno, last + 1)]
    return "\n".join(parts)


def explain(exc: BaseException, sql: str | None = None) -> str | None:
    """What DuckDB's error ``exc`` about the package's SQL means (a misspelled parameter of
    ``inftda_release`` / ``inftda_preview``, a forgotten ``load()``), or None when it is not
    about the package. ``sql``: the statement; default: found in the frame that raised it."""
    error = _duckdb_error(exc)
    if error is None:
        return None
    return duckdb_hint(str(error), sql if sql is not None else _statement(exc.__traceback__))


def _excepthook(previous: Any) -> Any:
    def hook(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> Any:
        hint = explain(value) if isinstance(value, BaseException) else None
        if hint and f"inftda_duckdb: {hint}" not in getattr(value, "__notes__", ()):
            value.add_note(f"inftda_duckdb: {hint}")
        return previous(etype, value, tb)

    hook.inftda_explains = True  # type: ignore[attr-defined]
    return hook


def _ipython_hint(shell: Any, etype: type, value: BaseException, tb: Any,
                  tb_offset: int | None = None) -> Any:
    """IPython's handler: the traceback as usual, then what the error means when it is about
    the package's SQL (the statement read from the cell)."""
    shown_tb = shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    cells = shell.user_ns.get("_ih") or [""]
    hint = explain(value, f"{cells[-1]}\n{_statement(tb)}")
    if hint:
        print(f"inftda_duckdb: {hint}", file=sys.stderr)
    return shown_tb


def install() -> None:
    """Explain DuckDB's errors about the package's SQL where they are shown (idempotent):
    ``sys.excepthook`` (scripts, the Python prompt) and, under IPython, a custom exception
    handler (DuckDB errors and jupysql's ``RuntimeError`` around them)."""
    if not getattr(sys.excepthook, "inftda_explains", False):
        sys.excepthook = _excepthook(sys.excepthook)
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return
    try:
        shell = ipython.get_ipython()
        if shell is not None and duckdb.Error not in shell.custom_exceptions:
            shell.set_custom_exc((duckdb.Error, RuntimeError), _ipython_hint)
    except Exception:  # an IPython without set_custom_exc: DuckDB's message alone
        return


__all__ = ["explain", "install"]
