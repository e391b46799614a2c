"""Every fenced block of README.md and docs/**/*.md runs as written.

The conventions (docs/README.md repeats them for writers):

- One test per page, ``test_page[docs/how-to/spark.md]``: the page's blocks run in order, in a
  fresh empty folder that is the working directory of all of them (a file one block writes is
  there for the next).
- ```` ```python ````: run in one namespace per page.
- ```` ```sql ````: run as ``inftda-duckdb shell`` runs statements (one at a time, the budget
  setters allowed when no transaction is open, stopping at the first error), on the DuckDB
  connection that the page's Python holds in the variable ``con``, or in the variable named by
  ``<!-- sql-connection: NAME -->`` on the line before the block.
- ```` ```bash ````: run by ``bash -e -o pipefail`` with this test run's environment (its
  ``inftda-duckdb`` first on PATH). Two kinds of line are not run there:
  a line starting with ``pip install`` is its own test, ``test_install[...]`` (marker ``slow``),
  run whole (``pip install . && inftda-duckdb demo``) in a fresh virtualenv from the checkout;
  a line running the test suite (``python -m pytest``) must be a line ``.ci/run`` runs, which the
  test checks instead of running the suite inside itself.
- ```` ```text ```` right after a python or bash block: what that block prints (a bash block:
  stdout and stderr as a terminal shows them; a python block: stdout). Lines
  are compared with runs of spaces made equal; a line ``...`` stands for any lines, and ``...``
  inside a line for any text.
- No other language, and no block is skipped: a block that cannot run here is not in the docs.
- ``<!-- doc-test: spark -->`` (or ``postgres``, or ``slow``: a page that compiles the kernel)
  anywhere on a page puts its test under that marker; a Spark page is skipped without PySpark,
  as the other Spark tests are.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
LANGUAGES = ("python", "sql", "bash", "text")
MARKERS = ("spark", "postgres", "slow")
INSTALL = re.compile(r"^\s*pip install\b")
TEST_SUITE = re.compile(r"\bpython -m pytest\b")
CONNECTION = re.compile(r"<!--\s*sql-connection:\s*(\w+)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    before: str  # the text line just above the opening fence

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path, text: str | None = None) -> list[Block]:
    text = page.read_text() if text is None else text
    found = []
    for match in FENCE.finditer(text):
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append(Block(page, text.count("\n", 0, match.start()) + 1, match[1].lower(),
                           match[2], above))
    return found


def logical_lines(code: str) -> list[str]:
    """Shell lines with their backslash continuations kept together."""
    lines: list[str] = []
    for physical in code.splitlines():
        if lines and lines[-1].endswith("\\"):
            lines[-1] += "\n" + physical
        else:
            lines.append(physical)
    return lines


def install_lines(page: Path) -> list[str]:
    return [line for b in blocks(page) if b.language == "bash"
            for line in logical_lines(b.code) if INSTALL.match(line)]


def page_markers(page: Path) -> list[Any]:
    text = page.read_text()
    return [getattr(pytest.mark, m) for m in MARKERS if f"<!-- doc-test: {m} -->" in text]


def page_params() -> list[Any]:
    return [pytest.param(p, id=str(p.relative_to(ROOT)), marks=page_markers(p)) for p in PAGES]


def install_params() -> list[Any]:
    """One test per install command (the same command on two pages: one test)."""
    commands = {line.split(" #")[0].strip(): line for p in PAGES for line in install_lines(p)
                if not TEST_SUITE.search(line)}
    return [pytest.param(line, id=command, marks=pytest.mark.slow)
            for command, line in commands.items()]


# ----------------------------------------------------------------------------- comparing output
def matches(expected: str, actual: str) -> bool:
    """``expected`` (a ```text block) against ``actual``: spaces equal, ``...`` wildcards."""
    def squeeze(line: str) -> str:
        return " ".join(line.split())

    pattern = []
    for line in expected.strip("\n").splitlines():
        if line.strip() == "...":
            pattern.append(r"(?:.*\n)*?")
        else:
            parts = (re.escape(part) for part in squeeze(line).split("..."))
            pattern.append(".*?".join(parts) + r"\n")
    text = "".join(squeeze(line) + "\n" for line in actual.strip("\n").splitlines())
    return re.fullmatch("".join(pattern), text) is not None


def test_output_matching() -> None:
    assert matches("a  b\n...\nlast 1...\n", "a b\nx\ny\nlast 12 s\n")
    assert matches("only\n", "only\n")
    assert not matches("a\nb\n", "a\nc\n")
    assert not matches("a\n", "a\nb\n")


def test_block_parsing() -> None:
    text = ("intro\n<!-- sql-connection: db -->\n```sql\nSELECT 1;\n```\n"
            "```bash\npip install . \\\n  && x\nls\n```\n")
    found = blocks(ROOT / "scratch.md", text)
    assert [(b.line, b.language) for b in found] == [(3, "sql"), (6, "bash")]
    assert CONNECTION.search(found[0].before)[1] == "db"  # type: ignore[index]
    assert logical_lines(found[1].code) == ["pip install . \\\n  && x", "ls"]


# ---------------------------------------------------------------------------------- the pages
def environment() -> dict[str, str]:
    bin_dir = Path(sys.executable).parent  # the console script sits next to this python
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def run_python(block: Block, namespace: dict[str, Any]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.code, block.where, "exec"), namespace)
    return out.getvalue()


def run_sql(block: Block, namespace: dict[str, Any]) -> str:
    import duckdb

    from inftda_duckdb.tools.shell import Shell

    name = CONNECTION.search(block.before)
    variable = name[1] if name else "con"
    con = namespace.get(variable)
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise AssertionError(f"no DuckDB connection in the page's variable {variable!r} (make it "
                             "in a python block before, or name one with <!-- sql-connection -->)")
    out, err = io.StringIO(), io.StringIO()
    status = Shell(con, out, err, interactive=False).run(block.code.splitlines())
    if status != 0:
        raise AssertionError(f"exit status {status}: {err.getvalue()}")
    return out.getvalue()


def suite_line_runs_in_ci(line: str) -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = line.split(" #")[0].strip()
    assert any(c.strip() == command for c in ci), f".ci/run does not run: {command}"


def run_bash(block: Block, folder: Path) -> str:
    kept = []
    for line in logical_lines(block.code):
        if TEST_SUITE.search(line):
            suite_line_runs_in_ci(line)
        elif not INSTALL.match(line):
            kept.append(line)
    if not any(line.strip() and not line.lstrip().startswith("#") for line in kept):
        return ""
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", "\n".join(kept)], cwd=folder,
                            env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=900, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise AssertionError(f"exit status {result.returncode}\n{result.stdout}")
    return result.stdout  # what a terminal shows: stdout and stderr as they came


@pytest.mark.parametrize("page", page_params())
def test_page(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spark_session = None
    if "<!-- doc-test: spark -->" in page.read_text():
        spark_session = pytest.importorskip("pyspark.sql").SparkSession
        # the executors' Python: this interpreter (its environment has the package)
        monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
        before = spark_session.getActiveSession()
    monkeypatch.chdir(tmp_path)
    try:
        run_page(page, tmp_path)
    finally:
        # a session the page started is stopped: the Spark tests' own (local[2, 2], ...) is
        # made by their fixture, which getOrCreate would otherwise hand the page's
        if spark_session is not None and before is None:
            started = spark_session.getActiveSession()
            if started is not None:
                started.stop()


def run_page(page: Path, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__doc__"}
    try:
        output: str | None = None
        for block in blocks(page):
            output = run_block(block, namespace, output, tmp_path)
    finally:
        for value in namespace.values():  # the DuckDB connections the page left open
            if type(value).__name__ == "DuckDBPyConnection":
                value.close()


def run_block(block: Block, namespace: dict[str, Any], output: str | None,
              folder: Path) -> str | None:
    """Run ``block``; returns what it printed (None after a text block or a sql block)."""
    if block.language not in LANGUAGES:
        raise AssertionError(f"{block.where}: a ```{block.language} block (the docs use only "
                             f"{', '.join(LANGUAGES)}: see tests/docs/test_docs.py)")
    try:
        if block.language == "text":
            assert output is not None, "a ```text block shows the output of the block above"
            assert matches(block.code, output), f"expected\n{block.code}\ngot\n{output}"
            return None
        if block.language == "python":
            return run_python(block, namespace)
        if block.language == "sql":
            run_sql(block, namespace)
            return None
        return run_bash(block, folder)
    except Exception as error:
        raise AssertionError(f"{block.where} ({block.language}) failed: {error}") from error


def test_the_readme_is_short_and_starts_with_its_setup() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= 300, f"README.md has {len(readme)} lines (at most 300)"
    assert readme[2:6] == [
        "```bash",
        "pip install . && inftda-duckdb demo              # the main job: a DP release of "
        "embedded sample data",
        "pip install -e '.[test]' && python -m pytest     # the tests",
        "```",
    ]


# ------------------------------------------------------------------- installs from a checkout
@pytest.mark.parametrize("line", install_params())
def test_install(line: str, tmp_path: Path) -> None:
    """An install line of the docs, run whole, in a fresh virtualenv, from the checkout."""
    venv.create(tmp_path / "venv", with_pip=True)
    bin_dir = tmp_path / "venv" / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               VIRTUAL_ENV=str(tmp_path / "venv"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", line], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=1800,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"{line}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    words = shlex.split(line.split("&&")[0], comments=True)
    extras = re.search(r"\[(.+)\]", " ".join(words[2:]))
    if extras and words[2].startswith("."):  # an extra of the package: it imports
        check = {"spark": "import pyspark", "postgres": "import psycopg",
                 "plot": "import matplotlib", "test": "import pytest"}
        for extra in extras[1].split(","):
            code = check.get(extra.strip(), "import inftda_duckdb")
            subprocess.run([str(bin_dir / "python"), "-c", code], check=True, env=env,
                           cwd=tmp_path)
