"""Error bars in DuckDB: every released count with its proven interval, and sums with theirs.

SQL (table macros registered by ``load``; each is ``SELECT * FROM query(<SQL>)`` whose text a
side-effect-free UDF renders at bind time from the release's public plan, reading only the
catalog and the ledger; the rendered statement reads the released table as the caller):

- ``inftda_intervals(released, level := k, beta := 0.05, joint := NULL, release := NULL)``: the
  k-prefix rows of the release (the prefix columns, ``count``, ``lower``, ``upper``);
- ``inftda_bounds(released, beta := 0.05, joint := NULL, release := NULL)``: per level, its
  bound alone and on the one event of levels ``1..joint``, with their integer half-widths;
- ``inftda_sum(released, cells, level := k, by := 0, beta := 0.05, joint := NULL, release :=
  NULL)``: the sum of the released counts over a set of k-prefixes (the rows of the table or
  view ``cells``), per group of its first ``per`` columns, with its interval;
- ``inftda_plan(source, columns, max_error := X, level := k, ...)`` (:mod:`.api`): the rho a
  target error needs.

``released`` is a table or view (its provenance in its comment, as the command line writes it),
a Parquet or CSV file the command line wrote (its metadata or sidecar), or, from Python, the Arrow
table ``release()`` returned; ``release := ID`` names the release's ledger entry instead, for a
table made by ``CREATE TABLE ... AS SELECT * FROM inftda_release(...)``, which carries no
provenance of its own. What the guarantees are, and their proofs: docs/explanation/error-bars.md
and :mod:`inftda_duckdb.core.errorbars`.
"""

from __future__ import annotations

import glob
import json
import os
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from ..core import errorbars as eb
from ..core.errors import InputError, bad_argument, opt, speaking, speaks
from ..core.identifiers import fold, label, literal, parse_qualified, quote, quote_qualified
from ..core.provenance import MARKER, SIDECAR, from_comment
from . import arguments, catalog, disclosure
from .budgets import table_sql
from .connections import create_function, create_macro, register_udfs

FILES = (".parquet", ".pq", ".csv")
SPARK_SCHEMA = "org.apache.spark.sql.parquet.row.metadata"  # Spark's schema in its Parquet files


@dataclass(frozen=True)
class Located:
    """A release found: its public plan, its provenance record, the SQL that reads its rows,
    and what it is called in messages."""

    plan: eb.PublicPlan
    record: dict[str, Any]
    reader: str
    where: str
    names: tuple[str, ...]  # its prefix columns as the table spells them


def _file(path: str) -> bool:
    """A released file: a .parquet/.pq/.csv file, or a folder of Parquet parts (Spark's)."""
    return path.lower().endswith(FILES) and (os.path.isfile(path) or (
        os.path.isdir(path) and bool(_parts(path))))


def _parts(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(glob.escape(folder), "*.parquet")))


def _file_record(cur: Any, path: str) -> tuple[str, dict[str, Any] | None]:
    """(the SQL reading a released file, its provenance record or None)."""
    if os.path.isdir(path):
        first = _parts(path)[0]
        record = _file_record(cur, first)[1]
        return f"read_parquet({literal(os.path.join(path, '*.parquet'))})", record
    if path.lower().endswith(".csv"):
        record = None
        if os.path.isfile(path + SIDECAR):
            with open(path + SIDECAR, encoding="utf-8") as handle:
                record = json.load(handle)
        return f"read_csv({literal(path)})", record
    rows = cur.execute("SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
                       [path]).fetchall()
    record = {k: v for k, v in rows if k != "ARROW:schema"}
    spark = record.get(SPARK_SCHEMA)
    if spark and "mechanism" not in record:  # written by Spark: the columns' metadata
        fields = json.loads(spark).get("fields", [])
        text = next((f["metadata"]["inftda"] for f in fields
                     if "inftda" in (f.get("metadata") or {})), None)
        record = json.loads(text) if text else {}
    return f"read_parquet({literal(path)})", record or None


