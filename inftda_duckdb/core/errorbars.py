"""Error bars: what a release's intervals need (its public plan), and the intervals themselves.

A release's **public plan** (:class:`PublicPlan`) is everything its error bars depend on, all of
it public and independent of beta: the exact budget of every level and of a noised root, their
noise variances, the neighbouring relation and the rows a privacy unit keeps, each level's
domain size and its cells ``N_l`` (nested domains: the valid prefixes). Every output of a release
carries it (the provenance key ``plan``: Arrow and Parquet metadata, a CSV's sidecar, the table
comment the command line writes, Spark's column metadata) and the ledger keeps it with the
release's row (:mod:`inftda_duckdb.ledger.plans`), so a table made by ``CREATE TABLE ... AS
SELECT * FROM inftda_release(...)`` finds it by its ledger id. :func:`from_record` rebuilds the
plan and refuses, with an error that says so, a record that is not a release's, lacks the plan,
or was edited (its parts disagree with what its parameters imply, or with its ledger row).

The guarantee (:func:`~.accounting.joint_bounds`; the proofs are in
docs/explanation/error-bars.md): on one event of probability at least ``1 - beta``, every
k-prefix of the public domain, released or released as 0 (absent from the table: count 0), has
its true count within ``B_k`` of its released count, for every level ``k <= K`` at once. The
truth is the table the release counted: at most ``max_rows_per_unit`` rows per privacy unit, rows
outside the domains dropped under ``unknown := 'drop'``. Counts are integers, so the interval of
a count ``c`` is ``[max(0, c - h), c + h]`` with ``h = floor(B_k)`` (:func:`half_width`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .accounting import ESTIMATORS, INFTDA, NEIGHBOURS, BudgetPlan, joint_bounds
from .errors import InputError, bad_argument, opt

VERSION = 1  #: the plan's format
KEY = "plan"  #: its key in a provenance record
RESERVED = ("count", "lower", "upper")
"""The result columns besides the prefix columns (a hierarchy column may not take these names)."""
_MARGIN = 1e-9  # relative: a floating-point bound is floored with this much room (see half_width)


@dataclass(frozen=True)
class PublicPlan:
    """What a release's error bars need: its columns, output form, budget split (per-level
    ``sigma_l**2``, a noised root's), domain sizes and cells, and where it is recorded."""

    columns: tuple[str, ...]
    budget: BudgetPlan
    sizes: tuple[int, ...]
    cells: tuple[int, ...]
    output: str = "counts"
    private: bool = True
    ledger_id: int | None = None
    source: str = ""
    estimator: str = INFTDA

    @property
    def depth(self) -> int:
        return len(self.columns)

    def level(self, value: object, name: str = "level") -> int:
        """A level ``1..d`` from its number or its column's name, else the InputError."""
        return level_of(value, self.columns, name)

    def bounds(self, beta: float, joint: int) -> list[float]:
        """``[B_0, ..., B_joint]`` on one event of probability >= 1 - beta."""
        return joint_bounds(self.cells, self.budget, beta, joint, estimator=self.estimator)

    def bound(self, level: int, beta: float, joint: int | None = None) -> float:
        """The half-width of level ``level``'s intervals: Theorem 1's bound (``joint`` None:
        the level alone), or the level's bound on the event of levels ``1..joint``."""
        return self.bounds(beta, level if joint is None else joint)[level]


def level_of(value: object, columns: Sequence[str], name: str = "level") -> int:
    """A level ``1..d`` named by its number or its column's name (ASCII case folded)."""
    d = len(columns)
    fix = f"pass a level 1..{d} or a column's name: {', '.join(columns)}"
    if isinstance(value, str):
        folded = [c.lower() for c in columns]
        if value.lower() in folded:
            return folded.index(value.lower()) + 1
        if value.strip().isdigit():
            value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= d:
        return value
    raise bad_argument(name, value, f"is not a level of this release (1..{d})", fix)


