"""Error bars: the bound on one event, a release's public plan and where it is found, intervals
and sums from Python and SQL, plans for a target error, and every refusal (never a made-up
interval)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import inftda_duckdb
from inftda_duckdb import InputError, LedgerError
from inftda_duckdb.core import errorbars as eb
from inftda_duckdb.core.accounting import error_bound, joint_bounds, plan_budget
from inftda_duckdb.core.provenance import KEYS, comment, from_comment, provenance
from inftda_duckdb.core.targets import plan_target, targets_of

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")

COLUMNS = ["a", "b", "c"]
DOMAINS = {"a": range(3), "b": range(4), "c": range(5)}


@pytest.fixture
def small(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Table t(a, b, c) of 600 rows over the domains 3 x 4 x 5."""
    con.execute("CREATE TABLE t AS SELECT (i % 3)::INTEGER AS a, (i % 4)::INTEGER AS b, "
                "(i % 7 % 5)::INTEGER AS c FROM range(600) r(i)")
    return con


def released(con: duckdb.DuckDBPyConnection, seed: int = 1, **options: object) -> pa.Table:
    return inftda_duckdb.release(con, "t", COLUMNS, rho=0.5, domains=DOMAINS, seed=seed,
                                 **options)


def meta(table: pa.Table) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}


# ---------------------------------------------------------------------------------- the bound


def test_joint_bounds_give_theorem_1_at_their_own_level_and_wider_below() -> None:
    cells = [3, 12, 60]
    for neighbours in ("substitute", "add_remove"):
        plan = plan_budget(3, rho=Fraction(1, 2), neighbours=neighbours)
        alone = error_bound(None, nodes=cells, plan=plan)
        for k in (1, 2, 3):
            together = joint_bounds(cells, plan, 0.05, k)
            assert together[k] == pytest.approx(alone[k - 1])
            assert all(together[j] >= alone[j - 1] for j in range(1, k + 1))
            assert together == sorted(together)  # B_0 <= B_1 <= ... (each adds a term)
        assert (joint_bounds(cells, plan, 0.05, 0)[0] > 0) == (neighbours == "add_remove")


def test_half_width_floors_with_room_and_intervals_hold_the_count() -> None:
    assert eb.half_width(12.7) == 12
    assert eb.half_width(13 - 1e-13) == 13  # a few ulps below an integer: never narrower
    assert eb.half_width(0.4) == 0
    assert eb.interval(5, 12) == (0, 17)
    assert eb.interval(30, 12) == (18, 42)


# ------------------------------------------------------------------------ the public plan


def test_every_release_carries_its_plan_and_the_ledger_keeps_it(small) -> None:
    table = released(small)
    record = meta(table)
    plan = eb.from_record(record, "t")
    assert plan.columns == tuple(COLUMNS)
    assert plan.sizes == (3, 4, 5) and plan.cells == (3, 12, 60)
    assert plan.budget.level_sigma2 == (Fraction(6),) * 3  # d / rho
    row = small.execute("SELECT plan FROM inftda_plans WHERE id = ?",
                        [int(record["ledger_id"])]).fetchall()
    assert json.loads(row[0][0]) == json.loads(record["plan"])


def test_the_comment_the_cli_writes_parses_back() -> None:
    record = provenance(rho=Fraction(1, 3), columns=["x", "y"], neighbours="add_remove",
                        output="counts", source="main.t; rho=9", seed=4, plan='{"k": [1, 2]}')
    back = from_comment(comment(record))
    assert back == {k: v for k, v in record.items() if v != ""}
    assert tuple(record) == KEYS  # every key the record writes, in its order
    assert from_comment("a table comment") is None


def edited(record: dict[str, str], **plan_changes: object) -> dict[str, str]:
    data = json.loads(record["plan"])
    data.update(plan_changes)
    return {**record, "plan": json.dumps(data)}


@pytest.mark.parametrize(("change", "says"), [
    ({"rho": "1"}, "was edited"),
    ({"level_sigma2": ["1", "6", "6"]}, "noise variance"),
    ({"cells": [3, 12, 61]}, "do not fit"),
    ({"root_rho": "1/8"}, "was edited"),
    ({"estimator": "magic"}, "estimator"),
    ({"level_rho": ["1/6", "1/6"]}, "levels"),
    ({"sizes": "3"}, "cannot be read"),
])
def test_an_edited_plan_is_refused(small, change, says) -> None:
    record = meta(released(small))
    with pytest.raises(InputError, match=says):
        eb.from_record(edited(record, **change), "t")


