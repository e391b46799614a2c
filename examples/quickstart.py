"""Quickstart: a differentially private release in DuckDB, from SQL and from Python.

Run: python examples/quickstart.py
"""

import duckdb

from inftda_duckdb.duckdb.budgets import set_budget
from inftda_duckdb.duckdb.extension import load, release
from inftda_duckdb.tools.demo import load_sample

con = duckdb.connect()  # or duckdb.connect("trips.duckdb") to keep the ledger between runs
load(con)  # registers inftda_release, inftda_preview, inftda_budget, inftda_set_budget, ...
load_sample(con, "trips")  # 200,000 sample trips: origin (ENUM) -> dest (ENUM) -> hour (INT)

# 1. Before spending anything: the noise per level and the Theorem 1 error bound (beta = 0.05).
con.sql("""
    SELECT level, "column", domain_size, nodes, rho_k, round(sigma_k, 2) AS sigma_k,
           round(bound, 1) AS bound
    FROM inftda_preview('trips', ['origin', 'dest', 'hour'], rho := 0.5,
                                 domains := {'hour': range(24)})
""").show()

# 2. A cap on what may ever be spent on this table (releases beyond it are refused). Set from
#    Python (or the CLI, or the shell's SQL): it commits at once, so it is refused inside an open
#    transaction, which only the host of a statement can check.
print(set_budget(con, "trips", rho=1))

# 3. The release: one SQL statement. ENUM columns bring their own public domain; the integer
#    column `hour` needs one (a public list, never read from the private data).
con.sql("""
    CREATE TABLE trips_dp AS
    SELECT * FROM inftda_release('trips', ['origin', 'dest', 'hour'], rho := 0.5,
                                 domains := {'hour': range(24)})
""")
con.sql("SELECT origin::VARCHAR AS origin, dest::VARCHAR AS dest, hour, count "
        "FROM trips_dp ORDER BY count DESC LIMIT 5").show()  # ::VARCHAR: short type names

# Consistent at every level: the released counts sum to the true number of trips (bounded DP:
# the number of rows is public), and every count is a non-negative integer.
total, smallest = con.sql("SELECT sum(count), min(count) FROM trips_dp").fetchall()[0]
assert total == con.sql("SELECT count(*) FROM trips").fetchall()[0][0] and smallest > 0

# 4. The same from Python: a pyarrow.Table whose schema metadata says whether it is private.
table = release(con, "trips", ["origin", "hour"], rho=0.25, domains={"hour": range(24)})
print(table.num_rows, "cells released; private:", table.schema.metadata[b"private"].decode())

# 5. What was spent: 0.75 of the budget of 1.
con.sql("SELECT budget, sources, budget_rho, spent_rho, remaining_rho, releases "
        "FROM inftda_budget()").show()
