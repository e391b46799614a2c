"""Render the release and preview SQL from the fragments in ``sql/release.sql``.

One code path: the SQL macro (through a bind-time UDF) and :func:`inftda_duckdb.release` render
the same statement here. Every identifier goes through :func:`identifiers.quote`, every text
through :func:`identifiers.literal`; the statement binds whatever the columns' types are.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

import duckdb

from ..core.domains import FULL_CHECK, DomainPlan
from ..core.identifiers import fold, literal, quote, quote_qualified
from ..core.provenance import MARKER, not_private_reason
from ..core.request import Labels, ReleaseRequest
from ..core.tree import MAX_KEY_SPAN


@dataclass(frozen=True)
class UdfNames:
    """The per-connection names of the UDFs the generated SQL calls."""

    begin: str
    levels: str
    preview: str
    rowkey: str

    @classmethod
    def numbered(cls, n: int) -> UdfNames:
        return cls(f"inftda_begin_{n}", f"inftda_levels_{n}", f"inftda_prev_{n}",
                   f"inftda_rowkey_{n}")


PREFIXES = "STRUCT(k INTEGER[], key BIGINT[], n BIGINT[])"
"""The SQL type of one level's true prefix counts (and of a nested level's allowed children)."""


def sql_path(name: str) -> Path:
    """A template file: ``inftda_duckdb/sql`` in a wheel, ``<repo>/sql`` in a checkout."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "sql", package.parent / "sql"):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"SQL template {name} not found next to inftda_duckdb")


@functools.cache
def fragments(name: str = "release.sql") -> dict[str, Template]:
    """``-- @name`` sections of a template file (header comment dropped)."""
    text = sql_path(name).read_text()
    parts = re.split(r"^-- @(\w+)\n", text, flags=re.M)
    return {parts[i]: Template(parts[i + 1].strip()) for i in range(1, len(parts), 2)}


def _f(fragment: str, /, **values: object) -> str:
    return fragments()[fragment].substitute({k: str(v) for k, v in values.items()})


def spec_json(
    request: ReleaseRequest,
    plan: DomainPlan,
    origin: str,
    token: str | None = None,
    charge: list[object] | None = None,
) -> str:
    """What inftda_begin needs besides the data checks: the request, the domain plan, origin,
    the capability token (see :mod:`.capabilities`; a Python call also waits for progress and
    errors under it) and the source to charge (``catalog.Where.to_json()``)."""
    spec: dict[str, object] = {
        "request": request.to_json(), "domains": plan.to_json(), "origin": origin}
    if token is not None:
        spec["token"] = token
    if charge is not None:
        spec["charge"] = charge
    return json.dumps(spec, sort_keys=True)