def test_a_record_disagreeing_with_its_own_plan_is_refused(small) -> None:
    record = meta(released(small))
    for key, value in (("rho", "1"), ("neighbours", "add_remove"), ("max_rows_per_unit", "2")):
        with pytest.raises(InputError, match="edited"):
            eb.from_record({**record, key: value}, "t")
    with pytest.raises(InputError, match="no provenance"):
        eb.from_record({}, "t")
    with pytest.raises(InputError, match="lacks the public plan"):
        eb.from_record({**record, "plan": ""}, "t")


# --------------------------------------------------------------------------- intervals


def test_intervals_of_a_release_from_python_and_sql_agree(small) -> None:
    table = released(small)
    rid = int(meta(table)["ledger_id"])
    small.register("arrow", table)
    small.execute("CREATE TABLE r AS SELECT * FROM arrow")
    for level in (1, "b", 3):
        arrow = inftda_duckdb.intervals(small, table, level=level, beta=0.1)
        by_id = inftda_duckdb.intervals(small, "r", level=level, beta=0.1, release=rid)
        sql = small.sql(f"SELECT * FROM inftda_intervals('r', level := {level!r}, beta := 0.1, "
                        f"release := {rid})").to_arrow_table()
        assert arrow.to_pylist() == by_id.to_pylist() == sql.to_pylist()
        k = eb.level_of(level, COLUMNS)
        assert arrow.column_names == [*COLUMNS[:k], "count", "lower", "upper"]
        info = meta(arrow)
        bound = joint_bounds([3, 12, 60], plan_budget(3, rho=Fraction(1, 2)), 0.1, k)[k]
        assert float(info["bound"]) == pytest.approx(bound)
        half = math.floor(bound)
        assert int(info["half_width"]) == half and info["absent_interval"] == f"[0, {half}]"
        for row in arrow.to_pylist():
            assert row["lower"] == max(0, row["count"] - half) <= row["count"]
            assert row["upper"] == row["count"] + half
        assert "all at once" in info["guarantee"]
        # the counts are the release's own: its k-prefix sums
        sums = small.execute(f"SELECT {', '.join(COLUMNS[:k])}, sum(count) FROM r GROUP BY ALL "
                             "ORDER BY ALL").fetchall()
        assert [tuple(r.values())[:k + 1] for r in arrow.to_pylist()] == sums


def test_intervals_of_a_least_squares_release_carry_its_rounding_term(small) -> None:
    """The plan records the estimator and the intervals use its bound: Theorem 1 plus
    k (1 + 2 eta) at level k (docs/explanation/least-squares.md), wider than InfTDA's."""
    plan = plan_budget(3, rho=Fraction(1, 2))
    for estimator in ("inftda", "least_squares"):
        table = released(small, estimator=estimator)
        assert json.loads(meta(table)["plan"])["estimator"] == estimator
        for k in (1, 3):
            info = meta(inftda_duckdb.intervals(small, table, level=k, beta=0.1))
            want = error_bound(None, nodes=[3, 12, 60], plan=plan, beta=0.1,
                               estimator=estimator)[k - 1]
            assert float(info["bound"]) == pytest.approx(want)
            plain = joint_bounds([3, 12, 60], plan, 0.1, k)[k]
            assert (want > plain + k) if estimator == "least_squares" else want == plain


def test_joint_intervals_use_the_one_event_of_levels_1_to_k(small) -> None:
    table = released(small)
    one = inftda_duckdb.intervals(small, table, level=1, beta=0.05)
    joint = inftda_duckdb.intervals(small, table, level=1, beta=0.05, joint=3)
    b = joint_bounds([3, 12, 60], plan_budget(3, rho=Fraction(1, 2)), 0.05, 3)
    assert float(meta(joint)["bound"]) == pytest.approx(b[1])
    assert int(meta(joint)["half_width"]) >= int(meta(one)["half_width"])
    with pytest.raises(InputError, match="at least the level"):
        inftda_duckdb.intervals(small, table, level=2, joint=1)


