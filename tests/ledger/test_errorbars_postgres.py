"""Release plans in a ledger on a PostgreSQL server: recorded with the charge, found by id,
append-only like the chain; a least-privilege driver records them with the grant the docs give;
a server ledger of an earlier version (no plans table) still charges, recording none."""

from __future__ import annotations

from fractions import Fraction

import pytest
from test_ledger_postgres import Server, mk, server, url  # noqa: F401 (fixtures)

from inftda_duckdb.ledger import chain, plans
from inftda_duckdb.ledger.store import Ledger

pytestmark = pytest.mark.postgres

PLAN = '{"version":1,"k":[1,2]}'


def test_a_plan_is_recorded_with_its_charge_and_found_by_id(url: str) -> None:  # noqa: F811
    import psycopg

    book = Ledger.open(url)
    rid, _ = book.charge(mk(plan=PLAN))
    bare, _ = book.charge(mk())
    assert book.release(rid)["plan"] == PLAN
    assert book.release(bare)["plan"] is None and book.release(99) is None
    with psycopg.connect(url, autocommit=True) as c, pytest.raises(psycopg.Error):
        c.execute(f"UPDATE {plans.PLANS} SET plan = 'x'")  # append-only


def test_a_least_privilege_driver_records_plans_with_the_documented_grant(
        server: Server) -> None:  # noqa: F811
    """First as a ledger of an earlier version (no plans table; the driver may not create
    one): the charge goes through, recording no plan. Then the owner creates the table and
    grants it as the docs say: the driver's charges record their plans."""
    db = server.database()
    admin, driver = f"{db}_admin", f"{db}_driver"
    server.sql("postgres", f"CREATE ROLE {admin} LOGIN; CREATE ROLE {driver} LOGIN; "
                           f"ALTER DATABASE {db} OWNER TO {admin}")
    server.sql(db, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")

    def at(role: str) -> str:
        return f"postgresql://{role}@/{db}?host={server.folder}&port={server.port}"

    owner = Ledger.open(at(admin))
    owner.set_budget([mk().source], Fraction(1))
    server.sql(db, f"SET ROLE {admin}; DROP TABLE {plans.PLANS}; "
                   f"GRANT SELECT, INSERT ON {chain.LEDGER} TO {driver}; "
                   f"GRANT SELECT ON {chain.BUDGETS}, {chain.SETTINGS} TO {driver}; "
                   f"GRANT SELECT, UPDATE ON {chain.HEAD} TO {driver}")
    book = Ledger.open(at(driver))
    rid, _ = book.charge(mk(plan=PLAN))
    assert book.release(rid)["plan"] is None and book.verify()["ok"]
    owner.run(lambda cur: plans.create(owner, cur))
    server.sql(db, f"SET ROLE {admin}; GRANT SELECT, INSERT ON {plans.PLANS} TO {driver}")
    rid, _ = book.charge(mk("1/10", plan=PLAN))
    assert book.release(rid)["plan"] == PLAN