def _ctes_public(request: ReleaseRequest, plan: DomainPlan, names: UdfNames) -> list[str]:
    """typed row, domains and coded domain tables (public, except domain_from_data); the row
    key of a release with a privacy unit."""
    src = quote_qualified(plan.source)
    typed = ", ".join(f"{quote(c)} AS v{i}" for i, c in enumerate(request.columns, 1))
    ctes = [_f("typed", typed_cols=typed, source=src)]
    if request.privacy_unit is not None:
        seed = "NULL::BIGINT" if request.seed is None else f"{int(request.seed)}::BIGINT"
        ctes.append(_f("row_key", rowkey=names.rowkey, seed=seed))
    if request.domain_from_data:
        ctes.append(_leaf_raw(request, plan))
    for i, dom in enumerate(plan.columns, 1):
        if dom.kind == "list":
            ctes.append(_f("dom_list", i=i, labels=_labels(dom.labels)))
        elif dom.known_enum:  # coded by enum_code(), decoded from the type: no domain CTEs
            continue
        elif dom.kind == "enum":
            ctes.append(_f("dom_enum", i=i, name=f"dom{i}_l"))
        elif dom.kind == "table":
            table = quote_qualified(plan.nestings[dom.table].table)
            ctes.append(_f("dom_enum", i=i, name=f"dom{i}_e"))
            ctes.append(_f("dom_table", i=i, table=table, tcol=quote(dom.table_column)))
        else:
            ctes.append(_f("dom_data", i=i))
        ctes.append(_f("dom", i=i))
    for t, nest in enumerate(plan.nestings, 1):
        lv = [k + 1 for k in nest.levels]
        casts = ", ".join(
            f"try(system.main.cast_to_type(x.{quote(n)}, t.v{i})) AS w{i}, "
            f"x.{quote(n)}::VARCHAR AS s{i}"
            for i, n in zip(lv, nest.names, strict=True)
        )
        joins = " ".join(f"LEFT JOIN dom{i} AS d{i} ON w.w{i} = d{i}.v" for i in lv)
        ctes.append(
            _f(
                "nest",
                t=t,
                table=quote_qualified(nest.table),
                nest_codes=", ".join(f"d{i}.code AS k{i}" for i in lv),
                nest_defect=" OR ".join(f"d{i}.code IS NULL" for i in lv),
                nest_text=" || ', ' || ".join(f"coalesce(w.s{i}, 'NULL')" for i in lv),
                nest_casts=casts,
                nest_joins=joins,
            )
        )
        ctes.append(_f("nest_ok", t=t, nest_keys=", ".join(f"k{i}" for i in lv)))
    return ctes


_INTEGER = re.compile(r"-?[1-9][0-9]{0,17}|0")


def _progression(labels: Labels) -> range | None:
    """The labels as an integer range, if they are one (a declared range always is)."""
    if isinstance(labels, range):
        return labels
    if all(_INTEGER.fullmatch(x) for x in labels):
        start = int(labels[0])
        step = int(labels[1]) - start if len(labels) > 1 else 1
        if step != 0 and all(int(x) == start + c * step for c, x in enumerate(labels)):
            return range(start, start + len(labels) * step, step)
    return None


def _labels(labels: Labels) -> str:
    """A query of (label, code) rows: a range() for integer progressions, else a JSON array."""
    r = _progression(labels)
    if r is not None:
        return (f"SELECT ({r.start} + r.i * {r.step})::VARCHAR, r.i "
                f"FROM system.main.range({len(r)}) AS r(i)")
    array = literal(json.dumps(list(labels)))
    return (
        "SELECT system.main.unnest(lst), system.main.generate_subscripts(lst, 1) - 1 "
        f"FROM (SELECT from_json({array}, '[\"VARCHAR\"]') AS lst)"
    )


def _keyed(request: ReleaseRequest, plan: DomainPlan) -> list[int] | None:
    """The domain sizes when the leaves are counted under one BIGINT key each (``@leaf_keyed``):
    every column an ENUM seen in the catalog, no nesting, no domain from the data, and the
    sizes plus one (a NULL's code) multiply to less than 2**62; else None."""
    sizes = plan.key_sizes(request.depth)
    if (sizes is None or request.domain_from_data or plan.nestings
            or not all(c.known_enum for c in plan.columns)
            or math.prod(s + 1 for s in sizes) >= MAX_KEY_SPAN):
        return None
    return sizes


def _leaf_keyed(request: ReleaseRequest, keyed: list[int]) -> str:
    """``@leaf_keyed``: the raw leaves of an all-ENUM source under one BIGINT each."""
    raw = [f"r{i}" for i in range(1, request.depth + 1)]
    return _f("leaf_keyed", raw=", ".join(raw),
              all_set=" AND ".join(f"{r} IS NOT NULL" for r in raw),
              key=_key(keyed, request.depth, [f"system.main.enum_code({r})" for r in raw]),
              mask=" + ".join(f"{1 << i} * ({r} IS NULL)::BIGINT" for i, r in enumerate(raw)))