def _table_record(cur: Any, con: Any, released: str, context: catalog.Context | None
                  ) -> tuple[str, str, dict[str, Any] | None]:
    """(the SQL reading a released table or view, its label, its record or None)."""
    found = catalog.resolve(cur, released, context)
    if found is not None:
        _public_only(con, found, "released", released)
    if found is None:
        close = catalog.candidates(cur, released)
        raise bad_argument("released", released, "was not found (no such table, view or "
                           "released file)", "pass a table name" + (
                               f"; did you mean {', '.join(close)}?" if close else "")
                           + " (from SQL, a TEMP table is out of reach: make it a table, or "
                           "call inftda_duckdb.intervals from Python)")
    rows = cur.execute(
        "SELECT comment FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? AND "
        "table_name = ? UNION ALL SELECT comment FROM duckdb_views() WHERE database_name = ? "
        "AND schema_name = ? AND view_name = ?", [*found, *found]).fetchall()
    record = from_comment(rows[0][0]) if rows else None
    return quote_qualified(found), label(found), record


def _ledger_rows(con: Any, rid: int) -> list[tuple[str, dict[str, Any]]]:
    """(ledger location, row) for release ``rid`` in every ledger ``con`` can show."""
    out = []
    for ledger in catalog.ledgers(con):
        row = ledger.release(rid)
        if row is not None:
            out.append((ledger.location, row))
    return out


def _candidates(con: Any, columns: list[str]) -> str:
    """The releases of the ledgers of ``con`` over ``columns`` (for an error's fix)."""
    found = []
    for ledger in catalog.ledgers(con):
        for r in ledger.rows().to_pylist():
            if [fold(c) for c in r["columns"]] == [fold(c) for c in columns]:
                found.append(f"{r['id']} ({r['source']}, rho {r['rho']})")
    return ("; releases over these columns in this connection's ledger: " + ", ".join(
        found[-5:])) if found else ""


def locate(cur: Any, con: Any, released: object, release: object = None,
           context: catalog.Context | None = None) -> Located:
    """The release ``released`` names (a table or view, a released file), with its plan from
    its own provenance or from the ledger entry ``release``, checked against each other and
    against the table's columns; an InputError otherwise (never a made-up interval)."""
    if not isinstance(released, str) or not released.strip():
        raise bad_argument("released", released, "must name a released table, view or file",
                           "pass e.g. 'trips_dp' or 'trips_dp.parquet'")
    if _file(released):
        if disclosure.is_public(con):
            raise disclosure.refuse("reading a file by its path", "ask the curator to load the "
                                    "release as a table and declare it public")
        reader, record = _file_record(cur, released)
        where = f"file {released}"
    else:
        reader, where, record = _table_record(cur, con, released, context)
    names = _columns(cur, reader)
    rid = _release_id(release)
    if rid is not None:
        record = _from_ledger(con, rid, record, where)
    elif record and record.get("ledger_id"):
        _cross_check(con, record, where)
    if not record:
        cols = [n for n in names if n not in ("count", MARKER)]
        raise eb.refused(where, eb.NOT_A_RELEASE, eb.find_it() + _candidates(con, cols))
    plan = eb.from_record(record, where)
    return Located(plan, dict(record), reader, where, _check_shape(plan, names, where))


def _release_id(release: object) -> int | None:
    if release is None:
        return None
    if isinstance(release, int) and not isinstance(release, bool) and release >= 1:
        return release
    raise bad_argument("release", release, "must be a release's ledger id (a positive integer)",
                       "find it with SELECT id, source, columns FROM inftda_releases()")


def _from_ledger(con: Any, rid: int, record: dict[str, Any] | None, where: str
                 ) -> dict[str, Any]:
    """The record of ledger entry ``rid``, checked against the table's own record if any."""
    rows = _ledger_rows(con, rid)
    if not rows:
        raise bad_argument("release", rid, "is no release of this connection's ledgers",
                           "find its id with SELECT id, source, columns FROM inftda_releases()")
    if len(rows) > 1:
        raise bad_argument("release", rid, "is a release id in several ledgers ("
                           + ", ".join(loc for loc, _ in rows) + ")",
                           "load the connection with the one ledger that charged it: "
                           "load(con, ledger=...)")
    location, row = rows[0]
    if not row["plan"]:
        raise eb.refused(where, f"names release {rid}, whose ledger row in {location} has no "
                         "public plan (charged by an older inftda-duckdb)",
                         "use the release's own provenance (a table or file the command line "
                         "wrote, the Arrow table release() returned), or release again")
    if record:
        mine = str(record.get("ledger_id") or "")
        if mine != str(rid):
            raise eb.refused(where, f"carries the provenance of ledger entry {mine or '(none)'}"
                             f", not of release {rid}", f"leave out {opt('release', rid)}, or "
                             "name the table made by that release")
        _disagree(record, row, where)
    return eb.record_of_ledger_row(row, row["plan"])


