"""Per-level accuracy of a release against the truth: the paper's evaluation metrics.

**Curator only.** :func:`evaluate` reads the *private* table. Its output is NOT differentially
private: publishing it (or anything computed from it) leaks information about the data. Use it to
choose a budget on your own data, never to publish.

For each level k = 1..d (the prefix ``c1..ck`` of the hierarchy columns) it reports, over the public
domain (cells absent from both tables have error 0):

- ``max_abs_error``: max |true - released| (what Theorem 1 bounds);
- ``mae``: sum |true - released| / number of cells of the public domain at level k (zeros included;
  NULL when the domain of some column up to k is unknown);
- ``false_discovery_rate``: cells with released > 0 and true = 0, over cells with released > 0
  (0 when nothing is released);
- ``false_negative_rate``: cells with true > 0 and released = 0, over cells with true > 0;
- ``released_nodes``, ``true_nonzero``, and ``bound``: Theorem 1's bound at ``beta`` when a budget
  is given (``within_bound`` says whether the max error is inside it).

Everything is one DuckDB statement (one GROUP BY per input, then per-level re-aggregation); the same
SQL backs the SQL form ``SELECT * FROM inftda_evaluate('trips', 'trips_dp', ['origin', 'dest'])``
(a TEMP table macro over ``query(<SQL rendered by a Python UDF>)``, see :func:`register`).

Public domain sizes come from, per column: ``domains`` (explicit values or a size), the column's
ENUM type, or ``domain_tables`` (nested domains: the number of distinct valid prefixes).
"""

from __future__ import annotations

import itertools
import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ..core.accounting import BudgetPlan, error_bound, total_rho
from ..core.errors import InputError, bad_argument, opt, speaks
from ..core.identifiers import literal, parse_qualified, quote, quote_qualified
from . import arguments, disclosure
from .connections import create_function, create_macro, register_udfs

#: Columns of the result, in order.
RESULT_COLUMNS = (
    "level", "prefix", "domain_cells", "true_total", "released_total", "true_nonzero",
    "released_nodes", "false_discoveries", "false_negatives", "max_abs_error", "mae",
    "false_discovery_rate", "false_negative_rate", "bound", "within_bound",
)  # fmt: skip

_ONE = "__inftda_one"
_ENUM_LABELS = "'''(?:[^'']|'''')*'''"  # regex (as a SQL literal) matching one quoted ENUM label


# ---------------------------------------------------------------------------------------- specs
def _columns(columns: object) -> list[str]:
    fix = "pass the hierarchy columns in order, e.g. ['origin', 'dest']"
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise bad_argument("columns", columns, "must be a non-empty list of column names", fix)
    if not all(isinstance(c, str) and c for c in columns) or len(set(columns)) != len(columns):
        raise bad_argument("columns", columns, "must be distinct non-empty names", fix)
    return list(columns)


