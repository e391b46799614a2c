"""Public domains of the hierarchy columns, as every engine plans them.

A level's domain is never read silently from the private data. In order of precedence it is
an explicit list (``domains := {'hour': range(24)}``), the distinct values of a public domain
table that has a column of that name (``domain_tables := ['geo']``), what the engine offers
for a column of a declared type (DuckDB: the labels of an ENUM column; Spark: nothing), or
(opt-in, not private) the distinct values in the data (``domain_from_data``).

A domain table also *nests* levels: if ``geo`` has columns ``state`` and ``county`` (both in the
hierarchy, state first), a state's children are only the counties ``geo`` lists under it.

:class:`DomainPlan` is what an engine decides before it reads anything: where each level's
values come from, and which domain tables nest which levels. The engine then resolves the
values (DuckDB inside its generated SQL, Spark on the driver) and reports them, with the data
checks, in the check row that :mod:`.checks` turns into errors.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import limits
from .errors import InputError, bad_argument, opt
from .identifiers import fold
from .request import Labels, ReleaseRequest
from .tree import MAX_KEY_SPAN

KINDS = ("list", "table", "enum", "data")
FULL_CHECK = 1 << 16
"""A preview validates a declared range of more values by its two ends only (arithmetic on
sizes: never materialised); a release validates every value of the domain it uses."""


@dataclass(frozen=True)
class ColumnDomain:
    """Where the domain of one hierarchy level comes from."""

    column: str
    kind: str  # one of KINDS
    labels: Labels = ()  # kind 'list': the values as text in code order, or an integer range
    table: int = -1  # kind 'table': index into DomainPlan.nestings
    table_column: str = ""  # kind 'table': the column's name in that table
    known_enum: bool = False  # kind 'enum' and the catalog showed an ENUM: code = enum_code(v)
    size: int | None = None  # |X_k| when known at planning time (lists, ENUMs seen in the catalog)


@dataclass(frozen=True)
class Nesting:
    """A public domain table and the hierarchy levels (0-based, ascending) it lists together."""

    table: tuple[str, ...]
    levels: tuple[int, ...]
    names: tuple[str, ...]  # the table's own column names for those levels


@dataclass(frozen=True)
class DomainPlan:
    columns: tuple[ColumnDomain, ...]
    nestings: tuple[Nesting, ...]
    source: tuple[str, str, str] = ("", "", "")  # resolved once: read by the SQL, charged
    shadow: str | None = None  # unqualified name resolved outside TEMP: refuse a TEMP namesake

    def nested_parent(self, level: int) -> tuple[int, tuple[int, ...]] | None:
        """For a nested level: (nesting index, earlier levels keying its allowed children)."""
        for t, nest in enumerate(self.nestings):
            if level in nest.levels[1:]:
                return t, nest.levels[: nest.levels.index(level)]
        return None

    def nested_levels(self, depth: int) -> list[bool]:
        """Per level (0-based) whether a domain table nests it under earlier levels."""
        return [self.nested_parent(k) is not None for k in range(depth)]

    def check_sizes(self) -> None:
        """Refuse a release (not a preview) with a domain larger than the cell limit, when its
        size is known as planned: before any SQL runs (a level noises every value of its
        domain under each released parent)."""
        for k, c in enumerate(self.columns, 1):
            if c.size is not None:
                limits.check_domain(c.column, k, c.size)

    def key_sizes(self, level: int) -> list[int] | None:
        """The domain sizes of levels 1..``level`` when all were known at planning time and
        their product is below 2**62: the level's prefixes then travel as one mixed-radix
        BIGINT key each (the order of the codes), else as one list of codes per column."""
        sizes = [c.size for c in self.columns[:level]]
        known = [s for s in sizes if s is not None]
        if len(known) < len(sizes) or math.prod(known) >= MAX_KEY_SPAN:
            return None
        return known

    def to_json(self) -> dict[str, Any]:
        """What inftda_begin needs to interpret the checks (labels stay in the SQL)."""
        return {
            "columns": [[c.column, c.kind, c.size] for c in self.columns],
            "nestings": [[list(n.table), list(n.levels), list(n.names)] for n in self.nestings],
            "source": list(self.source),
            "shadow": self.shadow,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DomainPlan:
        return cls(
            tuple(ColumnDomain(c, k, size=(size or [None])[0]) for c, k, *size in data["columns"]),
            tuple(Nesting(tuple(t), tuple(lv), tuple(nm)) for t, lv, nm in data["nestings"]),
            tuple(data.get("source") or ("", "", "")),
            data.get("shadow"),
        )


def nesting(request: ReleaseRequest, table: tuple[str, ...], names: list[str]) -> Nesting:
    """The hierarchy levels a domain table lists: its columns named like hierarchy columns."""
    by_lower = {fold(name): name for name in names}
    levels = [k for k, c in enumerate(request.columns) if fold(c) in by_lower]
    if not levels:
        raise bad_argument(
            "domain_tables",
            ".".join(table),
            f"has no column named like a hierarchy column {list(request.columns)}",
            "name the table's columns like the hierarchy columns",
        )
    return Nesting(table, tuple(levels), tuple(by_lower[fold(request.columns[k])]
                                               for k in levels))


def column_domains(
    request: ReleaseRequest, nestings: list[Nesting], otherwise: Callable[[str], ColumnDomain]
) -> tuple[ColumnDomain, ...]:
    """Every level's domain by precedence: an explicit list, the domain table listing the
    column, the data (opt-in, not private), else ``otherwise(column)`` (DuckDB: the column's
    ENUM labels; Spark, which has no ENUM: an error). A column in two tables is refused."""
    owner: dict[int, int] = {}
    for t, nest in enumerate(nestings):
        for k in nest.levels:
            if k in owner:
                raise bad_argument(
                    "domain_tables",
                    [".".join(n.table) for n in nestings],
                    f"list column {request.columns[k]!r} in two tables",
                    "give each hierarchy column at most one domain table",
                )
            owner[k] = t
    columns = []
    for k, col in enumerate(request.columns):
        if col in request.domains:
            labels = request.domains[col]
            columns.append(ColumnDomain(col, "list", labels=labels, size=len(labels)))
        elif k in owner:
            nest = nestings[owner[k]]
            name = nest.names[nest.levels.index(k)]
            columns.append(ColumnDomain(col, "table", table=owner[k], table_column=name))
        elif request.domain_from_data:
            columns.append(ColumnDomain(col, "data"))
        else:
            columns.append(otherwise(col))
    return tuple(columns)


def source_fix() -> str:
    return "check the name (qualify it as schema.table if needed) or create the table first"


def check_columns(request: ReleaseRequest, source: list[tuple[str, str]]) -> None:
    """Every hierarchy column and the privacy unit exist in the source; a missing one is named
    under its own option, with the closest column of the source (did you mean ...?)."""
    have = [name for name, _ in source]
    names = {fold(name) for name in have}
    missing = [c for c in request.columns if fold(c) not in names]
    unit = request.privacy_unit
    option, wanted = (("columns", missing) if missing or unit is None or fold(unit) in names
                      else ("privacy_unit", unit))
    if missing or option == "privacy_unit":
        folded = [fold(h) for h in have]
        guesses = [close[0] for c in (missing or [str(unit)])
                   if (close := difflib.get_close_matches(fold(c), folded, n=1, cutoff=0.6))]
        guess = ("did you mean " + ", ".join(next(h for h in have if fold(h) == g)
                                             for g in guesses) + "? Else " if guesses else "")
        raise bad_argument(
            option,
            wanted,
            f"not found in {request.source}",
            f"{guess}use columns of the source: {', '.join(have)}",
        )


def no_domain(column: str, type_name: str, enums: bool = True) -> InputError:
    """A column without a public domain (``enums``: the engine has ENUM types; Spark has not)."""
    enum = "make it an ENUM, " if enums else ""
    return InputError(
        f"column {column!r} ({type_name}) has no public domain. Fix: declare its values with "
        f"{opt('domains', {column: '...'})}, {enum}list it in a domain table "
        f"({opt('domain_tables', ['...'])}), or (exploration only, not private) pass "
        f"{opt('domain_from_data', True)}"
    )
