"""Seeded DuckDB releases equal their pinned hashes (:mod:`tests.pinned`): code moves, results
do not. A change that is meant to move a seeded output must say so and re-pin here."""

from __future__ import annotations

from typing import Any

import duckdb
import pinned
import pytest

import inftda_duckdb
from inftda_duckdb.core.provenance import MARKER

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed")


def duckdb_rows(case: str, estimator: str = "inftda") -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    inftda_duckdb.load(con)
    con.register("trips_arrow", pinned.trips())
    con.execute("CREATE TABLE trips AS SELECT * FROM trips_arrow")
    con.register("geo_arrow", pinned.geo())
    con.execute("CREATE TABLE geo AS SELECT * FROM geo_arrow")
    table = inftda_duckdb.release(con, "trips", pinned.COLUMNS, seed=pinned.SEED,
                                  estimator=estimator, **pinned.CASES[case])
    con.close()
    assert table.column_names[-1] == MARKER  # seeded: marked not private
    return [tuple(r.values()) for r in table.to_pylist()]


@pytest.mark.parametrize("estimator", list(pinned.ESTIMATORS))
@pytest.mark.parametrize("case", list(pinned.CASES))
def test_seeded_duckdb_release_matches_its_pinned_hash(case: str, estimator: str) -> None:
    rows = duckdb_rows(case, estimator)
    assert len(rows) > 20
    if case == "nested domain table":
        assert pinned.nested_rows_ok(rows)
    assert pinned.digest(rows) == pinned.ESTIMATORS[estimator][case]


def test_the_digest_sees_one_count_moved() -> None:
    """Negative control: the hash is not blind to a single count moving between two rows."""
    rows = duckdb_rows("flat")
    moved = list(rows)
    moved[0] = (*moved[0][:-2], moved[0][-2] + 1, moved[0][-1])
    moved[1] = (*moved[1][:-2], moved[1][-2] - 1, moved[1][-1])
    assert pinned.digest(moved) != pinned.digest(rows)
    assert pinned.digest(list(reversed(rows))) == pinned.digest(rows)
