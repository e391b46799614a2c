"""Parse and validate every argument of a release into one frozen :class:`ReleaseRequest`.

The SQL macro and the Python function take the same named options; both end here (the SQL path
hands them over as JSON built by ``to_json``), so a bad option gives the same :class:`InputError`
whichever way the release was asked for. Nothing here reads data or draws noise.
"""

from __future__ import annotations

import collections
import datetime as _dt
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from . import options as option_table
from .accounting import (
    AUTO,
    AUTO_TARGETS,
    INFTDA,
    auto_level,
    check_estimator,
    neighbours_name,
    total_rho,
)
from .errors import InputError, bad_argument, opt
from .exact import to_positive_fraction
from .identifiers import parse_qualified

Labels = tuple[str, ...] | range
"""A public domain as declared: its values as text in code order, or an integer range (kept a
range end to end: never expanded to validate, plan or preview it)."""

OUTPUTS = ("counts", "rows")
NEIGHBOURS = ("substitute", "add_remove")  # 'bounded' / 'unbounded' are accepted as aliases
UNKNOWN = ("error", "drop")
MAX_DEPTH = 32
OPTIONS = option_table.REQUEST  #: the request's options, from the option table
MAX_ROWS_PER_UNIT = 10**9
MAX_SEED = 2**63 - 1  #: seeds are BIGINTs in SQL
_BIGINT = 2**63


@dataclass(frozen=True)
class PrivacyBudget:
    """A release's budget as the caller gave it, exact: ``rho`` (zCDP), or ``epsilon`` with
    ``delta`` (converted to the rho charged, :attr:`total`)."""

    rho: Fraction | None = None
    epsilon: Fraction | None = None
    delta: Fraction | None = None

    @property
    def total(self) -> Fraction:
        """The rho the release is charged: ``rho``, or (epsilon, delta) converted (rounded
        down: :func:`~inftda_duckdb.core.accounting.total_rho`)."""
        return total_rho(self.rho, self.epsilon, self.delta)


@dataclass(frozen=True)
class PrivacyUnit:
    """Whose rows a release protects together: the rows sharing ``column``'s value, at most
    ``max_rows`` of them kept; ``rows_public``: the curator asserts every unit's row count is
    public (then, under substitute, the capped total is released exactly)."""

    column: str
    max_rows: int = 1
    rows_public: bool = False


@dataclass(frozen=True)
class ReleaseRequest:
    """A validated release: what to read, the budget, the public domains and the output form."""

    source: str
    source_parts: tuple[str, ...]
    columns: tuple[str, ...]
    budget: PrivacyBudget
    domains: Mapping[str, Labels] = field(default_factory=dict)
    domain_tables: tuple[tuple[str, ...], ...] = ()
    domain_from_data: bool = False
    level_weights: tuple[Fraction, ...] | str | None = None  # 'auto': see auto_target
    auto_target: str | int | None = None  # with 'auto': 'leaves', 'all' or a level 1..d-1
    output: str = "counts"
    neighbours: str = "substitute"
    unit: PrivacyUnit | None = None
    unknown: str = "error"
    seed: int | None = None
    estimator: str = INFTDA

    @property
    def rho(self) -> Fraction | None:
        return self.budget.rho

    @property
    def epsilon(self) -> Fraction | None:
        return self.budget.epsilon

    @property
    def delta(self) -> Fraction | None:
        return self.budget.delta

    @property
    def privacy_unit(self) -> str | None:
        return None if self.unit is None else self.unit.column

    @property
    def max_rows_per_unit(self) -> int:
        return 1 if self.unit is None else self.unit.max_rows

    @property
    def rows_per_unit_public(self) -> bool:
        return self.unit is not None and self.unit.rows_public

    @property
    def depth(self) -> int:
        return len(self.columns)

    @property
    def noised_root(self) -> bool:
        """Whether the root count is noised: with ``add_remove``, and with a privacy unit
        unless the curator asserts every unit's row count is public (``rows_per_unit_public``):
        the root n' = sum_u min(r_u, m) is then a function of those private row counts."""
        return self.neighbours == "add_remove" or (
            self.privacy_unit is not None and not self.rows_per_unit_public
        )

    @property
    def private(self) -> bool:
        """False for seeded or domain-from-data releases (tests and exploration only)."""
        return self.seed is None and not self.domain_from_data

    def to_json(self) -> str:
        """Serialise the options so :func:`from_json` rebuilds an equal request."""
        options: dict[str, Any] = {
            "source": self.source,
            "columns": list(self.columns),
            "rho": None if self.rho is None else str(self.rho),
            "epsilon": None if self.epsilon is None else str(self.epsilon),
            "delta": None if self.delta is None else str(self.delta),
            "domains": {k: _domain_json(v) for k, v in self.domains.items()} or None,
            "domain_tables": [".".join(_quote_part(p) for p in t) for t in self.domain_tables]
            or None,
            "domain_from_data": self.domain_from_data,
            "level_weights": self.level_weights
            if self.level_weights is None or isinstance(self.level_weights, str)
            else [str(w) for w in self.level_weights],
            "auto_target": self.auto_target,
            "output": self.output,
            "neighbours": self.neighbours,
            "privacy_unit": self.privacy_unit,
            "max_rows_per_unit": self.max_rows_per_unit,
            "rows_per_unit_public": self.rows_per_unit_public,
            "unknown": self.unknown,
            "seed": self.seed,
            "estimator": self.estimator,
        }
        return json.dumps(options, sort_keys=True)