def joint_of(value: object, level: int, depth: int, columns: Sequence[str]) -> int | None:
    """``joint``: None (the level alone), else a level ``>= level`` (number or column)."""
    if value is None:
        return None
    joint = level_of(value, columns, "joint")
    if joint < level:
        raise bad_argument("joint", value, f"must be at least the level asked ({level})",
                           f"pass {opt('joint', depth)} (levels 1..{depth} on one event), or "
                           "leave it out")
    return joint


def half_width(bound: float) -> int:
    """``floor(bound)``: an integer count within a real ``bound`` of an integer is within its
    floor. The floating-point ``bound`` may sit below the exact one by a few ulps, so it is
    floored with a relative margin of 1e-9: never narrower than the exact floor."""
    return math.floor(bound + _MARGIN * max(1.0, bound))


def interval(count: int, half: int) -> tuple[int, int]:
    """``[max(0, count - half), count + half]``: true counts are never negative."""
    return max(0, count - half), count + half


# ---------------------------------------------------------------------------------------------
# The plan as text (provenance and ledger), and back


def plan_json(budget: BudgetPlan, sizes: Sequence[int], cells: Sequence[int],
              estimator: str = INFTDA) -> str:
    """A release's public plan as one canonical JSON text (exact fractions as strings)."""
    return json.dumps({
        "version": VERSION, "estimator": estimator, "rho": str(budget.rho),
        "neighbours": budget.neighbours, "max_rows_per_unit": budget.max_rows_per_unit,
        "root_rho": None if budget.root_rho is None else str(budget.root_rho),
        "root_sigma2": None if budget.root_sigma2 is None else str(budget.root_sigma2),
        "level_rho": [str(r) for r in budget.level_rho],
        "level_sigma2": [str(s) for s in budget.level_sigma2],
        "sizes": [int(s) for s in sizes], "cells": [int(c) for c in cells],
        "split": budget.split_label,
    }, separators=(",", ":"))


NOT_A_RELEASE = "carries no provenance of an inftda_duckdb release"


def find_it() -> str:
    """The fix of a table without provenance (in the language of the caller)."""
    return ("pass the table release() returned, a table made with --into-table, a file the "
            "command line wrote, or name the release's ledger entry: "
            f"{opt('release', 1)} with its id from inftda_releases()")


def refused(where: str, rule: str, fix: str | None = None) -> InputError:
    """A release whose intervals cannot be given (not a release, no plan, or edited): the
    error naming it, never a made-up interval."""
    return bad_argument("released", where, rule, find_it() if fix is None else fix)


def from_record(record: Mapping[str, Any] | None, where: str) -> PublicPlan:
    """The public plan of the release whose provenance ``record`` is (``where``: what it was
    read from, for messages); an InputError (:func:`refused`) when it is not a release's,
    lacks the plan (released by an older version), or its parts disagree (edited)."""
    if not record or record.get("mechanism") != "InfTDA" or not record.get("columns"):
        raise refused(where, NOT_A_RELEASE)
    text = record.get(KEY)
    if not text:
        raise refused(where, "is a release whose provenance lacks the public plan its "
                      "intervals need (released by an older inftda-duckdb)",
                      f"name its ledger entry if its ledger recorded the plan: "
                      f"{opt('release', 1)} (its id in inftda_releases()), or release again")
    try:
        columns = tuple(json.loads(str(record["columns"])) if isinstance(record["columns"], str)
                        else record["columns"])
        data = json.loads(str(text))
        budget = _budget(data, len(columns))
        sizes = _positive_ints(data.get("sizes"), len(columns))
        cells = _positive_ints(data.get("cells"), len(columns))
    except (ValueError, TypeError, KeyError, ZeroDivisionError, AttributeError) as exc:
        raise refused(where, f"has a provenance whose plan cannot be read ({exc}): edited?"
                      ) from None
    estimator = data.get("estimator", INFTDA)
    problems = _problems(record, data, budget, columns, sizes, cells)
    if estimator not in ESTIMATORS:
        problems.append(f"its estimator {estimator!r} is unknown to this version")
    if problems:
        raise refused(where, "has a provenance that was edited or is inconsistent: "
                      + "; ".join(problems), "use the release as it was written (or name its "
                      f"ledger entry: {opt('release', 1)}, its id in inftda_releases())")
    ledger_id = str(record.get("ledger_id") or "")
    return PublicPlan(
        columns=columns, budget=budget, sizes=sizes, cells=cells,
        output=str(record.get("output") or "counts"),
        private=str(record.get("private", "true")).lower() in ("true", "1"),
        ledger_id=int(ledger_id) if ledger_id.isdigit() else None,
        source=str(record.get("source") or ""), estimator=estimator)