def test_intervals_keep_the_columns_types(con) -> None:
    con.execute("CREATE TYPE colour AS ENUM ('red', 'green')")
    con.execute("CREATE TABLE t AS SELECT (CASE WHEN i % 2 = 0 THEN 'red' ELSE 'green' END)"
                "::colour AS a, (i % 3)::TINYINT AS b FROM range(100) r(i)")
    con.execute("CREATE TABLE r AS SELECT * FROM inftda_release('t', ['a', 'b'], rho := 1, "
                "domains := {'b': range(3)}, seed := 1)")
    sql = con.sql("SELECT * FROM inftda_intervals('r', level := 2, release := 1)")
    assert [str(t) for t in sql.types[:2]] == ["ENUM('red', 'green')", "TINYINT"]
    table = inftda_duckdb.release(con, "t", ["a", "b"], rho=1, domains={"b": range(3)}, seed=2)
    arrow = inftda_duckdb.intervals(con, table, level=2)
    assert arrow.schema.field("a").type == table.schema.field("a").type
    assert arrow.schema.field("b").type == table.schema.field("b").type


def test_a_rows_release_counts_its_rows(small) -> None:
    table = released(small, output="rows")
    counts = released(small, output="counts")  # same seed: the same release
    assert (inftda_duckdb.intervals(small, table, level=2).to_pylist()
            == inftda_duckdb.intervals(small, counts, level=2).to_pylist())


def test_a_table_made_from_sql_is_found_by_its_ledger_id(small) -> None:
    small.execute("CREATE TABLE r AS SELECT * FROM inftda_release('t', ['a', 'b', 'c'], "
                  "rho := 0.5, domains := {'a': range(3), 'b': range(4), 'c': range(5)}, "
                  "seed := 1)")
    with pytest.raises(duckdb.Error, match=r"no provenance.*release := 1.*releases over these "
                       r"columns.*1 \(memory.main.t, rho 1/2\)"):
        small.sql("SELECT * FROM inftda_intervals('r', level := 1)").fetchall()
    rows = small.sql("SELECT * FROM inftda_intervals('r', level := 1, release := 1)").fetchall()
    assert [r[0] for r in rows] == [0, 1, 2]
    with pytest.raises(duckdb.Error, match="is no release"):
        small.sql("SELECT * FROM inftda_intervals('r', level := 1, release := 9)").fetchall()
    small.execute("CREATE TABLE other AS SELECT a, b, count FROM r")
    with pytest.raises(duckdb.Error, match="lacks the release's column"):
        small.sql("SELECT * FROM inftda_intervals('other', level := 1, release := 1)"
                  ).fetchall()


def test_a_table_that_is_not_a_release_gets_an_error(small) -> None:
    with pytest.raises(InputError, match="no provenance"):
        inftda_duckdb.intervals(small, "t", level=1)
    with pytest.raises(InputError, match="was not found"):
        inftda_duckdb.intervals(small, "nowhere", level=1)
    with pytest.raises(InputError, match="no provenance"):
        inftda_duckdb.intervals(small, pa.table({"a": [1], "count": [3]}), level=1)
    small.execute("COMMENT ON TABLE t IS 'Differentially private release (inftda-duckdb): "
                  "private=true; rho=1/2'")
    with pytest.raises(InputError, match="no provenance"):
        inftda_duckdb.intervals(small, "t", level=1)


def test_a_commented_table_is_checked_against_its_ledger_row(small) -> None:
    table = released(small)
    record = meta(table)
    small.register("arrow", table)
    small.execute("CREATE TABLE r AS SELECT * FROM arrow")
    small.execute(f"COMMENT ON TABLE r IS '{comment(record)}'")
    assert inftda_duckdb.intervals(small, "r", level=1).num_rows == 3
    # the comment edited consistently (rho and every level's budget and variance): the ledger
    # row still says rho 1/2
    plan = json.loads(record["plan"])
    plan.update(rho="1", level_rho=["1/3"] * 3, level_sigma2=["3"] * 3)
    forged = {**record, "rho": "1", "plan": json.dumps(plan, separators=(",", ":"))}
    small.execute(f"COMMENT ON TABLE r IS '{comment(forged)}'")
    with pytest.raises(InputError, match="disagrees with its ledger row"):
        inftda_duckdb.intervals(small, "r", level=1)
    released(small, seed=2)  # ledger entry 2: another release
    with pytest.raises(InputError, match="not of release 2"):
        inftda_duckdb.intervals(small, "r", level=1, release=2)


