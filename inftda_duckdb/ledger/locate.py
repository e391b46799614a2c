"""The ledger a caller names: a location, a :class:`~.store.Ledger`, or an engine's object.

An engine that keeps a ledger for its own objects (DuckDB: the ledger a connection charges)
registers how to find it (:func:`register`); another engine given such an object (Spark's
``ledger=con``) then finds the same ledger through :func:`locate`, without importing the first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .store import Ledger

LEDGER_VARIABLE = "INFTDA_LEDGER"
"""The environment variable naming the ledger file every engine and tool uses by default."""

_RESOLVERS: list[tuple[type, Callable[[Any], Ledger]]] = []


def register(kind: type, resolve: Callable[[Any], Ledger]) -> None:
    """Objects of ``kind`` name the ledger ``resolve(obj)`` returns (registered once)."""
    if all(k is not kind for k, _ in _RESOLVERS):
        _RESOLVERS.append((kind, resolve))


def locate(ledger: object) -> Ledger | None:
    """The ledger ``ledger`` names: a Ledger itself, a ledger file, ``postgresql://`` URL or
    ``':memory:'``, or an object a registered engine resolves; None when it names none."""
    if isinstance(ledger, Ledger):
        return ledger
    if isinstance(ledger, str | os.PathLike) and os.fspath(ledger).strip():
        return Ledger.open(os.fspath(ledger))
    for kind, resolve in _RESOLVERS:
        if isinstance(ledger, kind):
            return resolve(ledger)
    return None


__all__ = ["LEDGER_VARIABLE", "locate", "register"]
