"""The levels UDF inside DuckDB: the same seeded release for any number of threads, any block
size and any split into parts; a release in parts under a small memory_limit."""

from __future__ import annotations

import re
import subprocess
import sys

import duckdb
import numpy as np
import pytest
from test_release import levels_only  # (tests/duckdb: one hook for the levels' reports)

from inftda_duckdb.core import memory, topdown
from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.checks import load_checks
from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import LevelProgress, release_tree
from inftda_duckdb.duckdb import allocator, api, arrow_io, sqlgen, statements, udfs
from inftda_duckdb.duckdb.extension import load, release
from inftda_duckdb.duckdb.registry import RELEASES

pytestmark = pytest.mark.filterwarnings("ignore:this release used seed:UserWarning")

DOMS = "{'a': range(30), 'b': range(20), 'c': range(12)}"
SIZES = [30, 20, 12]


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TABLE t AS SELECT (hash(i, 1) % 30)::INTEGER AS a, "
              "(hash(i, 2) % 20)::INTEGER AS b, (hash(i, 3) % 12)::INTEGER AS c "
              "FROM range(60000) r(i)")
    yield c
    c.close()


def query(seed: int = 3) -> str:
    # (a seeded release carries the column inftda_not_private: left out)
    return (f"SELECT a, b, c, count FROM inftda_release('t', ['a', 'b', 'c'], rho := 1, "
            f"domains := {DOMS}, seed := {seed}) ORDER BY ALL")


def reference(con: duckdb.DuckDBPyConnection, seed: int = 3) -> list[tuple[int, ...]]:
    leaves = con.execute("SELECT a, b, c, count(*) AS n FROM t GROUP BY ALL").fetchnumpy()
    codes, counts = release_tree(np.column_stack([leaves["a"], leaves["b"], leaves["c"]]),
                                 leaves["n"], SIZES, plan_budget(3, rho=1),
                                 RandomSource.from_seed(seed))
    return [(*r, n) for r, n in zip(codes.tolist(), counts.tolist(), strict=True)]


def test_same_release_for_any_number_of_threads_and_block_size(con, monkeypatch):
    # the levels UDF runs its blocks on DuckDB's `threads` workers; neither the number of
    # workers nor the block size changes a seeded release, which equals release_tree
    want = reference(con)
    seen_workers = []
    original = udfs.release_below

    def spy(*args, **kwargs):
        seen_workers.append(kwargs["workers"])
        return original(*args, **kwargs)

    monkeypatch.setattr(udfs, "release_below", spy)
    for threads, block in ((1, 1 << 16), (2, 100), (7, 13)):
        con.execute(f"SET threads = {threads}")
        monkeypatch.setattr(topdown.level, "BLOCK_CELLS", block)
        assert con.execute(query()).fetchall() == want
        assert seen_workers[-1] == threads
    assert con.execute(query(4)).fetchall() != want


def test_the_levels_call_sorts_the_leaves_in_its_own_arrow_input(con, monkeypatch):
    # DuckDB exports the levels call's leaves into fresh Arrow buffers that it never reads
    # back: the core sorts them there (overwrite=True), and the list, the CTE and the table
    # they came from keep their values (a write through the same view in a UDF of our own)
    seen = []
    original = udfs.release_below

    def spy(levels, nodes, truth, counts, **kwargs):
        seen.append((truth.flags.writeable, kwargs["overwrite"]))
        return original(levels, nodes, truth, counts, **kwargs)

    monkeypatch.setattr(udfs, "release_below", spy)
    assert con.execute(query()).fetchall() == reference(con)
    assert seen == [(True, True)]

    def scribble(leaves):
        arrow_io.own_pairs(leaves)[:] = -7
        return memory.arrow(np.zeros(len(leaves), np.int64))

    con.create_function("scribble", scribble, ["STRUCT(key BIGINT[])"], "BIGINT",
                        type="arrow", side_effects=True)
    con.execute("CREATE TABLE lists AS SELECT [i, i + 1]::BIGINT[] AS l FROM range(5000) r(i)")
    got = con.execute("WITH l AS MATERIALIZED (SELECT list(i) AS l FROM range(100000) r(i)) "
                      "SELECT scribble({'key': l}), list_sum(l), l[7] FROM l").fetchall()
    assert got == [(0, 4999950000, 6)]
    got = con.execute("SELECT sum(scribble({'key': l})), sum(list_sum(l)) FROM lists")
    assert got.fetchall() == [(0, 25000000)]
    assert con.execute("SELECT sum(list_sum(l)), min(l[1]) FROM lists").fetchall() == [
        (25000000, 0)]


