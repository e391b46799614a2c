"""An interactive SQL shell with inftda_duckdb loaded (``inftda-duckdb shell [DATABASE]``).

DuckDB's own command-line shell cannot load Python UDFs, so this small shell brings them: it reads
SQL statements ending in ``;`` (several lines each), runs them on a connection prepared by
``inftda_duckdb.extension.load`` and prints results as DuckDB's box tables (``.mode csv`` or
``json`` for scripts). Dot commands: ``.tables``, ``.schema [TABLE]``, ``.budget``, ``.ledger``,
``.read FILE``, ``.mode [table|csv|json]``, ``.help``, ``.quit``.

Interactive (a terminal): prompts, line editing and history through ``readline`` (history file
``~/.inftda_duckdb_history``, or ``$INFTDA_DUCKDB_HISTORY``); an error is printed and the shell
goes on; Ctrl-C cancels the statement running. Non-interactive (``-c SQL``, ``.read FILE`` or a
pipe): no prompts, the shell stops at the first error with the command line's exit status (2
input, 3 budget refused, 1 internal, 130 interrupted), so a failing script does not run on.
Errors speak SQL (``rho := 0.5``), and a misspelled parameter of a package function is named,
with the valid ones.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction
from typing import Any, TextIO

import duckdb

from ..core.errors import number, speaking
from ..core.identifiers import literal, parse_qualified
from ..duckdb.progress import ScanProgress, scan_text, watching
from ..duckdb.registry import RELEASES
from ..ledger.dialect import STORAGE
from .admission import Admission
from .output import FORMATS, emit, render
from .status import (
    EXIT_CHARGED,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    error_text,
    exit_status,
    is_interrupt,
)

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
  .read FILE         run the statements in FILE
  .mode [MODE]       how results print: table (default), csv or json
  .help              this text
  .quit  (.exit)     leave the shell (Ctrl-D works too)
"""