def _domain_json(values: Labels) -> list[str] | dict[str, int]:
    if isinstance(values, range):
        return {"start": values.start, "stop": values.stop, "step": values.step}
    return list(values)


def _quote_part(part: str) -> str:
    return '"' + part.replace('"', '""') + '"'


def from_json(text: str) -> ReleaseRequest:
    """Build a request from the JSON object the SQL macro passes (``to_json({...})``)."""
    try:
        options = json.loads(text)
    except (TypeError, ValueError):
        raise InputError(f"release options are not valid JSON: {text!r}") from None
    if not isinstance(options, dict):
        raise InputError(f"release options must be a JSON object; got {text!r}")
    options = dict(options)
    source = options.pop("source", None)
    columns = options.pop("columns", None)
    options.pop("origin", None)
    return parse_request(source, columns, **options)


def parse_request(source: object, columns: object, **options: Any) -> ReleaseRequest:
    """Validate the arguments of ``inftda_release`` / :func:`inftda_duckdb.release`."""
    unknown_keys = sorted(set(options) - set(OPTIONS))
    if unknown_keys:
        raise bad_argument(
            "options", unknown_keys, "are not release options", f"use only {', '.join(OPTIONS)}"
        )
    parts = parse_qualified(source, "source")
    cols = _columns(columns)
    rho, epsilon, delta = _budget(options.get("rho"), options.get("epsilon"), options.get("delta"))
    output = _choice("output", options.get("output"), OUTPUTS, "counts")
    neighbours = _choice("neighbours", neighbours_name(options.get("neighbours")), NEIGHBOURS,
                         "substitute", " (or the aliases bounded, unbounded)")
    unknown = _choice("unknown", options.get("unknown"), UNKNOWN, "error")
    if output == "counts" and "count" in {c.lower() for c in cols}:
        raise bad_argument(
            "columns",
            list(cols),
            "must not contain a column named 'count' with output 'counts' (the output adds one)",
            f"rename the column in a view, or use {opt('output', 'rows')}",
        )
    unit = options.get("privacy_unit")
    if unit is not None and (not isinstance(unit, str) or not unit):
        raise bad_argument("privacy_unit", unit, "must be a column name", "pass e.g. 'person_id'")
    m = options.get("max_rows_per_unit")
    if m is None:
        m = 1
    elif isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_ROWS_PER_UNIT:
        raise bad_argument(
            "max_rows_per_unit", m if isinstance(m, int) and m < _BIGINT else "a huge number",
            f"must be a positive integer (at most {MAX_ROWS_PER_UNIT:,})",
            f"pass e.g. {opt('max_rows_per_unit', 3)}",
        )
    elif unit is None and m != 1:
        raise bad_argument(
            "max_rows_per_unit",
            m,
            "needs privacy_unit (the column identifying whose rows are bounded)",
            f"pass {opt('privacy_unit', 'person_id')} as well",
        )
    public_rows = _rows_public(options.get("rows_per_unit_public"), unit, neighbours)
    noised_root = neighbours == "add_remove" or (unit is not None and not public_rows)
    if unknown == "drop" and not noised_root:
        raise bad_argument(
            "unknown",
            "drop",
            "cannot be 'drop' with neighbours 'substitute' when the total is released exactly "
            "(no privacy unit, or rows_per_unit_public): dropping rows changes the number of "
            "rows n, which is then published as it is",
            f"use {opt('neighbours', 'add_remove')}, or clean the table in a view and release "
            "the view",
        )
    seed = options.get("seed")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED
    ):
        raise bad_argument(
            "seed", seed if isinstance(seed, int) and seed < _BIGINT else "a huge number",
            "must be a non-negative integer below 2**63", f"pass e.g. {opt('seed', 42)}",
        )
    from_data = options.get("domain_from_data")
    if from_data is None:
        from_data = False
    if not isinstance(from_data, bool):
        raise bad_argument(
            "domain_from_data", from_data, "must be true or false",
            f"pass {opt('domain_from_data', True)}",
        )
    weights = options.get("level_weights")
    if weights is not None:
        weights = _weights(weights, len(cols), noised_root)
    target = _auto_target(options.get("auto_target"), weights, cols)
    estimator = options.get("estimator")
    estimator = INFTDA if estimator is None else check_estimator(estimator)
    return ReleaseRequest(
        source=source,  # type: ignore[arg-type]
        source_parts=parts,
        columns=cols,
        budget=PrivacyBudget(rho, epsilon, delta),
        domains=_domains(options.get("domains"), cols),
        domain_tables=_tables(options.get("domain_tables")),
        domain_from_data=from_data,
        level_weights=weights,
        auto_target=target,
        output=output,
        neighbours=neighbours,
        unit=None if unit is None else PrivacyUnit(unit, m, public_rows),
        unknown=unknown,
        seed=seed,
        estimator=estimator,
    )


