"""End to end (issue 5): every executed release is charged exactly once, budgets refuse before any
noise is drawn, neighbouring relations and privacy units scale the noise as the accounting says."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from inftda_duckdb.core.accounting import (
    CONVERSION,
    epsilon_from_rho,
    plan_budget,
    rho_from_epsilon_delta,
)
from inftda_duckdb.core.errors import BudgetExceededError, InputError
from inftda_duckdb.core.noise import DiscreteGaussian
from inftda_duckdb.duckdb import allocator, extension, udfs
from inftda_duckdb.duckdb.budgets import budget, set_budget

RELEASE = "inftda_release('trips', ['origin', 'dest'], rho := {rho})"
THIRD = RELEASE.format(rho="'1/3'")
SEVENTH = RELEASE.format(rho="'1/7'")


def make_trips(c: duckdb.DuckDBPyConnection, n: int = 3000) -> None:
    c.execute("CREATE TYPE city AS ENUM ('a', 'b', 'c')")
    c.execute(
        "CREATE TABLE trips AS SELECT (['a', 'b', 'c'])[1 + i % 3]::city AS origin, "
        f"(['a', 'b', 'c'])[1 + (i // 3) % 3]::city AS dest, i // 2 AS person FROM range({n}) t(i)"
    )


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    make_trips(c)
    extension.load(c)
    yield c
    c.close()


def charges(c: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    return c.execute(
        "SELECT source, columns, neighbours, privacy_unit, max_rows_per_unit, rho, output, seeded, "
        "data_domain, private, origin FROM inftda_ledger ORDER BY id"
    ).fetchall()


def n_charges(c: duckdb.DuckDBPyConnection) -> int:
    return int(c.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])


def spent(c: duckdb.DuckDBPyConnection) -> Fraction:
    rows = c.execute("SELECT rho FROM inftda_ledger").fetchall()
    return sum((Fraction(r[0]) for r in rows), Fraction(0))


# ---------------------------------------------------------------------------------------------
# what is charged


def test_load_creates_the_ledger_and_sql_functions(con: duckdb.DuckDBPyConnection,
                                                    vouched: Any) -> None:
    assert n_charges(con) == 0
    assert con.execute("SELECT count(*) FROM inftda_budget()").fetchall() == [(0,)]
    extension.load(con)  # loading twice is harmless
    vouched(con, "SELECT inftda_set_budget('trips', rho := 1)")
    assert con.execute("SELECT budget_rho_exact FROM inftda_budget()").fetchall() == [("1",)]


def test_python_release_is_charged_once_with_all_fields(con: duckdb.DuckDBPyConnection) -> None:
    extension.release(con, "trips", ["origin", "dest"], rho="1/3")
    unit = {"privacy_unit": "person", "max_rows_per_unit": 2}
    with pytest.warns(UserWarning, match="NOT private"):
        extension.release(
            con, "main.trips", ["origin"], rho=0.25, neighbours="add_remove", seed=7, **unit
        )  # type: ignore[arg-type]
    first = ("memory.main.trips", ["origin", "dest"], "substitute", None, 1, "1/3", "counts")
    second = ("memory.main.trips", ["origin"], "add_remove", "person", 2, "1/4", "counts")
    assert charges(con) == [
        (*first, False, False, True, "python"),
        (*second, True, False, False, "python"),  # seeded: charged, marked not private
    ]


def test_epsilon_delta_release_is_charged_its_exact_rho(con: duckdb.DuckDBPyConnection) -> None:
    extension.release(con, "trips", ["origin"], epsilon=1, delta=1e-8)
    ((rho, eps, delta),) = con.execute("SELECT rho, epsilon, delta FROM inftda_ledger").fetchall()
    assert Fraction(rho) == rho_from_epsilon_delta(1, 1e-8)
    assert eps == epsilon_from_rho(Fraction(rho), delta)  # the epsilon at the stated delta
    if delta == 1e-8:  # the release passed its own delta to the ledger
        assert eps <= 1.0


def test_sql_release_is_charged_once_per_execution(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"SELECT * FROM {RELEASE.format(rho=0.5)}").fetchall()
    assert n_charges(con) == 1 and charges(con)[0][-1] == "sql"
    con.sql(f"SELECT * FROM {RELEASE.format(rho=0.5)}").to_arrow_table()  # binds twice, runs once
    assert n_charges(con) == 2
    rel = con.sql(f"SELECT * FROM {RELEASE.format(rho=0.5)}")
    rel.fetchall()
    rel.fetchall()  # every read of a relation re-runs the release: charged again
    assert n_charges(con) == 4
    con.execute(f"EXPLAIN SELECT * FROM {RELEASE.format(rho=0.5)}").fetchall()
    con.execute(f"DESCRIBE SELECT * FROM {RELEASE.format(rho=0.5)}").fetchall()
    assert n_charges(con) == 4  # nothing executed, nothing charged
    assert spent(con) == 2


def test_two_references_in_one_statement_are_two_charges(con: duckdb.DuckDBPyConnection) -> None:
    r = RELEASE.format(rho="'1/10'")
    con.execute(f"SELECT * FROM {r} UNION ALL SELECT * FROM {r}").fetchall()
    assert n_charges(con) == 2 and spent(con) == Fraction(1, 5)


def test_seeded_and_data_domain_releases_are_charged_but_not_private(
    con: duckdb.DuckDBPyConnection,
) -> None:
    con.execute("CREATE TABLE plain AS SELECT origin::VARCHAR AS o FROM trips")
    con.execute(
        "SELECT * FROM inftda_release('trips', ['origin'], rho := 0.1, seed := 3)"
    ).fetchall()
    with pytest.warns(UserWarning, match="NOT private"):
        extension.release(con, "plain", ["o"], rho=0.1, domain_from_data=True)
    got = [(r[0], r[7], r[8], r[9]) for r in charges(con)]
    assert got == [
        ("memory.main.trips", True, False, False),
        ("memory.main.plain", False, True, False),
    ]
    (row,) = [r for r in budget(con).to_pylist() if r["sources"] == ["memory.main.plain"]]
    assert row["non_private_releases"] == 1 and row["spent_rho_exact"] == "1/10"


def test_preview_spends_nothing(con: duckdb.DuckDBPyConnection) -> None:
    set_budget(con, "trips", rho="1/10")
    table = extension.preview(con, "trips", ["origin", "dest"], rho=0.5)
    assert table.num_rows >= 2  # one row per level
    con.execute("SELECT * FROM inftda_preview('trips', ['origin', 'dest'], rho := 0.5)").fetchall()
    assert (
        n_charges(con) == 0
    )  # a preview above the remaining budget is neither charged nor refused


def test_charge_survives_the_callers_rollback(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("BEGIN")
    con.execute(f"CREATE TABLE out AS SELECT * FROM {RELEASE.format(rho=0.5)}")
    con.execute("ROLLBACK")
    assert n_charges(con) == 1  # noise was drawn: the release stays charged


# ---------------------------------------------------------------------------------------------
# budgets and refusal


def test_three_thirds_under_a_budget_of_one_then_refusal(con: duckdb.DuckDBPyConnection) -> None:
    set_budget(con, "TRIPS", rho=1)
    extension.release(con, "trips", ["origin"], rho="1/3")
    con.execute(f"SELECT * FROM {THIRD}").fetchall()
    extension.release(con, "memory.main.trips", ["dest"], rho=Fraction(1, 3))
    assert spent(con) == 1
    before = charges(con)
    with pytest.raises(BudgetExceededError, match=r"requests rho 1e-07 .*remains"):
        extension.release(con, "trips", ["origin"], rho="1e-7")
    with pytest.raises(duckdb.Error, match=r"refused.*requests rho.*remains.*difference"):
        con.execute(f"CREATE TABLE out AS SELECT * FROM {RELEASE.format(rho='1e-7')}")
    con.execute("CREATE TABLE kept (origin city, dest city, count BIGINT)")
    with pytest.raises(duckdb.Error, match="refused"):
        con.execute(f"INSERT INTO kept SELECT * FROM {RELEASE.format(rho=0.01)}")
    assert charges(con) == before  # nothing charged
    assert con.execute("SELECT count(*) FROM kept").fetchall() == [(0,)]  # nothing written
    assert "out" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}


def test_refusal_message_has_requested_remaining_difference(
    con: duckdb.DuckDBPyConnection, vouched: Any,
) -> None:
    vouched(con, "SELECT inftda_set_budget('trips', rho := 0.5)")
    extension.release(con, "trips", ["origin"], rho=0.375)
    with pytest.raises(BudgetExceededError) as info:
        extension.release(con, "trips", ["origin"], rho=0.25)
    e = info.value
    assert "requests rho 0.25" in str(e) and "difference 0.125" in str(e)
    row = con.execute(
        "SELECT budget_rho, spent_rho, remaining_rho, remaining_rho_exact FROM inftda_budget()"
    ).fetchall()
    assert row == [(0.5, 0.375, 0.125, "1/8")]


def test_budget_exhausted_inside_one_statement(con: duckdb.DuckDBPyConnection) -> None:
    """Two references, room for one: the first is charged (noise drawn), the second refused."""
    set_budget(con, "trips", rho="3/20")
    r = RELEASE.format(rho=0.1)
    with pytest.raises(duckdb.Error, match="refused"):
        con.execute(f"SELECT * FROM {r} UNION ALL SELECT * FROM {r}").fetchall()
    assert n_charges(con) == 1


def test_uncapped_source_proceeds_and_is_recorded(con: duckdb.DuckDBPyConnection) -> None:
    for _ in range(3):
        extension.release(con, "trips", ["origin"], rho=5)
    (row,) = budget(con).to_pylist()
    assert row["budget_rho"] is None and row["spent_rho_exact"] == "15" and row["releases"] == 3


def test_failure_before_noise_is_not_charged(con: duckdb.DuckDBPyConnection) -> None:
    set_budget(con, "trips", rho=1)
    con.execute("INSERT INTO trips VALUES (NULL, 'a', 99999)")
    with pytest.raises(InputError, match="NULL"):
        extension.release(con, "trips", ["origin", "dest"], rho=0.5)
    with pytest.raises(duckdb.Error, match="NULL"):
        con.execute(f"SELECT * FROM {RELEASE.format(rho=0.5)}").fetchall()
    with pytest.raises(InputError, match="unknown"):
        extension.release(con, "trips", ["origin"], rho=0.5, unknown="drop")  # with substitute
    assert n_charges(con) == 0
    assert budget(con).to_pylist()[0]["remaining_rho_exact"] == "1"


def test_failure_after_noise_is_charged(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(duckdb.Error, match="after the noise"):
        con.execute(
            "SELECT CASE WHEN count >= 0 THEN error('after the noise') END "
            f"FROM {RELEASE.format(rho=0.5)}"
        ).fetchall()
    assert n_charges(con) == 1


def test_ledger_persists_across_sessions(tmp_path: Path) -> None:
    path = str(tmp_path / "curator.db")
    c = duckdb.connect(path)
    make_trips(c)
    extension.load(c)
    set_budget(c, "trips", rho=1)
    extension.release(c, "trips", ["origin"], rho=0.75)
    c.close()
    c = duckdb.connect(path)
    extension.load(c)
    with pytest.raises(BudgetExceededError):
        extension.release(c, "curator.main.trips", ["origin"], rho=0.5)
    extension.release(c, "trips", ["origin"], rho=0.25)
    assert c.execute("SELECT remaining_rho_exact FROM inftda_budget()").fetchall() == [("0",)]
    c.close()


# ---------------------------------------------------------------------------------------------
# concurrency


def _race(c: duckdb.DuckDBPyConnection, threads: int, per_thread: int, sql: bool) -> int:
    ok = [0]
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work() -> None:
        cur = c.cursor()
        extension.load(cur)
        start.wait()
        for _ in range(per_thread):
            try:
                if sql:
                    cur.execute(f"SELECT * FROM {SEVENTH}")
                    cur.fetchall()
                else:
                    extension.release(cur, "trips", ["origin", "dest"], rho=Fraction(1, 7))
            except (BudgetExceededError, duckdb.Error) as exc:
                assert "refused" in str(exc)
                continue
            with lock:
                ok[0] += 1

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return ok[0]


@pytest.mark.parametrize("parts", [False, True], ids=["one_call", "in_parts"])
@pytest.mark.parametrize("sql", [False, True], ids=["python", "sql"])
def test_concurrent_releases_never_overspend(con: duckdb.DuckDBPyConnection, sql: bool,
                                             parts: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads on one connection's cursors; ``in_parts``: releases planned in parts (a tiny
    memory_limit), charged by their first levels call."""
    calls: list[int] = []
    if parts:
        from inftda_duckdb.duckdb import sqlgen

        monkeypatch.setattr(allocator, "memory_limit", lambda _: 1 << 6)
        monkeypatch.setattr(sqlgen, "PARTS", 2)
        original = udfs.release_parts
        monkeypatch.setattr(udfs, "release_parts", lambda *a: calls.append(1) or original(*a))
    set_budget(con, "trips", rho=1)
    assert _race(con, threads=4, per_thread=3, sql=sql) == 7  # floor(1 / (1/7))
    assert n_charges(con) == 7 and spent(con) == 1
    assert bool(calls) == parts