def _budget(data: Mapping[str, Any], depth: int) -> BudgetPlan:
    level_rho = tuple(Fraction(str(r)) for r in data["level_rho"])
    level_sigma2 = tuple(Fraction(str(s)) for s in data["level_sigma2"])
    root = data.get("root_rho")
    m = data["max_rows_per_unit"]
    if isinstance(m, bool) or not isinstance(m, int):
        raise ValueError("max_rows_per_unit is not an integer")
    return BudgetPlan(
        rho=Fraction(str(data["rho"])), neighbours=str(data["neighbours"]),
        max_rows_per_unit=m, depth=depth,
        root_rho=None if root is None else Fraction(str(root)),
        root_sigma2=None if data.get("root_sigma2") is None
        else Fraction(str(data["root_sigma2"])),
        level_rho=level_rho, level_sigma2=level_sigma2, split=str(data.get("split", "")))


def _positive_ints(values: object, n: int) -> tuple[int, ...]:
    if not isinstance(values, list) or len(values) != n or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
        raise ValueError(f"expected {n} positive integers, got {values!r}")
    return tuple(values)


def _problems(record: Mapping[str, Any], data: Mapping[str, Any], b: BudgetPlan,
              columns: tuple[str, ...], sizes: tuple[int, ...],
              cells: tuple[int, ...]) -> list[str]:
    """What in the record disagrees with itself (empty: consistent)."""
    out = []
    d = len(columns)
    if len(b.level_rho) != d or len(b.level_sigma2) != d:
        out.append(f"its plan has {len(b.level_rho)} levels for {d} columns")
        return out
    if b.neighbours not in NEIGHBOURS:
        out.append(f"neighbours {b.neighbours!r}")
    if min(b.level_rho) <= 0 or (b.root_rho is not None and b.root_rho <= 0):
        out.append("a level's budget is not positive")
    if (b.root_rho is None) != (b.root_sigma2 is None):
        out.append("its root has a budget but no noise, or noise but no budget")
    parts = sum(b.level_rho, b.root_rho or Fraction(0))
    if parts != b.rho:
        out.append(f"rho {b.rho} but its parts sum to {parts}")
    m2 = Fraction(b.max_rows_per_unit) ** 2
    factor = 1 if b.neighbours == "substitute" else 2
    if out:
        return out
    if any(s != m2 / (factor * r) for s, r in zip(b.level_sigma2, b.level_rho, strict=True)):
        out.append("a level's noise variance is not the one its budget implies")
    if b.root_rho is not None and b.root_sigma2 != m2 / (2 * b.root_rho):
        out.append("the root's noise variance is not the one its budget implies")
    if b.neighbours == "add_remove" and b.root_rho is None:
        out.append("add_remove without a noised root")
    previous = 1
    for size, n in zip(sizes, cells, strict=True):
        if not previous <= n <= previous * size:
            out.append(f"cells {list(cells)} do not fit domain sizes {list(sizes)}")
            break
        previous = n
    # the record around the plan, where it says the same things
    checks = (("rho", str(b.rho)), ("neighbours", b.neighbours),
              ("max_rows_per_unit", str(b.max_rows_per_unit)))
    for key, value in checks:
        if key in record and str(record[key]) != value:
            out.append(f"its {key} is {record[key]} but its plan's is {value}")
    unit = record.get("privacy_unit")
    public = str(record.get("rows_per_unit_public", "")).lower()
    if unit is not None and public in ("true", "false"):
        noised = b.neighbours == "add_remove" or (bool(unit) and public == "false")
        if noised != (b.root_rho is not None):
            out.append("its root is noised where its parameters say it is public, or public "
                       "where they say it is noised")
    return out