def _leaf_coded_nested(plan: DomainPlan, d: int, code: dict[int, str], code_cols: str,
                       joins: str) -> tuple[list[str], str]:
    """``leaf_coded`` with domain tables, and the condition of a hit: the leaves coded by one
    join per table on their raw combination (``@leaf_hit``); only the rows that miss are coded
    column by column (``code_cols`` and ``joins``: the coding of ``@leaf_coded``)."""
    ctes, hit_cols, hit_joins = [], dict(code), []
    for t, nest in enumerate(plan.nestings, 1):
        lv = [k + 1 for k in nest.levels]
        ctes.append(_f(
            "nest_values", t=t,
            values=", ".join(f"d{i}.v AS w{i}" for i in lv),
            keys=", ".join(f"o.k{i}" for i in lv),
            joins=" ".join(f"JOIN dom{i} AS d{i} ON d{i}.code = o.k{i}" for i in lv)))
        hit_cols.update({i: f"c{t}.k{i}" for i in lv})
        on = " AND ".join(f"l.r{i} = c{t}.w{i}" for i in lv)
        hit_joins.append(f"LEFT JOIN nestv{t} AS c{t} ON {on}")
    nested = {k + 1 for nest in plan.nestings for k in nest.levels}
    hit_joins[:0] = [f"LEFT JOIN dom{i} AS d{i} ON l.r{i} = d{i}.v" for i in range(1, d + 1)
                     if code[i] == f"d{i}.code" and i not in nested]
    hit = " AND ".join(f"k{i} IS NOT NULL" for i in range(1, d + 1))
    ctes.append(_f("leaf_hit", code_joins=" ".join(hit_joins),
                   code_cols=", ".join(f"{hit_cols[i]} AS k{i}" for i in range(1, d + 1))))
    ctes.append(_f("leaf_miss", hit=hit, codes=", ".join(f"k{i}" for i in range(1, d + 1)),
                   code_cols=code_cols, code_joins=joins))
    oks = ", ".join(f"true AS nok{t}" for t in range(1, len(plan.nestings) + 1))
    ctes.append(_f("leaf_coded_nested", oks=oks, hit=hit))
    return ctes, hit


def _leaf_raw(request: ReleaseRequest, plan: DomainPlan) -> str:
    src = quote_qualified(plan.source)
    cols = ", ".join(quote(c) for c in request.columns)
    rows, unit_nulls, count = src, "", "system.main.count(*)"
    if request.privacy_unit is not None:
        # NULL units are counted (all of them: refused before charging) or, with unknown :=
        # 'drop', dropped; never pooled into one unit
        keep = "inftda_unit IS NOT NULL" if request.unknown == "drop" else "true"
        count = "system.main.sum(inftda_w)"
        unit_nulls = (", system.main.sum(inftda_w) FILTER (inftda_unit IS NULL)::BIGINT "
                      "AS nulls_unit, system.main.sum(inftda_read)::BIGINT AS read_unit")
        unit = quote(request.privacy_unit)
        m = int(request.max_rows_per_unit)
        if m == 1:
            exps, sort_key = "", _f("unit_key_one", u0=_f("unit_u", i="'0'"))
            reads = _f("unit_reads_one")
        else:
            exps = _f("unit_exps", m=m, ui=_f("unit_u", i="i::VARCHAR"))
            sort_key, reads = _f("unit_keys"), _f("unit_reads")
        texts = ", ".join(f"{x}::VARCHAR" for x in ["inftda_unit", *map(quote, request.columns)])
        rows = _f(
            "unit_source",
            cols=cols,
            unit=unit,
            group=f"system.main.to_json([{texts}])",
            exps=exps,
            sort_key=sort_key,
            reads=reads,
            source=src,
            m=m,
            keep_null=keep,
        )
    raw = ", ".join(f"{quote(c)} AS r{i}" for i, c in enumerate(request.columns, 1))
    # materialised only when domain_from_data reads it twice (domains and counts)
    materialized = "MATERIALIZED " if request.domain_from_data else ""
    return _f("leaf_raw", raw_cols=raw, source_rows=rows, materialized=materialized,
              unit_nulls=unit_nulls, count=count)