# ---------------------------------------------------------------------------------------------
# neighbouring relations and privacy units


def test_substitute_releases_n_exactly_add_remove_noises_it(
    con: duckdb.DuckDBPyConnection,
) -> None:
    for _ in range(3):
        t = extension.release(con, "trips", ["origin", "dest"], rho=0.01)
        assert sum(t.column("count").to_pylist()) == 3000
    # add_remove: root sigma^2 = 1 / (2 rho_0) = 5000 with rho_0 = rho / 100, so the released
    # total equals n with probability <= 1 / (sqrt(2 pi) 70) < 0.006 per release; all three
    # equal n with probability < 2.2e-7 (the false-failure rate of this assertion).
    totals = [
        sum(
            extension.release(
                con,
                "trips",
                ["origin", "dest"],
                rho=0.01,
                neighbours="add_remove",
                level_weights=[1, 49.5, 49.5],
            )
            .column("count")
            .to_pylist()
        )
        for _ in range(3)
    ]
    assert any(total != 3000 for total in totals)


def test_privacy_unit_keeps_at_most_m_rows_chosen_at_random() -> None:
    c = duckdb.connect()
    c.execute("CREATE TYPE side AS ENUM ('a', 'b', 'c')")
    # 2000 units with rows in 'a' and 'b', even units also in 'c'; 100 one-row units in 'c'
    c.execute(
        "CREATE TABLE visits AS "
        "SELECT u AS person, 'a'::side AS s FROM range(2000) t(u) UNION ALL "
        "SELECT u, 'b'::side FROM range(2000) t(u) UNION ALL "
        "SELECT u, 'c'::side FROM range(0, 2000, 2) t(u) UNION ALL "
        "SELECT 10000 + u, 'c'::side FROM range(100) t(u)"
    )
    extension.load(c)

    def release(m: int) -> dict[str, int]:
        # rho = 10^6: sigma^2 = m^2 / rho <= 9e-6, so the noise is 0 except w.p. < 1e-40
        t = extension.release(
            c, "visits", ["s"], rho=10**6, privacy_unit="person", max_rows_per_unit=m
        )
        return dict(zip(t.column("s").to_pylist(), t.column("count").to_pylist(), strict=True))

    got = release(1)
    assert sum(got.values()) == 2100  # every unit keeps exactly one row
    # the kept row is uniform within its unit: 'a' is kept w.p. 1/2 by the 1000 odd units and
    # 1/3 by the 1000 even ones, independently: mean 833.3, variance 1000/4 + 1000 * 2/9
    mean, sd = 1000 / 2 + 1000 / 3, math.sqrt(1000 / 4 + 2000 / 9)
    assert abs(got.get("a", 0) - mean) <= 5.33 * sd  # false-failure rate 1e-7 (normal approx.)
    # negative control: keeping each unit's first row (always 'a') fails the same check
    assert not abs(2000 - mean) <= 5.33 * sd
    assert sum(release(2).values()) == 2000 * 2 + 100
    assert release(3) == {"a": 2000, "b": 2000, "c": 1100}  # nobody has more than 3 rows
    c.close()