def _domain_groups(
    columns: list[str], domains: object, domain_tables: object, true_sql: str
) -> list[tuple[list[int], list[str]]]:
    """Independent groups of the public domain: (levels, SQL cell count of its first j levels).

    A column with an explicit domain or an ENUM type is a group of its own; a domain table is one
    group over its columns (nested: counted as distinct valid prefixes, its levels need not be
    adjacent, e.g. origin and destination interleaved). The public domain is the product of the
    groups, so level k has prod over groups of (count of the group's levels among 1..k) cells.
    """
    fix_d = "pass domains={'col': ['v1', 'v2', ...]} or {'col': size}"
    groups: list[tuple[list[int], list[str]]] = []
    owned: set[int] = set()
    if domains is not None:
        if not isinstance(domains, Mapping):
            raise bad_argument(
                "domains", domains, "must map column names to values or sizes", fix_d
            )
        for col, dom in domains.items():
            if col not in columns:
                raise bad_argument("domains", col, "names a column not in columns", fix_d)
            if isinstance(dom, bool | str) or not isinstance(dom, int | Sequence):
                raise bad_argument(
                    f"domains[{col!r}]", dom, "must be a list of values or a size", fix_d
                )
            size = dom if isinstance(dom, int) else len(dom)
            if isinstance(dom, Sequence) and len({json.dumps(v, default=str) for v in dom}) != size:
                raise bad_argument(f"domains[{col!r}]", dom, "must not repeat values", fix_d)
            if size < 1:
                raise bad_argument(f"domains[{col!r}]", dom, "must have at least one value", fix_d)
            groups.append(([columns.index(col)], [str(size)]))
            owned.add(columns.index(col))
    for table, cols, positional in _domain_table_specs(domain_tables):
        idx = [columns.index(c) if c in columns else -1 for c in cols]
        if not idx or -1 in idx or idx != sorted(idx):
            raise bad_argument(
                "domain_tables", {table: cols}, "must list hierarchy columns in hierarchy order",
                "e.g. {'geo': ['region', 'province', 'town']} (the table's columns by position)",
            )  # fmt: skip
        if owned & set(idx):
            raise bad_argument("domain_tables", table, "gives a column a second domain", fix_d)
        owned |= set(idx)
        src = (
            table
            if positional is None
            else quote_qualified(parse_qualified(table, "domain_tables"))
        )
        refs = [f"#{j + 1}" if positional is not False else quote(c) for j, c in enumerate(cols)]
        counts = [
            f"(SELECT count(*) FROM (SELECT DISTINCT {', '.join(refs[: j + 1])} FROM {src}))"
            for j in range(len(refs))
        ]
        groups.append((idx, counts))
    for i, col in enumerate(columns):
        if i not in owned:  # the column's ENUM type, if any (works on TEMP tables at bind time too)
            t = f"typeof((SELECT {quote(col)} FROM {true_sql} LIMIT 0))"
            enum = (f"CASE WHEN starts_with({t}, 'ENUM(') "
                    f"THEN len(regexp_extract_all({t}, {_ENUM_LABELS})) END")  # fmt: skip
            groups.append(([i], [enum]))
    return groups


class _Resolved(tuple[str, list[str]]):
    """A named domain table resolved against the catalog: (SQL subquery, hierarchy columns)."""


def _domain_table_specs(domain_tables: object) -> list[tuple[str, list[str], bool | None]]:
    """Normalise to (table, hierarchy columns, match by position: True / by name: False /
    already resolved to a SQL subquery: None)."""
    fix = (
        "pass a table whose columns are named like hierarchy columns ('geo'), a list of such "
        "tables, or {'geo': ['o_region', 'o_province']} to match the table's columns by position"
    )
    if domain_tables is None:
        return []
    if isinstance(domain_tables, str):
        domain_tables = [domain_tables]
    if isinstance(domain_tables, list) and all(isinstance(t, _Resolved) for t in domain_tables):
        return [(t[0], t[1], None) for t in domain_tables]
    if isinstance(domain_tables, Mapping):
        specs: list[tuple[str, list[str], bool | None]] = []
        for table, cols in domain_tables.items():
            if isinstance(cols, str) or not isinstance(cols, Sequence) or not cols:
                raise bad_argument(f"domain_tables[{table!r}]", cols, "must list columns", fix)
            specs.append((str(table), [str(c) for c in cols], True))
        return specs
    if isinstance(domain_tables, Sequence) and all(isinstance(t, str) for t in domain_tables):
        return [(t, [], False) for t in domain_tables]  # columns filled in by resolve_named
    raise bad_argument("domain_tables", domain_tables, "has an unsupported form", fix)


def _table_names(domain_tables: object) -> list[str]:
    """The tables ``domain_tables`` names (every one is read)."""
    return [t for t, _, how in _domain_table_specs(domain_tables) if how is not None]


