"""The cell limit: a release that would noise too many cells at some level is refused with the
numbers, decided from public information before anything is charged.

Level k noises every child (in the public domain X_k, or the children a domain table allows) of
every parent released at level k-1 (paper, Algorithm 1, line 5). Released counts are positive
integers summing to the root, so at most ``min(nodes_{k-1}, root)`` parents exist, and level k
noises at most ``min(nodes_k, min(nodes_{k-1}, root) * |X_k|)`` cells (:func:`level_cells`).
The root is public under ``substitute`` without a privacy unit (or with ``rows_per_unit_public``):
the bound is then decided before the charge. When the root is noised, the bound from the nodes
alone decides before the charge if it fits; otherwise only the noised root can decide it, and a
refusal then comes after the charge (:class:`ReleaseAbortedError`, which says so).

The limit (:func:`max_cells`) is the environment variable ``INFTDA_MAX_CELLS``, else the
machine's memory divided by ``BYTES_PER_CELL``. A process setting, not a release option: whoever
can call the SQL functions cannot raise it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .errors import InputError, ReleaseAbortedError

ENV = "INFTDA_MAX_CELLS"
BYTES_PER_CELL = 64
"""Memory per noised cell the default limit allows for: a level's working arrays (a nested level
holds ~6 int64 arrays over its cells; a dense one works in blocks) and, for a level whose domain
is that large, the domain's rows inside DuckDB (label, code and value: 40-60 bytes)."""
_FALLBACK_MEMORY = 8 << 30  # when the platform does not report its memory
MAX_DOMAIN_VALUES = 1 << 31
"""A level's domain has at most this many values, whatever the cell limit: a value's code is a
32-bit integer on both engines (DuckDB's INTEGER code lists and released codes, Spark's INT code
columns and its executors' decoding)."""


def physical_memory() -> int:
    """Bytes of physical memory (8 GiB where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return _FALLBACK_MEMORY


def max_cells() -> int:
    """Cells one level may noise: ``INFTDA_MAX_CELLS``, else memory / ``BYTES_PER_CELL``."""
    text = os.environ.get(ENV, "").strip().replace("_", "")
    if not text:
        return physical_memory() // BYTES_PER_CELL
    if not (text.isdigit() and len(text) <= 19 and int(text) > 0):
        raise InputError(
            f"environment variable {ENV} must be a positive integer (cells per level); got "
            f"{text[:40]!r}. Fix: set e.g. {ENV}=1000000000, or unset it for the default "
            f"({physical_memory() // BYTES_PER_CELL:,} on this machine)"
        )
    return int(text)


def level_cells(sizes: Sequence[int], nodes: Sequence[int], root: int | None) -> list[int]:
    """Upper bound on the cells noised at each level 1..d: ``min(nodes_k, parents * |X_k|)``
    with ``parents = min(nodes_{k-1}, root)`` (``nodes_0 = 1``; ``root`` None: unknown)."""
    out, above = [], 1
    for size, here in zip(sizes, nodes, strict=True):
        parents = above if root is None else min(above, root)
        out.append(min(int(here), parents * int(size)))
        above = int(here)
    return out


def _source_of_limit() -> str:
    if os.environ.get(ENV, "").strip():
        return f"set by {ENV}"
    return (f"the default: this machine's {physical_memory() / 2**30:.0f} GiB of memory / "
            f"{BYTES_PER_CELL} bytes per cell; set {ENV} to change it")


_FIX = ("Fix: coarsen or split the hierarchy (fewer values per level), declare smaller "
        f"domains, or raise {ENV} if the machine can afford it")


def check_domain(column: str, level: int, size: int) -> None:
    """A level noises at least one cell per value of its domain under each released parent: a
    domain alone larger than the limit is refused when the release is planned."""
    check_codes(column, level, size)
    cap = max_cells()
    if size > cap:
        raise InputError(
            f"the release would noise at least {size:,} cells at level {level} (column "
            f"{column!r}: its domain alone has {size:,} values), above the limit of {cap:,} "
            f"cells per level ({_source_of_limit()}); nothing was charged. {_FIX}"
        )


def check_codes(column: str, level: int, size: int) -> None:
    """Refuse a domain of more than :data:`MAX_DOMAIN_VALUES` values (codes are 32-bit), before
    anything is charged."""
    if size > MAX_DOMAIN_VALUES:
        raise InputError(
            f"the domain of column {column!r} (level {level}) has {size:,} values, above the "
            f"{MAX_DOMAIN_VALUES:,} a level may have (each value is coded as a 32-bit "
            "integer); nothing was charged. Fix: split the column into two levels (e.g. a "
            "coarse prefix, then the rest), or declare a smaller domain"
        )


def check_cells(
    columns: Sequence[str],
    sizes: Sequence[int],
    nodes: Sequence[int],
    root: int | None,
    *,
    charged: str | None = None,
) -> bool:
    """Refuse a release whose bound (:func:`level_cells`) passes the limit at some level, or
    with a domain of more than :data:`MAX_DOMAIN_VALUES` values (:func:`check_codes`).

    ``root``: the public or noised total, None when unknown (then only the nodes bound is
    tested, and False is returned when it does not fit: decide again with the noised root).
    ``charged``: what was spent (e.g. ``'rho 1/2 on memory.main.t'``) when the decision comes
    after the charge; the error then says so. Returns True when the release fits.
    """
    for k, (column, size) in enumerate(zip(columns, sizes, strict=True), 1):
        check_codes(column, k, int(size))
    cap = max_cells()
    bounds = level_cells(sizes, nodes, root)
    for k, cells in enumerate(bounds, 1):
        if cells <= cap:
            continue
        if root is None:
            return False
        above = 1 if k == 1 else int(nodes[k - 2])
        parents = min(above, root)
        how = (f"{parents:,} parents x {int(sizes[k - 1]):,} values"
               if cells == parents * int(sizes[k - 1]) else
               f"the {int(nodes[k - 1]):,} prefixes its domain table allows")
        text = (f"the release would noise up to {cells:,} cells at level {k} (column "
                f"{columns[k - 1]!r}: {how}), above the limit of {cap:,} cells per level "
                f"({_source_of_limit()})")
        if charged is None:
            raise InputError(f"{text}; nothing was charged. {_FIX}")
        raise ReleaseAbortedError(
            f"{text}. The total is noised, so this could only be decided from the noised "
            f"total, drawn after the charge: {charged} was charged and nothing is returned. "
            f"{_FIX}"
        )
    return True


def check_every_cell(columns: Sequence[str], sizes: Sequence[int], nodes: Sequence[int]) -> None:
    """``estimator := 'least_squares'`` noises every public cell of every level (``nodes[k-1]``
    at level k, all public): refuse, before anything is charged, a level above the limit (or a
    domain above :data:`MAX_DOMAIN_VALUES` values)."""
    cap = max_cells()
    for k, (column, size, cells) in enumerate(zip(columns, sizes, nodes, strict=True), 1):
        check_codes(column, k, int(size))
        if int(cells) > cap:
            raise InputError(
                f"estimator 'least_squares' noises every public cell of every level: level {k} "
                f"(column {column!r}) has {int(cells):,}, above the limit of {cap:,} cells per "
                f"level ({_source_of_limit()}); nothing was charged. {_FIX}, or use estimator "
                "'inftda' (it noises only the children of released parents)"
            )


__all__ = [
    "BYTES_PER_CELL",
    "ENV",
    "MAX_DOMAIN_VALUES",
    "ReleaseAbortedError",
    "check_cells",
    "check_codes",
    "check_domain",
    "check_every_cell",
    "level_cells",
    "max_cells",
    "physical_memory",
]
