"""The package's internal UDFs called by hand with malformed arguments (issue 33, D12): they
raised raw TypeError, JSONDecodeError or KeyError, or an InternalError saying "this is a bug".
Any caller can call them by name (DuckDB's Python UDFs are instance-wide); each must refuse
with a clear message of the package, charge nothing and keep the process alive.

Every UDF of the package is called with every malformed value in each argument (the others
plausible), in curator and in public-facing mode."""

from __future__ import annotations

import re
from collections.abc import Iterator

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.duckdb.extension import load

TEXTS = ["NULL", "''", "'x'", "'null'", "'3'", "'\"s\"'", "'[]'", "'[1, 2]'", "'{}'",
         "'{\"a\": 1}'", "'{\"token\": 5}'", "'{\"token\": \"t\", \"request\": 3}'",
         "'{\"source\": 1}'", "'{\"source\": \"t\", \"columns\": \"dx\", \"rho\": \"x\"}'",
         "'{\"source\": \"t\", \"columns\": [\"dx\"], \"rho\": 1, \"session\": 5}'",
         "'{\"source\": \"t\", \"columns\": [\"dx\"], \"rho\": 1, \"domains\": {\"dx\": [\"0\"]}, "
         "\"session\": {\"profiling\": null, \"query\": 5}, \"current_database\": 1, "
         "\"memory_limit\": []}'",
         "'{\"spec\": null, \"request\": \"{}\", \"domains\": 3, \"origin\": \"sql\"}'",
         "repeat('[', 100000)"]
SAMPLES = {
    "VARCHAR": TEXTS,
    "BIGINT": ["NULL", "-1", "0", "1", "9223372036854775807", "-9223372036854775808"],
    "UBIGINT": ["NULL", "0", "18446744073709551615"],
    "INTEGER": ["NULL", "-1", "0"],
    "DOUBLE": ["NULL", "'nan'::DOUBLE", "-1.0", "0.0", "'inf'::DOUBLE", "1e308"],
    "BOOLEAN": ["NULL", "true", "false"],
    "VARCHAR[]": ["NULL", "[]::VARCHAR[]", "['x']", "[NULL]::VARCHAR[]"],
    "BIGINT[]": ["NULL", "[]::BIGINT[]", "[1, -1]", "[NULL]::BIGINT[]",
                 "[9223372036854775807, 9223372036854775807]"],
}
RAW = re.compile(r"TypeError|JSONDecodeError|KeyError|AttributeError|ValueError|IndexError|"
                 r"OverflowError|ZeroDivisionError|RecursionError|ArrowInvalid|ArrowTypeError|"
                 r"UnicodeError|this is a bug|INTERNAL|Traceback")


def _samples(typ: str) -> list[str]:
    if typ in SAMPLES:
        return SAMPLES[typ]
    if typ.startswith("STRUCT") and typ.endswith("[]"):
        return ["NULL", f"[]::{typ}", f"[NULL]::{typ}"]
    if typ.startswith("STRUCT"):
        return ["NULL", f"NULL::{typ}", f"{{'k': [[1]], 'key': [1], 'n': [1]}}::{typ}",
                f"{{'k': NULL, 'key': [1, 2], 'n': [1]}}::{typ}"]
    return ["NULL"]


def _calls(name: str, types: list[str]) -> Iterator[str]:
    plausible = [_samples(t)[min(1, len(_samples(t)) - 1)] for t in types]
    yield f"SELECT {name}({', '.join('NULL' for _ in types)})"
    for i, typ in enumerate(types):
        for value in _samples(typ):
            args = [*plausible[:i], value, *plausible[i + 1:]]
            yield f"SELECT {name}({', '.join(args)})"
    if types and any(t.startswith("STRUCT") for t in types):  # two rows in one call
        yield f"SELECT {name}({', '.join(plausible)}) FROM range(2)"


@pytest.mark.parametrize("mode", ["curator", "public"])
def test_internal_udfs_refuse_malformed_arguments(mode: str) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 2)::VARCHAR AS dx FROM range(100) r(i)")
    load(con, mode=mode)
    inftda_duckdb.set_budget(con, "t", rho=100)
    udfs = con.execute(
        "SELECT function_name, parameter_types FROM duckdb_functions() WHERE database_name = "
        "'system' AND function_name LIKE 'inftda_%' AND function_type = 'scalar'").fetchall()
    assert len(udfs) >= 12
    raw = {}
    for name, types in udfs:
        for sql in _calls(name, list(types)):
            try:
                con.execute(sql).fetchall()
            except duckdb.Error as exc:
                text = str(exc).split("\n\nAt:\n")[0]
                if RAW.search(text):
                    raw.setdefault(re.sub(r"_\d+\(", "(", sql[:120]), text[:300])
    assert not raw, "\n".join(f"{k}\n    {v}" for k, v in sorted(raw.items()))
    assert con.execute("SELECT count(*) FROM inftda_ledger").fetchall() == [(0,)]
    con.close()