def resolve_named(con: Any, domain_tables: object, columns: list[str]) -> object:
    """Named domain tables (columns named like hierarchy columns, any case) -> explicit mapping."""
    specs = _domain_table_specs(domain_tables)
    if not specs or specs[0][2] is not False:
        return domain_tables
    out: list[_Resolved] = []
    for table, _, _ in specs:
        try:
            rel = con.sql(f"SELECT * FROM {quote_qualified(parse_qualified(table))} LIMIT 0")
        except duckdb.Error:
            raise bad_argument(
                "domain_tables", table, "names a table that was not found (from SQL a domain "
                "table must be a non-TEMP table or view)", "create it, or pass {table: [columns]}",
            ) from None  # fmt: skip
        by_lower = {str(n).lower(): str(n) for n in rel.columns}
        cols = [c for c in columns if c.lower() in by_lower]
        if not cols:
            raise bad_argument("domain_tables", table, f"has no column named like {columns}",
                               "name the table's columns like the hierarchy columns")  # fmt: skip
        # select the table's columns by name, in hierarchy order, through a subquery
        sel = ", ".join(quote(by_lower[c.lower()]) for c in cols)
        out.append(
            _Resolved((f"(SELECT {sel} FROM {quote_qualified(parse_qualified(table))})", cols))
        )
    return out


# ------------------------------------------------------------------------------------------ SQL
def evaluate_sql(
    true_table: str,
    released_table: str,
    columns: Sequence[str],
    *,
    domains: Mapping[str, Any] | None = None,
    domain_tables: object = None,
    true_count: str | None = None,
) -> str:
    """Render the metrics query (everything but the Theorem 1 bound). Pure: reads nothing."""
    cols = _columns(columns)
    true_sql = quote_qualified(parse_qualified(true_table, "true_table"))
    rel_sql = quote_qualified(parse_qualified(released_table, "released_table"))
    groups = _domain_groups(cols, domains, domain_tables, true_sql)
    qc = [quote(c) for c in cols]
    cl = ", ".join(qc)
    weight = "count(*)" if true_count is None else f"sum({quote(true_count)})"
    levels = []
    for k in range(1, len(cols) + 1):
        used = [(counts, sum(i < k for i in idx)) for idx, counts in groups]
        cells = " * ".join(f"({counts[j - 1]})" for counts, j in used if j > 0)
        cells = f"({cells})::BIGINT"
        levels.append(
            f"SELECT {k} AS level, {literal(', '.join(cols[:k]))} AS prefix, {cells} AS cells, "
            f"count(*) AS observed, sum(tn) AS true_total, sum(rn) AS released_total, "
            f"count(*) FILTER (tn > 0) AS true_nonzero, "
            f"count(*) FILTER (rn > 0) AS released_nodes, "
            f"count(*) FILTER (rn > 0 AND tn = 0) AS false_discoveries, "
            f"count(*) FILTER (tn > 0 AND rn = 0) AS false_negatives, "
            f"max(abs(tn - rn)) AS max_abs_error, sum(abs(tn - rn)) AS sum_abs_error "
            f"FROM (SELECT sum(tn) AS tn, sum(rn) AS rn FROM leaf GROUP BY {', '.join(qc[:k])})"
        )
    check = literal(
        "the tables hold values outside the public domain declared for the evaluation (more "
        "distinct cells than domain cells). Fix: declare the full domain (domains, ENUM types "
        "or domain_tables)"
    )
    return f"""WITH
t_leaf AS (SELECT {cl}, {weight}::BIGINT AS tn, 0::BIGINT AS rn FROM {true_sql} GROUP BY ALL),
r_src AS (SELECT {cl}, list_value(*COLUMNS('^(count|{_ONE})$')) AS w
          FROM (SELECT *, 1 AS {_ONE} FROM {rel_sql})),
r_leaf AS (SELECT {cl}, 0::BIGINT AS tn, sum(w[1])::BIGINT AS rn FROM r_src GROUP BY ALL),
leaf AS MATERIALIZED (SELECT {cl}, sum(tn)::BIGINT AS tn, sum(rn)::BIGINT AS rn
         FROM (SELECT * FROM t_leaf UNION ALL BY NAME SELECT * FROM r_leaf) GROUP BY ALL),
m AS ({" UNION ALL ".join(levels)})
SELECT level::INTEGER AS level, prefix,
       CASE WHEN observed > cells THEN error({check})::BIGINT ELSE cells END AS domain_cells,
       coalesce(true_total, 0)::BIGINT AS true_total,
       coalesce(released_total, 0)::BIGINT AS released_total,
       true_nonzero, released_nodes, false_discoveries, false_negatives,
       coalesce(max_abs_error, 0)::BIGINT AS max_abs_error,
       coalesce(sum_abs_error, 0)::DOUBLE / cells AS mae,
       CASE WHEN released_nodes = 0 THEN 0.0 ELSE false_discoveries / released_nodes END
           AS false_discovery_rate,
       CASE WHEN true_nonzero = 0 THEN 0.0 ELSE false_negatives / true_nonzero END
           AS false_negative_rate
FROM m ORDER BY level"""


