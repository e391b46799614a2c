"""The kinds of error a user can meet, and messages that speak the caller's language.

- :class:`InputError`: the caller asked for something invalid. The message names the argument,
  the offending value, the rule it breaks and how to fix it. Nothing was charged or written.
- :class:`BudgetExceededError`: the release would overspend a privacy budget. The message gives
  the requested, remaining and missing budget. Nothing was charged or written.
- :class:`LedgerError`: the privacy ledger cannot be trusted or reached (edited rows, a missing
  head, a wrong key, a read-only or locked file): every release is refused until it is fixed.
  Nothing was charged or written.
- :class:`InternalError`: an invariant of the mechanism failed. This is a bug; nothing is
  returned.
- :class:`ReleaseAbortedError`: a release too large for the cell limit, found only after the
  charge (the noised total decides it). Its budget WAS spent; nothing is returned.
- :class:`ReleaseOutOfMemoryError` (a ``MemoryError``): the engine ran out of its memory limit
  during a release; the message gives the limit and the fix, and ``charged`` says whether its
  budget was spent. Nothing is returned.
- :class:`ReleaseInterrupted` (a ``KeyboardInterrupt``): Ctrl-C or ``interrupt()`` stopped a
  release; the message and ``charged`` say whether its budget was spent.

A message is written once, with the options and calls it suggests as tokens (:func:`opt`,
:func:`arg`, :func:`call`), and rendered in the language of the interface in use when it is
read: ``rho := 0.5`` in SQL, ``rho=0.5`` in Python, ``--rho 0.5`` on the command line. The
interface is the error's own (:func:`speaks` pins it where a UDF raises, inside DuckDB) or the
caller's (:func:`speaking`, a context variable; Python by default). Values the caller passed are
quoted only when they are plain data (:func:`shown`): an object such as a DataFrame or a lazy
DuckDB relation is named by its type, never printed (printing a relation would execute it).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import json
import re
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any, Protocol, TypeVar

INTERFACES = ("python", "sql", "cli")
_INTERFACE: contextvars.ContextVar[str] = contextvars.ContextVar("inftda_interface",
                                                                 default="python")
_TOKEN = re.compile(r"\u27e8(opt|arg|call) (\S+?)(?: (.*?))?\u27e9", re.S)


class InftdaError(Exception):
    """Base class of every error raised on purpose by inftda_duckdb."""

    interface: str | None = None  #: the language of its fixes, if pinned (see :func:`speaks`)

    def __str__(self) -> str:
        return render(super().__str__(), self.interface)


class InputError(InftdaError, ValueError):
    """Invalid input from the caller (argument, table, column or data)."""


class BudgetExceededError(InftdaError):
    """A release was refused because it would exceed a privacy budget."""


class LedgerError(InputError):
    """The ledger is broken, unreachable or cannot record a charge durably: nothing is released."""


class InternalError(InftdaError, AssertionError):
    """An invariant of the mechanism failed: this is a bug in inftda_duckdb."""

    def __init__(self, message: str) -> None:
        super().__init__(
            f"{message} (this is a bug in inftda_duckdb: nothing was returned; please report it)"
        )


# ---------------------------------------------------------------------------------- tokens


def _encode(value: object) -> object:
    if isinstance(value, range):
        return {"\u27e8range": [value.start, value.stop]}
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if list(value) == ["\u27e8range"]:
            return range(*value["\u27e8range"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def opt(name: str, example: object = ...) -> str:
    """An option with an example value, e.g. ``opt('rho', 0.5)``: ``rho := 0.5`` in SQL,
    ``rho=0.5`` in Python, ``--rho 0.5`` on the command line (``...`` stands for a value)."""
    return f"\u27e8opt {name} {json.dumps(_encode(example) if example is not ... else '...')}\u27e9"


def arg(name: str) -> str:
    """An argument's name: ``rho`` in SQL and Python, ``--rho`` on the command line."""
    return name if not name or re.search(r"\s", name) else f"\u27e8arg {name}\u27e9"


