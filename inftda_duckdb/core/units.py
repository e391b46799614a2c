"""Contribution bounding for privacy units: which ``m`` rows of each unit a release keeps.

Each row of a unit gets a pseudorandom sort key from a keyed PRF of (unit, row); the ``m``
smallest are kept. The choice for one unit depends only on the row key and that unit's own rows:
never on other units, on scan order, or on DuckDB's ``setseed`` (which drives ``random()``).

The key ``K`` (:func:`row_key`) is 128 bits drawn per execution, before the data is read: from
the OS (``RandomSource.secure``), or under ``seed := s`` derived from ``s``. Why drawing it before
the charge is sound: ``K`` is independent of the data, so for every fixed ``K`` the capping is a
per-unit transformation (neighbouring tables stay neighbouring: one unit's at most ``m`` kept
rows differ) and the release is rho-zCDP; a data-independent mixture over ``K`` is too (Renyi
divergence is quasi-convex), and so would be publishing ``K``. Its secrecy protects nothing
private; it only makes the choice unpredictable. An execution that stops before the charge
returns no noise and no rows.

The sort keys (engine-neutral; ``sql/release.sql`` ``@unit_source`` computes them in SQL and
:func:`kept` is the reference). Identical rows of a unit (same unit and hierarchy values,
``c`` of them) are one group. With ``E_i = -ln(U_i) / (c - i)`` and::

    U_i = (int(sha256(K ':' i ':' G)[:13], 16) + 0.5) / 2**52
    G = the JSON array of the unit and the hierarchy values as text: ["7","JFK","13"] (NULL: null)

the group's candidates ``i = 0 .. min(c, m) - 1`` get the keys ``E_0 + ... + E_i``: exactly the
smallest ``min(c, m)`` of ``c`` independent Exp(1) keys, one per row (Renyi's representation of
exponential order statistics). Keeping the unit's ``m`` smallest candidates therefore keeps a
uniformly random ``m``-subset of its rows (given an ideal PRF), with one PRF call per kept
candidate at most instead of one per row. Ties (probability ~2**-50) are broken arbitrarily
among a unit's candidates; they cannot affect other units.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from .randomness import RandomSource

ROW_KEY_PATH = 0x726F7773  #: ``derive`` path of the row key under a seed ("rows")
_TWO52 = float(2**52)


def row_key(seed: int | None) -> str:
    """The 128-bit row key as 32 hex digits: fresh from the OS, or derived from ``seed``."""
    source = RandomSource.secure() if seed is None else RandomSource.from_seed(seed)
    words = source.derive(ROW_KEY_PATH).words(np.zeros(1, np.uint64), 0, 2)
    return words.astype("<u8").tobytes().hex()


def encode(values: Sequence[object]) -> str:
    """``G``: a group's unit and values as a compact JSON array of texts (SQL's ``to_json``)."""
    texts = [None if v is None else str(v) for v in values]
    return json.dumps(texts, separators=(",", ":"), ensure_ascii=False)


def group_keys(key: str, text: str, count: int, m: int) -> list[float]:
    """The sort keys of a group's first ``min(count, m)`` candidates (``text``: :func:`encode`)."""
    keys, total = [], 0.0
    for i in range(min(count, m)):
        digest = hashlib.sha256(f"{key}:{i}:{text}".encode()).hexdigest()
        u = (int(digest[:13], 16) + 0.5) / _TWO52
        total += -math.log(u) / (count - i)
        keys.append(total)
    return keys


def kept(key: str, rows: Iterable[tuple[Hashable, tuple[object, ...]]],
         m: int) -> Counter[tuple[Hashable, tuple[object, ...]]]:
    """Reference capping: ``rows`` are (unit, hierarchy values) pairs; returns how many rows of
    each (unit, values) group are kept (at most ``m`` per unit)."""
    groups = Counter(rows)
    by_unit: dict[Hashable, list[tuple[float, tuple[Hashable, tuple[object, ...]]]]] = {}
    for (unit, values), count in groups.items():
        for k in group_keys(key, encode([unit, *values]), count, m):
            by_unit.setdefault(unit, []).append((k, (unit, values)))
    out: Counter[tuple[Hashable, tuple[object, ...]]] = Counter()
    for candidates in by_unit.values():
        for _, group in sorted(candidates, key=lambda kv: kv[0])[:m]:
            out[group] += 1
    return out


__all__ = ["ROW_KEY_PATH", "encode", "group_keys", "kept", "row_key"]
