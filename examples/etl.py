"""ETL: Parquet in, differentially private Parquet out, with a persistent privacy ledger.

Run:  python examples/etl.py [INPUT.parquet OUTPUT.parquet [LEDGER.duckdb]]
Without arguments it writes the sample trips to a temporary folder and releases those.

The same job from the shell, without Python code (the sample trips as a table in the ledger's
database: their ENUM columns declare the public domains of origin and dest, which a Parquet
file cannot carry):
  inftda-duckdb sample trips --db ledger.duckdb
  inftda-duckdb budget ledger.duckdb --set trips --rho 2
  inftda-duckdb release --db ledger.duckdb --table trips --columns origin,dest,hour \
      --rho 0.5 --domain hour=0..23 --output trips_dp.parquet
"""

from __future__ import annotations

import os
import sys
import tempfile

import duckdb

from inftda_duckdb.core.identifiers import literal
from inftda_duckdb.duckdb.budgets import set_budget
from inftda_duckdb.duckdb.extension import load
from inftda_duckdb.tools.demo import BOROUGHS, ZONES, load_sample

# Public domains, from the data dictionary (Parquet keeps no ENUM types, so they are declared here).
DOMAINS = ("{'origin': [" + ", ".join(map(literal, BOROUGHS)) + "], "
           "'dest': [" + ", ".join(literal(zone) for zone, _ in ZONES) + "], "
           "'hour': range(24)}")


def run(input_path: str, output_path: str, ledger_path: str) -> int:
    """Release INPUT (origin, dest, hour) into OUTPUT; returns the number of released cells."""
    con = duckdb.connect(ledger_path)  # holds the view, the budget and the ledger of releases
    try:
        load(con)
        # A view, so each run reads the current file. One budget, over all runs, covers the
        # view and the file itself (what `inftda-duckdb release --input` charges).
        source = f"read_parquet({literal(input_path)})"
        con.execute(f"CREATE OR REPLACE VIEW trips AS SELECT * FROM {source}")
        set_budget(con, ["trips", f"file:{input_path}"], name="trip riders", rho=2)
        # Write under a temporary name and rename at the end: a failed run leaves no output.
        temporary = output_path + ".tmp"
        con.execute(f"""
            COPY (SELECT * FROM inftda_release('trips', ['origin', 'dest', 'hour'], rho := 0.5,
                                               domains := {DOMAINS}))
            TO {literal(temporary)} (FORMAT parquet)
        """)  # one execution of the statement = one release, charged once
        os.replace(temporary, output_path)
        cells = con.execute(f"SELECT count(*) FROM read_parquet({literal(output_path)})").fetchall()
        con.sql("SELECT budget, sources, spent_rho, remaining_rho, releases "
                "FROM inftda_budget()").show()
        return int(cells[0][0])
    finally:
        con.close()


def main(argv: list[str]) -> None:
    if len(argv) >= 2:
        input_path, output_path = argv[0], argv[1]
        ledger_path = argv[2] if len(argv) > 2 else "etl_ledger.duckdb"
        print(run(input_path, output_path, ledger_path), "cells written to", output_path)
        return
    with tempfile.TemporaryDirectory() as folder:
        input_path = os.path.join(folder, "trips.parquet")
        with duckdb.connect() as con:  # the private input of this example
            load_sample(con, "trips")
            con.execute(f"COPY trips TO {literal(input_path)} (FORMAT parquet)")
        output_path = os.path.join(folder, "trips_dp.parquet")
        cells = run(input_path, output_path, os.path.join(folder, "ledger.duckdb"))
        print(cells, "cells written to", output_path)


if __name__ == "__main__":
    main(sys.argv[1:])