@pytest.mark.parametrize("batched", [False, True], ids=["one_group_by", "batched"])
def test_release_in_parts_equals_one_call(con, monkeypatch, batched):
    # under a memory_limit too small for one list of every leaf (the public worst case), the
    # statement releases the levels above a cut once and the rest in parts; tiny parts (some
    # without any leaf) and several UDF calls: the same seeded release, every part once.
    # `batched`: the parts' lists built a batch at a time (a recursive CTE: DuckDB 1.5, which
    # cannot spill list() states), either shape on any DuckDB
    monkeypatch.setattr(sqlgen, "LISTS_SPILL", not batched)
    want = reference(con)
    domains = {"a": range(30), "b": range(20), "c": range(12)}
    _, plan, _ = api.prepare(con, "t", ["a", "b", "c"], {"rho": 1, "domains": domains})
    assert sqlgen._grouping(plan, 3, None) is None
    assert sqlgen._grouping(plan, 3, 1 << 30) is None  # fits: one call
    assert sqlgen._grouping(plan, 3, 1 << 10) == (2, 1, 600)  # 600 cut prefixes, one per part
    monkeypatch.setattr(sqlgen, "PARTS", 37)
    assert sqlgen._grouping(plan, 3, 1 << 10) == (2, 16, 38)
    sizes = plan.key_sizes(3)
    assert sqlgen._batches(sizes, 1 << 10, 38) == (19, 2)  # <= 32 batches of whole parts
    assert sqlgen._batches(sizes, 1 << 10, 600) == (32, 19)
    assert sqlgen._batches(sizes, 7200 * 16 * 8 // 5, 600) == (5, 120)  # the leaves / (limit / 8)
    monkeypatch.setattr(allocator, "memory_limit", lambda _: 1 << 10)
    request, plan, udf_names = api.prepare(con, "t", ["a", "b", "c"],
                                           {"rho": 1, "domains": domains})
    rendered, _ = statements.rendered(request, plan, udf_names, "python", None, None, 1 << 10)
    assert rendered.startswith("WITH RECURSIVE") == batched
    calls: list[list[int]] = []
    original = udfs.release_parts

    def spy(rids, part_ids, leaves, workers):
        calls.append(part_ids)
        return original(rids, part_ids, leaves, workers)

    monkeypatch.setattr(udfs, "release_parts", spy)
    live = RELEASES.ids()
    for parts in (37, 7):
        monkeypatch.setattr(sqlgen, "PARTS", parts)
        calls.clear()
        assert con.execute(query()).fetchall() == want
        done = sorted(p for c in calls for p in c)
        assert done == list(range(len(done))) and len(done) > 1  # every part exactly once
        assert RELEASES.ids() <= live  # the last part dropped the release state
    seen: list[LevelProgress] = []
    out = release(con, "t", ["a", "b", "c"], rho=1, domains=domains, seed=3,
                  progress=levels_only(seen))
    assert sorted(tuple(r.values()) for r in out.drop_columns(["inftda_not_private"]).to_pylist()
                  ) == want
    assert [p.level for p in seen] == [1, 2, 3]  # once per level, all cells done
    assert all(p.cells_done == p.cells_planned for p in seen)
    assert seen[2].cells_planned == 12 * seen[2].parents


def test_a_part_cannot_be_released_twice(con, monkeypatch):
    monkeypatch.setattr(allocator, "memory_limit", lambda _: 1 << 10)
    monkeypatch.setattr(sqlgen, "PARTS", 5)
    original = udfs.release_parts

    def twice(rids, part_ids, leaves, workers):  # the first part, then all of them
        original(rids[:1], part_ids[:1], leaves.slice(0, 1), workers)
        return original(rids, part_ids, leaves, workers)

    monkeypatch.setattr(udfs, "release_parts", twice)
    # refused; when DuckDB runs the part rows on two threads, the other thread may report first
    # that the refused release is gone (its state is dropped with the refusal): both refuse
    with pytest.raises(duckdb.Error, match=r"came twice, too late or unknown|unknown or expired "
                       r"release id"):
        con.execute(query()).fetchall()
    with pytest.raises(InputError, match="unknown or expired release id"):  # by hand
        udfs.live("nope")


def test_enum_leaves_counted_under_one_key_give_the_same_release():
    # every column an ENUM: the leaves are counted under one BIGINT key (NULLs in a key of
    # their own) and sent as (key << b) | n (b the bits of the rows kept); the same release,
    # NULL counts and refusals as the same data in VARCHAR columns with the ENUM's labels as
    # declared domains
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TYPE e1 AS ENUM ('x', 'y', 'z'); CREATE TYPE e2 AS ENUM ('p', 'q')")
    c.execute("CREATE TABLE e AS SELECT CASE WHEN i % 7 = 0 THEN NULL ELSE "
              "['x', 'y', 'z'][1 + i % 3] END::e1 AS a, CASE WHEN i % 11 = 0 THEN NULL ELSE "
              "['p', 'q'][1 + i % 2] END::e2 AS b, ['x', 'z'][1 + i % 2]::e1 AS c "
              "FROM range(5000) r(i)")
    c.execute("CREATE TABLE v AS SELECT a::VARCHAR AS a, b::VARCHAR AS b, c::VARCHAR AS c FROM e")
    doms = "{'a': ['x', 'y', 'z'], 'b': ['p', 'q'], 'c': ['x', 'y', 'z']}"
    request, plan, udf_names = api.prepare(c, "e", ["a", "b", "c"], {"rho": 1})
    assert "AS kz" in sqlgen.render_release(request, plan, udf_names, "python")
    for table, extra in (("e", ""), ("v", f", domains := {doms}")):
        with pytest.raises(duckdb.Error, match=r"column 'a' of \w+ is NULL in 715 rows"):
            c.execute(f"SELECT * FROM inftda_release('{table}', ['a', 'b', 'c'], rho := 1{extra})")
    got = [c.execute(f"SELECT a::VARCHAR, b::VARCHAR, c::VARCHAR, count FROM inftda_release("
                     f"'{table}', ['a', 'b', 'c'], rho := 1, seed := 5, unknown := 'drop', "
                     f"neighbours := 'add_remove'{extra}) ORDER BY ALL").fetchall()
           for table, extra in (("e", ""), ("v", f", domains := {doms}"))]
    assert got[0] == got[1] and sum(r[-1] for r in got[0]) > 3000
    c.close()


def test_enum_leaves_under_one_key_count_every_columns_nulls():
    # the keyed leaves keep a leaf with a NULL under -1 - the mask of its NULL columns; the
    # check row counts each column's NULLs from the rows of each mask: the same counts as the
    # VARCHAR columns' filtered sums, NULLs of several columns in one row included
    c = duckdb.connect()
    load(c)
    c.execute("CREATE TYPE e1 AS ENUM ('x', 'y', 'z'); CREATE TYPE e2 AS ENUM ('p', 'q')")
    c.execute("CREATE TABLE e AS SELECT CASE WHEN i % 7 = 0 THEN NULL ELSE "
              "['x', 'y', 'z'][1 + i % 3] END::e1 AS a, CASE WHEN i % 11 = 0 THEN NULL ELSE "
              "['p', 'q'][1 + i % 2] END::e2 AS b, ['x', 'z'][1 + i % 2]::e1 AS c, "
              "CASE WHEN i % 5 = 0 THEN NULL ELSE 'q' END::e2 AS d FROM range(5000) r(i)")
    c.execute("CREATE TABLE v AS SELECT a::VARCHAR AS a, b::VARCHAR AS b, c::VARCHAR AS c, "
              "d::VARCHAR AS d FROM e")
    want = [715, 455, 0, 1000]
    assert list(c.execute("SELECT count(*) FILTER (a IS NULL), count(*) FILTER (b IS NULL), "
                          "count(*) FILTER (c IS NULL), count(*) FILTER (d IS NULL) "
                          "FROM e").fetchall()[0]) == want
    doms = {"a": ["x", "y", "z"], "b": ["p", "q"], "c": ["x", "y", "z"], "d": ["p", "q"]}
    for table, options in (("e", {}), ("v", {"domains": doms})):
        request, plan, udf_names = api.prepare(c, table, list("abcd"), {"rho": 1, **options})
        sql = sqlgen.render_release(request, plan, udf_names, "python")
        assert ("AS kz" in sql) == (table == "e")
        checks = re.sub(r",\s*(--[^\n]*\n\s*)*inftda_b AS.*", "\nSELECT j FROM checks", sql,
                        flags=re.S)
        row = load_checks(c.execute(checks).fetchall()[0][0])
        assert [col["nulls"] for col in row["columns"]] == want, table
        assert (row["n"], row["kept"]) == (5000, 5000 - 715 - 455 - 1000 + 65 + 143 + 91 - 13)
    c.close()


def test_memory_limit_is_read_in_bytes(con):
    con.execute("SET memory_limit = '100MB'")
    assert allocator.memory_limit(con) == int(95.3 * 2**20)
    con.execute("SET memory_limit = '2GB'")
    assert allocator.memory_limit(con) == int(1.8 * 2**30) or allocator.memory_limit(con) > 1e9


def test_the_release_macro_passes_memory_limit_without_a_query(con, monkeypatch):
    # the macro reads current_setting('memory_limit') in the caller's statement: the bind-time
    # renderer parses that text (no query of its own); a small limit still splits the release
    # into parts, and the seeded release is the same
    want = reference(con)
    con.execute("SET memory_limit = '300MB'")
    original = allocator.memory_limit
    seen: list[object] = []
    monkeypatch.setattr(allocator, "memory_limit", lambda arg: seen.append(arg) or 1 << 10)
    parts: list[list[int]] = []
    split = udfs.release_parts
    monkeypatch.setattr(udfs, "release_parts",
                        lambda rids, ids, leaves, workers: parts.append(ids)
                        or split(rids, ids, leaves, workers))
    assert con.execute(query()).fetchall() == want
    assert len(seen) == 1 and isinstance(seen[0], str) and parts
    assert original(seen[0]) == original(con) > 250 * 2**20
    assert original("100.0 MiB") == 100 * 2**20 and original("unlimited") is None


ROWS = 6_000_000  # 3M until the leaves travelled as one list of pairs (then one list fit)


def _uniform(rows: int, limit: str) -> duckdb.DuckDBPyConnection:
    """``rows`` rows over 5 ENUM columns x 40 uniform values, under ``memory_limit``."""
    c = duckdb.connect()
    load(c)
    labels = ", ".join(f"'v{j}'" for j in range(40))
    c.execute(f"CREATE TYPE u AS ENUM ({labels})")
    cols = ", ".join(f"enum_range(NULL::u)[1 + floor(random() * 40)::INTEGER]::u AS c{k}"
                     for k in range(1, 6))
    c.execute("SELECT setseed(0.25)")
    c.execute(f"CREATE TABLE big AS SELECT {cols} FROM range({rows}) r(i)")
    c.execute(f"SET memory_limit = '{limit}'")
    return c


def test_release_succeeds_under_a_small_memory_limit_where_group_by_does():
    # issue 15 on DuckDB 1.5 (which cannot spill list() states), small: 1M rows over 5 x 40
    # under 50MB; the bare GROUP BY finishes, and the release did not (out of memory inside the
    # statement before the release began: one GROUP BY built every part's list at once) until
    # the parts' lists came in batches. On DuckDB 2.0 the one GROUP BY spills
    c = _uniform(1_000_000, "50MB")
    assert c.execute("SELECT count(*) FROM (SELECT c1, c2, c3, c4, c5, count(*) FROM big "
                     "GROUP BY ALL)").fetchall()[0][0] > 990_000
    n, total = c.execute("SELECT count(*), sum(count) FROM inftda_release('big', "
                         "['c1', 'c2', 'c3', 'c4', 'c5'], rho := 1)").fetchall()[0]
    assert total == 1_000_000 and n > 0
    c.close()


@pytest.mark.slow
def test_release_succeeds_under_a_memory_limit_where_group_by_does():
    # issue 15: under SET memory_limit = '100MB' the bare GROUP BY spills and finishes; the
    # release must too. 6M rows over 5 x 40 uniform (~5.8M leaves): one list of every leaf
    # runs out of memory (the negative control below), the release in parts does not
    c = _uniform(ROWS, "100MB")
    names = ["c1", "c2", "c3", "c4", "c5"]
    bare = c.execute("SELECT count(*) FROM (SELECT c1, c2, c3, c4, c5, count(*) FROM big "
                     "GROUP BY ALL)").fetchall()[0][0]
    assert bare > 0.85 * ROWS
    n, total = c.execute("SELECT count(*), sum(count) FROM inftda_release('big', "
                         f"{names}, rho := 1)").fetchall()[0]
    assert total == ROWS and n > 0
    request, plan, udf_names = api.prepare(c, "big", names, {"rho": 1})
    # as if no limit (minted like any rendered statement: a bare render is refused as hand-made)
    one_list, _ = statements.rendered(request, plan, udf_names, "python", None)
    with pytest.raises(duckdb.OutOfMemoryException):
        c.execute(f"SELECT count(*) FROM ({one_list})").fetchall()
    c.close()


@pytest.mark.parametrize("module", ["pandas", "pyarrow.compute"])
@pytest.mark.parametrize("parts", [False, True])
def test_a_release_never_imports_pandas_or_pyarrow_compute(parts, module):
    # pyarrow's pa.array() and Array.to_numpy() import pandas on first use (0.25-0.35 s of CPU),
    # and ListArray.flatten() imports pyarrow.compute (40-90 ms): every process's first release
    # paid them, though no DataFrame or compute kernel is needed (the levels call reads list
    # values through their offsets: memory.values). Fresh process; `parts`: the release in
    # parts (as under a tiny memory_limit) takes the other Arrow path.
    if module == "pandas":
        pytest.importorskip("pandas")  # else the check below could not fail
    code = f"""if True:
        import sys, duckdb
        c = duckdb.connect()
        c.create_function("f", lambda x: x, ["BIGINT"], "BIGINT", type="arrow")
        c.execute("SELECT f(?)", [1])  # DuckDB 1.5 imports pandas (which imports pyarrow.compute)
        if {module!r} in sys.modules:
            print('duckdb-imports-it'); sys.exit()
        import inftda_duckdb
        from inftda_duckdb.duckdb import allocator, udfs
        calls, inner = [], udfs.release_parts
        udfs.release_parts = lambda *a: calls.append(1) or inner(*a)
        if {parts}:
            allocator.memory_limit = lambda _: 1 << 10
        con = duckdb.connect(); inftda_duckdb.load(con)
        con.execute("CREATE TYPE e AS ENUM ('x', 'y', 'z')")
        con.execute("CREATE TABLE t AS SELECT (['x', 'y', 'z'])[1 + i % 3]::e AS a, "
                    "(i % 40)::INTEGER AS b FROM range(3000) r(i)")
        n = con.execute("SELECT count(*) FROM inftda_release('t', ['a', 'b'], rho := 1, "
                        "domains := {{'b': range(40)}})").fetchone()
        print(n[0] > 0, bool(calls), {module!r} in sys.modules)
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    if out.stdout.split() == ["duckdb-imports-it"]:
        pytest.skip(f"DuckDB {duckdb.__version__} imports {module} itself")
    assert out.stdout.split() == ["True", str(parts), "False"]


def test_importing_the_package_loads_neither_pandas_nor_pyarrow_compute():
    # every CLI call and fresh process pays the package's import: pyarrow.compute was ~0.15 s
    # of it, for one filter in inftda_releases(source)
    code = ("import sys, inftda_duckdb; "
            "print(*(m in sys.modules for m in ('pandas', 'pyarrow.compute', 'duckdb')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split() == ["False", "False", "True"]