_DDL_ONLY = ({"Count"}, {"Success"})


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
                 interactive: bool, mode: str = "table",
                 admission: Admission | None = None) -> None:
        self.con, self.out, self.err, self.interactive = con, out, err, interactive
        self.mode = mode  # table, csv or json (.mode)
        self.buffer = ""  # text of an unfinished statement
        self.status = EXIT_OK  # the exit status of the last failure
        self.admission = admission  # the public shell's gate (None: curator)
        self.seen: set[tuple[str, int]] = set()  # ledger rows already said

    def fail(self, error: BaseException, sql: str | None = None) -> bool:
        charges = getattr(error, "inftda_charged", None)
        self.status = exit_status(error)
        if charges and is_interrupt(error):  # the ledger's account, whatever stopped it
            text = (f"interrupted (Ctrl-C): the release was charged ({'; '.join(charges)}: "
                    "its budget is spent) but nothing was returned")
        elif charges:
            self.status = EXIT_CHARGED
            text = (f"{error_text(error, sql)} (the release was charged before it failed: "
                    f"{'; '.join(charges)}: its budget is spent)")
        else:
            text = error_text(error, sql)
        self.err.write(f"Error: {text}\n")
        return False

    def execute(self, sql: str, own: bool = False) -> bool:
        """Run one statement and print its result; False (message on ``err``) if it failed.
        ``own``: the shell's own SQL (a dot command), which the public shell does not check.
        What a statement charged is said on ``err`` (rho, source, ledger id)."""
        from ..duckdb.budgets import outside_transaction
        from ..duckdb.extension import statement

        def run() -> Any:
            relation = self.con.sql(sql)
            return None if relation is None else relation.to_arrow_table()

        begun, charges = RELEASES.begun(self.con), []
        try:
            if self.admission is not None and not own:
                sql = self.admission.statement(sql)
            # vouched: the SQL budget setters run if no transaction is open now (one statement)
            with speaking("sql"), outside_transaction(self.con, sql), self.progress():
                # on a helper thread: Ctrl-C stops a release within a block (extension.statement)
                table = statement(self.con, run)
            if self.admission is not None and not own:
                self.admission.created(sql)
            charges = self.charged(begun)
            if table is None:
                return True
            if set(table.column_names) in _DDL_ONLY and table.num_rows <= 1:
                return True
            if self.mode == "table":
                self.out.write(render(self.con, table))
            else:
                emit(self.con, table, self.mode, out=self.out)
        except (Exception, KeyboardInterrupt) as error:  # Ctrl-C: the statement stops, the
            charges = charges or self.charged(begun, say=False)  # shell goes on; every
            if charges:  # failure is reported, with what the statement charged
                setattr(error, "inftda_charged", charges)  # noqa: B010
            return self.fail(error, sql)
        return True

    @contextlib.contextmanager
    def progress(self) -> Iterator[None]:
        """On a terminal: DuckDB's progress of a statement running more than a second, redrawn
        on one line of ``err`` and cleared when it ends (as DuckDB's own shell does)."""
        if not self.err.isatty():
            yield
            return
        shown = False

        def report(p: ScanProgress) -> None:
            nonlocal shown
            shown = True
            self.err.write(f"\r{'running: ' + scan_text(p)}\033[K")
            self.err.flush()

        try:
            with watching(self.con, report):
                yield
        finally:
            if shown:
                self.err.write("\r\033[K")
                self.err.flush()

    def charged(self, begun: int, say: bool = True) -> list[str]:
        """The charges a statement made (if it began a release): each said on ``err``."""
        if RELEASES.begun(self.con) == begun:
            return []
        from ..duckdb.budgets import ledger_rows

        rows = [r for r in ledger_rows(self.con).to_pylist()
                if (r["ledger"], r["id"]) not in self.seen]
        self.seen |= {(r["ledger"], r["id"]) for r in rows}
        mine = [r for r in rows if r["origin"] == "sql"][-(RELEASES.begun(self.con) - begun):]
        texts = [f"rho {number(Fraction(r['rho']))} on {r['source']} (ledger id {r['id']})"
                 f"{'' if r['private'] else ', NOT PRIVATE'}" for r in mine]
        if say:
            for text in texts:
                self.err.write(f"charged {text}\n")
        return texts

    def dot(self, line: str) -> bool | None:
        """Run a dot command. Returns None to quit, else success."""
        words = line.split(maxsplit=1)
        command, argument = words[0].lower(), (words[1].strip() if len(words) > 1 else "")
        if command in (".quit", ".exit", ".q"):
            return None
        if command == ".help":
            self.out.write(HELP)
            return True
        if command == ".mode":
            if not argument:
                self.out.write(f"{self.mode}\n")
                return True
            if argument.lower() not in FORMATS:
                self.err.write(f"Error: .mode must be one of {', '.join(FORMATS)}; got "
                               f"{argument!r}. Fix: .mode csv\n")
                self.status = EXIT_INPUT
                return False
            self.mode = argument.lower()
            return True
        if command == ".read":
            return self.read(argument)
        if command == ".tables":
            return self.execute(
                "SELECT database_name AS database, schema_name AS schema, table_name AS name, "
                "'table' AS kind FROM duckdb_tables() WHERE NOT internal UNION ALL "
                "SELECT database_name, schema_name, view_name, 'view' FROM duckdb_views() "
                "WHERE NOT internal ORDER BY 1, 2, 3", own=True)
        if command == ".schema":
            where = ""
            if argument:
                try:
                    name = parse_qualified(argument, "table")[-1]
                except Exception as error:
                    return self.fail(error)
                where = f" AND lower(name) = lower({literal(name)})"
            found = self.con.execute(
                "SELECT sql FROM (SELECT table_name AS name, sql FROM duckdb_tables() "
                "WHERE NOT internal UNION ALL SELECT view_name, sql FROM duckdb_views() "
                f"WHERE NOT internal) WHERE sql IS NOT NULL{where} ORDER BY name").fetchall()
            if argument and not found:
                self.err.write(f"Error: .schema: no table or view named {argument}. Fix: "
                               ".tables lists them\n")
                self.status = EXIT_INPUT
                return False
            for (sql,) in found:
                self.out.write(sql.rstrip(";") + ";\n")
            return True
        if command == ".budget":
            return self.execute("SELECT budget, sources, budget_rho_exact, budget_rho, "
                                "spent_rho_exact, spent_rho, remaining_rho_exact, remaining_rho, "
                                "releases, non_private_releases FROM inftda_budget()", own=True)
        if command == ".ledger":
            return self.execute("SELECT id, date_trunc('second', started_at::TIMESTAMP) AS "
                                "started_at, source, columns, neighbours, rho, printf('%.6g', "
                                "rho_approx) AS rho_decimal, epsilon, delta, output, private "
                                "FROM inftda_releases() ORDER BY ledger, id", own=True)
        self.err.write(f"Error: unknown command {command}; type .help for the list\n")
        self.status = EXIT_INPUT
        return False

    def read(self, path: str) -> bool:
        """``.read FILE``: run its statements, stopping at the first error."""
        if not path:
            self.err.write("Error: .read needs a file. Fix: .read script.sql\n")
            self.status = EXIT_INPUT
            return False
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            self.err.write(f"Error: .read cannot read {path}: {reason}. Fix: check the path "
                           "(relative to the folder the shell was started in)\n")
            self.status = EXIT_INPUT
            return False
        inner = Shell(self.con, self.out, self.err, interactive=False, mode=self.mode,
                      admission=self.admission)
        inner.seen = self.seen
        ok = inner.run(text.splitlines()) == EXIT_OK
        self.mode = inner.mode
        if not ok:
            self.status = inner.status
        return ok

    def run(self, lines: Iterable[str]) -> int:
        """Process ``lines``; returns the exit status (that of the first failure when not
        interactive)."""
        for line in lines:
            if not self.buffer.strip() and line.strip().startswith("."):
                ok = self.dot(line.strip())
                if ok is None:
                    break
                if not ok and not self.interactive:
                    return self.status
                continue
            statements, self.buffer = split_statements(self.buffer + line + "\n")
            for statement in statements:
                if not self.execute(statement) and not self.interactive:
                    return self.status
        rest, self.buffer = self.buffer.strip(), ""
        if rest and not self.execute(rest) and not self.interactive:
            return self.status
        return EXIT_OK


