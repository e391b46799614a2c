"""Privacy units (issue 15): the total of a unit release is noised unless the curator asserts
every unit's row count is public, and the accounting and Theorem 1 follow."""

from __future__ import annotations

import math
from fractions import Fraction

import duckdb
import pytest

from inftda_duckdb.core.accounting import error_bound, plan_budget
from inftda_duckdb.duckdb.extension import preview, release

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")


@pytest.fixture
def visits(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    # person p has 1 + p % 4 rows: n' = sum_u min(r_u, 2) = 60 * 1 + 60 * 2 * 3 = 420
    con.execute(
        "CREATE TABLE visits AS SELECT p AS person, (['a', 'b', 'c'])[1 + (p + j) % 3] AS s "
        "FROM range(240) r(p), range(4) q(j) WHERE j <= p % 4"
    )
    return con


N_CAPPED = 420


def _total(table: object) -> int:
    return sum(table.column("count").to_pylist())  # type: ignore[attr-defined]


def test_unit_total_is_noised_unless_row_counts_are_asserted_public(
    visits: duckdb.DuckDBPyConnection,
) -> None:
    """Before the fix n' was released exactly (with m = 1: the exact number of people).
    Noised root: sigma_0^2 = m^2 / (2 rho_0) = 4 / (2 * 0.005) = 400, so one run lands on n'
    with probability < 0.02 and all five with probability < 4e-9 (the false-failure rate)."""
    options = {"rho": Fraction(1, 100), "privacy_unit": "person", "max_rows_per_unit": 2,
               "domains": {"s": ["a", "b", "c"]}}
    totals = [_total(release(visits, "visits", ["s"], **options)) for _ in range(5)]
    assert len(set(totals)) > 1 and any(t != N_CAPPED for t in totals), totals
    # negative control: with the assertion the total is n', exactly, every time
    asserted = [_total(release(visits, "visits", ["s"], rows_per_unit_public=True, **options))
                for _ in range(3)]
    assert asserted == [N_CAPPED] * 3
    rows = visits.execute("SELECT neighbours, privacy_unit FROM inftda_ledger").fetchall()
    assert rows == [("substitute", "person")] * 8


def test_unit_total_is_noised_from_sql_too(visits: duckdb.DuckDBPyConnection) -> None:
    q = ("SELECT sum(count) FROM inftda_release('visits', ['s'], rho := 0.01, "
         "privacy_unit := 'person', max_rows_per_unit := 2, domains := {{'s': ['a', 'b', 'c']}}{})")
    assert len({visits.execute(q.format("")).fetchall()[0][0] for _ in range(5)}) > 1
    exact = {visits.execute(q.format(", rows_per_unit_public := true")).fetchall()[0][0]
             for _ in range(3)}
    assert exact == {N_CAPPED}


def test_preview_shows_the_noised_root_of_a_unit_release(
    visits: duckdb.DuckDBPyConnection,
) -> None:
    abc = {"s": ["a", "b", "c"]}
    p = preview(visits, "visits", ["s"], rho=1, privacy_unit="person", max_rows_per_unit=2,
                domains=abc)
    assert p.column("level").to_pylist() == [0, 1]
    assert p.column("sigma2_k").to_pylist() == ["4", "8"]  # m^2 / (2 * 1/2), m^2 / (1/2)
    q = preview(visits, "visits", ["s"], rho=1, privacy_unit="person", max_rows_per_unit=2,
                rows_per_unit_public=True, domains=abc)
    assert q.column("level").to_pylist() == [1] and q.column("sigma2_k").to_pylist() == ["4"]


@pytest.mark.parametrize("m", [1, 3])
def test_substitute_with_a_noised_root_is_accounted_exactly(m: int) -> None:
    """Replacing one unit's rows (any number, at most m kept, including none) moves at most m
    rows out of cells and m into cells (level L2 sensitivity sqrt(2) m) and changes n' by at
    most m: rho_0 = rho_k = rho / (d + 1), sigma_0^2 = m^2 / (2 rho_0), sigma_k^2 = m^2 / rho_k;
    Theorem 1 gets the root's term once, as with add_remove."""
    rho, d = Fraction(1, 2), 3
    plan = plan_budget(d, rho=rho, max_rows_per_unit=m, noised_root=True)
    share = rho / (d + 1)
    assert plan.root_rho == share and plan.level_rho == (share,) * d
    assert plan.root_sigma2 == m * m / (2 * share)
    assert plan.level_sigma2 == (m * m / share,) * d
    assert plan.root_rho + sum(plan.level_rho) == rho
    sizes, beta = [4, 5, 6], 0.05
    got = error_bound(sizes, None, beta, plan=plan)
    for k in range(1, d + 1):
        root = math.sqrt(2 * float(plan.root_sigma2) * math.log(2 * (k + 1) / beta))
        levels = sum(
            math.sqrt(8 * float(plan.level_sigma2[j - 1])
                      * math.log(2 * (k + 1) * math.prod(sizes[:j]) / beta))
            for j in range(1, k + 1))
        assert got[k - 1] == pytest.approx(root + levels, rel=1e-12)
    with pytest.raises(Exception, match="must be true with add_remove"):
        plan_budget(d, rho=rho, neighbours="add_remove", noised_root=False)