def bounds(
    cells: Sequence[int | None],
    rho: object = None,
    beta: float = 0.05,
    plan: BudgetPlan | None = None,
) -> list[float | None]:
    """Theorem 1's bound per level from the public cell counts (None where unknown or no budget)."""
    if rho is None and plan is None:
        return [None] * len(cells)
    known = 0
    while known < len(cells) and cells[known] is not None:
        known += 1
    if known == 0:
        return [None] * len(cells)
    # Levels after the first unknown one get placeholder sizes (their bounds are dropped): the
    # bound at level k depends on levels 1..k and on the depth only.
    nodes = [int(c) for c in cells[:known] if c is not None]
    nodes += [nodes[-1] * 2**i for i in range(1, len(cells) - known + 1)]
    sizes = [nodes[0]] + [max(1, -(-b // a)) for a, b in itertools.pairwise(nodes)]
    total = plan.rho if plan is not None else rho
    values = error_bound(sizes, total, beta, nodes=nodes, plan=plan)
    return [float(v) if i < known else None for i, v in enumerate(values)]


def _rho(rho: object, epsilon: object, delta: object) -> Fraction | None:
    """The budget the bound is computed for (None: no bound), read as a release reads it."""
    if rho is None and epsilon is None and delta is None:
        return None
    return total_rho(rho, epsilon, delta)


def _with_bound(metrics: pa.Table, bound: list[float | None]) -> pa.Table:
    errors = metrics.column("max_abs_error").to_pylist()
    within = [None if b is None else e <= b for e, b in zip(errors, bound, strict=True)]
    metrics = metrics.append_column("bound", pa.array(bound, pa.float64()))
    return metrics.append_column("within_bound", pa.array(within, pa.bool_()))


# ------------------------------------------------------------------------------------- Python API
def evaluate(
    con: duckdb.DuckDBPyConnection,
    true_table: str,
    released_table: str,
    columns: Sequence[str],
    *,
    domains: Mapping[str, Any] | None = None,
    domain_tables: object = None,
    rho: object = None,
    plan: BudgetPlan | None = None,
    beta: float = 0.05,
    epsilon: object = None,
    delta: object = None,
    true_count: str | None = None,
) -> pa.Table:
    """Per-level metrics of ``released_table`` against ``true_table`` (curator only; NOT private).

    ``true_table`` holds the private rows (or leaf counts in column ``true_count``);
    ``released_table`` is a release with a ``count`` column (output 'counts') or one row per
    record. The budget (``rho``, or ``epsilon`` and ``delta``, or the release's ``plan``) only adds
    Theorem 1's bound at ``beta``. Returns one row per level with :data:`RESULT_COLUMNS`.
    """
    disclosure.check_evaluate(con, true_table, released_table, *_table_names(domain_tables))
    if not 0 < beta < 1:
        raise bad_argument("beta", beta, "must be in (0, 1)", "pass e.g. beta=0.05")
    total = _rho(rho, epsilon, delta)
    cols = _columns(columns)
    sql = evaluate_sql(
        true_table, released_table, cols, domains=domains,
        domain_tables=resolve_named(con, domain_tables, cols), true_count=true_count,
    )  # fmt: skip
    try:
        metrics = con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise InputError(f"evaluation failed: {exc}") from None
    cells = metrics.column("domain_cells").to_pylist()
    return _with_bound(metrics, bounds(cells, total, beta, plan))


# ---------------------------------------------------------------------------------------- SQL API
def _sql_from_json(
    con: Any,
    true_table: str,
    released_table: str,
    columns: list[str],
    options: str,
    bound_udf: str,
) -> str:
    opts = arguments.json_object(options, "inftda_evaluate_sql", "options") if options else {}
    tables = opts.get("domain_tables")
    disclosure.check_evaluate(con, true_table, released_table, *_table_names(tables))
    if tables is not None and not isinstance(tables, Mapping):  # named tables: read the catalog
        cursor = con.cursor()  # a fresh cursor: it cannot see TEMP tables (see duckdb-facts)
        try:
            tables = resolve_named(cursor, tables, _columns(columns))
        finally:
            cursor.close()
    body = evaluate_sql(
        true_table, released_table, columns, domains=opts.get("domains"),
        domain_tables=tables, true_count=opts.get("true_count"),
    )  # fmt: skip
    budget = {k: opts.get(k) for k in ("rho", "epsilon", "delta")}
    rho = _rho(**budget)
    raw = opts.get("beta")
    beta = 0.05 if raw is None else raw
    if not isinstance(beta, int | float) or isinstance(beta, bool) or not 0 < beta < 1:
        raise bad_argument("beta", beta, "must be in (0, 1)", f"pass e.g. {opt('beta', 0.05)}")
    rho_sql = "NULL::VARCHAR" if rho is None else literal(str(rho))
    return f"""SELECT *, max_abs_error <= bound AS within_bound FROM (
SELECT *, {bound_udf}(list(domain_cells) OVER (ORDER BY level
       ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), {rho_sql}, {float(beta)!r})[level]
       AS bound
FROM ({body})) ORDER BY level"""


def _bound_udf(cells: list[int | None], rho: str | None, beta: float) -> list[float | None]:
    """Each level's Theorem 1 bound for the statement of :func:`_sql_from_json` (which passes
    the levels' cell counts, the exact rho or NULL, and beta in (0, 1))."""
    udf = "inftda_evaluate_bound"
    if not isinstance(cells, list) or not all(
            c is None or (isinstance(c, int) and c >= 0) for c in cells):
        raise arguments.malformed(udf, "cells", cells)
    if not isinstance(beta, float) or not 0 < beta < 1:
        raise arguments.malformed(udf, "beta", beta)
    try:
        exact = None if rho is None else Fraction(rho)
    except (ValueError, ZeroDivisionError):
        raise arguments.malformed(udf, "rho", rho) from None
    if exact is not None and exact <= 0:
        raise arguments.malformed(udf, "rho", rho)
    return bounds(cells, exact, beta)


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Add ``inftda_evaluate(true_table, released_table, columns, ...)`` to ``con`` (TEMP macro).

    Named parameters: ``rho``, ``epsilon``, ``delta``, ``beta`` (0.05), ``domains`` (a STRUCT or MAP
    of value lists or sizes), ``domain_tables`` (a table name, or a STRUCT/MAP table -> columns),
    ``true_count`` (a leaf-count column of the true table). Curator only: the output is NOT private.
    """

    ref = weakref.ref(con)

    def create(n: int) -> None:
        @speaks("sql")
        def sql_from_json(
            true_table: str, released_table: str, columns: list[str], opts: str
        ) -> str:
            live = ref()
            if live is None:
                raise InputError("the connection that loaded inftda_duckdb is closed")
            return _sql_from_json(
                live, true_table, released_table, columns, opts, f"inftda_evaluate_bound_{n}"
            )

        udfs: list[tuple[str, Callable[..., Any], list[str], str]] = [
            (f"inftda_evaluate_sql_{n}", sql_from_json,
             ["VARCHAR", "VARCHAR", "VARCHAR[]", "VARCHAR"], "VARCHAR"),
            (f"inftda_evaluate_bound_{n}", _bound_udf, ["BIGINT[]", "VARCHAR", "DOUBLE"],
             "DOUBLE[]"),
        ]  # fmt: skip
        for name, fn, params, ret in udfs:
            create_function(con, name, fn, params, ret, null_handling="special",
                            side_effects=False)

    n = register_udfs(con, "evaluation", create)
    create_macro(
        con,
        "inftda_evaluate(true_table, released_table, columns, "
        "rho := NULL, epsilon := NULL, delta := NULL, beta := 0.05, domains := NULL, "
        "domain_tables := NULL, true_count := NULL) AS TABLE SELECT * FROM system.main.query("
        f"inftda_evaluate_sql_{n}(true_table, released_table, columns, "
        "system.main.to_json({'rho': rho, "
        "'epsilon': epsilon, 'delta': delta, 'beta': beta, 'domains': domains, "
        "'domain_tables': domain_tables, 'true_count': true_count})::VARCHAR))"
    )


# ------------------------------------------------------------------------------------------ plot
def plot_errors(
    results: Sequence[pa.Table] | pa.Table,
    path: str | Path | None = None,
    *,
    title: str | None = None,
    log: bool = False,
) -> Any:
    """The max absolute error per level for each run (dots), their mean, and the bound, as a
    matplotlib ``Figure`` (a notebook shows it), also written as a PNG to ``path`` if given.

    ``results`` are :func:`evaluate` tables, one per run. Needs the optional extra ``plot``.
    The figure is made without pyplot: the notebook's matplotlib backend is left alone.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError(
            "plotting needs matplotlib, which is not installed. "
            "Fix: pip install 'inftda-duckdb[plot]'"
        ) from None
    runs = [results] if isinstance(results, pa.Table) else list(results)
    if not runs or any(not isinstance(r, pa.Table) or "max_abs_error" not in r.column_names
                       for r in runs):  # fmt: skip
        raise bad_argument(
            "results", type(results).__name__, "must be evaluate() tables",
            "pass the tables returned by inftda_duckdb.evaluate",
        )  # fmt: skip
    fig = Figure(figsize=(7, 4.2), dpi=110)
    ax = fig.subplots()
    levels = runs[0].column("level").to_pylist()
    errs = [r.column("max_abs_error").to_pylist() for r in runs]
    for i, (run, e) in enumerate(zip(runs, errs, strict=True)):
        ax.plot(
            run.column("level").to_pylist(),
            e,
            "o",
            color="tab:blue",
            alpha=max(0.15, 1 / len(runs)),
            label="max |error| per run" if i == 0 else None,
        )
    mean = [sum(col) / len(col) for col in zip(*errs, strict=False)]
    ax.plot(levels, mean, "-", color="tab:blue", label=f"mean over {len(runs)} run(s)")
    bound = runs[0].column("bound").to_pylist() if "bound" in runs[0].column_names else []
    if any(b is not None for b in bound):
        ax.plot(levels, bound, "--", color="tab:red", label="Theorem 1 bound")
    if "mae" in runs[0].column_names and all(
        m is not None for m in runs[0].column("mae").to_pylist()
    ):
        mae = [
            sum(x) / len(x) for x in zip(*(r.column("mae").to_pylist() for r in runs), strict=False)
        ]
        ax.plot(levels, mae, ":", color="tab:green", label="MAE (zeros included), mean")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("level k (prefix of the first k columns)")
    ax.set_ylabel("absolute error")
    ax.set_xticks(levels)
    ax.set_title(title or "InfTDA error per level (curator-only evaluation; not private)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    if path is not None:
        fig.savefig(Path(path), format="png")
    return fig