def test_a_plan_edited_in_the_ledger_is_refused(small) -> None:
    small.execute("CREATE TABLE r AS SELECT * FROM inftda_release('t', ['a', 'b', 'c'], "
                  "rho := 0.5, domains := {'a': range(3), 'b': range(4), 'c': range(5)}, "
                  "seed := 1)")
    small.execute("UPDATE inftda_plans SET plan = replace(plan, '\"6\"', '\"5\"')")
    with pytest.raises(LedgerError, match="does not belong"):
        inftda_duckdb.intervals(small, "r", level=1, release=1)


def test_released_files_carry_their_plan(small, tmp_path: Path) -> None:
    from inftda_duckdb.tools.output import write_release

    table = released(small)
    want = inftda_duckdb.intervals(small, table, level=2).to_pylist()
    for name in ("r.parquet", "r.csv"):
        path = str(tmp_path / name)
        write_release(small, table, path, name.split(".")[1], meta(table))
        assert inftda_duckdb.intervals(small, path, level=2).to_pylist() == want
    (tmp_path / "r.csv.provenance.json").unlink()
    with pytest.raises(InputError, match="no provenance"):
        inftda_duckdb.intervals(small, str(tmp_path / "r.csv"), level=2)


def test_bad_arguments_are_refused_by_name(small) -> None:
    table = released(small)
    for kwargs, says in (({"level": 4}, "not a level"), ({"level": "zz"}, "not a level"),
                         ({}, "level is required"), ({"level": 1, "beta": 1.5}, "beta"),
                         ({"level": 1, "beta": 0}, "beta"), ({"level": 1, "release": -1},
                                                             "ledger id")):
        with pytest.raises(InputError, match=says):
            inftda_duckdb.intervals(small, table, **kwargs)


# --------------------------------------------------------------------------------- sums


def sql_sum(con, cells: str, level: int, per: int = 0, rid: int = 1) -> list[tuple]:
    return con.sql(f"SELECT * FROM inftda_sum('r', '{cells}', level := {level}, per := {per}, "
                   f"release := {rid})").fetchall()


@pytest.fixture
def made(small):
    small.execute("CREATE TABLE r AS SELECT * FROM inftda_release('t', ['a', 'b', 'c'], "
                  "rho := 0.5, domains := {'a': range(3), 'b': range(4), 'c': range(5)}, "
                  "seed := 1)")
    plan = plan_budget(3, rho=Fraction(1, 2))
    return small, {k: joint_bounds([3, 12, 60], plan, 0.05, k) for k in (1, 2, 3)}


def test_a_sum_over_whole_subtrees_inherits_their_ancestors_bound(made) -> None:
    con, b = made
    con.execute("CREATE VIEW s AS SELECT a, b, c FROM range(4) x(b), range(5) y(c), "
                "(SELECT 1 AS a)")
    cells, count, bound, low, up = sql_sum(con, "s", 3)[0]
    assert cells == 20 and bound == pytest.approx(b[3][1])  # a = 1's own bound, on 1..3
    truth_sum = con.execute("SELECT sum(count) FROM r WHERE a = 1").fetchall()[0][0]
    assert count == truth_sum and (low, up) == (count - math.floor(bound), count +
                                                math.floor(bound))


def test_a_sum_of_all_children_but_one_uses_the_parent_and_the_one_left_out(made) -> None:
    con, b = made
    con.execute("CREATE VIEW s AS SELECT a, b FROM range(3) x(a), range(4) y(b) WHERE b <> 2")
    rows = sql_sum(con, "s", 2, per=1)
    assert [r[0] for r in rows] == [0, 1, 2]
    for _, cells, _, bound, _, _ in rows:  # min(3 B_2, B_1 + 1 B_2) = B_1 + B_2
        assert cells == 3 and bound == pytest.approx(min(3 * b[2][2], b[2][1] + b[2][2]))
    total = sql_sum(con, "s", 2)[0]  # over the three parents: min(sum, 0 + complement)
    assert total[2] == pytest.approx(min(3 * (b[2][1] + b[2][2]), 3 * b[2][2]))


