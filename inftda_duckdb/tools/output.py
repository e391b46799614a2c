"""What the command line writes: result tables (box, CSV, JSON) and released files with their
provenance.

- :func:`render` draws an Arrow table as DuckDB's box table (the shell's results too).
- :func:`emit` prints a table as DuckDB's box table (``--format table``, for people), CSV or JSON
  (for scripts; exact values: fractions stay strings, doubles keep every digit).
- :func:`write_release` writes a released Arrow table to Parquet (the provenance record as the
  file's key-value metadata) or CSV (the record in a JSON sidecar, ``<file>.provenance.json``),
  each under a temporary name in the same folder, renamed at the end: a failed run leaves
  nothing behind.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, TextIO

import duckdb
import pyarrow as pa

from ..core.identifiers import literal, quote
from ..core.provenance import SIDECAR

FORMATS = ("table", "csv", "json")
MAX_ROWS = 40  #: rows a box table shows (the shell's default)


def _plain(value: Any) -> Any:
    """A JSON/CSV-friendly value: text for fractions, decimals, dates and times."""
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)  # sum() of BIGINTs is a HUGEINT / DECIMAL: still a whole number
    if isinstance(value, Fraction | Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def render(con: duckdb.DuckDBPyConnection, table: pa.Table, max_rows: int = MAX_ROWS,
           max_width: int | None = None) -> str:
    """Render an Arrow table as DuckDB's box table (reads the materialised rows, runs no query).

    ENUM (dictionary) columns are shown as their labels, so the type row stays short. The width
    is the terminal's, or 1000 characters when output goes to a pipe or a file.
    """
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            column = table.column(i).cast(field.type.value_type)
            table = table.set_column(i, pa.field(field.name, field.type.value_type), column)
    if max_width is None:  # a terminal's width; no limit worth the name for a pipe or a file
        tty = sys.stdout.isatty()
        max_width = max(shutil.get_terminal_size((120, 24)).columns, 40) if tty else 1000
    width = max_width
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        con.from_arrow(table).show(max_width=width, max_rows=max_rows)
    return buffer.getvalue()


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as plain dicts (ENUM / dictionary columns as their labels)."""
    return [{k: _plain(v) for k, v in r.items()} for r in table.to_pylist()]


def emit(con: duckdb.DuckDBPyConnection, table: pa.Table, fmt: str = "table",
         columns: Sequence[str] = (), out: TextIO | None = None) -> None:
    """Print ``table`` (only ``columns`` if given) in ``fmt``: 'table', 'csv' or 'json'."""
    out = out or sys.stdout
    if columns:
        table = table.select([c for c in columns if c in table.column_names])
    if fmt == "json":
        out.write(json.dumps(rows(table), indent=1, ensure_ascii=False) + "\n")
        return
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(table.column_names)
        for row in rows(table):
            writer.writerow(json.dumps(v) if isinstance(v, list | dict) else v
                            for v in row.values())
        return
    for i, field in enumerate(table.schema):  # a box table for people: 6 significant digits
        if pa.types.is_floating(field.type):
            values = [None if v is None else float(f"{v:.6g}") for v in table.column(i).to_pylist()]
            table = table.set_column(i, field, pa.array(values, field.type))
    out.write(render(con, table, max_rows=1000))


def sidecar(path: str) -> str:
    """The provenance sidecar of a CSV file: ``<path>.provenance.json``."""
    return path + SIDECAR


def _temporary(path: str, suffix: str = "") -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}.tmp{suffix}")


def write_release(con: duckdb.DuckDBPyConnection, table: pa.Table, path: str, kind: str,
                  record: Mapping[str, str]) -> list[str]:
    """Write ``table`` to ``path`` ('parquet' or 'csv') with its provenance ``record``; returns
    the files written (the CSV's sidecar too). Temporary names, renamed at the end."""
    data = _temporary(path, "." + kind)
    side = _temporary(sidecar(path), ".json")
    name = "inftda_cli_output"
    con.register(name, table.replace_schema_metadata(None))
    try:
        if kind == "parquet":
            kv = ", ".join(f"{literal(k)}: {literal(v)}" for k, v in record.items())
            options = f"FORMAT parquet, KV_METADATA {{{kv}}}"
        else:
            options = "FORMAT csv, HEADER true"
        con.execute(f"COPY (SELECT * FROM {quote(name)}) TO {literal(data)} ({options})")
        written = [path]
        if kind == "csv":
            with open(side, "w", encoding="utf-8") as handle:
                json.dump({"file": os.path.basename(path), **record}, handle, indent=1)
                handle.write("\n")
            os.replace(side, sidecar(path))
            written.append(sidecar(path))
        os.replace(data, path)
        return written
    finally:
        con.unregister(name)
        for leftover in (data, side):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)


def read_provenance(con: duckdb.DuckDBPyConnection, path: str) -> dict[str, str]:
    """The provenance record of a released file (Parquet metadata or the CSV's sidecar)."""
    if path.lower().endswith(".csv"):
        with open(sidecar(path), encoding="utf-8") as handle:
            record: dict[str, str] = json.load(handle)
        record.pop("file", None)
        return record
    found = con.execute("SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
                        [path]).fetchall()
    return {k: v for k, v in found if k != "ARROW:schema"}


__all__ = ["FORMATS", "MAX_ROWS", "emit", "read_provenance", "render", "rows", "sidecar",
           "write_release"]