def record_of_ledger_row(row: Mapping[str, Any], plan: str) -> dict[str, Any]:
    """The provenance record a ledger row and its recorded plan stand for."""
    return {
        "mechanism": "InfTDA", "columns": json.dumps(list(row["columns"])),
        "rho": str(row["rho"]), "neighbours": str(row["neighbours"]),
        "max_rows_per_unit": str(row["max_rows_per_unit"]),
        "privacy_unit": row.get("privacy_unit") or "", "output": str(row["output"]),
        "private": "true" if row["private"] else "false", "ledger_id": str(row["id"]),
        "source": str(row["source"]), KEY: plan,
    }


def disagreement(record: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """Where a release's provenance ``record`` disagrees with its ledger ``row`` (the row with
    its ledger id, its source and its columns; ``row['plan']``: the plan the ledger recorded,
    or None)."""
    out = []
    theirs = record_of_ledger_row(row, str(row.get("plan") or ""))
    for key in ("rho", "neighbours", "max_rows_per_unit", "output", "private"):
        if key in record and str(record[key]) != theirs[key]:
            out.append(f"{key} {record[key]} (the ledger's: {theirs[key]})")
    if row.get("plan") and record.get(KEY) and json.loads(str(record[KEY])) != json.loads(
            str(row["plan"])):
        out.append("its plan differs from the one the ledger recorded")
    return out


# ---------------------------------------------------------------------------------------------
# What a result states about itself


def guarantee(plan: PublicPlan, level: int, beta: float, joint: int | None, half: int) -> str:
    """The guarantee of level ``level``'s intervals, in words (a result's metadata)."""
    event = (f"Theorem 1 at level {level}" if joint is None else
             f"one event for levels 1..{joint}: intervals of these levels asked with the same "
             f"beta and joint hold together")
    return (f"With probability at least 1 - {beta:g} over the release's noise, the true count "
            f"of every {level}-prefix ({', '.join(plan.columns[:level])}) lies in its interval, "
            f"all at once ({event}, two-sided). A prefix absent from the table was released as "
            f"0: its interval is [0, {half}]. The truth is the table the release counted (with "
            "a privacy unit, the rows it kept; under unknown 'drop', without the rows it "
            "dropped).")


def metadata(plan: PublicPlan, level: int, beta: float, joint: int | None,
             record: Mapping[str, Any]) -> dict[str, str]:
    """The metadata of an intervals result: the guarantee, its numbers and the provenance."""
    bound = plan.bound(level, beta, joint)
    half = half_width(bound)
    return {
        **{str(k): str(v) for k, v in record.items()},
        "intervals": "simultaneous",
        "guarantee": guarantee(plan, level, beta, joint, half),
        "level": str(level), "beta": repr(beta), "joint": "" if joint is None else str(joint),
        "bound": repr(bound), "half_width": str(half), "absent_interval": f"[0, {half}]",
    }


def bounds_rows(plan: PublicPlan, beta: float, joint: int | None) -> list[dict[str, Any]]:
    """Per level (a noised root first, as level 0): cells, domain size, the bound of the level
    alone (Theorem 1) and its half-width, and the bound on the one event of levels
    ``1..joint`` (default: every level) with its half-width."""
    d = plan.depth
    together = plan.bounds(beta, d if joint is None else joint)
    root = plan.budget.root_sigma2 is not None
    rows = []
    for level in range(0 if root else 1, d + 1):
        alone = plan.bound(level, beta)
        shared = together[level] if level < len(together) else None
        rows.append({
            "level": level, "column": "(root n)" if level == 0 else plan.columns[level - 1],
            "cells": 1 if level == 0 else plan.cells[level - 1],
            "domain_size": 1 if level == 0 else plan.sizes[level - 1],
            "bound": alone, "half_width": half_width(alone),
            "joint_bound": shared, "joint_half_width": None if shared is None
            else half_width(shared), "beta": beta,
        })
    return rows


__all__ = ["KEY", "RESERVED", "PublicPlan", "bounds_rows", "disagreement",
           "find_it", "from_record", "guarantee", "half_width", "interval", "joint_of",
           "level_of", "metadata", "plan_json", "record_of_ledger_row", "refused"]