def _cross_check(con: Any, record: dict[str, Any], where: str) -> None:
    """A record naming a ledger id: the row with that id, source and columns in a ledger of
    ``con`` (if any: a table may travel to where its ledger is not) must agree with it."""
    rid = int(record["ledger_id"]) if str(record["ledger_id"]).isdigit() else None
    if rid is None:
        return
    columns = json.loads(str(record.get("columns") or "[]"))
    for _, row in _ledger_rows(con, rid):
        if row["source"] == record.get("source") and list(row["columns"]) == columns:
            _disagree(record, row, where)


def _disagree(record: dict[str, Any], row: dict[str, Any], where: str) -> None:
    differ = eb.disagreement(record, row)
    if differ:
        raise eb.refused(where, f"has a provenance that disagrees with its ledger row "
                         f"{row['id']}: " + "; ".join(differ) + " (edited?)",
                         "use the release as it was written, or name its ledger entry: "
                         f"{opt('release', row['id'])}")


def _columns(cur: Any, reader: str) -> tuple[str, ...]:
    try:
        return tuple(d[0] for d in cur.execute(f"SELECT * FROM {reader} LIMIT 0").description)
    except duckdb.Error as exc:
        raise bad_argument("released", reader, f"cannot be read ({str(exc).strip()})",
                           "pass a released table, view or file") from None


def _check_shape(plan: eb.PublicPlan, names: tuple[str, ...], where: str) -> tuple[str, ...]:
    """The table's spelling of the release's columns; an InputError if its columns are not a
    release's of ``plan`` (a hierarchy column missing, ``count`` missing or extra, a table
    marked not private whose provenance says private)."""
    spelled = {fold(n): n for n in names}
    missing = [c for c in plan.columns if fold(c) not in spelled]
    counts = "count" in spelled
    clash = [c for c in plan.columns if fold(c) in eb.RESERVED]
    problem = None
    if missing:
        problem = f"lacks the release's column(s) {', '.join(missing)}"
    elif counts != (plan.output == "counts"):
        problem = (f"has {'a' if counts else 'no'} count column, but its release's output was "
                   f"{plan.output!r}")
    elif MARKER in spelled and plan.private:
        problem = "is marked not private, but its provenance says private (edited?)"
    elif clash:
        problem = f"has a hierarchy column named {clash[0]!r}, a name the results use"
    if problem:
        raise eb.refused(where, problem, "pass the table as its release wrote it")
    return tuple(spelled[fold(c)] for c in plan.columns)


# ---------------------------------------------------------------------------------------------
# the statements


def _count(plan: eb.PublicPlan) -> str:
    return 'sum("count")' if plan.output == "counts" else "count(*)"


def intervals_sql(found: Located, level: int, half: int) -> str:
    """Level ``level``'s prefixes of the release, its count and interval (half-width
    ``half``)."""
    cols = ", ".join(quote(c) for c in found.names[:level])
    order = ", ".join(str(i) for i in range(1, level + 1))
    return (f"SELECT {cols}, n AS \"count\", greatest(n - {half}, 0)::BIGINT AS \"lower\", "
            f"(n + {half})::BIGINT AS \"upper\" FROM (SELECT {cols}, {_count(found.plan)}"
            f"::BIGINT AS n FROM {found.reader} GROUP BY ALL) ORDER BY {order}")


def bounds_table(plan: eb.PublicPlan, beta: float, joint: int | None) -> pa.Table:
    schema = pa.schema([("level", pa.int64()), ("column", pa.string()), ("cells", pa.int64()),
                        ("domain_size", pa.int64()), ("bound", pa.float64()),
                        ("half_width", pa.int64()), ("joint_bound", pa.float64()),
                        ("joint_half_width", pa.int64()), ("beta", pa.float64())])
    return pa.Table.from_pylist(eb.bounds_rows(plan, beta, joint), schema=schema)


