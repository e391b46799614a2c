"""The arguments of the package's UDFs, read defensively.

DuckDB's Python UDFs are instance-wide: any caller of the database can call
``inftda_begin_3(...)`` or ``inftda_levels_3(...)`` by name, with any arguments. The package's
own SQL always passes well-formed ones; anything else is refused here with one clear message
(which UDF, which argument, that it is an internal step, that nothing was charged), never a raw
TypeError, JSONDecodeError or an InternalError calling it a bug. Values a caller passes on
purpose through a macro (a budget's source, an option) keep their own, specific errors.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import InputError, shown

_NO_VALUE = object()


def hand_call(udf: str, argument: str, value: Any, rule: str) -> InputError:
    """The refusal of an internal UDF called with an argument its statement never passes."""
    text = shown(value, 80) if value is not _NO_VALUE else "nothing"
    return InputError(
        f"{udf}: {argument} {rule}; got {text}. It is an internal step of the package's SQL "
        "functions (inftda_release, inftda_preview, inftda_evaluate, inftda_set_budget, ...), "
        "which pass it well-formed; it is not for calling by hand. Nothing was charged. Fix: "
        "call the table macros")


def json_value(text: Any, udf: str, argument: str) -> Any:
    """The JSON value in ``text`` (a SQL NULL is None), or a :func:`hand_call` refusal."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise hand_call(udf, argument, text, "must be JSON text")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # (JSONDecodeError is a ValueError)
        raise hand_call(udf, argument, text, "must be JSON text") from None


def json_object(text: Any, udf: str, argument: str) -> dict[str, Any]:
    """The JSON object in ``text``, or a :func:`hand_call` refusal."""
    value = json_value(text, udf, argument)
    if not isinstance(value, dict):
        raise hand_call(udf, argument, text, "must be a JSON object")
    return value


def integer(value: Any, udf: str, argument: str, low: int = 0) -> int:
    """``value`` as an int >= ``low`` (a SQL integer), or a :func:`hand_call` refusal."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise hand_call(udf, argument, value, f"must be an integer >= {low}")
    return value


def malformed(udf: str, argument: str, value: Any = _NO_VALUE) -> InputError:
    """A :func:`hand_call` refusal of an argument whose content is not what the SQL passes."""
    return hand_call(udf, argument, value, "is not what the package's SQL passes")
