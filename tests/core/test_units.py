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


# ---------------------------------------------------------------------------------------------
# Which rows a unit keeps: a keyed PRF of (unit, row), never random()


@pytest.fixture
def people(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    # 120 people with 1..8 rows each over 5 values, rows shuffled (scan order is not unit order)
    con.execute(
        "CREATE TABLE people AS SELECT p AS person, "
        "(['a', 'b', 'c', 'd', 'e'])[1 + (p * j + j) % 5] AS s FROM range(120) r(p), "
        "range(8) q(j) WHERE j <= p % 8 ORDER BY hash(p * 31 + j)"
    )
    return con


def _per_unit(con: duckdb.DuckDBPyConnection, table: str, seed: int | None = None,
              **options: object) -> dict[int, dict[str, int]]:
    """Each person's kept rows by value: the release with person as the top level and a
    budget so large the noise is 0 (sigma^2 < 1e-4: P(any cell moves) < 1e-1000)."""
    t = release(con, table, ["person", "s"], rho=10**6, privacy_unit="person",
                max_rows_per_unit=3, seed=seed, domains={"person": range(120), "s": list("abcde")},
                **options)  # type: ignore[arg-type]
    out: dict[int, dict[str, int]] = {}
    for p, s, c in zip(*(t.column(i).to_pylist() for i in range(3)), strict=True):
        out.setdefault(p, {})[s] = c
    return out


def _fixed_secure_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every 'secure' source gets the same key: the row key is then fixed, as a seed fixes it."""
    from inftda_duckdb.core.randomness import RandomSource

    monkeypatch.setattr(RandomSource, "secure",
                        classmethod(lambda cls: cls._from_key(bytes(range(32)), private=True)))


def test_removing_a_unit_leaves_every_other_units_kept_rows_under_setseed(
    people: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15: with random() after setseed the choice was a function of scan order, and
    removing one unit changed which rows others kept (the histogram moved by L2 52-68 against
    m = 3). Now it depends on the row key and the unit's own rows only."""
    _fixed_secure_key(monkeypatch)
    people.execute("SELECT setseed(0.25)")
    full = _per_unit(people, "people", neighbours="add_remove")
    assert all(sum(v.values()) == min(p % 8 + 1, 3) for p, v in full.items())
    for gone in (0, 7, 50, 119):
        people.execute(f"CREATE OR REPLACE TABLE fewer AS SELECT * FROM people "
                       f"WHERE person <> {gone} ORDER BY hash(person * 7 + 3)")
        people.execute("SELECT setseed(0.25)")
        less = _per_unit(people, "fewer", neighbours="add_remove")
        assert less == {p: v for p, v in full.items() if p != gone}
    # setseed does not move the choice either
    people.execute("SELECT setseed(0.75)")
    assert _per_unit(people, "people", neighbours="add_remove") == full


def test_the_histogram_moves_by_at_most_the_sensitivity(
    people: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add_remove, m = 3: removing one unit moves each level's counts by L2 <= m."""
    _fixed_secure_key(monkeypatch)

    def histogram(table: str) -> dict[str, int]:
        people.execute("SELECT setseed(0.25)")
        t = release(people, table, ["s"], rho=10**6, neighbours="add_remove",
                    privacy_unit="person", max_rows_per_unit=3, domains={"s": list("abcde")})
        return dict(zip(t.column("s").to_pylist(), t.column("count").to_pylist(), strict=True))

    full = histogram("people")
    for gone in range(0, 120, 13):
        people.execute(f"CREATE OR REPLACE TABLE fewer AS SELECT * FROM people "
                       f"WHERE person <> {gone} ORDER BY hash(person * 7 + 3)")
        less = histogram("fewer")
        moved = math.sqrt(sum((full.get(s, 0) - less.get(s, 0)) ** 2 for s in "abcde"))
        assert moved <= 3, (gone, full, less)
        assert sum(full.values()) - sum(less.values()) == min(gone % 8 + 1, 3)


def test_no_random_in_the_generated_sql(people: duckdb.DuckDBPyConnection) -> None:
    from inftda_duckdb.core.request import parse_request
    from inftda_duckdb.duckdb.domain import plan_domains
    from inftda_duckdb.duckdb.sqlgen import UdfNames, render_release

    request = parse_request("people", ["s"], rho=1, privacy_unit="person",
                            domains={"s": list("abcde")})
    sql = render_release(request, plan_domains(request, people, strict=True),
                         UdfNames.numbered(1), "python")
    assert "random()" not in sql and "sha256(" in sql and "inftda_rowkey_1(NULL" in sql


def test_kept_rows_are_the_reference_capping(people: duckdb.DuckDBPyConnection) -> None:
    """The SQL computes core/units.py's sort keys exactly (the engine-neutral definition)."""
    from collections import Counter

    from inftda_duckdb.core import units

    got = _per_unit(people, "people", seed=5)
    rows = people.execute("SELECT person, s FROM people").fetchall()
    ref = units.kept(units.row_key(5), [(p, (p, s)) for p, s in rows], 3)
    assert Counter({(p, (p, s)): c for p, v in got.items() for s, c in v.items()}) == ref
    assert _per_unit(people, "people", seed=6) != got  # another key, another choice


def test_a_unit_keeps_a_uniform_subset_of_its_rows(con: duckdb.DuckDBPyConnection) -> None:
    """m = 1 from {a x 9, b}: a is kept w.p. 9/10; m = 2 from {a, a, b, b}: one of each w.p.
    2/3. Seeded, so the outcome is fixed; for a fresh key each check fails w.p. < 1e-6 (5
    standard deviations). Negative control: one key per distinct row (no Renyi weighting)
    would keep a w.p. 1/2 and never one of each, far outside both tolerances."""
    from inftda_duckdb.core import units

    con.execute("CREATE TABLE nine AS SELECT p AS person, CASE WHEN j = 0 THEN 'b' ELSE 'a' END"
                " AS s FROM range(2000) r(p), range(10) q(j)")
    t = release(con, "nine", ["person", "s"], rho=10**6, privacy_unit="person", seed=3,
                domains={"person": range(2000), "s": ["a", "b"]})
    share_a = t.filter(pa_equal(t, "s", "a")).num_rows / 2000
    tolerance = 5 * math.sqrt(0.09 / 2000)
    assert abs(share_a - 0.9) < tolerance, share_a
    # negative control, same key: one Exp(1) key per distinct row, not per row
    key = units.row_key(3)
    naive = sum(units.group_keys(key, units.encode([p, p, "a"]), 1, 1)
                < units.group_keys(key, units.encode([p, p, "b"]), 1, 1) for p in range(2000))
    assert abs(naive / 2000 - 0.9) > 10 * tolerance, naive
    con.execute("CREATE TABLE two AS SELECT p AS person, (['a', 'b'])[1 + j % 2] AS s "
                "FROM range(1500) r(p), range(4) q(j)")
    t = release(con, "two", ["person", "s"], rho=10**6, privacy_unit="person",
                max_rows_per_unit=2, seed=3, domains={"person": range(1500), "s": ["a", "b"]})
    mixed = sum(1 for c in t.column("count").to_pylist() if c == 1) / 2 / 1500
    assert abs(mixed - 2 / 3) < 5 * math.sqrt(2 / 9 / 1500), mixed


def pa_equal(table: object, column: str, value: str) -> object:
    import pyarrow.compute as pc

    return pc.equal(table.column(column), value)  # type: ignore[attr-defined]