def sum_sql(found: Located, cells: str, level: int, by: int, beta: float,
            joint: int | None) -> str:
    """The sum of the released counts over the k-prefixes listed by ``cells`` (k = ``level``),
    per group of its first ``by`` columns, with its interval: the recursion of
    docs/explanation/error-bars.md ("Sums over a set of cells"), level by level from k up to
    ``by``, on the one event of levels ``1..joint`` (default k)."""
    plan = found.plan
    b = plan.bounds(beta, level if joint is None else joint)
    x = plan.sizes
    cols = [quote(c) for c in found.names[:level]]

    def on(left: str, right: str, n: int) -> str:
        return " AND ".join(f"{left}.{c} IS NOT DISTINCT FROM {right}.{c}" for c in cols[:n])

    ctes = [
        f"s AS (SELECT DISTINCT {', '.join(cols)} FROM {cells})",
        f"r AS (SELECT {', '.join(cols)}, {_count(plan)}::BIGINT AS n FROM {found.reader} "
        "GROUP BY ALL)",
        f"p{level} AS (SELECT {', '.join('s.' + c for c in cols)}, coalesce(r.n, 0) AS n, "
        f"1::BIGINT AS cells, r.n IS NOT NULL AS known, {b[level]!r}::DOUBLE AS fs, "
        f"0.0::DOUBLE AS fc FROM s LEFT JOIN r ON {on('s', 'r', level)})",
    ]
    for j in range(level, by, -1):  # the children of level j, their parents of level j - 1
        up = cols[:j - 1]
        keys = ", ".join(up) + ", " if up else ""
        ctes.append(
            f"q{j - 1} AS (SELECT {keys}coalesce(sum(n), 0)::BIGINT AS n, "
            f"coalesce(sum(cells), 0)::BIGINT AS cells, coalesce(sum(fs), 0) AS g, "
            f"coalesce(sum(fc), 0) + greatest({x[j - 1]} - count(*) FILTER (known), 0) * "
            f"{b[j]!r} AS h FROM p{j} GROUP BY ALL)")
        known = "true"
        join = ""
        if up and j - 1 > by:
            seen = ", ".join(up)
            join = (f" LEFT JOIN (SELECT DISTINCT {seen}, true AS x FROM {found.reader}) AS "
                    f"v ON {' AND '.join(f'q.{c} IS NOT DISTINCT FROM v.{c}' for c in up)}")
            known = "v.x IS NOT NULL"
        picked = ", ".join(f"q.{c}" for c in up) + ", " if up else ""
        ctes.append(
            f"p{j - 1} AS (SELECT {picked}q.n, q.cells, {known} AS known, "
            f"least(q.g, {b[j - 1]!r} + q.h) AS fs, least(q.h, {b[j - 1]!r} + q.g) AS fc "
            f"FROM q{j - 1} AS q{join})")
    group = cols[:by]
    keys = ", ".join(group) + ", " if group else ""
    order = f" ORDER BY {', '.join(str(i) for i in range(1, by + 1))}" if by else ""
    return (f"WITH {', '.join(ctes)} SELECT {keys}cells, n AS \"count\", fs AS bound, "
            f"greatest(n - h, 0)::BIGINT AS \"lower\", (n + h)::BIGINT AS \"upper\" FROM "
            f"(SELECT *, floor(fs + 1e-9 * greatest(1.0, fs))::BIGINT AS h FROM p{by}){order}")


# ---------------------------------------------------------------------------------------------
# arguments


def _beta(value: object) -> float:
    from ..core.planning import check_beta

    return check_beta(0.05 if value is None else value)


def _level(plan: eb.PublicPlan, value: object, name: str = "level") -> int:
    if value is None:
        raise bad_argument(name, None, "is required", f"pass {opt(name, 1)} (levels 1.."
                           f"{plan.depth}: {', '.join(plan.columns)})")
    return plan.level(value, name)


def _by(plan: eb.PublicPlan, value: object, level: int) -> int:
    if value is None or value == 0:
        return 0
    by = plan.level(value, "per")
    if by > level:
        raise bad_argument("per", value, f"must be a level at most the cells' level ({level})",
                           f"pass {opt('per', 0)} for one total, or a level 1..{level}")
    return by


