"""What a public-facing caller reads when a release stops after its charge (issue 33, D10):
under ``add_remove`` whether the release fits the cell limit is decided from the noised total,
after the charge, and the error quoted that total ("297 parents x 10 values") instead of the
public-facing mode's one fixed message."""

from __future__ import annotations

import re

import duckdb
import pytest

import inftda_duckdb
from inftda_duckdb.core.limits import ENV
from inftda_duckdb.duckdb.disclosure import DATA_PROBLEM_TAG
from inftda_duckdb.duckdb.extension import load

# level 1: 1000 values, level 2: 10 under each of min(1000, noised total) parents: with the
# limit at 1000 cells a level, only the noised total (about ROWS) can decide that it does not fit
RELEASE = ("SELECT * FROM inftda_release('t', ['a', 'b'], rho := 1, "
           "domains := {'a': range(1000), 'b': range(10)})")
ROWS = {"a": 300, "b": 517}


def _stopped(rows: int, mode: str | None) -> tuple[str, int]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT i % 1000 AS a, i % 10 AS b FROM range({rows}) r(i)")
    load(con, mode=mode) if mode else load(con)
    inftda_duckdb.set_budget(con, "t", rho=10)
    with pytest.raises(duckdb.Error) as info:
        con.execute(RELEASE if mode else RELEASE.replace(
            "rho := 1,", "rho := 1, neighbours := 'add_remove',")).fetchall()
    charged = int(con.execute("SELECT count(*) FROM inftda_ledger").fetchall()[0][0])
    con.close()
    return str(info.value).split("\n\nAt:\n")[0], charged


def test_public_mode_says_only_the_fixed_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "1000")
    texts = []
    for rows in ROWS.values():
        text, charged = _stopped(rows, "public")
        assert charged == 1 and DATA_PROBLEM_TAG in text and "charged (rho 1 on" in text
        assert "parents" not in text and not re.search(r"\b\d{3}\b", text), text
        texts.append(text)
    assert texts[0] == texts[1]


def test_curator_mode_keeps_the_explanation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: the curator reads which level and why (and that it was charged)."""
    monkeypatch.setenv(ENV, "1000")
    text, charged = _stopped(ROWS["a"], None)
    assert charged == 1 and "parents x 10 values" in text and "was charged" in text
