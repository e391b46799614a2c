"""An interactive SQL shell with inftda_duckdb loaded (``inftda-duckdb shell [DATABASE]``).

DuckDB's own command-line shell cannot load Python UDFs, so this small shell brings them: it reads
SQL statements ending in ``;`` (several lines each), runs them on a connection prepared by
``inftda_duckdb.extension.load`` and prints results as DuckDB's box tables. Dot commands:
``.tables``, ``.schema [TABLE]``, ``.budget``, ``.ledger``, ``.help``, ``.quit``.

Interactive (a terminal): prompts, line editing and history through ``readline`` (history file
``~/.inftda_duckdb_history``, or ``$INFTDA_DUCKDB_HISTORY``); an error is printed and the shell
goes on. Non-interactive (``echo "SELECT 1;" | inftda-duckdb shell db``): no prompts, the shell
stops at the first error and exits with status 1, so a failing script does not run on.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO

import duckdb
import pyarrow as pa

from ..core.identifiers import literal, parse_qualified

HELP = """\
Enter SQL statements ending in ';' (a statement may span several lines). Examples:
  SELECT * FROM inftda_preview('trips', ['origin', 'dest'], rho := 0.5);
  CREATE TABLE trips_dp AS
    SELECT * FROM inftda_release('trips', ['origin', 'dest'], rho := 0.5);
Dot commands (at the start of a statement):
  .tables            list tables and views
  .schema [TABLE]    show CREATE statements (of one table or of all)
  .budget            privacy budgets per source: set, spent, remaining
  .ledger            every release charged so far
  .help              this text
  .quit  (.exit)     leave the shell (Ctrl-D works too)
"""

MAX_ROWS = 40
_DDL_ONLY = ({"Count"}, {"Success"})
_UDF_WRAPPER = re.compile(
    r"^.*?Python exception occurred while executing the UDF[^:]*:\s*"
    r"(?:[A-Za-z_.]*(?:InputError|LedgerError|BudgetExceededError|InternalError|InftdaError):\s*)?",
    re.S,
)


def clean_message(error: BaseException) -> str:
    """The user-facing text of an error: DuckDB's UDF wrapper prefix and our class name removed."""
    text = str(error).strip()
    stripped = _UDF_WRAPPER.sub("", text, count=1)
    return stripped or text


def render(con: duckdb.DuckDBPyConnection, table: pa.Table, max_rows: int = MAX_ROWS,
           max_width: int | None = None) -> str:
    """Render an Arrow table as DuckDB's box table (reads the materialised rows, runs no query).

    ENUM (dictionary) columns are shown as their labels, so the type row stays short. The width
    is the terminal's, or 1000 characters when output goes to a pipe or a file.
    """
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            column = table.column(i).cast(field.type.value_type)
            table = table.set_column(i, pa.field(field.name, field.type.value_type), column)
    if max_width is None:  # a terminal's width; no limit worth the name for a pipe or a file
        tty = sys.stdout.isatty()
        max_width = max(shutil.get_terminal_size((120, 24)).columns, 40) if tty else 1000
    width = max_width
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        con.from_arrow(table).show(max_width=width, max_rows=max_rows)
    return buffer.getvalue()


def split_statements(text: str) -> tuple[list[str], str]:
    """Split ``text`` at every ``;`` outside quotes and comments.

    Returns the complete statements (without the ``;``, blank ones dropped) and the unfinished
    rest. Understands '...' and "..." (doubled quotes inside), $$...$$, -- and /* */ comments.
    """
    statements: list[str] = []
    start, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            end = i + 1
            while True:
                end = text.find(ch, end)
                if end < 0:
                    return statements, text[start:]
                if text[end + 1 : end + 2] == ch:
                    end += 2
                    continue
                break
            i = end + 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i) or text.startswith("$$", i):
            close = "*/" if ch == "/" else "$$"
            end = text.find(close, i + 2)
            if end < 0:
                return statements, text[start:]
            i = end + 2
        elif ch == ";":
            if text[start:i].strip():
                statements.append(text[start:i].strip())
            start = i = i + 1
        else:
            i += 1
    return statements, text[start:]


