"""The paper's workloads as DuckDB tables, for trying the tool and for the benchmarks.

Every generator is deterministic for a given ``seed`` (default 42, as in the paper) and writes
regular (non-TEMP) tables, so the SQL form of the release can see the public domain tables:

- ``<name>_counts``: the leaf counts (hierarchy columns + ``n``), the compact truth;
- ``<name>``: the private rows (a view expanding the counts with ``range(n)``, or a table when
  ``materialize=True``), what a release reads;
- domain tables where a domain is nested.

Workloads (see benchmarks/RESULTS.md for how the tool does on them):

- :func:`synthetic_tree`: the paper's synthetic origin-destination trees. Flows ~ Pareto(3)
  (numpy's Lomax form) min-max scaled into [1, 1000] over the non-zero cells; columns alternate
  destination and origin levels (D1, O1, D2, O2, ...). ``binary``: 16 binary columns, 65,536 cells.
  ``random``: a random geography (branching uniform in 1..10 per node, 4 levels, redrawn until it
  has exactly 435 leaves as in the paper), crossed with itself: 8 nested levels, 435^2 = 189,225
  cells. Variants ``complete`` (every cell > 0), ``dense`` (50% of cells zero), ``sparse`` (99%).
- :func:`italy_like`: a synthetic stand-in for Italian commuting: 20 regions -> ~110 provinces ->
  ~8,000 municipalities, origin (region, province, municipality) then destination: ~65M domain
  cells, ~550k non-zero flows, most within a province (gravity model, heavy-tailed populations).
- :func:`enum_table`: rows over four ENUM columns (50 x 20 x 24 x 10 values, skewed marginals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa

from ..core.errors import bad_argument
from ..core.identifiers import literal, quote

SEED = 42
KINDS = ("binary", "random")
VARIANTS = {"complete": 0.0, "dense": 0.5, "sparse": 0.99}  # share of zero cells


@dataclass(frozen=True)
class Workload:
    """What a generator wrote (``source``, ``columns``, ``domains``, ``domain_tables``: release)."""

    source: str  # the private rows (view or table)
    counts: str  # leaf counts: the hierarchy columns + n
    columns: tuple[str, ...]
    n: int  # number of rows
    nonzero: int  # non-zero leaf cells
    cells: tuple[int, ...]  # public domain cells per level 1..d
    domains: dict[str, list[int]] | None = None
    domain_tables: tuple[str, ...] = ()
    notes: dict[str, object] = field(default_factory=dict)


def pareto_flows(rng: np.random.Generator, size: int) -> np.ndarray:
    """Pareto(3) flows min-max scaled into [1, 1000] (int64), as in the paper's synthetic data."""
    if size == 0:
        return np.zeros(0, np.int64)
    x = rng.pareto(3.0, size)
    span = x.max() - x.min()
    scaled = 1 + 999 * (x - x.min()) / (span if span > 0 else 1.0)
    return np.rint(scaled).astype(np.int64)


def _write(
    con: duckdb.DuckDBPyConnection, name: str, leaves: pa.Table, materialize: bool
) -> tuple[str, str, int, int]:
    """Write ``<name>_counts`` (non-zero leaves) and the row source ``<name>``."""
    counts = f"{name}_counts"
    cols = [c for c in leaves.column_names if c != "n"]
    con.register("__inftda_leaves", leaves)
    try:
        con.execute(
            f"CREATE OR REPLACE TABLE {quote(counts)} AS SELECT * FROM __inftda_leaves "
            f"WHERE n > 0 ORDER BY ALL"
        )
    finally:
        con.unregister("__inftda_leaves")
    sel = ", ".join(quote(c) for c in cols)
    rows = f"SELECT {sel} FROM (SELECT {sel}, unnest(range(n)) FROM {quote(counts)})"
    con.execute(f"DROP VIEW IF EXISTS {quote(name)}")
    con.execute(f"DROP TABLE IF EXISTS {quote(name)}")
    kind = "TABLE" if materialize else "VIEW"
    con.execute(f"CREATE {kind} {quote(name)} AS {rows}")
    n, nonzero = con.sql(f"SELECT sum(n)::BIGINT, count(*) FROM {quote(counts)}").fetchall()[0]
    return name, counts, int(n or 0), int(nonzero)


