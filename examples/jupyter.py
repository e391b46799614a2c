# %% [markdown]
# # InfTDA in a Jupyter notebook
#
# This file is a notebook in the percent format (Jupyter with jupytext, VS Code and PyCharm open
# it cell by cell); it also runs as a plain script: `python examples/jupyter.py`.
#
# The pattern: one DuckDB connection per notebook, loaded once; **materialise each release into a
# table** and explore that table as much as you like. Every *execution* of a query that calls
# `inftda_release` is a new release with fresh noise, charged again to the ledger, so never keep
# `con.sql("SELECT * FROM inftda_release(...)")` in a variable and display it twice.
#
# With jupysql the same SQL runs in `%sql` / `%%sql` cells on this connection: `%load_ext sql`,
# then `%sql con`, then e.g. `%sql CREATE TABLE t AS SELECT * FROM inftda_release(...)`.
# jupysql runs each statement on a fresh cursor of `con`; `load(con)` makes the functions
# visible to cursors too. jupysql is optional and not needed by this package.

# %%
import duckdb

from inftda_duckdb.duckdb.extension import load
from inftda_duckdb.tools.demo import load_sample

con = duckdb.connect()  # duckdb.connect("project.duckdb") keeps tables and the ledger
load(con)
load_sample(con, "trips")

# %% [markdown]
# Preview first (spends nothing): per level the noise scale and the Theorem 1 bound.

# %%
con.sql("""SELECT level, "column", domain_size, nodes, rho_k, round(sigma_k, 2) AS sigma_k,
                  round(bound, 1) AS bound
           FROM inftda_preview('trips', ['origin', 'dest', 'hour'], rho := 0.5,
                               domains := {'hour': range(24)})""").show()

# %% [markdown]
# One release, materialised: this cell is the only one that spends budget.

# %%
con.sql("""CREATE OR REPLACE TABLE trips_dp AS
           SELECT * FROM inftda_release('trips', ['origin', 'dest', 'hour'], rho := 0.5,
                                        domains := {'hour': range(24)})""")

# %% [markdown]
# Explore the released table freely: these queries read `trips_dp`, not the private data.

# %%
by_hour = con.sql("SELECT hour, sum(count) AS trips FROM trips_dp GROUP BY hour ORDER BY hour")
by_hour.show(max_rows=6)
hours = by_hour.fetchnumpy()  # or .df() with pandas, .pl() with polars, for plotting
assert len(hours["hour"]) == 24

# %%
con.sql("SELECT dest::VARCHAR AS dest, sum(count) AS trips FROM trips_dp "
        "WHERE origin = 'Queens' GROUP BY ALL ORDER BY trips DESC LIMIT 5").show()

# %% [markdown]
# The ledger: one release so far, however often the cells above were re-run.

# %%
con.sql("SELECT budget, spent_rho, remaining_rho, releases FROM inftda_budget()").show()
assert con.sql("SELECT count(*) FROM inftda_ledger").fetchall() == [(1,)]
