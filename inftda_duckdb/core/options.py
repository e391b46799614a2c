"""THE option table: every option of a release and of a preview, declared once.

Each :class:`Option` says its name (the Python keyword and the SQL named parameter), the kind
of value it takes, its default, a one-line doc, an example value, its command-line flag (with
its help where the command line's syntax differs from the doc), which surfaces take it
(``release``, ``preview``), which engines accept it (``duckdb``, ``spark``), and whether it
reaches the engine-neutral request (:func:`~inftda_duckdb.core.request.parse_request`) or is an
option of the calling interface (``source_name``, ``progress``, Spark's ``ledger``). Everything a
user reads about options comes from here: the SQL macros' parameter lists (``sql/macros.sql``),
the command line's flags with their metavars, choices, defaults and help
(``tools/cli/flags.py``), the Spark API's accepted keywords, and the reference tables in
``docs/reference``; the Python functions' signatures are tested against it. A new option is one
entry here plus its behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

RELEASE = "release"
PREVIEW = "preview"
PLAN = "plan"  # the rho a target error needs (core.targets): a preview without a budget
SURFACES = (RELEASE, PREVIEW, PLAN)
ENGINES = ("duckdb", "spark")
KINDS = ("number", "count", "integer", "boolean", "text", "list", "mapping", "function", "object")
"""What an option's value is: an exact positive number (``0.5``, ``'1/3'``), a positive integer,
a non-negative integer, true/false, a text, a list, a mapping, a function or another object (the
command line parses each kind its own way)."""
BOTH = frozenset({RELEASE, PREVIEW})
EVERY = frozenset(SURFACES)  # release, preview and plan: what shapes a release's bound
ALL_ENGINES = frozenset(ENGINES)


@dataclass(frozen=True)
class Option:
    """One option of a release or preview (see the module docstring)."""

    name: str
    doc: str
    group: str  # "budget", "domains", "mechanism", "privacy unit", "output", "interface"
    kind: str = "text"  # one of KINDS
    default: object = None  # as the Python API takes it (None: left out)
    shown_default: str = ""  # the default as the reference shows it ("" : none)
    preview_shown: str | None = None  # ... in a preview, where it differs
    choices: tuple[str, ...] = ()
    cli: str | None = None  # the command-line flag; None: not on the command line
    metavar: str | None = None
    surfaces: frozenset[str] = BOTH
    engines: frozenset[str] = ALL_ENGINES
    request: bool = True  # part of the engine-neutral request (else: the interface's own)
    sql: bool = True  # a named parameter of the SQL table macros
    sql_default: str = "NULL"  # its default in the macros' parameter list
    also: tuple[str, ...] = field(default_factory=tuple)  # more flags serving it (--domain-file)
    example: str = ""  # a value as the command line takes it (its fixes: "pass e.g. --rho 0.5")
    cli_doc: str = ""  # the command line's help, where its syntax differs from ``doc``

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: unknown kind {self.kind!r}")

    def shown(self, surface: str) -> str:
        """The default the reference shows for ``surface``."""
        if surface == PREVIEW and self.preview_shown is not None:
            return self.preview_shown
        return self.shown_default

    @property
    def flag(self) -> str:
        """The command-line flag, or the Python name where there is none."""
        return self.cli or self.name


OPTIONS: tuple[Option, ...] = (
    Option("rho", "total zCDP budget, a number or a string (`0.5`, `'1/3'`), exact. Give exactly "
           "one of `rho` or `epsilon` + `delta`", "budget", kind="number", cli="--rho", metavar="R",
           example="0.5"),
    Option("epsilon", "with `delta`: the budget as (epsilon, delta)-DP, converted to the largest "
           "rho that gives it (Canonne-Kamath-Steinke, rounded down)", "budget", kind="number",
           cli="--epsilon", metavar="E", example="1"),
    Option("delta", "with `epsilon`; in a preview with `rho`, or in a plan, the delta of the "
           "reported epsilon", "budget", kind="number", preview_shown="1e-6", cli="--delta",
           metavar="D", example="1e-6", surfaces=EVERY),
    Option("domains", "public domains: `{'hour': range(24), 'origin': ['EWR', 'JFK', 'LGA']}`, "
           "in code order; a large integer range as `{'id': {'start': 0, 'stop': 1000000}}` "
           "(optional `'step'`), which stays a range", "domains", kind="mapping", cli="--domain",
           metavar="COL=SPEC", also=("--domain-file",),
           cli_doc="public domain of a column: COL=LO..HI (integers) or COL=V1,V2,... (labels); "
           "repeatable. ENUM columns need none", surfaces=EVERY),
    Option("domain_tables", "public tables listing the valid combinations of some hierarchy "
           "columns (nested hierarchies), e.g. `['geo']`", "domains", kind="list",
           cli="--domain-table", metavar="T",
           cli_doc="public domain table (in --db) for one column or a nested pair of columns; "
           "repeatable", surfaces=EVERY),
    Option("domain_from_data", "read undeclared domains from the private data: exploration "
           "only, **not private**", "domains", kind="boolean", default=False,
           shown_default="false", cli="--domain-from-data", sql_default="false", surfaces=EVERY),
    Option("level_weights", "budget share per level (d weights, or d + 1 when the total is "
           "noised; root first), or `'auto'`: the split minimising the Theorem 1 bound at "
           "`auto_target`, from public sizes only", "mechanism", kind="list",
           shown_default="uniform", cli="--level-weights", metavar="W1,W2,...", surfaces=EVERY),
    Option("auto_target", "with `level_weights` `'auto'`: `'leaves'`, `'all'` (every level's "
           "bound counts once), or a level (its number, 1 = the first column, or the column's "
           "name)", "mechanism", shown_default="'leaves'", cli="--auto-target", metavar="T",
           surfaces=EVERY),
    Option("estimator", "what each parent's children are fitted from: `'inftda'` (the paper's: "
           "their noisy counts) or `'least_squares'` (every public cell of every level noised, "
           "each node estimated by weighted least squares from all levels, then the same "
           "integer pass: more accurate upper levels for the same budget, more cells noised on "
           "sparse data)", "mechanism", shown_default="'inftda'",
           choices=("inftda", "least_squares"), cli="--estimator", surfaces=EVERY),
    Option("output", "`'counts'`: the columns + `count`; `'rows'`: one row per synthetic record",
           "output", default="counts", shown_default="'counts'", choices=("counts", "rows"),
           cli="--output-kind", surfaces=frozenset({RELEASE})),
    Option("neighbours", "`'substitute'` (alias `'bounded'`: n is public) or `'add_remove'` "
           "(alias `'unbounded'`: the total is noised too)", "mechanism",
           shown_default="'substitute'",
           choices=("substitute", "add_remove", "bounded", "unbounded"), cli="--neighbours",
           surfaces=EVERY),
    Option("privacy_unit", "a column identifying people: at most `max_rows_per_unit` rows of "
           "each are kept (a uniformly random subset) and the noise protects all of them; the "
           "total is noised", "privacy unit", cli="--privacy-unit", metavar="COL", surfaces=EVERY),
    Option("max_rows_per_unit", "with `privacy_unit`: the rows kept per unit", "privacy unit",
           kind="count", shown_default="1", cli="--max-rows-per-unit", metavar="M", example="3",
           surfaces=EVERY),
    Option("rows_per_unit_public", "with a privacy unit under `substitute`: the curator asserts "
           "every unit's number of rows is public, so the capped total is released exactly",
           "privacy unit", kind="boolean", default=False, shown_default="false",
           cli="--rows-per-unit-public", surfaces=EVERY),
    Option("unknown", "rows with NULL or undeclared values: `'error'` (names the column, the "
           "count, examples and the fix) or `'drop'` (needs a noised total)", "output",
           shown_default="'error'", choices=("error", "drop"), cli="--unknown",
           surfaces=frozenset({RELEASE})),
    Option("seed", "reproducible noise for tests and demos: the release is **not private**",
           "output", kind="integer", cli="--seed", metavar="N", example="42",
           surfaces=frozenset({RELEASE})),
    Option("beta", "the bound holds with probability at least 1 - beta", "output", kind="number",
           default=0.05, shown_default="0.05", cli="--beta", example="0.05",
           surfaces=frozenset({PREVIEW, PLAN}), request=False, sql_default="0.05"),
    Option("max_error", "the largest error to plan for: a number (at `level`), or one per level "
           "(NULL for a level without a target)", "target", kind="list", cli="--max-error",
           metavar="X", example="50", surfaces=frozenset({PLAN}), request=False,
           cli_doc="the largest error to plan for at --level, or X1,X2,... one per level "
           "(- for a level without a target)"),
    Option("level", "with one `max_error`: the level it is for (its number, 1 = the first "
           "column, or the column's name)", "target", shown_default="the leaves", cli="--level",
           metavar="K", example="2", surfaces=frozenset({PLAN}), request=False),
    Option("source_name", "with an in-memory source (DataFrame, relation, Arrow): the name its "
           "releases are charged to (`'trips'`, `'name:trips'` or `'file:PATH'`)", "interface",
           surfaces=frozenset({RELEASE}), request=False, sql=False),
    Option("progress", "a function called with each level's progress (a `LevelProgress`)",
           "interface", kind="function", surfaces=frozenset({RELEASE}),
           engines=frozenset({"duckdb"}), request=False, sql=False),
    Option("ledger", "the ledger charged: a ledger file on the driver, a `postgresql://` URL, "
           "`':memory:'`, a `Ledger` or a DuckDB connection (default `INFTDA_LEDGER`)",
           "interface", kind="object", surfaces=frozenset({RELEASE}), engines=frozenset({"spark"}),
           request=False, sql=False),
    Option("partitions", "the number of subtree partitions", "interface", kind="count",
           surfaces=frozenset({RELEASE}), engines=frozenset({"spark"}), request=False, sql=False),
)

BY_NAME = {o.name: o for o in OPTIONS}
REQUEST = tuple(o.name for o in OPTIONS if o.request)
"""The options a :class:`~inftda_duckdb.core.request.ReleaseRequest` is parsed from."""


def of(surface: str, engine: str | None = None, *, sql: bool | None = None,
       request: bool | None = None) -> tuple[Option, ...]:
    """The options of ``surface`` (release or preview), optionally only those ``engine`` takes,
    those of the SQL macros (``sql``), or those of the request (``request``), in table order."""
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}")
    return tuple(o for o in OPTIONS if surface in o.surfaces
                 and (engine is None or engine in o.engines)
                 and (sql is None or o.sql == sql)
                 and (request is None or o.request == request))


def names(options: Iterable[Option]) -> tuple[str, ...]:
    return tuple(o.name for o in options)


def macro_parameters(surface: str) -> str:
    """The named parameters of the SQL table macro of ``surface`` (after source, columns)."""
    return ", ".join(f"{o.name} := {o.sql_default}" for o in of(surface, "duckdb", sql=True))


def macro_fields(surface: str) -> str:
    """The ``system.main.to_json({...})`` fields that hand the macro's options to its generator."""
    return ", ".join(f"'{o.name}': {o.name}" for o in of(surface, "duckdb", sql=True))


