"""What a budget covers and a charge is recorded against: a source identity, engine-neutral.

A :class:`SourceId` has a stable ``key`` (what budgets and charges are matched on) and a ``label``
(what people read). Keys never depend on a database file's name or alias:

- a table or view: ``table:<database id>/<schema>.<name>``, where the database id is a random id
  the engine stores inside the database the first time it is used (a renamed, copied or
  re-attached file keeps it);
- a TEMP object: ``temp:<schema>.<name>`` (it lives as long as its connection);
- files read directly (Parquet, CSV): ``file:<their dataset>`` (:func:`dataset`): a file by
  its absolute path (symbolic links resolved), a folder of part files or of partition folders by
  the folder, however it is reached (one part file, the folder, a partition, a catalog table
  stored there) and whatever files it holds today; a URI (``s3a://``, ``hdfs://``) as written;
- anything else (a DataFrame, an Arrow table, a Spark view): ``name:<a name the caller gives>``.

Identifiers are compared like DuckDB's binder compares them: ASCII letters case-insensitively,
every other character exactly ("Ä" and "ä" are two tables, as in DuckDB).
"""

from __future__ import annotations

import os
import re
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
        """Files read directly: keyed by their :func:`dataset` (a file, or the folder of part
        files it belongs to)."""
        found = dataset(path)
        return cls(FILE + found, found, True)

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


PARTITION = re.compile(r"[^=/]+=[^/]*")
"""A partition folder (``year=2024``): Hive's, Spark's and DuckDB's layout of one dataset."""
PART_FILE = re.compile(
    r"part[-_].*"  # Spark, Hadoop, Delta: part-00000-<uuid>-c000.snappy.parquet, part-r-00000
    r"|0\d{5}_\d+(_copy_\d+)?(\..*)?"  # Hive: 000000_0, 000001_0_copy_1
    r"|data_\d+(\..*)?"  # DuckDB's COPY ... (PER_THREAD_OUTPUT): data_0.parquet
    r"|.*[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}.*",  # a UUID (Iceberg)
    re.IGNORECASE)
"""The name of a file that a writer made as one part of a folder (never a name people give)."""


def dataset(path: str) -> str:
    """The dataset a file or folder belongs to: the identity of a source read from files.

    The path is made absolute with symbolic links resolved (a URI such as ``s3a://b/t`` is kept
    as written, without a trailing ``/``). A part file (:data:`PART_FILE`: written by Spark,
    Hadoop, Hive or DuckDB as one part of a folder) stands for its folder, and a partition folder
    (``name=value``, :data:`PARTITION`) for the folder above it, up to the first folder that is
    neither: so a folder of part files is one source whichever part, partition or path reaches
    it, and whatever files it holds today. Any other file is its own source, and so is a folder
    read as a whole."""
    uri = "://" in path
    found = path.rstrip("/") if uri else os.path.realpath(os.path.expanduser(path))
    head, name = _split(found)
    part = PART_FILE.fullmatch(name) and (uri or not os.path.isdir(found))
    if part or PARTITION.fullmatch(_split(head)[1]):
        found = head
    while PARTITION.fullmatch(_split(found)[1]):
        found = _split(found)[0]
    return found


def _split(path: str) -> tuple[str, str]:
    """(folder, name) of a path or URI (a root has no name)."""
    head, _, name = path.rpartition("/")
    if not head or head.endswith(":/") or head.endswith(":"):  # '/', 's3a://bucket'
        return path, ""
    return head, name


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
