"""The ledger on a PostgreSQL server (``Ledger.open('postgresql://...')``): the same decisions,
chain and exact arithmetic as a ledger file, hand edits detected, writers from several processes
serialised (with a negative control), DuckDB, the CLI and a Spark-style charge drawing from one
server ledger, a real Spark release charged to it (also marked ``spark``), the README's
least-privilege roles and ``sslmode=verify-full``, and no password shown.

A throwaway server is started once per session (``initdb`` + ``pg_ctl`` in a temporary folder,
on a free port and a private socket; stopped at the end); without PostgreSQL's server binaries
or psycopg these tests are skipped, saying why.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest
import test_ledger
from spark.conftest import spark  # noqa: F401 (the Spark tests' local[2] session)

import inftda_duckdb
from inftda_duckdb import load, release, set_budget
from inftda_duckdb.core.errors import BudgetExceededError, LedgerError
from inftda_duckdb.duckdb import budgets
from inftda_duckdb.ledger import chain, dialect, store, verify
from inftda_duckdb.ledger.sources import SourceId
from inftda_duckdb.ledger.store import REQUIRE_BUDGET, Charge, Ledger

pytestmark = pytest.mark.postgres

PASSWORD = "pw-Zq81-not-for-eyes"  # the test server's password (TCP connections need it)
TRIPS, OTHER = SourceId.named("trips"), SourceId.named("other")
DOM = {"x": [0, 1, 2]}


def _binaries() -> dict[str, str] | None:
    """initdb, pg_ctl and postgres: on PATH, else in ``pg_config --bindir``."""
    found = {name: shutil.which(name) for name in ("initdb", "pg_ctl", "postgres")}
    if not all(found.values()) and shutil.which("pg_config"):
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                check=False).stdout.strip()
        for name in found:
            found[name] = found[name] or shutil.which(name, path=bindir)
    return {k: v for k, v in found.items() if v} if all(found.values()) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A throwaway PostgreSQL server; ``url(db)`` over its socket (no password needed),
    ``tcp(db, password)`` over 127.0.0.1 (scram-sha-256)."""

    def __init__(self, folder: str, port: int) -> None:
        self.folder, self.port, self._n = folder, port, itertools.count()

    def url(self, db: str) -> str:
        return f"postgresql://inftda@/{db}?host={self.folder}&port={self.port}"

    def tcp(self, db: str, password: str | None = None) -> str:
        secret = f":{password}" if password is not None else ""
        return f"postgresql://inftda{secret}@127.0.0.1:{self.port}/{db}"

    def database(self) -> str:
        import psycopg

        name = f"t{next(self._n)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return name

    def sql(self, db: str, text: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as c:
            cur = c.execute(text)
            return cur.fetchall() if cur.description else []


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg 3) is not installed")
    binaries = _binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or in "
                    "pg_config --bindir")
    folder = tempfile.mkdtemp(prefix="inftda-pg-")
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as another user
        import pwd

        user = next((u for u in ("postgres", "nobody") if _has_user(pwd, u)), None)
        if user is None or not shutil.which("runuser"):
            pytest.skip("running as root without a 'postgres' or 'nobody' user and runuser")
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        run_as = ["runuser", "-u", user, "--"]
    Path(folder, "pw").write_text(PASSWORD + "\n")
    os.chmod(Path(folder, "pw"), 0o644)
    data, port = os.path.join(folder, "data"), _free_port()
    subprocess.run([*run_as, binaries["initdb"], "-D", data, "-U", "inftda", "-E", "UTF8",
                    "--auth-local=trust", "--auth-host=scram-sha-256",
                    f"--pwfile={folder}/pw", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c synchronous_commit=off")
    subprocess.run([*run_as, binaries["pg_ctl"], "-D", data, "-o", options, "-l",
                    f"{folder}/log", "-w", "start"], check=True, capture_output=True, timeout=120)
    try:
        yield Server(folder, port)
    finally:
        subprocess.run([*run_as, binaries["pg_ctl"], "-D", data, "-m", "fast", "-w", "stop"],
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def _has_user(pwd: Any, name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@pytest.fixture
def url(server: Server) -> str:
    """A fresh database on the server (a new, empty ledger)."""
    return server.url(server.database())


def mk(rho: object = "1/3", source: SourceId = TRIPS, **kw: object) -> Charge:
    fields: dict[str, Any] = dict(
        source=source, columns=("origin", "dest"), neighbours="substitute", rho=Fraction(rho),
        privacy_unit=None, max_rows_per_unit=1, output="counts", seeded=False,
        data_domain=False, origin="spark")
    fields.update(kw)
    return Charge(**fields)


# ---------------------------------------------------------------------------------------------
# the same ledger


def _scenario(ledger: Ledger) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """One sequence of operations; what each did, the budget table and the charges."""
    outcomes: list[str] = []

    def attempt(c: Charge) -> None:
        try:
            rid, _ = ledger.charge(c)
            outcomes.append(f"charged {rid}")
        except BudgetExceededError as exc:
            outcomes.append(f"refused {getattr(exc, 'remaining', None)} "
                            f"{getattr(exc, 'difference', None)}")

    ledger.set_budget([TRIPS, OTHER], Fraction(1), name="people")
    ledger.set_budget([TRIPS], Fraction(2, 3))
    for rho in ("1/3", "1/7", "1/5", "1/5", "1/7"):
        attempt(mk(rho))
    attempt(mk("1/3", source=OTHER))
    attempt(mk("1/11", source=OTHER, seeded=True, neighbours="add_remove",
               privacy_unit="rider", max_rows_per_unit=3, output="rows"))
    ledger.set_setting(REQUIRE_BUDGET, "true")
    attempt(mk("1/100", source=SourceId.named("uncovered")))
    ledger.set_budget([SourceId.named("fresh")], Fraction(0))
    attempt(mk("1/100", source=SourceId.named("fresh")))
    drop = {"set_at", "ledger"}
    table = [{k: v for k, v in r.items() if k not in drop} for r in ledger.budgets().to_pylist()]
    charges = [{k: v for k, v in r.items() if k not in {"started_at", "ledger"}}
               for r in ledger.rows().to_pylist()]
    assert ledger.verify()["ok"]
    return outcomes, table, charges


def test_the_same_operations_decide_and_record_exactly_as_a_ledger_file(
    url: str, tmp_path: Path
) -> None:
    on_server = _scenario(Ledger.open(url))
    in_file = _scenario(Ledger.open(str(tmp_path / "budget.duckdb")))
    assert on_server == in_file
    outcomes, table, _ = on_server
    assert outcomes.count("charged 1") == 1 and sum(o.startswith("refused") for o in outcomes) == 5
    people = next(r for r in table if r["budget"] == "people")
    assert people["spent_rho_exact"] == "20/21"  # 1/3 + 1/7 + 1/7 (trips) + 1/3 (other)


def test_a_fresh_process_reads_the_same_state_and_location_has_the_url(url: str) -> None:
    ledger = Ledger.open(url)
    ledger.set_budget([TRIPS], Fraction(1))
    ledger.charge(mk("1/3"))
    verify.STATES.clear()  # another process: verifies the whole chain from the server
    again = Ledger.open(url)
    assert again.remaining(TRIPS)[0] == Fraction(2, 3)  # type: ignore[index]
    assert again.location == url and again.verify()["rows"] == 2


# ---------------------------------------------------------------------------------------------
# the chain


def _copy_row(seq_shift: int) -> str:
    return (f"INSERT INTO inftda_ledger SELECT id, started_at, source, columns, neighbours, "
            "privacy_unit, max_rows_per_unit, rho, rho_approx, epsilon, delta, output, seeded, "
            f"data_domain, private, origin, conversion, source_key, seq + {seq_shift}, "
            "prev_hash, digest, hash FROM inftda_ledger")


@pytest.mark.parametrize("edit", ["UPDATE inftda_ledger SET rho = '1/1000'",
                                  "UPDATE inftda_budgets SET rho = '100'",
                                  "DELETE FROM inftda_ledger", "TRUNCATE inftda_settings"])
def test_the_rows_are_append_only(server: Server, edit: str) -> None:
    import psycopg

    db = server.database()
    ledger = Ledger.open(server.url(db))
    ledger.set_budget([TRIPS], Fraction(1))
    ledger.set_setting(REQUIRE_BUDGET, "true")
    ledger.charge(mk("1/2"))
    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        server.sql(db, edit)
    verify.STATES.clear()
    assert ledger.verify()["ok"] and ledger.remaining(TRIPS)[0] == Fraction(1, 2)  # type: ignore[index]


# the owner of the tables can switch the triggers off: the chain still tells
_OFF = "ALTER TABLE {} DISABLE TRIGGER USER; "
EDITS = {
    "update rho": (_OFF.format("inftda_ledger") + "UPDATE inftda_ledger SET rho = '1/1000'",
                   "content or hash"),
    "update budget": (_OFF.format("inftda_budgets") + "UPDATE inftda_budgets SET rho = '100'",
                      "content or hash"),
    "insert": (_copy_row(100), "rows were deleted or inserted"),
    "insert and head": (_copy_row(3) + "; UPDATE inftda_ledger_head SET seq = seq + 3",
                        "head row was altered"),
    "delete one": (_OFF.format("inftda_ledger") + "DELETE FROM inftda_ledger WHERE id = 1",
                   "rows were deleted or inserted"),
    "delete all": (_OFF.format("inftda_ledger") + "DELETE FROM inftda_ledger",
                   "rows were deleted or inserted"),
    "drop": ("DROP TABLE inftda_ledger", "missing"),
    "drop head": ("DROP TABLE inftda_ledger_head", "head table is missing"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_hand_edits_on_the_server_are_detected_by_every_charge_and_verify(
    server: Server, edit: str
) -> None:
    db = server.database()
    ledger = Ledger.open(server.url(db))
    ledger.set_budget([TRIPS], Fraction(1))
    ledger.charge(mk("1/2"))
    ledger.charge(mk("1/2", source=OTHER))
    sql, what = EDITS[edit]
    server.sql(db, sql)
    test_ledger.assert_broken(ledger, what)


def test_a_deletion_is_detected_by_a_process_that_already_verified(server: Server) -> None:
    db = server.database()
    ledger = Ledger.open(server.url(db))
    ledger.charge(mk("1/2"))
    ledger.charge(mk("1/2"))
    server.sql(db, _OFF.format("inftda_ledger") + "DELETE FROM inftda_ledger WHERE id = 2")
    with pytest.raises(LedgerError, match="deleted"):
        ledger.charge(mk("1/2"))


def test_a_charge_with_an_unusual_label_is_hashed_by_duckdb_and_verifies(url: str) -> None:
    ledger = Ledger.open(url)
    odd = SourceId.named("bell\x07 and é")
    assert chain.charge_digest({**store._charge_values(mk(source=odd), 1), "seq": 1,
                                "prev_hash": ""}) is None  # the path DuckDB computes
    ledger.charge(mk(source=odd))
    verify.STATES.clear()
    assert ledger.verify()["ok"] and ledger.rows().column("source").to_pylist() == [odd.label]


def test_a_keyed_chain_on_the_server_needs_its_key(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "ledger.key"
    key.write_bytes(os.urandom(32))
    monkeypatch.setenv(chain.KEY_FILE, str(key))
    Ledger.open(url).charge(mk("1/2"))
    assert Ledger.open(url).verify()["keyed"]
    monkeypatch.delenv(chain.KEY_FILE)
    with pytest.raises(LedgerError, match="is keyed and no key was given"):
        Ledger.open(url).charge(mk("1/2"))
    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(32))
    monkeypatch.setenv(chain.KEY_FILE, str(other))
    with pytest.raises(LedgerError, match="not its key"):
        Ledger.open(url).charge(mk("1/2"))


# ---------------------------------------------------------------------------------------------
# several processes

# the ledger file's race worker (6 charges of 1/9), after a prologue: every decision is slow
# (so the charges overlap), and without the lock in the negative control; all start together
WORKER = textwrap.dedent("""
    import os, sys, time
    from inftda_duckdb.ledger import postgres, store
    refuse = store.Ledger._refuse
    def slow(self, state, charge):
        time.sleep(0.15)
        refuse(self, state, charge)
    store.Ledger._refuse = slow
    if os.environ.get("NO_LOCK"):
        take = postgres.Postgres.lock
        postgres.Postgres.lock = lambda self, cur, prefix, create=False: (
            take(self, cur, prefix, create) if create else None)
    print("ready", flush=True)
    sys.stdin.readline()
""") + test_ledger.WORKER


def _race(url: str, lock: bool) -> list[tuple[int, str, str]]:
    Ledger.open(url).set_budget([SourceId.named("a"), SourceId.named("b")], Fraction(1),
                                name="people")
    env = {**os.environ, **({} if lock else {"NO_LOCK": "1"})}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, url, name], text=True, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
             for name in ("a", "b", "a")]
    for p in procs:  # all started and connected: then all go at once
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=300) for p in procs]
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs, strict=True)]


