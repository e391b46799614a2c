"""Regenerate the option tables of the reference docs from the option table.

``python -m inftda_duckdb.tools.reference`` rewrites every region ``<!-- options:release -->``,
``<!-- options:preview -->``, ``<!-- options:plan -->`` ... ``<!-- /options -->`` of
``docs/reference/sql.md`` from :mod:`inftda_duckdb.core.options` (``--check``: only report
whether they are current, exit status 1 if not; the tests run it). The command line's table
(``options:cli-release``) lists flags the option table does not own (sources, destinations) and
is tested against the parser.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..core import options

PAGES = {"sql.md": (options.RELEASE, options.PREVIEW, options.PLAN)}
_REGION = re.compile(r"(<!-- options:(\w+) -->\n)(.*?)(<!-- /options -->)", re.S)


def regenerate(text: str, surfaces: tuple[str, ...]) -> str:
    """``text`` with the regions of ``surfaces`` replaced by the option table's rendering."""

    def table(m: re.Match[str]) -> str:
        if m[2] not in surfaces:
            return m[0]
        return f"{m[1]}{options.reference_table(m[2])}\n{m[4]}"

    return _REGION.sub(table, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inftda_duckdb.tools.reference",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, default=Path("docs/reference"),
                        help="the reference folder (default: docs/reference)")
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for page, surfaces in PAGES.items():
        path = args.docs / page
        text = path.read_text()
        fresh = regenerate(text, surfaces)
        if fresh != text:
            stale.append(str(path))
            if not args.check:
                path.write_text(fresh)
    if args.check and stale:
        print(f"stale option tables in {', '.join(stale)}: run python -m "
              "inftda_duckdb.tools.reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