def test_scattered_cells_and_absent_ones_sum_their_bounds(made) -> None:
    con, b = made
    con.execute("CREATE VIEW s AS SELECT * FROM (VALUES (0, 0, 0), (2, 3, 4), (1, 1, 9)) "
                "v(a, b, c)")
    cells, count, bound, _, _ = sql_sum(con, "s", 3)[0]
    assert cells == 3 and bound == pytest.approx(3 * b[3][3])  # (1, 1, 9): outside, counted
    con.execute("CREATE VIEW one AS SELECT 2 AS a, 3 AS b, 4 AS c")
    *_, cells, count, bound, low, up = sql_sum(con, "one", 3, per=3)[0]
    assert cells == 1 and bound == pytest.approx(b[3][3])
    assert (low, up) == (max(0, count - math.floor(bound)), count + math.floor(bound))


def test_a_value_outside_the_domain_never_shrinks_the_complement(made) -> None:
    """Five cells listed under (0, 0), four of them outside the domain (c = 7..10): they must
    not count as covering the parent's children, or the bound would be the parent's alone.
    Only children the release has are known to be in the domain."""
    con, b = made
    con.execute("CREATE VIEW s AS SELECT 0 AS a, 0 AS b, c FROM (VALUES (0), (7), (8), (9), "
                "(10)) v(c)")
    known = con.execute("SELECT count(*) FROM r WHERE a = 0 AND b = 0 AND c = 0").fetchall()
    bound = sql_sum(con, "s", 3, per=2)[0][4]
    want = min(5 * b[3][3], b[3][2] + (5 - known[0][0]) * b[3][3])
    assert bound == pytest.approx(want) and bound > b[3][2]


def test_sum_arguments_are_checked(made) -> None:
    con, _ = made
    con.execute("CREATE VIEW s AS SELECT 0 AS a")
    with pytest.raises(duckdb.Error, match="per"):
        con.sql("SELECT * FROM inftda_sum('r', 's', level := 1, per := 2, release := 1)"
                ).fetchall()
    with pytest.raises(duckdb.Error, match="level is required"):
        con.sql("SELECT * FROM inftda_sum('r', 's', release := 1)").fetchall()


def test_bounds_table_lists_every_level(made) -> None:
    con, b = made
    rows = con.sql("SELECT level, bound, half_width, joint_bound FROM inftda_bounds('r', "
                   "release := 1)").fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]
    for level, bound, half, joint in rows:
        assert bound == pytest.approx(b[level][level]) and half == math.floor(bound)
        assert joint == pytest.approx(b[3][level])


# --------------------------------------------------------------------------------- plans


def test_the_planned_rho_is_the_least_to_a_hundredth_of_a_percent() -> None:
    cells = [3, 12, 60]
    for weights in (None, "auto"):
        for neighbours in ("substitute", "add_remove"):
            planned = plan_target(cells, {3: 30.0}, 0.05, neighbours=neighbours,
                                  level_weights=weights)
            split = planned.level_weights
            at = plan_budget(3, rho=planned.rho, level_weights=split, neighbours=neighbours,
                             noised_root=neighbours == "add_remove")
            assert joint_bounds(cells, at, 0.05, 3)[3] <= 30.0
            less = plan_budget(3, rho=planned.rho * Fraction(9999, 10000), level_weights=split,
                               neighbours=neighbours, noised_root=neighbours == "add_remove")
            assert joint_bounds(cells, less, 0.05, 3)[3] > 30.0
    both = plan_target(cells, {3: 30.0}, 0.05)
    assert set(both.candidates) == {"uniform", "auto (leaves)"}
    assert both.rho == min(v for v in both.candidates.values() if v is not None)


