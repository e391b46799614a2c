"""The command line's language for fixes: options spelled as flags (``--rho 0.5``,
``--domain hour=0..23``), calls as commands. Importing this module registers the renderer
(``core/errors.py``: one message, rendered for the interface in use)."""

from __future__ import annotations

import re
import shlex
from typing import Any

from ...core import options as table
from ...core.errors import RENDERERS

_FLAGS = {**{o.name: o.cli for o in table.OPTIONS if o.cli},  # --output-kind, --domain, ...
          "source": "--table", "released_table": "RELEASED", "released": "RELEASED",
          "true_table": "TRUE",
          "directory": "--dir"}
"""The flag of an argument where it is not ``--`` and the name with dashes."""


def _cli_value(value: Any) -> str:
    if isinstance(value, range):
        return f"{value.start}..{value.stop - 1}"
    if isinstance(value, list):
        return ",".join(_cli_value(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return text if text == "..." else shlex.quote(text)


class CliRenderer:
    """Fixes spelled as options of this command line (``--rho 0.5``, ``--domain hour=0..23``)."""

    def argument(self, name: str) -> str:
        if name.startswith("-") or not re.fullmatch(r"[a-z_]+", name):
            return name
        return _FLAGS.get(name, "--" + name.replace("_", "-"))

    def option(self, name: str, value: Any) -> str:
        flag = self.argument(name)
        if name == "domains" and isinstance(value, dict):
            return " ".join(f"--domain {k}={_cli_value(v)}" for k, v in value.items())
        if value is True:
            return flag
        return f"{flag} {_cli_value(value)}"

    def call(self, function: str, args: list[Any], options: dict[str, Any]) -> str:
        rest = " ".join(self.option(k, v) for k, v in options.items())
        if function == "set_budget" and args:
            return f"inftda-duckdb budget DATABASE --set {_cli_value(args[0])} {rest}".strip()
        return f"inftda-duckdb {function.replace('_', '-')} {rest}".strip()


RENDERERS["cli"] = CliRenderer()


__all__ = ["CliRenderer"]