def docstring(options: Iterable[Option], indent: str = "    ") -> str:
    """An ``Options:`` section for a docstring (a function taking ``**options``)."""
    lines = ["", f"{indent}Options (from :mod:`inftda_duckdb.core.options`):", ""]
    lines += [f"{indent}- ``{o.name}``: {o.doc}" for o in options]
    return "\n".join(lines) + "\n"


SOURCE_AND_COLUMNS = (
    "| `source` | (required) | table or view: `'t'`, `'schema.t'`, `'db.schema.t'`, "
    "`'\"my table\"'`; TEMP tables and views work |\n"
    "| `columns` | (required) | the hierarchy, top level first (1 to 32 columns; VARCHAR, ENUM, "
    "integer, DATE, ...) |"
)


def reference_table(surface: str, engine: str = "duckdb", *, sql: bool | None = True) -> str:
    """The options of ``surface`` as a Markdown table: the generated regions of the reference
    docs (``<!-- options:SURFACE -->``; :mod:`inftda_duckdb.tools.reference` writes them)."""
    rows = ["| parameter | default | meaning |", "|---|---|---|", SOURCE_AND_COLUMNS]
    for o in of(surface, engine, sql=sql):
        default = f"`{o.shown(surface)}`" if o.shown(surface) else ""
        rows.append(f"| `{o.name}` | {default} | {o.doc} |")
    return "\n".join(rows)


__all__ = ["BY_NAME", "OPTIONS", "PREVIEW", "RELEASE", "REQUEST", "Option", "docstring",
           "macro_fields",
           "macro_parameters", "names", "of", "reference_table"]