def call(function: str, *args: object, **options: object) -> str:
    """A call of a public function, e.g. ``call('set_budget', 'trips', rho=...)``: rendered as
    ``set_budget(con, 'trips', rho=...)``, ``SELECT inftda_set_budget('trips', rho := ...)`` or
    ``inftda-duckdb budget DATABASE --set trips --rho ...``."""
    body = json.dumps([_encode(list(args)), {k: _encode(v) if v is not ... else "..."
                                            for k, v in options.items()}])
    return f"\u27e8call {function} {body}\u27e9"


class Renderer(Protocol):
    """How one interface spells options, argument names and calls."""

    def option(self, name: str, value: Any) -> str: ...

    def argument(self, name: str) -> str: ...

    def call(self, function: str, args: list[Any], options: dict[str, Any]) -> str: ...


def _number(value: float) -> str:
    return re.sub(r"e([-+])0*(\d)", r"e\1\2", repr(value)).replace("e+", "e")


def sql_literal(value: Any) -> str:
    """``value`` as a DuckDB literal (``'it''s'``, ``[1, 2]``, ``{'hour': range(24)}``)."""
    if value == "...":
        return "..."
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, range):
        return f"range({value.stop})" if value.start == 0 else f"range({value.start}, {value.stop})"
    if isinstance(value, list):
        return "[" + ", ".join(sql_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{sql_literal(k)}: {sql_literal(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return "'" + str(value).replace("'", "''") + "'"


def python_literal(value: Any) -> str:
    """``value`` as Python source (``'x'``, ``True``, ``range(24)``)."""
    if value == "...":
        return "..."
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, range):
        return sql_literal(value)  # range(24) / range(1, 13): the same spelling
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python_literal(k)}: {python_literal(v)}"
                               for k, v in value.items()) + "}"
    return repr(value)


SETTERS = ("set_budget", "require_budget")
"""Calls that commit in the ledger: from SQL they run only in the package's shell (a SQL
function cannot tell whether a transaction is open; see ``duckdb/budgets.py``)."""


class SqlRenderer:
    """SQL. ``setters_run``: whether the SQL running now may call the :data:`SETTERS` (see
    :func:`setters_run`); elsewhere (``con.sql``, jupysql) their fix is the Python call."""

    setters_run = False

    def option(self, name: str, value: Any) -> str:
        return f"{name} := {sql_literal(value)}"

    def argument(self, name: str) -> str:
        return name

    def call(self, function: str, args: list[Any], options: dict[str, Any]) -> str:
        parts = [sql_literal(a) for a in args] + [self.option(k, v) for k, v in options.items()]
        sql = f"SELECT inftda_{function}({', '.join(parts)})"
        if function in SETTERS and not self.setters_run:
            return (f"{PythonRenderer().call(function, args, options)} from Python (or {sql} "
                    "in inftda-duckdb shell)")
        return sql


class PythonRenderer:
    def option(self, name: str, value: Any) -> str:
        return f"{name}={python_literal(value)}"

    def argument(self, name: str) -> str:
        return name

    def call(self, function: str, args: list[Any], options: dict[str, Any]) -> str:
        parts = ["con"] + [python_literal(a) for a in args]
        parts += [self.option(k, v) for k, v in options.items()]
        return f"{function}({', '.join(parts)})"


SQL = SqlRenderer()
RENDERERS: dict[str, Renderer] = {"sql": SQL, "python": PythonRenderer()}


@contextlib.contextmanager
def setters_run() -> Iterator[None]:
    """Inside the block, SQL fixes name the SQL setters (the package's shell vouches for the
    statement it runs). Process-wide, not a context variable: DuckDB's threads render the
    messages of the functions they run."""
    before, SQL.setters_run = SQL.setters_run, True
    try:
        yield
    finally:
        SQL.setters_run = before
"""Renderers by interface; the command line adds its own (``tools/cli.py``)."""


def render(text: str, interface: str | None = None) -> str:
    """``text`` with its tokens spelled for ``interface`` (default: the one in use)."""
    if "\u27e8" not in text:
        return text
    renderer = RENDERERS.get(interface or _INTERFACE.get()) or RENDERERS["python"]

    def one(match: re.Match[str]) -> str:
        kind, name, body = match[1], match[2], match[3]
        if kind == "arg":
            return renderer.argument(name)
        data = _decode(json.loads(body))
        if kind == "opt":
            return renderer.option(name, data)
        return renderer.call(name, data[0], data[1])

    return _TOKEN.sub(one, text)


