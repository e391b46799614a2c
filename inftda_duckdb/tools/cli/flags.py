"""The options of a release and of a preview on the command line, generated from the option
table (:mod:`inftda_duckdb.core.options`): flag, metavar, choices, default, the type its kind
implies, and help from its doc. What the command line does its own way is keyed here by option
name (``--domain COL=SPEC`` and ``--domain-table`` repeated: :data:`SETTINGS`) or by flag
(``--domain-file``: :data:`ALSO`), and parsed in :mod:`.arguments`."""

from __future__ import annotations

import argparse
import re
from typing import Any

from ...core import options as table
from .arguments import fraction, positive_int

TITLES = {"budget": "privacy budget (exactly one of --rho or --epsilon/--delta)",
          "domains": "public domains"}
"""The help's group titles, by the option table's group (else the group's own name)."""

SETTINGS: dict[str, dict[str, Any]] = {
    "domains": {"action": "append", "default": []},  # COL=SPEC, parsed by arguments.parse_domain
    "domain_tables": {"action": "append", "default": []},
}
"""argparse settings of the options the command line takes its own way, by option name."""

ALSO: dict[str, dict[str, Any]] = {
    "--domain-file": {"action": "append", "default": [], "metavar": "COL=FILE",
                      "help": "public domain from a .csv/.parquet file: its column named COL, "
                      "else its first column; repeatable"},
}
"""The command line's further flags for an option (the table's ``Option.also``), by flag."""


_NAMED = re.compile(r"\b(" + "|".join(o.name for o in table.OPTIONS if "_" in o.name and o.cli)
                    + r")\b")


_STRONG = re.compile(r"\*\*(.+?)\*\*")


def help_text(option: table.Option, surface: str) -> str:
    """An option's --help line in ``surface``'s parser: its command-line doc, else its doc as
    plain text (no Markdown, bold as capitals; the options it names spelled as flags:
    ``--auto-target``), and its default."""
    text = option.cli_doc or _NAMED.sub(lambda m: table.BY_NAME[m[1]].flag, option.doc)
    text = _STRONG.sub(lambda m: m[1].upper(), text).replace("`", "")  # **not private**
    if option.shown(surface) and option.kind != "boolean":
        text += f"; default {option.shown(surface)}"
    return text.replace("%", "%%")


def argument(option: table.Option, surface: str) -> dict[str, Any]:
    """``add_argument``'s keywords for an option of the table in ``surface``'s parser, from its
    kind, metavar, choices and default (and :data:`SETTINGS`)."""
    settings: dict[str, Any] = {"help": help_text(option, surface)}
    if option.kind == "boolean":
        return {**settings, "action": "store_true"}
    if option.metavar:
        settings["metavar"] = option.metavar
    if option.choices:
        settings["choices"] = option.choices
    if option.kind == "number":
        settings["type"] = fraction(option.flag, option.example)
    elif option.kind == "count":
        settings["type"] = positive_int(option.flag, option.example)
    elif option.kind == "integer":
        settings["type"] = int
    if option.default is not None:
        settings["default"] = option.default
    return {**settings, **SETTINGS.get(option.name, {})}


def add_table_options(p: argparse.ArgumentParser,
                      surface: str) -> dict[str, argparse._ArgumentGroup]:
    """The options of ``surface`` (release or preview) that have a flag, generated from the
    option table in its order and groups; returns the groups by name (a command adds its own
    options to them)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option in table.of(surface):
        if option.cli is None:
            continue
        if option.group not in groups:
            groups[option.group] = p.add_argument_group(TITLES.get(option.group, option.group))
        group = groups[option.group]
        group.add_argument(option.cli, **argument(option, surface))
        for flag in option.also:
            group.add_argument(flag, **ALSO[flag])
    return groups


__all__ = ["ALSO", "SETTINGS", "TITLES", "add_table_options", "argument", "help_text"]
