"""Administration of a ledger: the upgrade of an inftda_duckdb 0.1 ledger, and the move of a
ledger's rows into another ledger (a database's own ledger into a shared ledger file).

Both append verified rows through :func:`.verify.append` in one transaction of the ledger
written to, so the chain they write verifies as any other; :meth:`~.store.Ledger.upgrade` and
:meth:`~.store.Ledger.move_to` call them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol

from . import chain, verify
from .chain import BUDGETS, HEAD, LEDGER, ROWS, SETTINGS
from .sources import SourceId
from .verify import State

MOVED_TO = "moved_to"  # setting: this ledger's rows were moved to another ledger (see move_to)


class Movable(verify.Site, Protocol):
    """What this module needs of a ledger (a :class:`~.store.Ledger`) beyond a
    :class:`~.verify.Site`: one transaction, and a setting."""

    def run(self, body: Callable[[Any], Any], write: bool = True) -> Any: ...

    def set_setting(self, name: str, value: str) -> None: ...


def move_to(ledger: Movable, target: Movable) -> int:
    """Append every budget, setting and charge of ``ledger`` (verified, in order; times,
    sources and conversions kept, release ids renumbered) to ``target``, once, then close
    ``ledger``: its further charges are refused and name ``target``. Returns the rows moved
    (0 when they were moved before)."""
    def read(cur: Any) -> tuple[State, list[tuple[str, dict[str, Any]]]]:
        state = verify.verified(ledger, cur)
        events: list[tuple[str, dict[str, Any]]] = []
        cur, p = ledger.dialect.view(cur, ledger.prefix, 0)
        for table in ROWS:
            rows = cur.sql(f"SELECT * EXCLUDE (prev_hash, digest, hash) FROM {p}{table}")
            events += [(table, r) for r in rows.to_arrow_table().to_pylist()]
        return state, sorted(events, key=lambda e: e[1]["seq"])

    state, events = ledger.run(read, write=False) or (None, [])
    if state is None or state.settings.get(MOVED_TO):
        return 0
    mark = f"imported:{state.ledger_id}"

    def write(cur: Any) -> int:
        after = verify.verified(target, cur)
        if mark in after.settings:
            return 0
        for table, r in events:
            r.pop("seq")
            if table == SETTINGS and r["name"] == verify.IDENTITY:  # the moved ledger's own
                r["name"] = verify.IDENTITY + os.path.realpath(ledger.where)  # by its file
            if table == LEDGER:
                r["id"] = after.next_id
                after.next_id += 1
            columns = {LEDGER: chain.CHARGE_COLUMNS, BUDGETS: chain.BUDGET_COLUMNS_AT,
                       SETTINGS: chain.SETTING_COLUMNS_AT}[table]
            after = verify.append(target, cur, after, table, columns, r)
        verify.append(target, cur, after, SETTINGS, chain.SETTING_COLUMNS,
                      {"name": mark, "value": str(len(events))})
        return len(events)

    moved = int(target.run(write))
    ledger.set_setting(MOVED_TO, target.location)
    return moved


def upgrade(ledger: Movable, translate: Callable[[str], SourceId]) -> int:
    """Move a format-1 ledger (inftda_duckdb 0.1: no chain) into the chained tables, in one
    transaction: every old budget and charge (``translate`` maps an old source name to its
    identity; old rows keep conversion 'bun-steinke-2016', their ids and times). The old
    tables stay as ``inftda_ledger_v1`` and ``inftda_budgets_v1``. Returns the rows moved."""
    p = ledger.prefix

    def body(cur: Any) -> int:
        present = verify.tables(ledger, cur)
        if HEAD in present:
            return 0
        old = [t for t in (LEDGER, BUDGETS) if t in present]
        for t in old:
            cur.execute(f"ALTER TABLE {p}{t} RENAME TO {t}_v1")
        state = verify.new_ledger(ledger, cur)
        if BUDGETS in old:
            for source, rho, set_at in cur.execute(
                    f"SELECT source, rho, set_at FROM {p}{BUDGETS}_v1 ORDER BY set_at, "
                    "source").fetchall():
                sid = translate(source)
                state = verify.append(ledger, cur, state, BUDGETS, chain.BUDGET_COLUMNS_AT, {
                    "name": sid.key, "label": sid.label, "sources": [sid.key],
                    "labels": [sid.label], "rho": rho, "rho_approx": float(Fraction(rho)),
                    "set_at": set_at})
        if LEDGER in old:
            for row in cur.execute(f"SELECT * FROM {p}{LEDGER}_v1 ORDER BY id").fetchall():
                (rid, started, source, columns, neighbours, unit, m, rho, _, epsilon,
                 delta, output, seeded, data_domain, private, origin) = row
                sid = translate(source)
                state = verify.append(ledger, cur, state, LEDGER, chain.CHARGE_COLUMNS, {
                    "id": rid, "started_at": started, "source": sid.label,
                    "source_key": sid.key, "columns": columns, "neighbours": neighbours,
                    "privacy_unit": unit, "max_rows_per_unit": m, "rho": rho,
                    "rho_approx": float(Fraction(rho)), "epsilon": epsilon, "delta": delta,
                    "output": output, "seeded": seeded, "data_domain": data_domain,
                    "private": private, "origin": origin,
                    "conversion": "bun-steinke-2016"})
        return state.seq

    return int(ledger.run(body))