def _prompted_lines(shell: Shell) -> Iterator[str]:
    """Lines typed at a terminal, with readline editing and history: a statement typed over
    several lines is kept as one history entry (up-arrow recalls it whole)."""
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
    typed: list[str] = []  # the lines of the statement being typed
    try:
        while True:
            try:
                line = input("   ...> " if shell.buffer.strip() else "inftda> ")
            except EOFError:
                shell.out.write("\n")
                return
            except KeyboardInterrupt:
                shell.out.write("^C\n")
                shell.buffer, typed = "", []
                continue
            typed.append(line)
            yield line
            if not shell.buffer.strip():  # the statement is complete: one history entry
                if readline is not None and len(typed) > 1:
                    _one_entry(readline, typed)
                typed = []
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.set_history_length(1000)
                readline.write_history_file(history)


def _one_entry(readline: Any, lines: list[str]) -> None:
    """Replace the history entries of ``lines`` (the last ones) by one: the whole statement."""
    entries = [e for e in lines if e.strip()]
    length = readline.get_current_history_length()
    start = length - len(entries)
    if start < 0 or [readline.get_history_item(start + 1 + i)
                     for i in range(len(entries))] != entries:
        return
    for i in reversed(range(len(entries))):
        readline.remove_history_item(start + i)
    readline.add_history("\n".join(lines))


def main(database: str | None, stdin: TextIO | None = None, commands: Sequence[str] = (),
         mode: str = "table", ledger: str | None = None,
         prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> int:
    """Open ``database`` (in memory if None), load the package (with ``ledger``, see ``load``)
    and run the shell: the ``commands`` (``-c``) if given, else the statements of ``stdin`` (a
    terminal: interactive). ``prepare(con)`` runs after the load (the CLI's ``--public``)."""
    from ..duckdb import disclosure
    from ..duckdb.budgets import ledger_rows
    from ..duckdb.extension import load

    source = stdin or sys.stdin
    interactive = not commands and source.isatty()
    con = duckdb.connect(database or ":memory:", config=dict(STORAGE))
    try:
        load(con, ledger=ledger)
        if prepare is not None:
            prepare(con)
        admission = Admission(con) if disclosure.is_public(con) else None
        shell = Shell(con, sys.stdout, sys.stderr, interactive, mode, admission)
        shell.seen = {(r["ledger"], r["id"]) for r in ledger_rows(con).to_pylist()}
        for command in commands:  # each -c is one complete command, as in psql
            status = shell.run(command.splitlines())
            if status != EXIT_OK:
                return status
        if commands:
            return EXIT_OK
        if interactive:
            name = database or "an in-memory database"
            print(f"inftda-duckdb shell on {name} (DuckDB {duckdb.__version__}). "
                  "Statements end with ';'. Type .help for help, .quit to leave.")
            return shell.run(_prompted_lines(shell))
        try:
            return shell.run(line.rstrip("\n") for line in source)
        except KeyboardInterrupt as error:
            shell.fail(error)
            return EXIT_INTERRUPTED
    finally:
        con.close()
