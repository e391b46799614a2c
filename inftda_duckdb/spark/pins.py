"""Pinned data: what a release keeps so that its result is deterministic, and how to free it.

:func:`pin` cuts a DataFrame's lineage at one materialisation (the leaves, the raw leaves
when the domains come from the data, and estimator 'least_squares'' sums below the bands:
:mod:`.estimates`): a reliable checkpoint (files) when the session has a
checkpoint directory, else a local checkpoint (blocks in executor storage). The released
DataFrame reads the pinned data at every evaluation, so they live as long as the result does.
:func:`unpin` frees them at once (the command line does after writing the result; Python callers
call :func:`inftda_duckdb.spark.unpin` on the released DataFrame): on a classic session the
checkpointed blocks are removed and the checkpoint files deleted; on Spark Connect the server
drops its reference (its context cleaner then removes the blocks). The result cannot be
evaluated afterwards (Spark's ``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``): write it first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame

from .sessions import checkpoint_dir, is_connect

ATTRIBUTE = "_inftda_pinned"
"""The released DataFrame's attribute listing its pinned DataFrames."""


def pin(frame: DataFrame) -> DataFrame:
    """Cut the lineage so that every later use reads one materialisation of ``frame``.

    With a checkpoint directory: a reliable checkpoint, now (``frame`` is cached first, so the
    checkpoint writes the rows the caching job computed). Otherwise a local checkpoint,
    materialised by the next job: executor storage, and a lost executor then fails the job
    instead of re-reading data that may have changed."""
    if checkpoint_dir(frame.sparkSession) is not None:
        cached = frame.persist()
        pinned = cached.checkpoint(eager=True)
        cached.unpersist()
        return pinned
    return frame.localCheckpoint(eager=False)


def attach(result: DataFrame, pinned: Iterable[DataFrame]) -> DataFrame:
    """``result`` remembering the pinned DataFrames its lineage starts at (for :func:`unpin`)."""
    setattr(result, ATTRIBUTE, list(pinned))
    return result


def unpin(result: DataFrame) -> int:
    """Free the pinned data of a released DataFrame (see the module docstring); returns how many
    pinned DataFrames were freed (0 the second time, or for a DataFrame ``release`` did not
    return)."""
    pinned: list[DataFrame] = getattr(result, ATTRIBUTE, [])
    for frame in pinned:
        if is_connect(frame.sparkSession):
            _drop_remote(frame)
        else:
            _drop_classic(frame)
    setattr(result, ATTRIBUTE, [])
    return len(pinned)


def _drop_classic(frame: DataFrame) -> None:
    """Unpersist the checkpointed RDD under ``frame`` and delete its checkpoint files."""
    jvm: Any = frame.sparkSession.sparkContext._jvm
    plan = frame._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        return
    rdd = plan.rdd()
    rdd.unpersist(False)
    found = rdd.getCheckpointFile()
    if found.isDefined():
        path = jvm.org.apache.hadoop.fs.Path(found.get())
        path.getFileSystem(frame.sparkSession.sparkContext._jsc.hadoopConfiguration()) \
            .delete(path, True)


def _drop_remote(frame: DataFrame) -> None:
    """Ask the Spark Connect server to drop the checkpointed DataFrame it caches for ``frame``."""
    from pyspark.sql.connect.plan import CachedRemoteRelation, RemoveRemoteCachedRelation

    plan = getattr(frame, "_plan", None)
    if not isinstance(plan, CachedRemoteRelation) or plan._relation_id is None:
        return
    client: Any = getattr(frame.sparkSession, "client")  # noqa: B009  (Connect's only)
    client.execute_command(RemoveRemoteCachedRelation(plan).command(client))
    cached: Any = plan
    cached._relation_id = None  # dropped: no second request when it is garbage collected