# Noise scale vs accounting: one level, K cells of exactly COUNT rows each, sigma_1^2 = SIGMA2 by
# the correct formula, counts 10 sigma away from 0 so IntOpt never clips. IntOpt then moves each
# cell by at most 1 (to restore the released total), lowering the smallest noisy counts first, so
# the move is correlated with the noise: it adds at most 2 E|Z| + 1 = 2 sigma sqrt(2/pi) + 1 to
# the variance. Measured at sigma = 10 that is up to +17%, hence sigma = 100 here: <= +1.6%.
K = 2000
COUNT = 1000
SIGMA2 = 10_000


def _variance_ok(errors: list[int], sigma2: float) -> bool:
    """(K-1) s^2 / sigma^2 ~ chi^2(K-1) ~ N(K-1, 2(K-1)): accept |s^2/sigma^2 - 1| <= 5.33 sd.

    False-failure rate 1e-7 two-sided; with IntOpt's <= 1.6% inflation, below 1e-6.
    """
    n = len(errors)
    mean = sum(errors) / n
    s2 = sum((e - mean) ** 2 for e in errors) / (n - 1)
    return abs(s2 / sigma2 - 1) <= 5.33 * math.sqrt(2 / (n - 1))


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize(
    ("neighbours", "m"),
    [("substitute", 1), ("substitute", 3), ("add_remove", 1), ("add_remove", 3)],
)
def test_noise_scale_matches_the_accounting(neighbours: str, m: int) -> None:
    c = duckdb.connect()
    # row r is in cell r % K and belongs to unit r // m: every unit has m rows in m distinct
    # cells, so contribution bounding drops nothing and the truth is exactly COUNT per cell
    c.execute(
        f"CREATE TABLE big AS SELECT i % {K} AS cell, i // {m} AS unit FROM range({K * COUNT}) t(i)"
    )
    extension.load(c)
    unit = {"privacy_unit": "unit", "max_rows_per_unit": m} if m > 1 else {}
    if neighbours == "substitute" and m == 1:
        # one level: rho_1 = rho, Delta_2 = sqrt(2), sigma_1^2 = 1 / rho_1
        rho = Fraction(1, SIGMA2)
        weights: dict[str, object] = {}
        wrong = 1 / (2 * rho)  # add_remove's sigma^2
    elif neighbours == "substitute":
        # a unit's row count is private: the total is noised too. Weights 1:3, rho_1 = 3 rho / 4,
        # Delta_2 = sqrt(2) m, sigma_1^2 = m^2 / rho_1
        rho = Fraction(4 * m * m, 3 * SIGMA2)
        weights = {"level_weights": [1, 3]}
        wrong = m / (Fraction(3, 4) * rho)  # inf-tda's sqrt(2m) sensitivity bug
    else:
        # root + one level, weights 1:3: rho_1 = 3 rho / 4, Delta_2 = m, sigma^2 = m^2 / (2 rho_1)
        rho = Fraction(m * m * 2, 3 * SIGMA2)
        weights = {"level_weights": [1, 3]}
        wrong = m * m / (Fraction(3, 4) * rho)  # substitute's sqrt(2) m sensitivity
    t = extension.release(
        c,
        "big",
        ["cell"],
        rho=rho,
        neighbours=neighbours,
        domains={"cell": range(K)},
        **unit,
        **weights,  # type: ignore[arg-type]
    )
    released = dict(zip(t.column("cell").to_pylist(), t.column("count").to_pylist(), strict=True))
    errors = [released.get(i, 0) - COUNT for i in range(K)]
    assert _variance_ok(errors, SIGMA2)
    assert not _variance_ok(errors, float(wrong))  # negative control: the wrong scale fails
    (row,) = c.execute("SELECT neighbours, max_rows_per_unit, rho FROM inftda_ledger").fetchall()
    assert row == (neighbours, m, str(rho))
    c.close()