def _rows_public(value: object, unit: object, neighbours: str) -> bool:
    """``rows_per_unit_public``: the curator's assertion that every unit's row count is public
    (then, under substitute, the total n' = sum_u min(r_u, m) is released exactly)."""
    if value is None or value is False:
        return False
    if value is not True:
        raise bad_argument("rows_per_unit_public", value, "must be true or false",
                           f"pass {opt('rows_per_unit_public', True)}, or leave it out")
    if unit is None or neighbours != "substitute":
        raise bad_argument(
            "rows_per_unit_public", True,
            "applies only with a privacy_unit and neighbours 'substitute' (without a unit each "
            "row is its own unit and n is public; with add_remove the total is always noised)",
            "leave it out",
        )
    return True


def _columns(columns: object) -> tuple[str, ...]:
    fix = "pass the hierarchy columns in order, e.g. ['origin', 'dest', 'hour']"
    if isinstance(columns, str) or not isinstance(columns, list | tuple):
        raise bad_argument("columns", columns, "must be a list of column names", fix)
    if not columns:
        raise bad_argument("columns", list(columns), "must not be empty", fix)
    if len(columns) > MAX_DEPTH:
        raise bad_argument(
            "columns", list(columns), f"must have at most {MAX_DEPTH} columns", "release fewer"
        )
    if any(not isinstance(c, str) or not c for c in columns):
        raise bad_argument("columns", list(columns), "must all be non-empty strings", fix)
    lowered = [c.lower() for c in columns]
    dups = sorted({c for c in columns if lowered.count(c.lower()) > 1})
    if dups:
        raise bad_argument(
            "columns", list(columns), f"must not repeat a column ({', '.join(dups)})", fix
        )
    return tuple(columns)