def _zero_out(rng: np.random.Generator, cells: int, variant: str) -> np.ndarray:
    """Indices of the non-zero cells for a variant (a seeded random subset)."""
    if variant not in VARIANTS:
        raise bad_argument("variant", variant, f"must be one of {list(VARIANTS)}", "pass 'dense'")
    keep = cells - round(cells * VARIANTS[variant])
    return (
        np.sort(rng.choice(cells, size=keep, replace=False)) if keep < cells else np.arange(cells)
    )


def random_geography(rng: np.random.Generator, depth: int = 4, leaves: int = 435) -> np.ndarray:
    """Leaf paths (leaves x depth, global node ids per level) of a random tree with branching
    uniform in 1..10, redrawn from ``rng`` until it has exactly ``leaves`` leaves."""
    while True:
        branching = [rng.integers(1, 11, size=1)]
        for _ in range(depth - 1):
            branching.append(rng.integers(1, 11, size=int(branching[-1].sum())))
        if int(branching[-1].sum()) == leaves:
            break
    # parent of each node at level l+1: repeat parent ids by their branching
    ids = [np.repeat(np.arange(len(b)), b) for b in branching]  # ids[l][j]: parent of node j
    paths = np.empty((leaves, depth), np.int64)
    node = np.arange(leaves)
    for lev in range(depth - 1, -1, -1):
        paths[:, lev] = node
        node = ids[lev][node]
    return paths