def test_drivers_charging_one_server_ledger_at_once_never_overspend(url: str) -> None:
    results = _race(url, lock=True)
    assert all(rc == 0 for rc, _, _ in results), results
    assert sum(int(o.split()[-1]) for _, o, _ in results) == 9  # 9 x 1/9 = 1, 9 refused
    verify.STATES.clear()
    ledger = Ledger.open(url)
    (people,) = ledger.budgets().to_pylist()
    assert people["spent_rho_exact"] == "1" and people["remaining_rho_exact"] == "0"
    assert ledger.verify() == {**ledger.verify(), "ok": True, "rows": 10}


def test_negative_control_without_the_lock_concurrent_charges_collide(url: str) -> None:
    """The race above can fail: without the head's lock, writers decide on the same head and
    append the same seq (only the primary key stops the second: its release fails)."""
    results = _race(url, lock=False)
    failed = [e for rc, _, e in results if rc != 0]
    assert failed and all("duplicate key" in e for e in failed), results


# ---------------------------------------------------------------------------------------------
# every entry point on one server ledger


def _cli(*args: object, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inftda_duckdb.tools.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_duckdb_the_cli_and_a_spark_charge_draw_from_one_server_ledger(
    url: str, tmp_path: Path
) -> None:
    parquet = tmp_path / "trips.parquet"
    with duckdb.connect() as con:
        con.execute("CREATE TABLE trips AS SELECT (i % 3)::INTEGER AS x FROM range(300) t(i)")
        con.execute(f"COPY trips TO '{parquet}' (FORMAT parquet)")
    with duckdb.connect(str(tmp_path / "city.duckdb")) as con:
        load(con, ledger=url)
        con.execute(f"CREATE VIEW trips AS SELECT * FROM read_parquet('{parquet}')")
        set_budget(con, ["trips", f"file:{parquet}", "name:spark:spark_catalog.default.trips"],
                   name="trips people", rho="3/2")
        release(con, "trips", ["x"], rho="1/2", domains=DOM)
    args = ["release", "--input", parquet, "--columns", "x", "--domain", "x=0..2", "--quiet"]
    ok = _cli(*args, "--rho", "1/3", "--output", tmp_path / "a.parquet", "--ledger", url)
    assert ok.returncode == 0, ok.stderr
    # a Spark driver charging the same people (what inftda_duckdb.spark does, on the driver)
    Ledger.open(url).charge(mk("1/6", source=SourceId.named("spark:spark_catalog.default.trips")))
    refused = _cli(*args, "--rho", "1", "--output", tmp_path / "b.parquet",
                   INFTDA_LEDGER=url)  # the environment variable: the same ledger
    assert refused.returncode != 0 and "refused" in refused.stderr, refused.stderr
    assert "only 0.5 of the budget" in refused.stderr
    with duckdb.connect(str(tmp_path / "city.duckdb")) as con:
        load(con, ledger=url)
        (people,) = inftda_duckdb.budget(con).to_pylist()
        assert (people["spent_rho_exact"], people["releases"]) == ("1", 3)
        assert people["ledger"] == url
        assert budgets.ledger_rows(con).column("origin").to_pylist() == [
            "python", "cli", "spark"]
    listed = _cli("ledger", "--verify", "--ledger", url)
    assert listed.returncode == 0 and "is intact: 4 rows" in listed.stdout, listed  # budget + 3


@pytest.mark.spark
def test_a_spark_release_is_charged_once_to_the_server_ledger_and_refused_over_budget(
    spark: Any, url: str, tmp_path: Path  # noqa: F811 (the fixture imported above)
) -> None:
    """inftda_duckdb.spark.release(..., ledger=URL) on a real SparkSession: charged once, on the
    server, under the key DuckDB gives the same file; evaluating the result again charges
    nothing; a release past the budget is refused before any noise, and nothing is charged."""
    from inftda_duckdb.spark import release as spark_release

    parquet = tmp_path / "trips.parquet"
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT (i % 3)::INTEGER AS x FROM range(300) t(i)) TO '{parquet}' "
                    "(FORMAT parquet)")
    source = SourceId.file(str(parquet))
    Ledger.open(url).set_budget([source], Fraction(1), name="trips people")
    frame = spark.read.parquet(str(parquet))
    result = spark_release(frame, ["x"], rho="1/2", domains=DOM, ledger=url)
    first = sorted(tuple(r) for r in result.collect())
    assert {x for x, _ in first} <= {0, 1, 2} and sum(c for _, c in first) == 300
    result.write.parquet(str(tmp_path / "out"))  # evaluated again: the same rows, no charge
    written = spark.read.parquet(str(tmp_path / "out"))
    assert sorted(tuple(r) for r in written.collect()) == first
    with pytest.raises(BudgetExceededError, match=r"requests rho 0.6 .* only 0.5 "):
        spark_release(frame, ["x"], rho="3/5", domains=DOM, ledger=url)
    fresh = Ledger.server(url)  # what another driver, or a new process, reads from the server
    charged = fresh.rows()
    assert charged.column("source_key").to_pylist() == [source.key]
    assert charged.column("rho").to_pylist() == ["1/2"]
    assert charged.column("origin").to_pylist() == ["spark-python"]
    (people,) = fresh.budgets().to_pylist()
    assert (people["spent_rho_exact"], people["releases"]) == ("1/2", 1)
    report = fresh.verify()
    assert report["ok"] and report["problem"] is None, report


