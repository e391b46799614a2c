"""A release, step by step, as every engine runs it: the order of its checks lives here.

1. :func:`check`, in this order: a bad kernel setting; **the budget** (the ledger's refusal,
   through the engine's ``budget`` callable, before any data check or data-dependent message);
   the request's **public checks** (the split of the budget, the declared domains and domain
   tables, the cell limit on declared domains); only then **the data checks** (the engine's
   ``data`` callable is the one read of the private data before the charge: NULLs, values
   outside the domains, and the cell limit when the total is public). In the public-facing
   mode (``hide``) a data check's error is kept, not raised: the engine raises one fixed
   message once the release is charged (what failed depends on the data).
2. The engine charges the ledger with :func:`charge_fields` (a refusal there raises: nothing
   drawn).
3. :func:`draw`: the level keys (a secure source, or a seeded one for tests, not private), the
   root (Algorithm 1, line 1), and the cell limit decided from the noised root when only it
   can decide (after the charge, and the error says so).
   With ``estimator := 'least_squares'`` the public checks also refuse a level with more public
   cells than the limit (every public cell is noised) and a plan whose arithmetic cannot be
   certified, and :func:`least_squares` gives the engine what it runs in place of the noise
   (the estimates replace line 5's noisy counts; the root is their rounded estimate when it is
   noised).
4. The engine runs the levels (:func:`~inftda_duckdb.core.topdown.release_below`, Algorithm 1,
   lines 2-9) on its leaf counts and materialises the released leaves with
   :func:`~inftda_duckdb.core.provenance.of_release`.

The engine supplies only what is engine-specific: the domain plan and the check row (its SQL,
or its jobs), the ledger it charges, the leaf counts in and the released leaves out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Generic, TypeVar

from . import kernel, leastsquares, limits
from .accounting import REPORT_DELTA, BudgetPlan
from .checks import raise_for_data_checks, raise_for_public_checks
from .domains import DomainPlan
from .errorbars import plan_json
from .errors import InftdaError, ReleaseOutOfMemoryError, call, number
from .planning import budget_plan, level_cells
from .randomness import RandomSource
from .request import ReleaseRequest
from .topdown import release_root

T = TypeVar("T")

ORIGINS = ("python", "cli")
"""The interfaces a Python caller may record as a release's origin (SQL releases record 'sql')."""


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A release that passed its checks: the split of its budget, each level's domain size and
    cells (public), the rows kept ``n`` (the true root), whether the cell limit held without
    the noised root (``fits``), a data error the public-facing mode keeps for after the charge
    (``hidden``), and what the engine's budget check returned (``found``)."""

    request: ReleaseRequest
    domains: DomainPlan
    plan: BudgetPlan
    sizes: list[int]
    cells: list[int]
    n: int
    fits: bool
    hidden: InftdaError | None
    found: T
    arith: leastsquares.Arithmetic | None = None  # estimator 'least_squares': its arithmetic
    unit_rows: tuple[int, int] | None = None  # privacy unit: rows (kept, read) by its cap


def check(request: ReleaseRequest, domains: DomainPlan, public: Mapping[str, Any], *,
          budget: Callable[[Fraction], T], data: Callable[[], Mapping[str, Any]],
          hide: bool = False) -> Checked[T]:
    """Every check of a release, in the order of the module docstring. ``public``: the check
    row's public part (domain sizes and domain tables' checks); ``budget(rho)`` raises the
    ledger's refusal; ``data()`` returns the whole check row (the data checks included)."""
    kernel.check()
    found = budget(request.budget.total)
    plan = budget_plan(request, domains, public)
    domains.check_sizes()
    raise_for_public_checks(request, domains, public)
    sizes, cells = level_cells(domains, public)
    arith = None
    if request.estimator == leastsquares.NAME:  # every public cell: decided from public sizes
        limits.check_every_cell(request.columns, sizes, cells)
        arith = leastsquares.arithmetic_of(plan, sizes, domains.nested_levels(request.depth))
        arith.check()
    checks = data()
    n, fits, hidden = 0, True, None
    try:
        n = raise_for_data_checks(request, domains, checks)
        fits = arith is not None or limits.check_cells(request.columns, sizes, cells,
                                                       None if request.noised_root else n)
    except InftdaError as exc:
        if not hide:
            raise
        hidden = exc
    unit_rows = None
    if "read_unit" in checks:  # rows with a unit: those the cap kept, and those read
        unit_rows = (int(checks["n"]) - int(checks.get("nulls_unit", 0)), int(checks["read_unit"]))
    return Checked(request, domains, plan, sizes, cells, n, fits, hidden, found, arith, unit_rows)


def charged_text(rho: Fraction, source: str) -> str:
    """What a charged release spent, as every message says it, decimal first:
    ``'rho 0.5 on main.trips'`` (the ledger keeps it exact)."""
    return f"rho {number(rho)} on {source}"