# ---------------------------------------------------------------------------------------------
# level_weights := 'auto' (issue 19): the noise follows the plan, the plan only public sizes


def _sigma2_drawn(c: duckdb.DuckDBPyConnection, sql: str, monkeypatch: pytest.MonkeyPatch) -> set:
    seen: set[Fraction] = set()
    original, addressed = DiscreteGaussian.sample, DiscreteGaussian.sample_addressed

    def sample(dist: DiscreteGaussian, source: Any, ids: Any, out: Any = None) -> Any:
        seen.add(dist.sigma2)
        return original(dist, source, ids, out)

    def sample_addressed(dist: DiscreteGaussian, source: Any, n: int, out: Any) -> Any:
        seen.add(dist.sigma2)  # the release's blocks draw through this hot path
        return addressed(dist, source, n, out)

    monkeypatch.setattr(DiscreteGaussian, "sample", sample)
    monkeypatch.setattr(DiscreteGaussian, "sample_addressed", sample_addressed)
    c.execute(sql).fetchall()
    monkeypatch.setattr(DiscreteGaussian, "sample", original)
    monkeypatch.setattr(DiscreteGaussian, "sample_addressed", addressed)
    return seen


@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
def test_auto_weights_noise_each_level_as_planned_from_public_sizes(
    neighbours: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = duckdb.connect()
    extension.load(c)
    # public: 3 states with 3 + 1 + 2 counties (a nested domain table), 4 hours
    c.execute("CREATE TABLE geo AS SELECT * FROM (VALUES ('CA', 'LA'), ('CA', 'SF'), "
              "('CA', 'SD'), ('NY', 'NYC'), ('TX', 'Austin'), ('TX', 'Dallas')) t(state, county)")
    c.execute("CREATE TABLE d AS SELECT (['CA', 'NY', 'TX'])[1 + i % 3] AS state, "
              "(['LA', 'NYC', 'Dallas'])[1 + i % 3] AS county, i % 4 AS hour FROM range(300) t(i)")
    sql = ("SELECT * FROM inftda_release('d', ['state', 'county', 'hour'], rho := '3/4', "
           "domain_tables := ['geo'], domains := {'hour': range(4)}, level_weights := 'auto', "
           f"auto_target := 'county', neighbours := '{neighbours}')")
    plan = plan_budget(3, rho=Fraction(3, 4), level_weights="auto", auto_target=2,
                       neighbours=neighbours, nodes=[3, 6, 24])  # the public cells per level
    expected = {*plan.level_sigma2, *([plan.root_sigma2] if plan.root_sigma2 else [])}
    assert _sigma2_drawn(c, sql, monkeypatch) == expected
    uniform = plan_budget(3, rho=Fraction(3, 4), neighbours=neighbours)
    assert expected != {*uniform.level_sigma2, uniform.root_sigma2} - {None}  # control
    (rho,) = c.execute("SELECT rho FROM inftda_ledger").fetchall()[0]
    assert Fraction(rho) == Fraction(3, 4)  # charged the total, whatever the split
    # other private rows, same public domains: the same split
    c.execute("CREATE OR REPLACE TABLE d AS SELECT 'TX' AS state, 'Austin' AS county, "
              "3 AS hour FROM range(5)")
    assert _sigma2_drawn(c, sql, monkeypatch) == expected
    # a county more in the public table: another split (negative control for the check above)
    c.execute("INSERT INTO geo VALUES ('NY', 'Buffalo')")
    assert _sigma2_drawn(c, sql, monkeypatch) != expected
    c.close()


def test_ledger_round_trip_of_an_epsilon_delta_budget(con: duckdb.DuckDBPyConnection) -> None:
    """A budget set as (1, 1e-6) holds exactly one release at (1, 1e-6): the same conversion
    on both sides (CKS), the row's epsilon is the one asked for, and nothing more fits."""
    set_budget(con, "trips", epsilon=1, delta=1e-6)
    table = extension.release(con, "trips", ["origin"], epsilon=1, delta=1e-6)
    assert table.schema.metadata[b"conversion"] == CONVERSION.encode()  # the provenance says
    ((rho, eps, delta),) = con.execute("SELECT rho, epsilon, delta FROM inftda_ledger").fetchall()
    assert Fraction(rho) == rho_from_epsilon_delta(1, 1e-6) == budget_cap(con)
    assert delta == 1e-6 and 1 - 1e-12 < eps <= 1.0
    assert Fraction(rho) > rho_from_epsilon_delta(1, 1e-6, "bun-steinke-2016") * Fraction(139, 100)
    with pytest.raises(BudgetExceededError):
        extension.release(con, "trips", ["origin"], epsilon="0.01", delta=1e-6)
    columns = {r[0] for r in con.execute("DESCRIBE inftda_ledger").fetchall()}
    if "conversion" in columns:  # recorded per row by the ledger (issue 14, wp-ledger)
        assert con.execute("SELECT conversion FROM inftda_ledger").fetchall() == [(CONVERSION,)]


def budget_cap(c: duckdb.DuckDBPyConnection) -> Fraction:
    return Fraction(c.execute("SELECT budget_rho_exact FROM inftda_budget()").fetchall()[0][0])
