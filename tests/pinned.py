"""Seeded releases whose outputs are pinned by hash: a restructuring must move code, not results.

Each case is a deterministic table (numpy's PCG64 with a fixed seed) and a seeded release over
it through the public API. :func:`digest` hashes the sorted rows (values and counts, the
not-private marker included), so any change to the noise, IntOpt, the coding of the domains or
the order of the levels changes the hash. The same cases run on DuckDB
(``tests/test_pinned_releases.py``) and on Spark (``tests/spark/test_spark_pinned.py``) against
the same hashes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pyarrow as pa

ORIGINS = ["EWR", "JFK", "LGA", "ISP"]
CARRIERS = [f"c{i:02d}" for i in range(12)]
HOURS = list(range(24))


def trips(seed: int = 2026, n: int = 20_000) -> pa.Table:
    """Skewed trips: origin -> carrier -> hour, with a person per row (3-ish rows each)."""
    rng = np.random.default_rng(seed)
    origin = rng.choice(len(ORIGINS), n, p=[0.5, 0.3, 0.15, 0.05])
    carrier = np.minimum(rng.geometric(0.25, n) - 1 + origin, len(CARRIERS) - 1)
    hour = np.clip(np.round(rng.normal(12 + 2 * origin, 4, n)), 0, 23).astype(int)
    person = rng.integers(0, n // 3, n)
    return pa.table({
        "origin": [ORIGINS[i] for i in origin],
        "carrier": [CARRIERS[i] for i in carrier],
        "hour": hour.tolist(),
        "person": person.tolist(),
    })


def geo() -> pa.Table:
    """A public domain table: which carriers fly from which origin (a nested level: the
    carriers from the origin's own index on, as :func:`trips` draws them)."""
    pairs = [(o, c) for i, o in enumerate(ORIGINS) for j, c in enumerate(CARRIERS) if j >= i]
    return pa.table({"origin": [p[0] for p in pairs], "carrier": [p[1] for p in pairs]})


COLUMNS = ["origin", "carrier", "hour"]
FLAT = {"origin": ORIGINS, "carrier": CARRIERS, "hour": HOURS}

CASES: dict[str, dict[str, Any]] = {
    "flat": {"rho": 1, "domains": FLAT},
    "nested domain table": {"rho": "1/2", "domains": {"hour": HOURS}, "domain_tables": ["geo"]},
    "privacy units": {"rho": 2, "domains": FLAT, "privacy_unit": "person",
                      "max_rows_per_unit": 2},
    "add_remove, level weights": {"epsilon": 1, "delta": 1e-6, "domains": FLAT,
                                  "neighbours": "add_remove", "level_weights": [1, 2, 3, 4]},
    "auto weights, rows output": {"rho": "0.3", "domains": FLAT, "level_weights": "auto",
                                  "output": "rows"},
}
SEED = 31

PINNED = {
    "flat": "bd2516a6032f7d1a",
    "nested domain table": "d7e85da0a962a13b",
    "privacy units": "388129586e72d3b1",
    "add_remove, level weights": "a973befe7fab181e",
    "auto weights, rows output": "2985faaa3ae8417a",
}


PINNED_LEAST_SQUARES = {  # the same cases with estimator := 'least_squares'
    "flat": "c75080725f148502",
    "nested domain table": "568fff9e2eceecfe",
    "privacy units": "ff5e76b53696964e",
    "add_remove, level weights": "ca65852c38946dc2",
    "auto weights, rows output": "5664d78f7f4f5388",
}
ESTIMATORS = {"inftda": PINNED, "least_squares": PINNED_LEAST_SQUARES}


def nested_rows_ok(rows: list[tuple[Any, ...]]) -> bool:
    """Every released (origin, carrier) pair is one the domain table allows."""
    allowed = set(zip(geo()["origin"].to_pylist(), geo()["carrier"].to_pylist(), strict=True))
    return all((r[0], r[1]) in allowed for r in rows)


def digest(rows: list[tuple[Any, ...]]) -> str:
    """The hash of a release's rows, order-free (rows sorted by their JSON text)."""
    lines = sorted(json.dumps(list(r), default=str) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