def _budget(
    rho: object, epsilon: object, delta: object
) -> tuple[Fraction | None, Fraction | None, Fraction | None]:
    fix = f"pass {opt('rho', 0.5)}, or {opt('epsilon', 1)} with {opt('delta', 1e-6)}"
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise bad_argument(
                "rho", rho, "must be given alone, not with epsilon/delta", "pass one budget form"
            )
        return _positive(rho, "rho", fix), None, None
    if epsilon is None or delta is None:
        raise bad_argument(
            "rho",
            None,
            "must be given (or both epsilon and delta): a release needs a privacy budget",
            fix,
        )
    eps = _positive(epsilon, "epsilon", fix)
    dlt = _positive(delta, "delta", fix)
    if dlt >= 1:
        raise bad_argument("delta", delta, "must be below 1", f"pass e.g. {opt('delta', 1e-6)}")
    return None, eps, dlt


def _positive(value: object, name: str, fix: str) -> Fraction:
    if isinstance(value, float) and not math.isfinite(value):
        raise bad_argument(name, value, "must be a positive finite number", fix)
    return to_positive_fraction(value, name, fix)


def _choice(name: str, value: object, allowed: tuple[str, ...], default: str,
            also: str = "") -> str:
    if value is None:
        return default
    if value not in allowed:
        raise bad_argument(
            name, value, f"must be one of {', '.join(allowed)}{also}",
            f"pass {opt(name, allowed[0])}",
        )
    return str(value)


def _weights(weights: object, depth: int, noised_root: bool) -> tuple[Fraction, ...] | str:
    need = depth + noised_root
    fix = (f"pass {need} positive numbers, e.g. {opt('level_weights', [1] * need)}, or "
           f"{opt('level_weights', AUTO)}")
    if isinstance(weights, str) and weights.strip().lower() == AUTO:
        return AUTO
    if isinstance(weights, str) or not isinstance(weights, list | tuple):
        raise bad_argument("level_weights", weights, "must be a list of numbers or 'auto'", fix)
    if len(weights) != need:
        what = (f"{need} weights, one per level and the root first (the total is noised)"
                if noised_root else f"{need} weights, one per level")
        raise bad_argument("level_weights", list(weights), f"must have {what}", fix)
    return tuple(_positive(w, "level_weights", fix) for w in weights)


def _auto_target(
    target: object, weights: tuple[Fraction, ...] | str | None, columns: tuple[str, ...]
) -> str | int | None:
    """``auto_target`` as ``'leaves'``, ``'all'`` or a level ``1..d-1`` (a hierarchy column's
    name is its level; the deepest level is ``'leaves'``); None without auto weights."""
    if weights != AUTO:
        if target is not None:
            raise bad_argument(
                "auto_target", target, "only applies with level_weights 'auto'",
                f"pass {opt('level_weights', AUTO)} as well, or drop auto_target",
            )
        return None
    if isinstance(target, str) and target.lower() not in AUTO_TARGETS:
        by_lower = {c.lower(): k for k, c in enumerate(columns, 1)}
        if target.lower() in by_lower:
            target = by_lower[target.lower()]
    elif isinstance(target, str) and target.lower() in {c.lower() for c in columns}:
        raise bad_argument(
            "auto_target", target, f"is both a keyword and a hierarchy column {list(columns)}",
            "pass the column's level number instead (1 = the first column)",
        )
    elif isinstance(target, str):
        target = target.lower()
    return auto_level(target, len(columns))