def _frame_check(plan: DomainPlan) -> str:
    """Whether a TEMP source with ENUM-domain columns is a registered pandas DataFrame."""
    if plan.source[0].lower() != "temp" or all(c.kind != "enum" for c in plan.columns):
        return ""
    return _f("frame_check", name=literal(fold(plan.source[2])))


def _column_checks(plan: DomainPlan, preview: bool = False) -> str:
    items = []
    for i, c in enumerate(plan.columns, 1):
        if c.known_enum:
            items.append(_f("column_check_enum", i=i))
        elif preview and isinstance(c.labels, range) and len(c.labels) > FULL_CHECK:
            ends = (str(c.labels[0]), str(c.labels[-1]))
            items.append(_f("column_check_range", i=i, size=len(c.labels),
                            first=literal(ends[0]), last=literal(ends[1])))
        else:
            items.append(_f("column_check", i=i))
    return ",\n".join(items)


def _nest_checks(plan: DomainPlan, data: bool, leaves: str = "leaf_coded") -> str:
    """Each domain table's checks; with ``data``, the rows of the coded ``leaves`` outside it."""
    items = []
    for t, nest in enumerate(plan.nestings, 1):
        lv = [k + 1 for k in nest.levels]
        nodes = ", ".join(
            f"(SELECT system.main.count(*) FROM "
            f"(SELECT DISTINCT {', '.join(f'k{i}' for i in lv[:j])} "
            f"FROM nest{t} WHERE NOT defect))"
            for j in range(1, len(lv) + 1)
        )
        text = _f(
            "nest_check",
            t=t,
            first=lv[0],
            all_coded=" AND ".join(f"k{i} IS NOT NULL" for i in lv),
            nest_raw_text=" || ', ' || ".join(f"r{i}::VARCHAR" for i in lv),
            nest_nodes=nodes,
            leaves=leaves,
        )
        if not data:
            head = text[: text.index(",\n 'outside'")]
            text = head + ",\n 'nodes': [" + nodes + "]}"
        items.append(text)
    return ",\n".join(items)


def _lists(columns: list[str]) -> str:
    """One INTEGER list of the columns' values, column after column. Built by one aggregate
    with the counts' list, so every list follows the same row order."""
    return " || ".join(f"system.main.list({c})" for c in columns)


