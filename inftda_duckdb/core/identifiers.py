"""SQL identifiers: parse a user's (possibly qualified) table name and quote names safely.

Every table and column name that reaches generated SQL goes through :func:`quote`, so names with
spaces, quotes or keywords work and nothing can be injected through them.
"""

from __future__ import annotations

import string

from .errors import bad_argument

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def fold(identifier: str) -> str:
    """An identifier as DuckDB compares it: ASCII letters lower-cased, nothing else changed."""
    return identifier.translate(_ASCII_LOWER)


def label(parts: tuple[str, ...]) -> str:
    """``db.schema.name`` for people: parts quoted only when they hold a dot or a quote."""
    return ".".join(quote(p) if ("." in p or '"' in p) else p for p in parts)


def quote(name: str) -> str:
    """Quote one identifier for DuckDB, doubling embedded double quotes."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """Quote a string literal for DuckDB, doubling embedded single quotes."""
    return "'" + text.replace("'", "''") + "'"


def parse_qualified(text: object, argument: str = "source") -> tuple[str, ...]:
    """Split ``db.schema.table`` into its parts, honouring double quotes.

    A name without dots or quotes is one identifier, spaces included (``'trip data'``).
    Parts in double quotes may contain dots; a doubled quote inside quotes is a literal quote.
    """
    fix = "pass a table or view name such as 'trips', 'main.trips' or '\"my table\"'"
    if not isinstance(text, str) or not text.strip():
        raise bad_argument(argument, text, "must be a non-empty table or view name", fix)
    if '"' not in text:
        parts = [p.strip() for p in text.split(".")] if "." in text else [text]
    else:
        parts = []
        current: list[str] = []
        i, quoted = 0, False
        while i < len(text):
            ch = text[i]
            if quoted:
                if ch == '"' and text[i + 1 : i + 2] == '"':
                    current.append('"')
                    i += 1
                elif ch == '"':
                    quoted = False
                else:
                    current.append(ch)
            elif ch == '"':
                quoted = True
            elif ch == ".":
                parts.append("".join(current))
                current = []
            elif not ch.isspace():
                current.append(ch)
            i += 1
        if quoted:
            raise bad_argument(argument, text, "has an unbalanced double quote", fix)
        parts.append("".join(current))
    if len(parts) > 3 or any(not p for p in parts):
        raise bad_argument(argument, text, "must be name, schema.name or database.schema.name", fix)
    return tuple(parts)


def quote_qualified(parts: tuple[str, ...]) -> str:
    """Render parsed parts as a quoted, qualified name."""
    return ".".join(quote(p) for p in parts)