# ---------------------------------------------------------------------------------------------
# passwords, and the extra


def test_the_password_is_never_shown(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    db = server.database()
    with_password = Ledger.open(server.tcp(db, PASSWORD))
    with_password.set_budget([TRIPS], Fraction(1))
    with_password.charge(mk("1/2"))
    shown = [with_password.location, repr(with_password), str(with_password.verify()),
             str(with_password.budgets().to_pylist()), str(with_password.rows().to_pylist())]
    assert with_password.location == server.tcp(db)
    assert not [s for s in shown if PASSWORD in s]
    with pytest.raises(BudgetExceededError) as refused:
        with_password.charge(mk("1"))
    assert PASSWORD not in str(refused.value)
    wrong = "wrong-" + PASSWORD
    with pytest.raises(LedgerError, match="cannot be reached") as failed:
        Ledger.open(server.tcp(db, wrong)).charge(mk("1/2"))
    assert wrong not in str(failed.value) and PASSWORD not in str(failed.value)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)  # the recommended way: never in the URL
    assert Ledger.open(server.tcp(db)).remaining(TRIPS)[0] == Fraction(1, 2)  # type: ignore[index]
    cli = _cli("budget", "--ledger", server.tcp(db, PASSWORD))
    assert cli.returncode == 0 and PASSWORD not in cli.stdout + cli.stderr, cli