def leaf_lists(request: ReleaseRequest, plan: DomainPlan) -> str:
    """The leaves as the one-call levels UDF gets them from the CTE ``leaf``: one list of
    ``(key << b) | n`` (``@leaf_pairs``; ``b`` the bits of the rows kept) when the plan knows
    the sizes, else the codes."""
    sizes = plan.key_sizes(request.depth)
    if sizes is None:
        return _runtime_keys(plan, request.depth)
    key = "key" if _keyed(request, plan) is not None else _key(sizes, request.depth)
    # b <= cap keeps (key << b) | n below span * 2**b <= 2**62 - 1
    cap = ((MAX_KEY_SPAN - 1) // math.prod(sizes)).bit_length() - 1
    return _f("leaf_pairs", key=key, cap=cap)


def _runtime_keys(plan: DomainPlan, d: int) -> str:
    """The leaves when some domain sizes are known only as the statement runs (domain tables,
    domain_from_data): keys when the sizes' product is below 2**62 (two lists instead of d + 1),
    else the codes column after column; FILTER builds only one of them."""
    sizes = [str(c.size) if c.size is not None else f"(SELECT system.main.count(*) FROM dom{i})"
             for i, c in enumerate(plan.columns[:d], 1)]
    codes = [f"k{j}" for j in range(1, d + 1)]
    lists = " || ".join(f"system.main.list({c}) FILTER (NOT z.small)" for c in codes)
    return _f("prefix_keys_runtime", klists=lists,
              key=_key([f"z.s{j}" for j in range(1, d + 1)], d),
              sizes=", ".join(f"{size} AS s{j}" for j, size in enumerate(sizes, 1)),
              product=" * ".join(f"z.s{j}::HUGEINT" for j in range(1, d + 1)),
              max=str(MAX_KEY_SPAN))


def _key(sizes: Sequence[int | str], i: int, codes: list[str] | None = None) -> str:
    """The mixed-radix key of the codes k1..ki (or ``codes``): ((k1 * s2 + k2) * s3 + ...)."""
    codes = codes or [f"k{j}" for j in range(1, i + 1)]
    key = f"{codes[0]}::BIGINT"
    for j in range(2, i + 1):
        key = f"({key} * {sizes[j - 1]} + {codes[j - 1]})"
    return key


PARTS = 8192
"""Parts of a release whose leaves could outgrow DuckDB's memory_limit in one list: about this
many runs of cut prefixes (one list each; DuckDB streams them to the levels call)."""


def _eighths(sizes: Sequence[int], memory_limit: int) -> int:
    """How many eighths of ``memory_limit`` (bytes) the leaves could fill, at 16 bytes each in
    the worst case the public ``sizes`` allow (rounded up)."""
    return -(-math.prod(sizes) * 16 // max(1, memory_limit // 8))


def _grouping(plan: DomainPlan, d: int, memory_limit: int | None) -> tuple[int, int, int] | None:
    """(cut level, cut prefixes per part, parts) when the leaves could pass an eighth of
    ``memory_limit`` (:func:`_eighths`), else None (one list). Needs the sizes when planned
    (mixed-radix keys) and two levels or more."""
    sizes = plan.key_sizes(d)
    if memory_limit is None or sizes is None or d < 2 or _eighths(sizes, memory_limit) <= 1:
        return None
    cut, span = 1, sizes[0]
    while cut < d - 1 and span < PARTS:
        cut, span = cut + 1, span * sizes[cut]
    group = max(1, span // PARTS)
    return cut, group, -(-span // group)


LISTS_SPILL = int(duckdb.__version__.split(".")[0]) >= 2
"""Whether this DuckDB spills the states of list() (2.0 does; 1.5 keeps them in the aggregate's
arena, unspillable, until the statement ends)."""

BATCHES = 32
"""At most this many batches of parts (steps of a recursive CTE, each a scan of the leaves) where
list() states cannot spill. The parts' lists of 10M rows over 5 ENUM levels x 40 (9.5M leaves)
from a materialized CTE under 100MB on DuckDB 1.5 (shared machine, load ~3): 4 or 8 batches ran
out of memory, 16 took 11.8 s, 32 17.6 s, 64 24.7 s (the whole release, 32: 25.7 s)."""


def _batches(sizes: Sequence[int], memory_limit: int, parts: int) -> tuple[int, int]:
    """(batches, parts per batch) for a release in parts where list() states cannot spill: one
    batch per eighth of ``memory_limit`` the leaves could fill (:func:`_eighths`), 2 to
    :data:`BATCHES` batches (public sizes only, like the parts)."""
    want = _eighths(sizes, memory_limit)
    per = -(-parts // min(parts, max(2, min(BATCHES, want))))
    return -(-parts // per), per


def render_release(
    request: ReleaseRequest,
    plan: DomainPlan,
    names: UdfNames,
    origin: str,
    token: str | None = None,
    charge: list[object] | None = None,
    memory_limit: int | None = None,
) -> str:
    """The whole release as one statement (see the header of sql/release.sql); with DuckDB's
    ``memory_limit`` (bytes), in parts when one list of the leaves might not fit, the parts'
    lists built in batches when this DuckDB cannot spill list() states (:data:`LISTS_SPILL`)."""
    d = request.depth
    ctes = _ctes_public(request, plan, names)
    keyed = _keyed(request, plan)
    if not request.domain_from_data:
        ctes.append(_leaf_raw(request, plan))
    # an ENUM column seen in the catalog is coded by its label position (no join needed)
    enum = {i for i, c in enumerate(plan.columns, 1) if c.known_enum}
    code = {
        i: f"system.main.enum_code(l.r{i})::INTEGER" if i in enum else f"d{i}.code"
        for i in range(1, d + 1)
    }
    code_cols = ", ".join(f"{code[i]} AS k{i}" for i in range(1, d + 1))
    joins = " ".join(
        f"LEFT JOIN dom{i} AS d{i} ON l.r{i} = d{i}.v" for i in range(1, d + 1) if i not in enum
    )
    for t, nest in enumerate(plan.nestings, 1):
        on = " AND ".join(f"nk{t}.k{k + 1} = {code[k + 1]}" for k in nest.levels)
        joins += f" LEFT JOIN nestok{t} AS nk{t} ON {on}"
        code_cols += f", nk{t}.ok AS nok{t}"
    hit = None  # with domain tables: the condition of a leaf coded by their joins alone
    if keyed is not None:
        ctes.append(_leaf_keyed(request, keyed))
    elif plan.nestings:
        coding, hit = _leaf_coded_nested(plan, d, code, code_cols, joins)
        ctes += coding
    else:
        ctes.append(_f("leaf_coded", code_cols=code_cols, code_joins=joins))
    keep = "kz >= 0" if keyed is not None else " AND ".join(
        [f"k{i} IS NOT NULL" for i in range(1, d + 1)]
        + [f"nok{t} IS NOT NULL" for t in range(1, len(plan.nestings) + 1)]
    )
    # an ENUM column's values all have a code: only NULLs can be missing
    stats = _f("datastat_masks") if keyed is not None else ",\n    ".join(
        _f("datastat_enum" if i in enum else "datastat", i=i) for i in range(1, d + 1))
    if request.privacy_unit is not None:
        stats += (",\n    coalesce(system.main.sum(nulls_unit), 0)::BIGINT AS nulls_unit"
                  ",\n    coalesce(system.main.sum(read_unit), 0)::BIGINT AS read_unit")
    totals = "'stats': s," + _frame_check(plan)
    if plan.shadow is not None:
        totals += _f("shadow_check", name=literal(fold(plan.shadow)))
    coded = "leaf_coded" if hit is None else "leaf_miss"  # with domain tables: only the misses
    select = _f("stats", keep=keep, stats=stats, leaves=coded)
    if hit is not None:
        unit = request.privacy_unit is not None
        select = _f("stats_nested", hit=hit, misses=select,
                    unit=", nulls_unit, read_unit" if unit else "",
                    unit_sum=", h.nulls_unit + m.nulls_unit AS nulls_unit, "
                             "h.read_unit + m.read_unit AS read_unit" if unit else "",
                    unit_hit=", coalesce(system.main.sum(nulls_unit), 0)::BIGINT AS "
                             "nulls_unit, coalesce(system.main.sum(read_unit), 0)::BIGINT AS "
                             "read_unit" if unit else "")
    ctes.append(_f("datastats", select=select))
    ctes.append(
        _f(
            "checks",
            totals=totals,
            column_checks=_column_checks(plan),
            nest_checks=_nest_checks(plan, True, coded),
            stats=" CROSS JOIN datastats AS s",
        )
    )
    spec = literal(spec_json(request, plan, origin, token, charge))
    ctes.append(_f("begin", begin=names.begin, spec=spec))
    codes = "kz AS key" if keyed is not None else ", ".join(f"k{i}" for i in range(1, d + 1))
    ctes.append(_f("leaf", codes=codes, keep=keep))
    allowed = []
    for i in range(1, d + 1):
        nested = plan.nested_parent(i - 1)
        if nested is None:
            allowed.append("NULL")
            continue
        keys = [f"k{k + 1}" for k in (*nested[1], i - 1)]
        allowed.append(_f("allowed", t=nested[0] + 1, keys=", ".join(keys), klists=_lists(keys)))
    lists = ", ".join(
        _f("decode_enum", i=i) if i in enum else _f("decode_list", i=i) for i in range(1, d + 1)
    )
    unnest = ", ".join(f"system.main.unnest(e.e.k[{i}]) AS k{i}" for i in range(1, d + 1))
    grouping = _grouping(plan, d, memory_limit)
    recursive = False
    if grouping is None:
        ctes.append(_f("levels", levels=names.levels,
                       leaf=leaf_lists(request, plan),
                       allowed=", ".join(allowed), ptype=PREFIXES, lists=lists, unnest=unnest))
    else:
        cut, group, parts = grouping
        sizes = plan.key_sizes(d)
        assert sizes is not None
        below = math.prod(sizes[cut:])
        if not LISTS_SPILL:
            assert memory_limit is not None
            batches, per = _batches(sizes, memory_limit, parts)
            part_lists = _f("part_lists_batched", part_radix=below * group, batches=batches,
                            batch=per, batch_radix=below * group * per, parts=parts)
            part_rows, part = _f("part_rows_batched"), "g.part"
            recursive = True
        else:
            part_lists = _f("part_lists", part_radix=below * group)
            part_rows, part = _f("part_rows", parts=parts), "p.i"
        ctes.append(_f("levels_grouped", levels=names.levels,
                       key="key" if keyed is not None else _key(sizes, d),
                       cut_radix=below, part_radix=below * group, part_lists=part_lists,
                       part_rows=part_rows, part=part, cut=cut, parts=parts,
                       allowed=", ".join(allowed), ptype=PREFIXES, lists=lists, unnest=unnest))
    decoded = ", ".join(
        f"dl.l{i}[r.k{i} + 1] AS {quote(c)}" for i, c in enumerate(request.columns, 1)
    )
    reason = not_private_reason(request.seed, request.domain_from_data)
    marker = "" if reason is None else f", {literal(reason)} AS {quote(MARKER)}"
    if request.output == "counts":
        final = _f("final_counts", decoded=decoded, marker=marker)
    else:
        final = _f(
            "final_rows", decoded=decoded, marker=marker,
            decoded_names=", ".join(quote(c) for c in request.columns),
        )
    return ("WITH RECURSIVE\n" if recursive else "WITH\n") + ",\n".join(ctes) + "\n" + final


def render_preview(
    request: ReleaseRequest, plan: DomainPlan, names: UdfNames, beta: float, delta: float,
    origin: str = "sql",
    token: str | None = None,
) -> str:
    """Domain sizes (public; private data only with domain_from_data) -> the preview UDF
    (``origin``: the interface that asked, 'sql' or 'python')."""
    ctes = _ctes_public(request, plan, names)
    checks = _f(
        "checks",
        totals=_frame_check(plan),
        column_checks=_column_checks(plan, preview=True),
        nest_checks=_nest_checks(plan, False),
        stats="",
    )
    ctes.append(checks)
    spec = preview_spec_json(request, plan, beta, delta, token, origin)
    call = f"{names.preview}({literal(spec)}, j)"
    final = f"SELECT u.* FROM (SELECT system.main.unnest({call}) AS u FROM checks)"
    return "WITH\n" + ",\n".join(ctes) + "\n" + final


def preview_spec_json(
    request: ReleaseRequest, plan: DomainPlan, beta: float, delta: float,
    token: str | None = None, origin: str = "sql",
) -> str:
    """The spec the preview UDF gets: the release's, with ``beta``, the reporting ``delta`` and
    the interface that asked (``origin``)."""
    spec = json.loads(spec_json(request, plan, "preview", token))
    spec.update(beta=beta, delta=delta, interface=origin)
    return json.dumps(spec, sort_keys=True)