def current_interface() -> str:
    return _INTERFACE.get()


@contextlib.contextmanager
def speaking(interface: str) -> Iterator[None]:
    """Render messages for ``interface`` ('python', 'sql' or 'cli') inside the block."""
    token = _INTERFACE.set(interface)
    try:
        yield
    finally:
        _INTERFACE.reset(token)


F = TypeVar("F", bound=Callable[..., Any])


def speaks(interface: str | Callable[..., str]) -> Callable[[F], F]:
    """Decorate a function DuckDB calls (a UDF): an :class:`InftdaError` it raises keeps
    ``interface`` (or ``interface(*args)``) as its language, since DuckDB reads the message
    after the call has returned, outside any :func:`speaking` block."""

    def wrap(function: F) -> F:
        @functools.wraps(function)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except InftdaError as exc:
                if exc.interface is None:
                    exc.interface = interface(*args) if callable(interface) else interface
                raise

        return wrapped  # type: ignore[return-value]

    return wrap


# ---------------------------------------------------------------------------------- values

_PLAIN = (str, int, float, bool, Fraction, type(None), range)


def shown(value: Any, limit: int = 200) -> str:
    """``repr(value)`` for plain data (cut at ``limit`` characters), else ``<a TYPE>``: objects
    are never printed (a DataFrame's repr is the whole frame; a relation's runs its query)."""

    def plain(v: Any, depth: int = 0) -> bool:
        if isinstance(v, _PLAIN):
            return True
        if depth < 3 and type(v) in (list, tuple, set, frozenset):
            return all(plain(x, depth + 1) for x in v)
        if depth < 3 and type(v) is dict:
            return all(plain(k, depth + 1) and plain(x, depth + 1) for k, x in v.items())
        return False

    if not plain(value):
        kind = type(value)
        return f"<a {kind.__module__.split('.')[0]} {kind.__name__}>"
    text = _repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _repr(value: Any) -> str:
    """``repr`` of plain data with exact numbers as a person wrote them (``1/3``, ``2``), not
    ``Fraction(1, 3)``."""
    if isinstance(value, Fraction):
        return str(value)
    if type(value) in (list, tuple):
        inner = ", ".join(_repr(v) for v in value)
        return f"[{inner}]" if type(value) is list else f"({inner}{',' if len(value) == 1 else ''})"
    if type(value) is dict:
        return "{" + ", ".join(f"{_repr(k)}: {_repr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def number(value: Fraction | int | float, rounding: str | None = None) -> str:
    """A number for people, decimal first: an integer as itself, else 6 significant digits
    (``0.5``, ``~0.333333`` where the decimal is not exact). The exact fraction belongs to the
    ledger, JSON and CSV. ``rounding='down'``: the decimal is rounded down (never above the
    value), so it can be passed back as it reads (a request of at most what remains).

    >>> number(Fraction(1, 2)), number(Fraction(1, 3)), number(Fraction(1, 3), 'down'), number(2)
    ('0.5', '~0.333333', '0.333333', '2')
    """
    exact = Fraction(value)
    if exact.denominator == 1:
        return str(exact.numerator)
    text = f"{float(exact):.6g}"
    if rounding == "down" and Fraction(text) > exact:
        digits = int(f"{float(exact):.5e}".split("e")[1])  # the exponent of the first digit
        step = Fraction(10) ** (digits - 5)
        text = f"{float((exact // step) * step):.6g}"
    return text if Fraction(text) == exact or rounding == "down" else f"~{text}"


def bad_argument(name: str, value: Any, rule: str, fix: str) -> InputError:
    """Build the standard user-error message: argument, value, rule and fix.

    >>> str(bad_argument("rho", -1, "must be a positive finite number",
    ...                  f"pass e.g. {opt('rho', 0.5)}"))
    'rho must be a positive finite number; got -1. Fix: pass e.g. rho=0.5'
    """
    return InputError(f"{arg(name)} {rule}; got {shown(value)}. Fix: {fix}")


class ReleaseAbortedError(InftdaError):
    """A release stopped after its budget was charged, before returning anything: under
    ``add_remove`` (or a privacy unit with a noised total) whether it fits the cell limit can
    only be decided from the noised total, which is drawn after the charge."""

    charged = True


class ReleaseOutOfMemoryError(InftdaError, MemoryError):
    """The engine ran out of its memory limit during a release; ``charged`` says whether the
    release's budget had been spent (False: the engine failed before the charge)."""

    def __init__(self, message: str, charged: bool) -> None:
        super().__init__(message)
        self.charged = charged


class ReleaseInterrupted(KeyboardInterrupt):
    """Ctrl-C or :func:`inftda_duckdb.interrupt` stopped a release; ``charged`` says whether
    its budget had been spent (``None``: interrupted while the charge was being recorded).
    A :class:`KeyboardInterrupt`, so code that handles Ctrl-C handles it too."""

    def __init__(self, message: str, charged: bool | None) -> None:
        super().__init__(message)
        self.charged = charged


# ------------------------------------------------------------- DuckDB's errors about our SQL

LOAD_FIX = "call inftda_duckdb.load(con), or use inftda-duckdb shell"
_NOT_LOADED = re.compile(r"(?:Scalar|Table) Function with name (inftda_[a-z_]+?)_(?:sql|udf)_\d+ "
                         r"does not exist")
_MISMATCH = re.compile(r"Macro (inftda_[a-z_]+)\(\) does not support the supplied arguments"
                       r"(?:.*?Candidate macros:\s*\w+\((.*?)\)\s*$)?", re.S)


def duckdb_hint(text: str, sql: str | None = None) -> str | None:
    """What DuckDB's own error ``text`` about the package's SQL means, for people (None when
    it is not about the package): a macro kept in a database file whose functions this
    connection never registered (load() forgotten after a restart), or a misspelled parameter
    of a package macro (named from ``sql``, the statement, with the closest valid name)."""
    missing = _NOT_LOADED.search(text)
    if missing:
        return (f"{missing[1]} is not loaded on this connection: the database file keeps the "
                "package's SQL macros, but the functions they call live in the process that "
                f"loaded them (a restart loses them). Fix: {LOAD_FIX}")
    mismatch = _MISMATCH.search(text)
    if mismatch:
        return unknown_parameters(mismatch[1], mismatch[2], sql) or (
            f"{mismatch[1]} does not accept these arguments: a misspelled parameter, or the "
            "source or the columns missing (DuckDB does not say which). Valid parameters: "
            f"{', '.join(parameters(mismatch[1], mismatch[2]))}. Fix: spell them as listed; "
            "inftda_duckdb.explain(exc, sql) names a misspelled one")
    return None


def parameters(macro: str, signature: str | None = None) -> list[str]:
    """The named parameters of a package macro: the option table's for inftda_release and
    inftda_preview, else those of ``signature`` (DuckDB's candidate list)."""
    from . import options

    surface = macro.removeprefix("inftda_")
    if surface in options.SURFACES:
        return ["source", "columns", *options.names(options.of(surface, "duckdb", sql=True))]
    return [p.split(":=")[0].strip() for p in (signature or "").split(",") if ":=" in p]


def unknown_parameters(macro: str, signature: str | None, sql: str | None) -> str | None:
    """``macro``'s named parameters used in ``sql`` that it does not have, as a message:
    ``inftda_release has no parameter rhoo (did you mean rho?)``; None if none is found."""
    valid = parameters(macro, signature)
    if sql is None or not valid:
        return None
    used: list[str] = []
    for found in re.finditer(rf"\b{macro}\s*\(", sql, re.I):
        depth, i = 1, found.end()
        while i < len(sql) and depth:
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            i += 1
        used += re.findall(r"(\w+)\s*:=", sql[found.end():i])
    wrong = [u for u in dict.fromkeys(used) if u.lower() not in valid]
    if not wrong:
        return None
    hints = []
    for name in wrong:
        close = difflib.get_close_matches(name.lower(), valid, n=1)
        hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return (f"{macro} has no parameter {', '.join(hints)}. Valid parameters: "
            f"{', '.join(valid)}. Fix: spell the parameter as listed, e.g. "
            f"{macro}(..., rho := 0.5)")