def test_plan_from_python_and_sql_agree_and_spend_nothing(small, charges) -> None:
    got = inftda_duckdb.plan(small, "t", COLUMNS, max_error=20, level=2, domains=DOMAINS)
    rows = small.sql("SELECT * FROM inftda_plan('t', ['a', 'b', 'c'], max_error := 20, "
                     "level := 2, domains := {'a': range(3), 'b': range(4), 'c': range(5)})"
                     ).to_arrow_table()
    assert rows.to_pylist() == got["rows"].to_pylist()
    assert got["bounds"][2] <= 20 and got["max_error"] == {2: 20.0}
    assert sum(got["level_weights"]) == got["rho"]
    assert charges() == 0
    table = inftda_duckdb.release(small, "t", COLUMNS, domains=DOMAINS, seed=1,
                                  **got["release_options"])
    assert float(meta(inftda_duckdb.intervals(small, table, level=2))["bound"]) == \
        pytest.approx(got["bounds"][2])


def test_a_plan_for_least_squares_meets_its_own_bound(small, charges) -> None:
    """The plan knows the estimator's bound (Theorem 1 plus the rounding term): the planned rho,
    released with the release options it returns, gives intervals within the target; an
    InfTDA plan's rho is too small for it; a target below the rounding term is refused."""
    got = inftda_duckdb.plan(small, "t", COLUMNS, max_error=20, level=3, domains=DOMAINS,
                             estimator="least_squares")
    plain = inftda_duckdb.plan(small, "t", COLUMNS, max_error=20, level=3, domains=DOMAINS)
    assert got["rho"] > plain["rho"] and got["release_options"]["estimator"] == "least_squares"
    assert "estimator" not in plain["release_options"]
    table = inftda_duckdb.release(small, "t", COLUMNS, domains=DOMAINS, seed=1,
                                  **got["release_options"])
    bound = float(meta(inftda_duckdb.intervals(small, table, level=3))["bound"])
    assert bound == pytest.approx(got["bounds"][3]) and bound <= 20
    sql = small.sql("SELECT DISTINCT estimator FROM inftda_plan('t', ['a', 'b', 'c'], "
                    "max_error := 20, level := 3, estimator := 'least_squares', domains := "
                    "{'a': range(3), 'b': range(4), 'c': range(5)})").fetchall()
    assert sql == [("least_squares",)]
    with pytest.raises(InputError, match="rounding term"):
        inftda_duckdb.plan(small, "t", COLUMNS, max_error=3, level=3, domains=DOMAINS,
                           estimator="least_squares")
    assert charges() == 1  # the one release above


def test_a_target_per_level(small) -> None:
    got = inftda_duckdb.plan(small, "t", COLUMNS, max_error=[10, None, 40], domains=DOMAINS)
    assert got["bounds"][1] <= 10 and got["bounds"][3] <= 40
    assert got["max_error"] == {1: 10.0, 3: 40.0}


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"max_error": 0}, "positive"),
    ({"max_error": -3}, "positive"),
    ({"max_error": "abc"}, "positive"),
    ({"max_error": 10, "beta": 1}, "beta"),
    ({"max_error": 10, "beta": 0}, "beta"),
    ({"max_error": 10, "level": 7}, "not a level"),
    ({"max_error": 10, "level": "zz"}, "not a level"),
    ({}, "max_error is required"),
    ({"max_error": [1, 2]}, "must list 3"),
    ({"max_error": [1, 2, 3], "level": 1}, "goes with one"),
    ({"max_error": 1e12}, "is met by any release"),
])
def test_a_malformed_or_impossible_target_is_refused(small, kwargs, says) -> None:
    with pytest.raises(InputError, match=says):
        inftda_duckdb.plan(small, "t", COLUMNS, domains=DOMAINS, **kwargs)


def test_targets_of_names_levels_by_column() -> None:
    assert targets_of(5, "b", COLUMNS) == {2: 5.0}
    assert targets_of("5/2", None, COLUMNS) == {3: 2.5}


def test_plan_follows_the_public_facing_mode(con) -> None:
    con.execute("CREATE TYPE k AS ENUM ('x', 'y')")
    con.execute("CREATE TABLE t AS SELECT 'x'::k AS a, 1 AS b")
    inftda_duckdb.load(con, mode="public")
    with pytest.raises(InputError, match="public-facing"):
        inftda_duckdb.plan(con, "t", ["a", "b"], max_error=5, domains={"b": range(3)})
    got = inftda_duckdb.plan(con, "t", ["a", "b"], max_error=5,
                             domains={"a": ["x", "y"], "b": range(3)})
    assert got["level_weights"][0] is not None and len(got["level_weights"]) == 3  # root first


