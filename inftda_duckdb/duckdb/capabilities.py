"""Capability tokens: the internal steps of a release run only inside the statement rendered for
them, once.

Every rendered release (and preview) carries a fresh random token in its spec. The process
remembers each token with the SHA-256 of the spec text it was minted for and, from SQL, the
DuckDB query id of the statement being bound (the macro passes ``current_query_id()``; the
generated statement passes it again when it runs). ``inftda_begin_<n>`` accepts a spec only if
its token was minted here, for exactly that text, in that statement, so a hand-made call (a
forged spec, a spec copied from another statement or replayed there) errors before anything is
charged. The levels step, which charges, accepts only a release its begin step accepted.

A release's begin step runs once per execution. Inside a correlated subquery (LATERAL, a
correlated scalar subquery, EXISTS ...) DuckDB runs it once per outer row: the second run of one
token is refused, and since the charge happens in the levels step, after every begin step of the
statement (they are one MATERIALIZED CTE), such a statement is refused before anything is charged.

What this does not stop: anyone who can run arbitrary SQL can read the private tables directly
(DuckDB has no per-user permissions); within a single statement they could also call the
generator and the begin step together. The tokens guard the package's own surface and accidents.
"""

from __future__ import annotations

import collections
import hashlib
import secrets
import threading

from ..core.errors import InputError

MAX_TOKENS = 4096  #: tokens kept (most are used within a second; EXPLAIN renders never run)

_LOCK = threading.Lock()
# token -> [digest of its spec, query id (None: Python API), state, the parsed request it was
# rendered from (or None)]; state is 'minted', then
# 'begun' by the begin step, 'done' once the levels step claimed it. A prepared statement that
# DuckDB re-executes without rendering it again (DuckDB 1.5) begins a 'done' token again: a new
# release, charged again. Two begin steps of one token before its claim are a correlated subquery.
_TOKENS: collections.OrderedDict[str, list[object]] = collections.OrderedDict()


def new() -> str:
    """A fresh token (128 random bits)."""
    return secrets.token_hex(16)


def mint(token: str, spec_text: str, query_id: int | None, parsed: object = None) -> None:
    """Allow ``spec_text`` (which holds ``token``) to begin in the statement ``query_id``
    (None: a statement rendered and run by the Python API itself). ``parsed``: an immutable
    object the spec was rendered from (the release request), handed back by :func:`redeem`
    so the begin step need not parse the spec's copy again."""
    with _LOCK:
        _TOKENS[token] = [_digest(spec_text), query_id, "minted", parsed]
        while len(_TOKENS) > MAX_TOKENS:
            _TOKENS.popitem(last=False)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_HAND_MADE = (
    "{step} is an internal step of inftda_release and runs only inside the statement rendered "
    "for it: this call was made by hand, copied from another statement or replayed. Nothing was "
    "charged. Fix: call inftda_release(...) (or inftda_duckdb.release) instead"
)
CORRELATED = (
    "inftda_release ran inside a correlated subquery (LATERAL, a correlated scalar subquery, "
    "EXISTS or IN ...), where DuckDB would execute the whole release once per outer row; it is "
    "refused and nothing was charged. Fix: materialise the release first (CREATE TABLE t AS "
    "SELECT * FROM inftda_release(...)), then join or filter t"
)


def redeem(step: str, token: object, spec_text: str, query_id: int | None,
           once: bool = True) -> object:
    """Accept the spec of a begin step (``once``) or a preview step, or raise InputError.
    Returns what the token was minted with as ``parsed`` (the spec text is exactly the one
    minted: its digest matched)."""
    with _LOCK:
        entry = _TOKENS.get(token) if isinstance(token, str) else None
        if entry is None or entry[0] != _digest(spec_text) or (
                entry[1] is not None and entry[1] != query_id):
            raise InputError(_HAND_MADE.format(step=step))
        if not once:
            return entry[3]
        if entry[2] == "begun":
            entry[2] = "duplicated"
        if entry[2] == "duplicated":
            raise InputError(CORRELATED)
        entry[2] = "begun"
        return entry[3]


def claim(token: str | None) -> None:
    """At the levels step, before the charge: refuse a release whose begin step ran more than
    once in its statement (a correlated subquery)."""
    if token is None:
        return
    with _LOCK:
        entry = _TOKENS.get(token)
        if entry is None:
            raise InputError("this release waited so long between its steps that its capability "
                             "token expired; nothing was charged. Fix: run it again")
        if entry[2] != "begun":
            raise InputError(CORRELATED)
        entry[2] = "done"


def forget(token: str | None) -> None:
    """Drop ``token`` (the Python call that rendered its statement has returned)."""
    if token is not None:
        with _LOCK:
            _TOKENS.pop(token, None)
