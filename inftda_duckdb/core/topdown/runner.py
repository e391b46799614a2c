"""The worker threads of a release, its progress reports and its cancellation.

:class:`Runner` releases a level's blocks on a pool of ``workers`` threads (one pool per number
of workers, shared by the releases of a process and forgotten in a forked child), with at most two
blocks per worker under way, and hands their results to the level in the order of the blocks:
the output does not depend on the threads' timing. Between blocks it asks the cancel hook
(:data:`CancelHook`; :class:`Cancelled`) and reports progress (:data:`ProgressHook`;
:class:`LevelProgress`).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, NamedTuple

from ..errors import InftdaError


class LevelProgress(NamedTuple):
    """A progress report: ``cells_done`` of the ``cells_planned`` cells of ``level`` (every
    child of the level's ``parents``) are noised and optimised, ``seconds`` after it began."""

    level: int
    depth: int
    parents: int
    cells_done: int
    cells_planned: int
    seconds: float


ProgressHook = Callable[[LevelProgress], None]
"""Called from the thread that called :func:`~inftda_duckdb.core.topdown.release_below`: once
per level with ``cells_done == cells_planned``, and on long levels up to 16 times before
(bounded)."""
CancelHook = Callable[[], bool]
"""Called between blocks; a true result stops the release with :class:`Cancelled` (it may also
raise its own exception, which propagates)."""


class Cancelled(InftdaError):
    """The release stopped between two blocks because its cancel hook asked it to."""


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    with _POOL_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="inftda")
        return pool


def _forget_pools() -> None:  # a forked child has none of the parent's threads
    _POOLS.clear()


os.register_at_fork(after_in_child=_forget_pools)


class Runner:
    """Runs a level's blocks (in order, on the pool when there are workers and several
    blocks), reports progress and checks the cancel hook between blocks."""

    def __init__(self, depth: int, workers: int, progress: ProgressHook | None,
                 cancel: CancelHook | None) -> None:
        self.depth, self.workers, self.progress, self.cancel = depth, workers, progress, cancel

    def _stop(self) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled("the release was cancelled between two blocks")

    def run(self, level: int, parents: int, planned: int, tasks: Sequence[tuple[int, ...]],
            cells: Sequence[int], work: Callable[..., Any], sink: Callable[[Any], None]) -> None:
        """``sink(work(*task))`` for every task, in the order of ``tasks``."""
        start, done, told, count = time.perf_counter(), 0, 0, 0

        def finished(result: Any) -> None:
            nonlocal done, told, count
            sink(result)
            done += cells[count]
            count += 1
            if self.progress is not None and (done == planned or done - told >= planned / 16):
                told = done
                self.progress(LevelProgress(level, self.depth, parents, done, planned,
                                            time.perf_counter() - start))

        self._stop()
        if self.workers == 1 or len(tasks) < 2:
            for task in tasks:
                finished(work(*task))
                if count < len(tasks):
                    self._stop()
        else:
            pool, pending = _pool(self.workers), collections.deque[Future[Any]]()
            try:
                for task in tasks:
                    if len(pending) >= 2 * self.workers:  # bounded: a few blocks per worker
                        finished(pending.popleft().result())
                        self._stop()
                    pending.append(pool.submit(work, *task))
                while pending:
                    finished(pending.popleft().result())
            finally:  # on an error or a cancel: drop what has not started, wait for the rest
                for f in pending:
                    f.cancel()
                wait(pending)
        if self.progress is not None and not tasks:
            self.progress(LevelProgress(level, self.depth, parents, 0, 0,
                                        time.perf_counter() - start))