class Shell:
    """Reads statements and dot commands, runs them on ``con``, writes results to ``out``."""

    def __init__(self, con: duckdb.DuckDBPyConnection, out: TextIO, err: TextIO,
                 interactive: bool) -> None:
        self.con, self.out, self.err, self.interactive = con, out, err, interactive
        self.buffer = ""  # text of an unfinished statement

    def execute(self, sql: str) -> bool:
        """Run one statement and print its result; False (message on ``err``) if it failed."""
        try:
            relation = self.con.sql(sql)
            if relation is None:
                return True
            table = relation.to_arrow_table()
            if set(table.column_names) in _DDL_ONLY and table.num_rows <= 1:
                return True
            self.out.write(render(self.con, table))
        except Exception as error:  # every failure is reported
            self.err.write(f"Error: {clean_message(error)}\n")
            return False
        return True

    def dot(self, line: str) -> bool | None:
        """Run a dot command. Returns None to quit, else success."""
        words = line.split(maxsplit=1)
        command, argument = words[0].lower(), (words[1].strip() if len(words) > 1 else "")
        if command in (".quit", ".exit", ".q"):
            return None
        if command == ".help":
            self.out.write(HELP)
            return True
        if command == ".tables":
            return self.execute(
                "SELECT database_name AS database, schema_name AS schema, table_name AS name, "
                "'table' AS kind FROM duckdb_tables() WHERE NOT internal UNION ALL "
                "SELECT database_name, schema_name, view_name, 'view' FROM duckdb_views() "
                "WHERE NOT internal ORDER BY 1, 2, 3")
        if command == ".schema":
            where = ""
            if argument:
                try:
                    name = parse_qualified(argument, "table")[-1]
                except Exception as error:
                    self.err.write(f"Error: {clean_message(error)}\n")
                    return False
                where = f" AND name = {literal(name)}"
            return self.execute(
                "SELECT sql FROM (SELECT table_name AS name, sql FROM duckdb_tables() "
                "WHERE NOT internal UNION ALL SELECT view_name, sql FROM duckdb_views() "
                f"WHERE NOT internal) WHERE sql IS NOT NULL{where} ORDER BY name")
        if command == ".budget":
            return self.execute("SELECT budget, sources, budget_rho, spent_rho, remaining_rho, "
                                "releases, non_private_releases FROM inftda_budget()")
        if command == ".ledger":
            return self.execute("SELECT id, date_trunc('second', started_at::TIMESTAMP) AS "
                                "started_at, source, columns, neighbours, rho, epsilon, delta, "
                                "output, private FROM inftda_releases() ORDER BY ledger, id")
        self.err.write(f"Error: unknown command {command}; type .help for the list\n")
        return False

    def run(self, lines: Iterable[str]) -> int:
        """Process ``lines``; returns the exit status (1 if a non-interactive statement failed)."""
        for line in lines:
            if not self.buffer.strip() and line.strip().startswith("."):
                ok = self.dot(line.strip())
                if ok is None:
                    break
                if not ok and not self.interactive:
                    return 1
                continue
            statements, self.buffer = split_statements(self.buffer + line + "\n")
            for statement in statements:
                if not self.execute(statement) and not self.interactive:
                    return 1
        rest, self.buffer = self.buffer.strip(), ""
        if rest and not self.execute(rest) and not self.interactive:
            return 1
        return 0


def _prompted_lines(shell: Shell) -> Iterator[str]:
    """Lines typed at a terminal, with readline editing and history."""
    history = os.environ.get("INFTDA_DUCKDB_HISTORY",
                             os.path.join(os.path.expanduser("~"), ".inftda_duckdb_history"))
    readline = None
    try:
        import readline as _readline

        readline = _readline
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
    except ImportError:  # pragma: no cover - Windows without pyreadline
        pass
    try:
        while True:
            try:
                line = input("   ...> " if shell.buffer.strip() else "inftda> ")
            except EOFError:
                shell.out.write("\n")
                return
            except KeyboardInterrupt:
                shell.out.write("^C\n")
                shell.buffer = ""
                continue
            yield line
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.set_history_length(1000)
                readline.write_history_file(history)


def main(database: str | None, stdin: TextIO | None = None, ledger: str | None = None) -> int:
    """Open ``database`` (in memory if None), load the package (with ``ledger``, see
    ``load``) and run the shell."""
    from ..duckdb.extension import load

    source = stdin or sys.stdin
    interactive = source.isatty()
    con = duckdb.connect(database or ":memory:")
    try:
        load(con, ledger=ledger)
        shell = Shell(con, sys.stdout, sys.stderr, interactive)
        if interactive:
            name = database or "an in-memory database"
            print(f"inftda-duckdb shell on {name} (DuckDB {duckdb.__version__}). "
                  "Statements end with ';'. Type .help for help, .quit to leave.")
            return shell.run(_prompted_lines(shell))
        return shell.run(line.rstrip("\n") for line in source)
    finally:
        con.close()