def label(value: object) -> str:
    """The text form of one public domain value (cast to the column's type inside DuckDB)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise bad_argument("domains", value, "must not contain NaN or infinity", "remove it")
        return repr(value)
    if isinstance(value, _dt.date | _dt.datetime | _dt.time):
        return value.isoformat()
    if hasattr(value, "dtype") and hasattr(value, "item"):
        return label(value.item())
    raise bad_argument(
        "domains", value, "values must be strings, numbers, booleans or dates", "convert it"
    )


def _domains(domains: object, columns: tuple[str, ...]) -> dict[str, Labels]:
    fix = f"pass {opt('domains', {'hour': range(24), 'origin': ['EWR', 'JFK', 'LGA']})}"
    if domains is None:
        return {}
    if not isinstance(domains, Mapping):
        raise bad_argument("domains", domains, "must map column names to lists of values", fix)
    by_lower = {c.lower(): c for c in columns}
    result: dict[str, Labels] = {}
    for name, values in domains.items():
        column = by_lower.get(str(name).lower())
        if column is None:
            raise bad_argument(
                "domains", name, f"names a column that is not in columns {list(columns)}", fix
            )
        if isinstance(values, Mapping):  # {'start': a, 'stop': b[, 'step': c]}: SQL's range form
            values = _range(name, values)
        if isinstance(values, str | bytes) or not isinstance(values, list | tuple | range):
            raise bad_argument(f"domains['{name}']", values, "must be a list of values", fix)
        if isinstance(values, range):
            result[column] = _checked_range(name, values)
            continue
        if len(values) == 0:
            raise bad_argument(f"domains['{name}']", list(values), "must not be empty", fix)
        if any(v is None for v in values):
            raise bad_argument(
                f"domains['{name}']", _head(values), "must not contain NULL", "remove the NULL"
            )
        labels = tuple(label(v) for v in values)
        if len(set(labels)) != len(labels):
            dups = sorted(x for x, n in collections.Counter(labels).items() if n > 1)[:5]
            raise bad_argument(
                f"domains['{name}']", dups, "must not repeat a value", "list each value once"
            )
        result[column] = labels
    return result


def _head(values: list[Any] | tuple[Any, ...]) -> object:
    """A long list shown by its first values (an error message stays short)."""
    return list(values) if len(values) <= 10 else f"[{', '.join(map(repr, values[:10]))}, ...]"


def _range(name: object, spec: Mapping[Any, Any]) -> range:
    """``{'start': a, 'stop': b, 'step': c}`` (step optional): the range a, a + c, ... < b."""
    fix = f"pass {opt('domains', {str(name): {'start': 0, 'stop': 1000}})} (stop excluded)"
    keys = set(spec)
    if not {"start", "stop"} <= keys <= {"start", "stop", "step"}:
        raise bad_argument(f"domains['{name}']", dict(spec),
                           "must be a list of values or {'start': ..., 'stop': ...[, 'step': ...]}",
                           fix)
    parts = [spec["start"], spec["stop"], spec.get("step", 1)]
    if any(isinstance(v, bool) or not isinstance(v, int) for v in parts) or parts[2] == 0:
        raise bad_argument(f"domains['{name}']", dict(spec),
                           "must have integer start, stop and a non-zero integer step", fix)
    return range(*parts)


def _checked_range(name: object, values: range) -> range:
    """A range domain, checked by arithmetic alone: non-empty, BIGINT values."""
    fix = f"pass e.g. {opt('domains', {str(name): range(1000)})}"
    shown = f"range({values.start}, {values.stop}, {values.step})"
    size = max(0, -(-(values.stop - values.start) // values.step))  # len() stops at 2**63
    if size == 0:
        raise bad_argument(f"domains['{name}']", shown, "must not be empty", fix)
    last = values.start + (size - 1) * values.step
    if max(abs(values.start), abs(last)) >= _BIGINT:
        raise bad_argument(f"domains['{name}']", shown,
                           "must hold 64-bit integers (BIGINT, below 2**63 in absolute value)", fix)
    return values


def _tables(tables: object) -> tuple[tuple[str, ...], ...]:
    if tables is None:
        return ()
    if isinstance(tables, str):
        tables = [tables]
    if not isinstance(tables, list | tuple):
        raise bad_argument(
            "domain_tables", tables, "must be a list of table names", "pass ['geo']"
        )
    parsed = tuple(parse_qualified(t, "domain_tables") for t in tables)
    if len(set(parsed)) != len(parsed):
        raise bad_argument(
            "domain_tables", list(tables), "must not repeat a table", "list each table once"
        )
    return parsed

