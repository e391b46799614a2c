"""``load(con)``: InfTDA on a DuckDB connection, its UDFs and TEMP table macros.

Per connection (:mod:`.connections`), ``load`` registers the budget and evaluation functions,
the release UDFs of :mod:`.udfs` and the bind-time generators of :mod:`.statements`, and the
TEMP table macros rendered from the option table (:mod:`inftda_duckdb.core.options`):

- ``inftda_release(source, columns, rho := ..., ...)``: ``SELECT * FROM query(<SQL>)`` where the
  SQL is rendered at bind time by a side-effect-free UDF (DuckDB's Python API has no table
  functions); executing it performs one release (see ``sql/release.sql``);
- ``inftda_preview(source, columns, rho := ..., beta := 0.05, delta := 1e-6)``: noise scale and
  Theorem 1 bound per level; spends nothing.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..core import options, units
from ..ledger.store import Ledger
from . import budgets, catalog, disclosure, errorbars, evaluation, planner, statements, udfs
from .connections import create_macro, register_udfs
from .sqlgen import PREFIXES, UdfNames, fragments


def load(con: Any, ledger: str | Ledger | None = None, mode: str | None = None) -> None:
    """Register InfTDA on ``con`` (idempotent; each connection or cursor needs its own load).

    ``mode='public'``: the public-facing mode, for a connection whose functions analysts may
    call (see :mod:`.disclosure`): it holds for every connection of the database instance and
    cannot be turned off. Default: the mode in force (curator, the trusted data holder).

    ``ledger``: where budgets and charges are kept: a ledger file any number of processes,
    tools and data files can share (``'budget.duckdb'``, created on first use), or ``':memory:'``
    for an in-memory ledger chosen on purpose. Default: the file named by ``INFTDA_LEDGER``,
    else the ledger inside the database that holds each source (created in the default database
    now, in another database the first time one of its tables is charged or budgeted).
    """
    disclosure.set_mode(con, mode)
    if ledger is not None:
        catalog.choose(con, ledger)
    chosen = catalog.chosen(con)
    with con.cursor() as cur:
        home = catalog.home(cur, catalog.default_database(con))
    store = catalog.ledger_for(con, home)
    if chosen is not None or (not store.read_only and store.format() is None):
        store.ledger_id()  # create it now (reports an unreachable ledger file at once)
    budgets.register(con)
    evaluation.register(con)
    n = register_udfs(con, "release", lambda n: _register(con, n))
    macros = fragments("macros.sql")
    for surface, generator in ((options.RELEASE, f"inftda_release_sql_{n}"),
                               (options.PREVIEW, f"inftda_preview_sql_{n}")):
        create_macro(con, macros[f"{surface}_macro"].substitute(
            generator=generator, parameters=options.macro_parameters(surface),
            fields=options.macro_fields(surface)))
    errorbars.register(con)  # inftda_intervals, inftda_bounds, inftda_sum
    planner.register(con, UdfNames.numbered(n))  # inftda_plan


def _register(con: Any, n: int) -> None:
    """The release UDFs of ``con``, numbered ``n``; each holds ``con`` weakly."""
    names = UdfNames.numbered(n)
    ref = weakref.ref(con)
    fn = con.create_function
    fn(f"inftda_release_sql_{n}", lambda options: statements.release_sql(ref, names, options),
       ["VARCHAR"], "VARCHAR", side_effects=False)
    fn(f"inftda_preview_sql_{n}", lambda options: statements.preview_sql(ref, names, options),
       ["VARCHAR"], "VARCHAR", side_effects=False)
    fn(
        names.begin,
        lambda spec, checks, query_id: udfs.begin(ref, names.begin, spec, checks, query_id),
        ["VARCHAR", "VARCHAR", "UBIGINT"],
        "STRUCT(rid VARCHAR)",
        side_effects=True,
        null_handling="special",
    )
    fn(names.levels, udfs.levels,
       ["VARCHAR", "BIGINT", PREFIXES, f"{PREFIXES}[]", "BIGINT", "BIGINT", "BIGINT"],
       "STRUCT(rid VARCHAR, k INTEGER[][], n BIGINT[])", type="arrow", side_effects=True,
       null_handling="special")
    fn(names.preview, lambda spec, checks: udfs.preview_rows(ref, names.preview, spec, checks),
       ["VARCHAR", "VARCHAR"], udfs.PREVIEW_TYPE, side_effects=False)
    fn(names.rowkey, lambda seed: units.row_key(seed), ["BIGINT"], "VARCHAR",
       side_effects=True, null_handling="special")