def _public_only(con: Any, found: tuple[str, ...], name: str, given: object) -> None:
    """Public-facing mode: the functions here read a table's rows exactly, so only tables the
    curator declared public (:func:`.disclosure.declare_public_table`), never a private one."""
    if disclosure.is_public(con) and not disclosure.public_table(con, found):
        raise disclosure.refuse(f"{name} {given!r}, a table the curator has not declared public "
                                "(its rows are read exactly),", "ask the curator to declare it "
                                "public, or list the cells as values: cells := [[...], ...]")


def _cells(value: object, names: tuple[str, ...], con: Any, cur: Any,
           context: catalog.Context | None) -> str:
    """What lists the cells of a sum: a table or view (in public-facing mode, one declared
    public), or a list of cells, each a list of values (or a struct) in the columns' order."""
    fix = ("pass a table or view name, e.g. 'morning', or the cells as values: "
           f"cells := [[{', '.join('...' for _ in names)}], ...]")
    if isinstance(value, list):
        if not value:
            raise bad_argument("cells", value, "lists no cell", fix)
        rows = []
        for cell in value:
            values = list(cell.values()) if isinstance(cell, dict) else cell
            if not isinstance(values, list) or len(values) != len(names):
                raise bad_argument("cells", cell, f"must hold {len(names)} values, one per "
                                   f"column ({', '.join(names)})", fix)
            rows.append("(" + ", ".join(_value(v) for v in values) + ")")
        return f"(VALUES {', '.join(rows)}) AS cells({', '.join(quote(n) for n in names)})"
    if not isinstance(value, str) or not value.strip():
        raise bad_argument("cells", value, "must name a table or view, or list the cells", fix)
    parts = parse_qualified(value, "cells")
    _public_only(con, catalog.resolve_release(cur, value, context), "cells", value)
    return quote_qualified(parts)