def synthetic_tree(
    con: duckdb.DuckDBPyConnection,
    name: str | None = None,
    *,
    kind: str = "binary",
    variant: str = "complete",
    seed: int = SEED,
    materialize: bool = False,
) -> Workload:
    """The paper's synthetic OD tree ``kind`` ('binary' or 'random') with ``variant`` zeros."""
    if kind not in KINDS:
        raise bad_argument("kind", kind, f"must be one of {list(KINDS)}", "pass 'binary'")
    name = name or f"{kind}_{variant}"
    rng = np.random.default_rng(seed)
    if kind == "binary":
        d = 16
        columns = [f"{side}{i}" for i in range(1, d // 2 + 1) for side in ("d", "o")]
        codes = (np.arange(1 << d)[:, None] >> np.arange(d - 1, -1, -1)) & 1
        keep = _zero_out(rng, 1 << d, variant)
        data = {c: pa.array(codes[keep, j].astype(np.int8)) for j, c in enumerate(columns)}
        data["n"] = pa.array(pareto_flows(rng, len(keep)))
        source, counts, n, nz = _write(con, name, pa.table(data), materialize)
        cells = tuple(2**k for k in range(1, d + 1))
        domains = {c: [0, 1] for c in columns}
        return Workload(source, counts, tuple(columns), n, nz, cells, domains=domains)
    geo = random_geography(rng)
    depth, leaves = geo.shape[1], geo.shape[0]
    columns = [f"{side}{i}" for i in range(1, depth + 1) for side in ("d", "o")]
    dest, orig = np.divmod(np.arange(leaves * leaves), leaves)
    keep = _zero_out(rng, leaves * leaves, variant)
    data = {}
    for lev in range(depth):
        data[f"d{lev + 1}"] = pa.array(geo[dest[keep], lev].astype(np.int32))
        data[f"o{lev + 1}"] = pa.array(geo[orig[keep], lev].astype(np.int32))
    table = pa.table({c: data[c] for c in columns} | {"n": pa.array(pareto_flows(rng, len(keep)))})
    source, counts, n, nz = _write(con, name, table, materialize)
    tables = []
    for side in ("d", "o"):
        geo_name = f"{name}_geo_{side}"
        paths = pa.table(
            {f"{side}{j + 1}": pa.array(geo[:, j].astype(np.int32)) for j in range(depth)}
        )
        con.register("__inftda_geo", paths)
        con.execute(f"CREATE OR REPLACE TABLE {quote(geo_name)} AS SELECT * FROM __inftda_geo")
        con.unregister("__inftda_geo")
        tables.append(geo_name)
    per_level = [len(np.unique(geo[:, : j + 1], axis=0)) for j in range(depth)]
    level_cells: list[int] = []
    for j in range(depth):  # D_{j+1} (times O_j), then O_{j+1}
        level_cells += [per_level[j] * (per_level[j - 1] if j else 1), per_level[j] ** 2]
    return Workload(
        source, counts, tuple(columns), n, nz, tuple(level_cells), domain_tables=tuple(tables)
    )


def italy_like(
    con: duckdb.DuckDBPyConnection,
    name: str = "italy",
    *,
    seed: int = SEED,
    regions: int = 20,
    provinces: int = 110,
    municipalities: int = 8000,
    pairs: int = 850_000,
    materialize: bool = False,
) -> Workload:
    """An Italy-like nested origin-destination workload (synthetic; see the module docstring).

    ``pairs`` gravity-model draws (origin ~ population^0.5; destination: 60% same province, 28%
    same region, 12% anywhere, each ~ population^0.7) are deduplicated, giving ~550k non-zero
    flows at the defaults; every municipality also has a flow to itself. Flows are Pareto(3) in
    [1, 1000], self flows 200 times that (most commuters stay in their municipality).
    """
    if not 1 <= regions <= provinces <= municipalities:
        raise bad_argument("regions/provinces/municipalities", (regions, provinces, municipalities),
                           "must satisfy 1 <= regions <= provinces <= municipalities",
                           "pass e.g. 20, 110, 8000")  # fmt: skip
    rng = np.random.default_rng(seed)

    def split(total: int, parts: int) -> np.ndarray:
        """Sizes >= 1 summing to ``total``, Dirichlet(3)-distributed."""
        return 1 + rng.multinomial(total - parts, rng.dirichlet(np.full(parts, 3.0)))

    prov_region = np.repeat(np.arange(regions), split(provinces, regions))
    mun_prov = np.repeat(np.arange(provinces), split(municipalities, provinces))
    mun_region = prov_region[mun_prov]
    pop = rng.pareto(1.1, municipalities) + 1.0  # heavy-tailed populations (Zipf-like)
    attract = pop**0.7

    def draw_within(group: np.ndarray, of: np.ndarray, u: np.ndarray) -> np.ndarray:
        """For each entry of ``of`` (a group id), a municipality of that group ~ population."""
        order = np.argsort(group, kind="stable")
        cum = np.cumsum(attract[order])
        start = np.searchsorted(group[order], of, side="left")
        end = np.searchsorted(group[order], of, side="right")
        lo = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
        pos = np.searchsorted(cum, lo + u * (cum[end - 1] - lo), side="right")
        return order[np.clip(pos, start, end - 1)]

    origin = rng.choice(municipalities, size=pairs, p=pop**0.5 / (pop**0.5).sum())
    kind = rng.choice(3, size=pairs, p=[0.60, 0.28, 0.12])
    u = rng.random(pairs)
    country = np.zeros(municipalities, np.int64)
    dest = np.select(
        [kind == 0, kind == 1],
        [
            draw_within(mun_prov, mun_prov[origin], u),
            draw_within(mun_region, mun_region[origin], u),
        ],
        draw_within(country, country[origin], u),
    )
    selfs = np.arange(municipalities) * (municipalities + 1)
    pair = np.unique(np.concatenate([origin * municipalities + dest, selfs]))
    o, de = np.divmod(pair, municipalities)
    flows = pareto_flows(rng, len(pair))
    flows[o == de] *= 200
    geo = np.stack([mun_region, mun_prov, np.arange(municipalities)], axis=1).astype(np.int32)
    levels = ("region", "province", "municipality")
    columns = [f"o_{x}" for x in levels] + [f"d_{x}" for x in levels]
    data = {c: pa.array(geo[o if c.startswith("o_") else de, j % 3]) for j, c in enumerate(columns)}
    source, counts, n, nz = _write(con, name, pa.table(data | {"n": pa.array(flows)}), materialize)
    geo_table = f"{name}_geo"
    con.register("__inftda_geo", pa.table({x: pa.array(geo[:, j]) for j, x in enumerate(levels)}))
    con.execute(f"CREATE OR REPLACE TABLE {quote(geo_table)} AS SELECT * FROM __inftda_geo")
    con.unregister("__inftda_geo")
    tables = []
    for side in ("o", "d"):  # the release matches domain tables to hierarchy columns by name
        view = f"{geo_table}_{side}"
        cols = ", ".join(f"{quote(x)} AS {quote(f'{side}_{x}')}" for x in levels)
        con.execute(
            f"CREATE OR REPLACE VIEW {quote(view)} AS SELECT {cols} FROM {quote(geo_table)}"
        )
        tables.append(view)
    per = [regions, provinces, municipalities]
    cells = tuple(per) + tuple(municipalities * p for p in per)
    return Workload(source, counts, tuple(columns), n, nz, cells, domain_tables=tuple(tables),
                    notes={"geo": geo_table})  # fmt: skip


def enum_table(
    con: duckdb.DuckDBPyConnection,
    name: str = "trips",
    n: int = 1_000_000,
    *,
    sizes: Sequence[int] = (50, 20, 24, 10),
    columns: Sequence[str] = ("origin", "dest", "hour", "mode"),
    seed: int = SEED,
) -> Workload:
    """A row table of ``n`` rows over ENUM columns (default 50 x 20 x 24 x 10 values).

    Column j takes label i with probability proportional to 1 / (i + 1)^0.7 (skewed marginals,
    independent columns), so small n leaves many of the 240,000 cells empty.
    """
    if len(sizes) != len(columns) or any(s < 1 for s in sizes) or n < 0:
        raise bad_argument("sizes", list(sizes), "must give one positive size per column",
                           "pass e.g. sizes=(50, 20, 24, 10)")  # fmt: skip
    rng = np.random.default_rng(seed)
    arrays, sel = {}, []
    for col, size in zip(columns, sizes, strict=True):
        p = 1.0 / np.arange(1, size + 1) ** 0.7
        arrays[col] = pa.array(rng.choice(size, size=n, p=p / p.sum()).astype(np.int16))
        labels = [f"{col[0]}{i:0{len(str(size - 1))}d}" for i in range(size)]
        lab = "[" + ", ".join(literal(x) for x in labels) + "]"
        enum = "ENUM(" + ", ".join(literal(x) for x in labels) + ")"
        sel.append(f"CAST({lab}[{quote(col)} + 1] AS {enum}) AS {quote(col)}")
    con.register("__inftda_codes", pa.table(arrays))
    try:
        con.execute(
            f"CREATE OR REPLACE TABLE {quote(name)} AS SELECT {', '.join(sel)} FROM __inftda_codes"
        )
    finally:
        con.unregister("__inftda_codes")
    cols = ", ".join(quote(c) for c in columns)
    counts = f"{name}_counts"
    con.execute(f"CREATE OR REPLACE TABLE {quote(counts)} AS SELECT {cols}, count(*)::BIGINT AS n "
                f"FROM {quote(name)} GROUP BY ALL ORDER BY ALL")  # fmt: skip
    nonzero = con.sql(f"SELECT count(*) FROM {quote(counts)}").fetchall()[0][0]
    cells = tuple(int(np.prod(sizes[: j + 1])) for j in range(len(sizes)))
    return Workload(name, counts, tuple(columns), n, int(nonzero), cells)