# ---------------------------------------------------------------------------- command line


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def test_the_command_line_prints_intervals_and_plans(tmp_path: Path) -> None:
    db = str(tmp_path / "t.duckdb")
    with duckdb.connect(db) as con:
        con.execute("CREATE TABLE t AS SELECT (i % 3)::INTEGER AS a, (i % 4)::INTEGER AS b "
                    "FROM range(300) r(i)")
    done = cli("release", "--db", db, "--table", "t", "--columns", "a,b", "--rho", "1",
               "--domain", "a=0..2", "--domain", "b=0..3", "--into-table", "r", "--quiet",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = cli("intervals", "r", "--db", db, "--level", "a", "--format", "csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "a,count,lower,upper" and len(lines) == 4
    with duckdb.connect(db) as con:
        inftda_duckdb.load(con)
        want = con.sql("SELECT * FROM inftda_intervals('r', level := 1)").fetchall()
    assert [tuple(int(x) for x in line.split(",")) for line in lines[1:]] == want
    done = cli("intervals", "r", "--db", db, "--bounds", "--format", "csv", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("level,column,cells")
    done = cli("plan", "--db", db, "--table", "t", "--columns", "a,b", "--domain", "a=0..2",
               "--domain", "b=0..3", "--max-error", "20", "--level", "1", "--format", "json",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows[0]["max_error"] == 20 and rows[0]["bound"] <= 20
    done = cli("plan", "--db", db, "--table", "t", "--columns", "a,b", "--domain", "a=0..2",
               "--domain", "b=0..3", "--max-error", "0", cwd=tmp_path)
    assert done.returncode == 2 and "--max-error" in done.stderr
    done = cli("intervals", "t", "--db", db, "--level", "1", cwd=tmp_path)
    assert done.returncode == 2 and "--release" in done.stderr


def test_cells_can_be_listed_as_values(made) -> None:
    con, b = made
    rows = con.sql("SELECT cells, bound FROM inftda_sum('r', cells := [[0, 0, 0], [2, 3, 4]], "
                   "level := 3, release := 1)").fetchall()
    assert rows[0][0] == 2 and rows[0][1] == pytest.approx(2 * b[3][3])
    structs = con.sql("SELECT cells FROM inftda_sum('r', [{'a': 1, 'b': 2}], level := 2, "
                      "release := 1)").fetchall()
    assert structs == [(1,)]
    with pytest.raises(duckdb.Error, match="must hold 2 values"):
        con.sql("SELECT * FROM inftda_sum('r', [[1]], level := 2, release := 1)").fetchall()


def test_the_public_facing_mode_reads_only_tables_declared_public(made, tmp_path: Path) -> None:
    """An analyst who can only call the functions must not read a private table through them:
    a 'rows' release's id with the private source itself would give its exact counts."""
    con, _ = made
    rows = inftda_duckdb.release(con, "t", COLUMNS, rho=0.5, domains=DOMAINS, seed=3,
                                 output="rows")
    rid = int(meta(rows)["ledger_id"])
    from inftda_duckdb.duckdb import disclosure

    path = str(tmp_path / "t.parquet")
    con.execute(f"COPY t TO '{path}'")
    inftda_duckdb.load(con, mode="public")
    with pytest.raises(duckdb.Error, match="not declared public"):
        con.sql(f"SELECT * FROM inftda_intervals('t', level := 3, release := {rid})").fetchall()
    with pytest.raises(duckdb.Error, match="not declared public"):
        con.sql("SELECT * FROM inftda_intervals('r', level := 1, release := 1)").fetchall()
    with pytest.raises(duckdb.Error, match="file by its path"):
        con.sql(f"SELECT * FROM inftda_intervals('{path}', level := 1, release := {rid})"
                ).fetchall()
    disclosure.declare_public_table(con, "r")
    assert len(con.sql("SELECT * FROM inftda_intervals('r', level := 1, release := 1)"
                       ).fetchall()) == 3
    with pytest.raises(duckdb.Error, match="not declared public"):
        con.sql("SELECT * FROM inftda_sum('r', 't', level := 3, release := 1)").fetchall()
    assert con.sql("SELECT cells FROM inftda_sum('r', [[0, 0, 0]], level := 3, release := 1)"
                   ).fetchall() == [(1,)]
