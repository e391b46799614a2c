"""What a budget covers and a charge is recorded against: a source identity, engine-neutral.

A :class:`SourceId` has a stable ``key`` (what budgets and charges are matched on) and a ``label``
(what people read). Keys never depend on a database file's name or alias:

- a table or view: ``table:<database id>/<schema>.<name>``, where the database id is a random id
  the engine stores inside the database the first time it is used (a renamed, copied or
  re-attached file keeps it);
- a TEMP object: ``temp:<schema>.<name>`` (it lives as long as its connection);
- a file read directly (Parquet, CSV): ``file:<absolute path, symbolic links resolved>``;
- anything else (a DataFrame, an Arrow table, a Spark view): ``name:<a name the caller gives>``.

Identifiers are compared like DuckDB's binder compares them: ASCII letters case-insensitively,
every other character exactly ("Ä" and "ä" are two tables, as in DuckDB).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.errors import bad_argument
from ..core.identifiers import fold, label, quote

FILE, NAME = "file:", "name:"


@dataclass(frozen=True)
class SourceId:
    """A source as the ledger knows it: ``key`` to match, ``label`` to show; ``durable`` when
    the data outlives the process (a database file, a file on disk)."""

    key: str
    label: str
    durable: bool

    @classmethod
    def table(cls, database_id: str, schema: str, name: str, label: str,
              durable: bool) -> SourceId:
        """A table or view of the database whose stored id is ``database_id``."""
        return cls(f"table:{database_id}/{_pair(schema, name)}", label, durable)

    @classmethod
    def temp(cls, schema: str, name: str) -> SourceId:
        """A TEMP table or view (one connection's; not durable)."""
        return cls(f"temp:{_pair(schema, name)}", label(("temp", schema, name)), False)

    @classmethod
    def file(cls, path: str) -> SourceId:
        """A file read directly: keyed by its absolute path, symbolic links resolved."""
        real = os.path.realpath(os.path.expanduser(path))
        return cls(FILE + real, real, True)

    @property
    def spec(self) -> str:
        """The source as ``set_budget`` takes it: ``file:PATH``, ``name:NAME`` or the table."""
        kind = self.key.split(":", 1)[0]
        return {"file": "file:", "name": "name:"}.get(kind, "") + self.label

    @classmethod
    def named(cls, name: str) -> SourceId:
        """An in-memory object (DataFrame, Arrow table, Spark view) under a name the caller
        chooses; the same name is the same source wherever it is used."""
        if not isinstance(name, str) or not name.strip():
            raise bad_argument("name", name, "must be a non-empty name",
                               "pass e.g. 'name:trips_frame'")
        return cls(NAME + fold(name.strip()), name.strip(), False)


def _pair(schema: str, name: str) -> str:
    return f"{quote(fold(schema))}.{quote(fold(name))}"


def parse(text: object, argument: str = "source") -> SourceId | str:
    """``'file:PATH'`` and ``'name:NAME'`` -> their :class:`SourceId`; anything else is a table
    or view name, returned for the engine to resolve in its catalog. (An unquoted SQL
    identifier cannot hold a ':', so the prefixes are unambiguous.)"""
    if not isinstance(text, str) or not text.strip():
        raise bad_argument(argument, text, "must be a non-empty table name, 'file:PATH' or "
                           "'name:NAME'", "pass e.g. 'trips' or 'file:/data/trips.parquet'")
    if text.startswith(FILE):
        path = text[len(FILE):]
        if not path.strip():
            raise bad_argument(argument, text, "names no file", "pass 'file:/data/trips.parquet'")
        return SourceId.file(path)
    if text.startswith(NAME):
        if not text[len(NAME):].strip():
            raise bad_argument(argument, text, "names no object", "pass e.g. 'name:trips_frame'")
        return SourceId.named(text[len(NAME):])
    return text