def out_of_memory(limit: int | None, charged: str | None) -> ReleaseOutOfMemoryError:
    """The error of a release the engine could not run within its memory limit (``limit``
    bytes, None if unknown): the limit and the fix, and whether anything was spent (``charged``
    as :func:`charged_text` says it, None before the charge). Names no size of the data (the
    engine's own message would: memory in use when it failed)."""
    if limit is None:
        now, fix = "", "'4GB'"
    else:
        now, fix = f" ({limit / 2**20:.1f} MiB now)", f"'{-(-2 * limit // 10**6)}MB'"
    spent = ("nothing was charged" if charged is None
             else f"its budget was already charged ({charged} is spent, as the ledger records)")
    return ReleaseOutOfMemoryError(
        f"the release needs more memory than DuckDB's memory_limit{now} allows: {spent} and "
        f"nothing was returned. Fix: raise the limit (e.g. SET memory_limit = {fix}) and let "
        "DuckDB spill to disk (SET temp_directory = '/a/path/with/space' if it has none), then "
        "run the release again", charged is not None)


def uncovered_text(rho: Fraction, label: str, spec: str) -> str:
    """The notice of a release charged to a source no budget covers (a new copy or export of
    data whose budget is kept under another name starts uncapped): said once per source."""
    return (f"no budget covers {label}: rho {number(rho)} was charged to it without a cap (a "
            "copy or an export of data is a new source, with its own account). Fix: cap it with "
            f"{call('set_budget', spec, rho=...)}, or refuse every release no budget covers with "
            f"{call('require_budget')}")


def unit_cap_text(request: ReleaseRequest, kept: int, read: int) -> str:
    """The curator's notice of what a privacy unit's cap dropped (``max_rows_per_unit``): rows
    kept of rows read, counted among the rows with a unit (a NULL unit is refused, or dropped
    with ``unknown := 'drop'``). Exact private counts: curator mode only, never in public-facing
    mode or in a provenance (the released table is public)."""
    share = f" ({100 * kept / read:.1f}%)" if read else ""
    m = request.max_rows_per_unit
    return (f"privacy unit {request.privacy_unit!r} (at most {m} row{'' if m == 1 else 's'} "
            f"each): kept {kept:,} of {read:,} rows read{share}")


def repeated_text(charged: str) -> str:
    """The notice of a release statement executed again on one connection (a notebook's saved
    query re-runs it wherever it is used): ``charged`` as :func:`charged_text` says it."""
    return (f"this release statement ran before on this connection, and ran again: a new release "
            f"with fresh noise, charged again ({charged}). A saved query (jupysql's %%sql "
            "--save) runs it again wherever it is used. Fix: keep one result, CREATE TABLE name "
            "AS SELECT * FROM inftda_release(...), and query the table")


def public_plan(checked: Checked[Any]) -> str:
    """The public plan of a checked release (:mod:`.errorbars`): its provenance and its ledger
    row carry it, for its intervals."""
    return plan_json(checked.plan, checked.sizes, checked.cells, checked.request.estimator)


def charge_fields(request: ReleaseRequest, rho: Fraction, origin: str,
                  plan: str | None = None) -> dict[str, Any]:
    """What the ledger records of a release: its :class:`~inftda_duckdb.ledger.Charge` but the
    source (``plan``: its public plan, :func:`public_plan`, recorded beside its row)."""
    return dict(
        columns=request.columns,
        neighbours=request.neighbours,
        rho=rho,
        privacy_unit=request.privacy_unit,
        max_rows_per_unit=request.max_rows_per_unit,
        output=request.output,
        seeded=request.seed is not None,
        data_domain=request.domain_from_data,
        origin=origin,
        delta=float(REPORT_DELTA if request.delta is None else request.delta),
        plan=plan,
    )


def draw(checked: Checked[Any], charged: str) -> tuple[RandomSource, int]:
    """After the charge: the release's random source (every level key derives from it) and its
    released root; the cell limit from the noised root when only it can decide (``charged``
    names what was spent, for that error)."""
    request = checked.request
    source = RandomSource.secure() if request.seed is None else RandomSource.from_seed(request.seed)
    root = release_root(checked.n, checked.plan, source)
    if not checked.fits:
        limits.check_cells(request.columns, checked.sizes, checked.cells, root, charged=charged)
    return source, root


def least_squares(checked: Checked[Any], source: RandomSource) -> leastsquares.LeastSquares | None:
    """After the charge, with ``estimator := 'least_squares'``: what the engine runs in place of
    the noise (:class:`~inftda_duckdb.core.leastsquares.LeastSquares`: the root's noise is the
    draw :func:`draw` took for InfTDA's root); None for InfTDA."""
    if checked.arith is None:
        return None
    plan = checked.plan
    return leastsquares.LeastSquares(checked.arith, checked.n,
                                     leastsquares.root_noise(plan, source), plan.root_sigma2)


__all__ = ["ORIGINS", "Checked", "charge_fields", "charged_text", "check", "draw",
           "least_squares", "public_plan", "repeated_text", "uncovered_text",
           "unit_cap_text"]