# ---------------------------------------------------------------------------------------------
# least privilege and TLS (the README's "A ledger on a server (clusters)")


def _least_privilege(server: Server) -> tuple[str, str]:
    """The README's recipe: a database owned by an admin role, which sets the budgets (creating
    the tables and their triggers) and grants a driver role what charging needs, and no more.
    Returns (admin URL, driver URL)."""
    db = server.database()
    admin, driver = f"{db}_admin", f"{db}_driver"
    server.sql("postgres", f"CREATE ROLE {admin} LOGIN; CREATE ROLE {driver} LOGIN; "
                           f"ALTER DATABASE {db} OWNER TO {admin}")
    server.sql(db, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")

    def url(role: str) -> str:
        return f"postgresql://{role}@/{db}?host={server.folder}&port={server.port}"

    Ledger.open(url(admin)).set_budget([TRIPS], Fraction(1), name="trips people")
    server.sql(db, f"SET ROLE {admin}; "
                   f"GRANT SELECT, INSERT ON {chain.LEDGER} TO {driver}; "
                   f"GRANT SELECT ON {chain.BUDGETS}, {chain.SETTINGS} TO {driver}; "
                   f"GRANT SELECT, UPDATE ON {chain.HEAD} TO {driver}")
    return url(admin), url(driver)


def test_a_least_privilege_driver_role_charges_but_cannot_edit_or_disable_the_triggers(
    server: Server,
) -> None:
    import psycopg

    admin, driver = _least_privilege(server)
    book = Ledger.open(driver)
    book.charge(mk("1/3"))  # a driver charges and is refused past the budget
    with pytest.raises(BudgetExceededError, match=r"only ~0.666667 of"):
        book.charge(mk("3/4"))
    refused = [
        f"UPDATE {chain.LEDGER} SET rho = '1/1000'",
        f"DELETE FROM {chain.LEDGER}",
        f"TRUNCATE {chain.LEDGER}",
        f"ALTER TABLE {chain.LEDGER} DISABLE TRIGGER ALL",
        f"DROP TRIGGER inftda_append_only_update ON {chain.LEDGER}",
        "SET session_replication_role = replica",  # would skip every trigger
        f"DROP TABLE {chain.LEDGER}",
        f"INSERT INTO {chain.BUDGETS} SELECT * FROM {chain.BUDGETS}",  # a budget of its own
        f"DELETE FROM {chain.HEAD}",
        "CREATE TABLE inftda_ledger_shadow (x int)",
    ]
    for text in refused:
        with psycopg.connect(driver, autocommit=True) as c, \
                pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(text)
    with pytest.raises(LedgerError, match="permission denied"):  # the API says why
        Ledger.open(driver).set_budget([TRIPS], Fraction(5))
    with psycopg.connect(admin, autocommit=True) as c:  # negative control: the owner can
        c.execute(f"ALTER TABLE {chain.LEDGER} DISABLE TRIGGER inftda_append_only_update")
        c.execute(f"ALTER TABLE {chain.LEDGER} ENABLE TRIGGER inftda_append_only_update")
    fresh = Ledger.server(driver)
    assert fresh.verify()["ok"]
    (people,) = fresh.budgets().to_pylist()
    assert (people["spent_rho_exact"], people["releases"], people["budget_rho_exact"]) == (
        "1/3", 1, "1")


def test_sslmode_verify_full_refuses_a_server_without_tls_and_charges_nothing(
    server: Server,
) -> None:
    """libpq's sslmode passes through the URL: ``verify-full`` insists on TLS with a verified
    certificate and host name, so a server without TLS is refused before anything is read."""
    db = server.database()
    Ledger.open(server.url(db)).set_budget([TRIPS], Fraction(1))
    tcp = server.tcp(db, PASSWORD)
    with pytest.raises(LedgerError, match="SSL was required"):
        Ledger.server(f"{tcp}?sslmode=verify-full&sslrootcert=/nonexistent/root.crt").charge(
            mk("1/3"))
    assert Ledger.server(server.url(db)).rows().num_rows == 0
    Ledger.server(f"{tcp}?sslmode=disable").charge(mk("1/3"))  # control: only sslmode differs
    assert Ledger.server(server.url(db)).rows().num_rows == 1


def test_psycopg_is_needed_only_for_a_server_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    code = ("import sys, duckdb, inftda_duckdb; c = duckdb.connect(); inftda_duckdb.load(c); "
            "print('psycopg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "False"
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    with pytest.raises(LedgerError, match=r"pip install 'inftda-duckdb\[postgres\]'"):
        Ledger.open("postgresql://curator@db.example.org/budgets")


def test_a_writer_waits_for_the_lock_then_gives_up_charging_nothing(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    db = server.database()
    ledger = Ledger.open(server.url(db))
    ledger.charge(mk("1/2"))
    monkeypatch.setattr(dialect, "LOCK_WAIT", 0.3)
    with psycopg.connect(server.url(db)) as holder:  # another driver mid-charge
        holder.execute("LOCK TABLE inftda_ledger_head IN EXCLUSIVE MODE")
        with pytest.raises(LedgerError, match=r"held by another writer for over 0.3 s"):
            ledger.charge(mk("1/2"))
        assert ledger.verify()["rows"] == 1  # readers do not wait
        holder.rollback()
    ledger.charge(mk("1/2"))
    assert ledger.rows().column("id").to_pylist() == [1, 2]


def test_a_database_s_own_ledger_moves_to_the_server(url: str, tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "city.duckdb")) as con:
        load(con)
        con.execute("CREATE TABLE trips AS SELECT (i % 3)::INTEGER AS x FROM range(30) t(i)")
        set_budget(con, "trips", rho=1)
        release(con, "trips", ["x"], rho="1/3", domains=DOM)
        assert budgets.move_ledger(con, url) == 2
        with pytest.raises(LedgerError, match="moved to"):  # the database's own ledger
            Ledger.in_database(con, "city", path=str(tmp_path / "city.duckdb"),
                               read_only=False).charge(mk("1/3"))
    with duckdb.connect(str(tmp_path / "city.duckdb")) as con:
        load(con, ledger=url)
        release(con, "trips", ["x"], rho="1/3", domains=DOM)
        (trips,) = inftda_duckdb.budget(con).to_pylist()
        assert (trips["spent_rho_exact"], trips["ledger"]) == ("2/3", url)