def _value(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return literal(v)
    raise bad_argument("cells", v, "holds a value that is not a number, text or NULL",
                       "list each cell's values as numbers or texts")


# ---------------------------------------------------------------------------------------------
# Python


def intervals(con: Any, released: Any, level: object = None, beta: float = 0.05, *,
              joint: object = None, release: int | None = None) -> pa.Table:
    """The k-prefix rows of a release (k = ``level``: a number or a column's name), with their
    released ``count`` and ``[lower, upper]``: with probability at least ``1 - beta`` every
    k-prefix's true count lies in its interval, all at once (Theorem 1, two-sided); a prefix
    absent from the table was released as 0, its interval ``[0, half_width]`` (metadata).
    ``joint``: a level K >= k: the intervals of levels 1..K asked with the same ``joint`` and
    ``beta`` hold together. ``released``: the Arrow table :func:`release` returned, a table or
    view name, or a released file; ``release``: its ledger id (for a table made from SQL).
    The result's schema metadata states the guarantee, the bound and the provenance."""
    with speaking("python"):
        if isinstance(released, pa.Table):
            return _arrow_intervals(con, released, level, beta, joint, release)
        found = locate(con, con, released, release)
        return _run_intervals(con, found, level, beta, joint)


def _asked(plan: eb.PublicPlan, level: object, beta: object, joint: object
           ) -> tuple[int, float, int | None, int]:
    """(level, beta, joint, half-width) of an intervals call, checked."""
    k = _level(plan, level)
    together = eb.joint_of(joint, k, plan.depth, plan.columns)
    b = _beta(beta)
    return k, b, together, eb.half_width(plan.bound(k, b, together))


def _run_intervals(con: Any, found: Located, level: object, beta: float,
                   joint: object) -> pa.Table:
    k, b, together, half = _asked(found.plan, level, beta, joint)
    table = con.sql(intervals_sql(found, k, half)).to_arrow_table()
    return table.replace_schema_metadata(eb.metadata(found.plan, k, b, together, found.record))


def _arrow_intervals(con: Any, table: pa.Table, level: object, beta: float, joint: object,
                     release: int | None) -> pa.Table:
    record = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    name = f"inftda_released_{uuid.uuid4().hex[:16]}"
    con.register(name, table.replace_schema_metadata(None))
    try:
        names = _columns(con, quote(name))
        where = "the Arrow table"
        if release is not None:
            record = _from_ledger(con, _release_id(release) or 0, record or None, where)
        plan = eb.from_record(record, where)
        found = Located(plan, record, quote(name), where, _check_shape(plan, names, where))
        result = _run_intervals(con, found, level, beta, joint)
    finally:
        con.unregister(name)
    for i, column in enumerate(found.names[:result.num_columns - 3]):  # the Arrow types back
        want = table.schema.field(column).type
        if result.schema.field(i).type != want:
            result = result.set_column(i, pa.field(column, want), result.column(i).cast(want))
    return result


# ---------------------------------------------------------------------------------------------
# SQL


def _context(data: dict[str, Any]) -> catalog.Context | None:
    db, schema = data.get("current_database"), data.get("current_schema")
    if not isinstance(db, str) or not isinstance(schema, str):
        return None
    return db, schema, str(data.get("search_path") or "")


_CONTEXT = ("'current_database': system.main.current_database(), "
            "'current_schema': system.main.current_schema(), "
            "'search_path': system.main.current_setting('search_path')")


def register(con: Any) -> None:
    """The SQL side: the table macros ``inftda_intervals``, ``inftda_bounds`` and
    ``inftda_sum`` and the UDFs that render their statements (the module docstring)."""
    ref = weakref.ref(con)

    def located(options: str) -> tuple[Located, dict[str, Any]]:
        data = arguments.json_object(options, "inftda_intervals_sql (or _bounds_, _sum_)",
                                     "options")
        with live().cursor() as cur:
            return locate(cur, live(), data.get("released"), data.get("release"),
                          _context(data)), data

    def live() -> Any:
        con = ref()
        if con is None:
            raise InputError("the connection that loaded inftda_duckdb is closed")
        return con

    @speaks("sql")
    def intervals_text(options: str) -> str:
        loc, data = located(options)
        k, _, _, half = _asked(loc.plan, data.get("level"), data.get("beta"), data.get("joint"))
        return intervals_sql(loc, k, half)

    @speaks("sql")
    def bounds_text(options: str) -> str:
        loc, data = located(options)
        plan = loc.plan
        joint = eb.joint_of(data.get("joint"), 1, plan.depth, plan.columns)
        return table_sql(bounds_table(plan, _beta(data.get("beta")), joint))

    @speaks("sql")
    def sum_text(options: str) -> str:
        loc, data = located(options)
        plan = loc.plan
        k = _level(plan, data.get("level"))
        with live().cursor() as cur:
            cells = _cells(data.get("cells"), loc.names[:k], live(), cur, _context(data))
        return sum_sql(loc, cells, k, _by(plan, data.get("per"), k), _beta(data.get("beta")),
                       eb.joint_of(data.get("joint"), k, plan.depth, plan.columns))

    def create(n: int) -> None:
        for name, body in (("intervals", intervals_text), ("bounds", bounds_text),
                           ("sum", sum_text)):
            create_function(con, f"inftda_{name}_sql_{n}", body, ["VARCHAR"], "VARCHAR",
                            side_effects=False)

    n = register_udfs(con, "errorbars", create)
    for name, params, fields in (
        ("intervals", "released, level := NULL, beta := 0.05, joint := NULL, release := NULL",
         "'released': released, 'level': level, 'beta': beta, 'joint': joint, "
         "'release': release"),
        ("bounds", "released, beta := 0.05, joint := NULL, release := NULL",
         "'released': released, 'beta': beta, 'joint': joint, 'release': release"),
        ("sum", "released, cells, level := NULL, per := 0, beta := 0.05, joint := NULL, "
         "release := NULL", "'released': released, 'cells': cells, 'level': level, "
         "'per': per, 'beta': beta, 'joint': joint, 'release': release"),
    ):
        create_macro(con, f"inftda_{name}({params}) AS TABLE SELECT * FROM system.main.query("
                     f"inftda_{name}_sql_{n}(system.main.to_json({{{fields}, {_CONTEXT}}})"
                     "::VARCHAR))")


__all__ = ["Located", "bounds_table", "intervals", "intervals_sql", "locate", "register",
           "sum_sql"]
