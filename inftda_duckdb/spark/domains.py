"""Public domains on Spark: every hierarchy level's values in code order, held on the driver.

The rules and their precedence are every engine's (:mod:`inftda_duckdb.core.domains`, whose
:class:`DomainPlan` this module fills in): an explicit list (``domains={'hour': range(24)}``),
the distinct values of a public domain table that has a column of that name (a DataFrame or a
table name; it also *nests* the levels it lists together), or, opt-in and not private, the
distinct values in the data (``domain_from_data``). Spark has no ENUM type, so every other column
needs a declared domain.

Labels are converted to the source column's Spark type by ``try_cast`` (a label that does not
convert is reported as DuckDB reports it); codes follow the list's order, or the sorted distinct
values of a table, as in DuckDB. A domain of at most :data:`.spread.DRIVER_VALUES` values comes
to the driver as a typed Arrow array (public data, one small job for all lists and one per
domain table, split by :mod:`.gather` when a result could pass ``spark.driver.maxResultSize``):
the leaves are coded against it by a literal map or a broadcast join, and the executors decode
the released codes with it. A larger one stays on the executors (:mod:`.spread`), and so does a
large domain table nesting the first levels; other nestings come to the driver.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.accounting import INFTDA
from ..core.domains import (
    FULL_CHECK,
    ColumnDomain,
    DomainPlan,
    Nesting,
    check_columns,
    column_domains,
    nesting,
    no_domain,
)
from ..core.errors import bad_argument, opt
from ..core.planning import level_cells
from ..core.request import Labels, ReleaseRequest
from ..core.tree import Allowed
from . import gather, spread
from .ledger import datasets
from .spread import EXAMPLES


def col(name: str) -> Any:
    """A Spark column by its exact name (dots, spaces and backticks included)."""
    return F.col("`" + name.replace("`", "``") + "`")


@dataclass(frozen=True)
class Source:
    """The source DataFrame, its name for messages, and each hierarchy column's real name and
    Spark type (matched case-insensitively, as Spark resolves names)."""

    frame: DataFrame
    name: str
    fields: tuple[T.StructField, ...]
    unit: T.StructField | None

    @classmethod
    def of(cls, frame: DataFrame, name: str, request: ReleaseRequest) -> Source:
        schema = frame.schema
        check_columns(request, [(f.name, f.dataType.simpleString()) for f in schema.fields])
        by_lower = {f.name.lower(): f for f in schema.fields}
        unit = request.privacy_unit
        return cls(
            frame,
            name,
            tuple(by_lower[c.lower()] for c in request.columns),
            None if unit is None else by_lower[unit.lower()],
        )


@dataclass(frozen=True)
class Domains:
    """The plan (kinds, sizes, nestings) and the values: ``values[k]`` holds level k's public
    values in code order (typed as the source column), or is None for a level whose domain
    stays on the executors (``spreads[k]``); ``nests[t]`` holds nesting t's distinct coded
    combinations (one row per level; ``-1`` marks a value outside the level's domain), or is
    None for a one-column table on the executors (it lists exactly its level's domain)."""

    plan: DomainPlan
    values: tuple[pa.Array | None, ...]
    nests: tuple[np.ndarray | None, ...]
    checks: dict[str, Any]
    spreads: dict[int, spread.Spread]
    nested: dict[int, spread.Nested]  # t: a nesting domain table on the executors

    def pinned(self) -> list[DataFrame]:
        """The pinned rankings and tables of the domains on the executors (freed with the
        release)."""
        return [*(frame for s in self.spreads.values() for frame in s.pinned()),
                *(n.codes for n in self.nested.values())]

    def spread_nested(self, level: int) -> bool:
        """Whether a nesting on the executors nests ``level`` under the levels above it (its
        allowed children: :meth:`nested_rows`)."""
        found = self.plan.nested_parent(level)
        return found is not None and found[0] in self.nested

    def nested_rows(self, level: int) -> DataFrame:
        """The allowed children of a :meth:`spread_nested` level: codes ``c0..c{level}``."""
        found = self.plan.nested_parent(level)
        assert found is not None and found[0] in self.nested
        return self.nested[found[0]].listed(level + 1)

    @property
    def sizes(self) -> list[int]:
        return [int(c.size or 0) for c in self.plan.columns]

    def allowed(self, level: int, cut: int) -> Allowed | None:
        """A nested level's public children (the earlier levels keying them, and the codes).
        A level of a nesting on the executors below the cut: None (its children travel with
        the subtrees); above it: collected (at most the cut's cells, :mod:`.subtrees`)."""
        nested = self.plan.nested_parent(level)
        if nested is None:
            return None
        t, keys = nested
        if t in self.nested:
            if level >= cut:
                return None
            table = self.nested[t].listed(level + 1).toArrow()
            return Allowed(keys, np.stack([table.column(j).to_numpy().astype(np.int64)
                                           for j in range(level + 1)]))
        nest = self.plan.nestings[t]
        rows = [nest.levels.index(k) for k in (*keys, level)]
        codes = self.nests[t]
        assert codes is not None, "a nested level's table is on the driver"
        table = codes[rows][:, (codes >= 0).all(axis=0)]
        return Allowed(keys, np.unique(table, axis=1))

    def frame(self, spark: SparkSession, level: int) -> DataFrame:
        """Level ``level``'s values and codes as a DataFrame ``(v, code)`` (:func:`.gather.local`:
        broadcast when small; :meth:`.spread.Spread.coded` for a domain on the executors)."""
        values = self.values[level]
        if values is None:
            return self.spreads[level].coded()
        return _local(spark, values)

    def nest_frame(self, spark: SparkSession, t: int) -> DataFrame:
        """Nesting t's valid combinations as a DataFrame of codes ``(c0, c1, ...)``
        (:func:`.gather.local`)."""
        if t in self.nested:
            return self.nested[t].listed()
        table = self.nests[t]
        assert table is not None, "a one-column table on the executors lists every value"
        table = np.unique(table[:, (table >= 0).all(axis=0)], axis=1)
        return gather.local(spark,
            pa.table({f"c{j}": pa.array(row.astype(np.int32)) for j, row in enumerate(table)})
        )


def plan(
    request: ReleaseRequest,
    source: Source,
    tables: Sequence[tuple[str, DataFrame]],
) -> tuple[DomainPlan, list[DataFrame]]:
    """Every level's domain kind (precedence as in DuckDB) and the nestings of the tables."""
    nestings: list[Nesting] = []
    frames: list[DataFrame] = []
    for name, table in tables:
        _refuse_private_table(source, name, table)
        nestings.append(nesting(request, (name,), [f.name for f in table.schema.fields]))
        frames.append(table)
    types = {c: f.dataType.simpleString().upper() for c, f in zip(request.columns, source.fields,
                                                                   strict=True)}

    def otherwise(column: str) -> ColumnDomain:
        raise no_domain(column, types[column], enums=False)

    columns = column_domains(request, nestings, otherwise)
    return DomainPlan(columns, tuple(nestings)), frames


def _refuse_private_table(source: Source, name: str, table: DataFrame) -> None:
    """A domain table that is the source itself, or reads every dataset the source reads, is
    private (one that reads some of them is a public lookup the source joins:
    :func:`.ledger.source_of`)."""
    read = datasets(source.frame)
    same = table.sameSemantics(source.frame) or (bool(read) and read <= datasets(table))
    if same:
        raise bad_argument(
            "domain_tables",
            name,
            f"is the private source {source.name} itself (or reads its files): its values and "
            "combinations would be read from the private data, and the release would not be "
            "private",
            "pass a public table that is not derived from the data, or declare the values with "
            f"{opt('domains')}; to read domains from the data explicitly (not private) pass "
            f"{opt('domain_from_data', True)}",
        )


def resolve(
    spark: SparkSession,
    request: ReleaseRequest,
    source: Source,
    dplan: DomainPlan,
    tables: Sequence[DataFrame],
    data: DataFrame | None = None,
    *,
    preview: bool = False,
) -> Domains:
    """Read every level's values (lists: one job; each domain table: one job; data: one job
    per column, from the leaves ``data`` with raw columns ``r1..rd``) and check them, returning
    the check row's public part (:mod:`inftda_duckdb.core.checks`)."""
    d = request.depth
    values: list[pa.Array | None] = [None] * d
    checks: list[dict[str, Any] | None] = [None] * d
    spreads: dict[int, spread.Spread] = {}
    tabled = {k for nest in dplan.nestings for k in nest.levels}
    lists = [k for k, c in enumerate(dplan.columns) if c.kind == "list"]
    for k in lists:  # a large list no table is checked against: on the executors
        labels = dplan.columns[k].labels
        if (k not in tabled and len(labels) > spread.DRIVER_VALUES
                and not (preview and _long_range(labels))):
            spreads[k], checks[k] = spread.of_list(spark, labels, source.fields[k].dataType)
    lists = [k for k in lists if k not in spreads]
    if lists:
        cast = _cast_lists(spark, dplan, source, lists, preview)  # in level order
        for k, (typed, check) in zip(lists, cast, strict=True):
            values[k], checks[k] = typed, check
    raw_nests: list[pa.Table | None] = []
    spread_nests: dict[int, dict[str, Any]] = {}
    nested: dict[int, spread.Nested] = {}
    for t, (nest, table) in enumerate(zip(dplan.nestings, tables, strict=True)):
        rows = _table_rows(nest, table, source)
        alone = len(nest.levels) == 1 and dplan.columns[nest.levels[0]].kind == "table"
        raw = gather.distinct_rows(rows, spread.DRIVER_VALUES if alone or spreadable(
            request, nest) else None)
        raw_nests.append(raw)
        if raw is None and not alone:  # the first levels' combinations, more than the driver
            nested[t], spread_nests[t] = _spread_nest(  # holds
                spark, t, dplan, source, rows.distinct(), values, checks, spreads)
            continue
        if raw is None:  # one column of more values than the driver holds
            k = nest.levels[0]
            spreads[k], defects, examples = spread.of_table(
                rows.select(F.col("w0").alias("w"), F.col("s0").alias("s")).distinct())
            checks[k] = spread.column_check(source.fields[k].dataType, spreads[k].size)
            spread_nests[t] = {
                "defects": defects, "defect_examples": examples, "orphans": 0,
                "orphan_examples": [], "outside": 0, "outside_examples": [],
                "nodes": [spreads[k].size]}
            continue
        for j, k in enumerate(nest.levels):
            if dplan.columns[k].kind == "table" and dplan.columns[k].table == t:
                values[k] = _sorted_distinct(raw.column(f"w{j}"))
                checks[k] = _column_check(source.fields[k], values[k], 0, [])
    for k, c in enumerate(dplan.columns):
        if c.kind == "data":
            assert data is not None, "domain_from_data needs the leaves"
            found = gather.distinct_rows(data.select(col(f"r{k + 1}")), spread.DRIVER_VALUES)
            if found is None:
                spreads[k] = spread.of_values(data.select(col(f"r{k + 1}").alias("v"))
                                              .distinct())
                checks[k] = spread.column_check(source.fields[k].dataType, spreads[k].size)
                continue
            values[k] = _sorted_distinct(found.column(0))
            checks[k] = _column_check(source.fields[k], values[k], 0, [])
    done = [c for c in checks if c is not None]
    assert len(done) == d
    nests: list[np.ndarray | None] = []
    nest_checks = []
    for t, (nest, raw) in enumerate(zip(dplan.nestings, raw_nests, strict=True)):
        if raw is None:
            nests.append(None)
            nest_checks.append(spread_nests[t])
            continue
        coded, check = _code_nest(nest, raw, values)
        nests.append(coded)
        nest_checks.append(check)
    columns = tuple(
        ColumnDomain(c.column, c.kind, c.labels, c.table, c.table_column, size=int(ok["size"]))
        for c, ok in zip(dplan.columns, done, strict=True)
    )
    full = DomainPlan(columns, dplan.nestings, dplan.source, dplan.shadow)
    return Domains(full, tuple(values), tuple(nests), {"columns": done, "nestings": nest_checks},
                   spreads, nested)


def spreadable(request: ReleaseRequest, nest: Nesting) -> bool:
    """A domain table may stay on the executors when it nests levels 1..m in order (m > 1: the
    allowed children of each nested level are then keyed by the levels above it, and travel
    with the subtrees, :func:`.descent.descend`), for the estimator ``'inftda'`` (least squares
    noises every allowed cell from the driver's plan)."""
    return (len(nest.levels) > 1 and nest.levels == tuple(range(len(nest.levels)))
            and request.estimator == INFTDA)


def _spread_nest(
    spark: SparkSession, t: int, dplan: DomainPlan, source: Source, rows: DataFrame,
    values: list[pa.Array | None], checks: list[dict[str, Any] | None],
    spreads: dict[int, spread.Spread],
) -> tuple[spread.Nested, dict[str, Any]]:
    """Domain table t on the executors (:func:`spreadable`, too many rows for the driver):
    its own levels' values (ranked there, their checks into ``spreads`` and ``checks``), then
    its rows coded against every level's domain, and the nesting's check."""
    nest = dplan.nestings[t]
    own = [j for j, k in enumerate(nest.levels)
           if dplan.columns[k].kind == "table" and dplan.columns[k].table == t]
    sizes = rows.agg(*[F.count_distinct(F.col(f"w{j}")) for j in own]).collect()[0] \
        if own else []
    for j, size in zip(own, sizes, strict=True):
        k = nest.levels[j]
        spreads[k] = spread.Spread(rows.select(F.col(f"w{j}").alias("v"))
                                   .where(F.col("v").isNotNull()), int(size), positional=False)
        checks[k] = spread.column_check(source.fields[k].dataType, int(size))
    frames = [spreads[k].coded() if k in spreads else _local(spark, values[k])
              for k in nest.levels]
    first = checks[nest.levels[0]]
    assert first is not None
    return spread.of_nest(rows, frames, int(first["size"]))


def _cast_lists(
    spark: SparkSession, dplan: DomainPlan, source: Source, levels: list[int], preview: bool
) -> list[tuple[pa.Array, dict[str, Any]]]:
    """All explicit lists converted to their columns' types in ONE Spark job: column ``l{k}``
    holds level k's labels (padded with NULL), ``v{k}`` their ``try_cast`` to the type. Labels
    of a STRING column are its values: no job when all columns are strings. A preview checks a
    declared range of more than :data:`FULL_CHECK` values by its two ends only, as DuckDB's
    does (the values are then those two ends; the check has the range's size)."""
    ends = {k for k in levels if preview and _long_range(dplan.columns[k].labels)}
    labels = {k: _texts(dplan.columns[k].labels, k in ends) for k in levels}
    text = [k for k in levels if isinstance(source.fields[k].dataType, T.StringType)]
    levels = [k for k in levels if k not in text]
    done = {k: pa.array(labels[k], pa.string()) for k in text}
    checks = {k: _column_check(source.fields[k], done[k], 0, []) for k in text}
    if levels:
        done_cast = _cast_in_spark(spark, labels, source, levels)
        for k, (typed, check) in zip(levels, done_cast, strict=True):
            done[k], checks[k] = typed, check
    for k in ends:
        checks[k] = dict(checks[k], size=len(dplan.columns[k].labels), dups=0)
        checks[k]["bad_examples"] = labels[k] if checks[k]["bad"] else []
    return [(done[k], checks[k]) for k in sorted(done)]


def _long_range(labels: Labels) -> bool:
    return isinstance(labels, range) and len(labels) > FULL_CHECK


def _texts(labels: Labels, ends: bool = False) -> list[str]:
    """A declared domain's labels as text (a range's values; ``ends``: its first and last)."""
    if ends:
        return [str(labels[0]), str(labels[-1])]
    return [str(x) for x in labels] if isinstance(labels, range) else list(labels)


def _cast_in_spark(
    spark: SparkSession, labels: dict[int, list[str]], source: Source, levels: list[int]
) -> list[tuple[pa.Array, dict[str, Any]]]:
    longest = max(len(labels[k]) for k in levels)
    table = pa.table({
        f"l{k}": pa.array(labels[k] + [None] * (longest - len(labels[k])), pa.string())
        for k in levels
    })
    casts = [F.col(f"l{k}").try_cast(source.fields[k].dataType).alias(f"v{k}") for k in levels]
    typed = gather.rows_of(spark, table, lambda frame: frame.select(*casts))
    out = []
    for k in levels:
        cast = typed.column(f"v{k}").combine_chunks().slice(0, len(labels[k]))
        bad = [x for x, ok in zip(labels[k], cast.is_valid().to_pylist(), strict=True) if not ok]
        check = _column_check(source.fields[k], cast, len(bad), bad[:EXAMPLES])
        out.append((cast, check))
    return out


def _column_check(
    field: T.StructField, values: pa.Array, bad: int, bad_examples: list[str]
) -> dict[str, Any]:
    """One level's domain check (:func:`.spread.column_check`) of values on the driver."""
    valid = values.drop_null()
    return spread.column_check(field.dataType, len(valid), bad, bad_examples,
                               len(valid) - len(pc.unique(valid)))


def _local(spark: SparkSession, values: pa.Array | None) -> DataFrame:
    """A domain held on the driver as a DataFrame ``(v, code)`` (:func:`.gather.local`)."""
    assert values is not None
    codes = pa.array(np.arange(len(values), dtype=np.int32))
    return gather.local(spark, pa.table({"v": values, "code": codes}))


def _sorted_distinct(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Distinct non-NULL values in ascending order: a table's (or the data's) domain."""
    unique = pc.unique(values.drop_null())
    if isinstance(unique, pa.ChunkedArray):
        unique = unique.combine_chunks()
    return unique.take(pc.sort_indices(unique))


def _table_rows(nest: Nesting, table: DataFrame, source: Source) -> DataFrame:
    """A domain table's hierarchy columns: ``w{j}`` each value converted to its hierarchy
    column's type (NULL when it does not convert), ``s{j}`` its text."""
    exprs = []
    for j, (k, name) in enumerate(zip(nest.levels, nest.names, strict=True)):
        exprs.append(col(name).try_cast(source.fields[k].dataType).alias(f"w{j}"))
        exprs.append(col(name).cast("string").alias(f"s{j}"))
    return table.select(*exprs)


def _code_nest(
    nest: Nesting, raw: pa.Table, values: Sequence[pa.Array | None]
) -> tuple[np.ndarray, dict[str, Any]]:
    """Codes of a domain table's rows (-1: NULL or outside the domain) and its check (its
    levels' values are on the driver)."""
    j_levels = range(len(nest.levels))
    held = [values[k] for k in nest.levels]
    assert all(v is not None for v in held), "a nesting's levels are on the driver"
    codes = np.stack([
        pc.fill_null(pc.index_in(raw.column(f"w{j}").cast(v.type), value_set=v), -1)
        .to_numpy(zero_copy_only=False).astype(np.int64)
        for j, v in zip(j_levels, held, strict=True) if v is not None
    ]) if raw.num_rows else np.zeros((len(nest.levels), 0), np.int64)
    defect = (codes < 0).any(axis=0)
    texts = [
        ", ".join("NULL" if s is None else str(s)
                  for s in (raw.column(f"s{j}")[i].as_py() for j in j_levels))
        for i in np.flatnonzero(defect)[:EXAMPLES]
    ]
    ok = codes[:, ~defect]
    first = held[0]
    assert first is not None
    orphans = np.setdiff1d(np.arange(len(first)), ok[0])
    nodes = [
        int(np.unique(ok[: j + 1], axis=1).shape[1]) if ok.size else 0 for j in j_levels
    ]
    check = {
        "defects": int(defect.sum()),
        "defect_examples": texts,
        "orphans": int(orphans.shape[0]),
        "orphan_examples": [_text(first[int(i)].as_py()) for i in orphans[:EXAMPLES]],
        "outside": 0,
        "outside_examples": [],
        "nodes": nodes,
    }
    return codes, check


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def level_nodes(domains: Domains) -> list[int]:
    """Cells noised at each level when every parent is released (N_l): products of the free
    domains times the nested combinations (the preview's node counts)."""
    return level_cells(domains.plan, domains.checks)[1]


def key_span(sizes: Sequence[int]) -> int:
    """The span of mixed-radix keys over ``sizes`` (their product)."""
    return math.prod(int(s) for s in sizes)
