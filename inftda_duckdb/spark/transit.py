"""Secrets in transit: the settings that encrypt a release's keys and counts between machines.

A Spark release sends each executor the level keys of the levels below the cut (inside the task
closures, over Spark's RPC) and shuffles the true leaf counts between executors (written to local
disk, then fetched over the network). On a cluster both cross machines:

- ``spark.network.crypto.enabled=true`` (with ``spark.authenticate=true``, which it requires)
  encrypts RPC and block transfers, hence the keys and the shuffled counts on the wire;
  ``spark.ssl.rpc.enabled=true`` (TLS for RPC, Spark 4) is the alternative.
- ``spark.io.encryption.enabled=true`` encrypts shuffle and spill files on the executors' disks.

In local mode (``local``, ``local[N]``) everything stays in one process tree on one machine, and
nothing is checked. :func:`unencrypted_settings` names what is off; the release warns with
:class:`UnencryptedTransitWarning` before it reads any data.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class UnencryptedTransitWarning(UserWarning):
    """A release on a cluster whose keys or shuffled counts travel or rest unencrypted."""


_LOCAL = re.compile(r"local(\[[^\]]*\])?", re.IGNORECASE)


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` (one process)."""
    return _LOCAL.fullmatch(master.strip()) is not None


def unencrypted_settings(master: str, setting: Callable[[str], str | None]) -> list[str]:
    """The settings to switch on (``key=true``) for a release on ``master``; none when local.

    ``setting(key)`` reads the session's configuration (None when unset)."""
    if is_local(master):
        return []

    def on(key: str) -> bool:
        return (setting(key) or "false").strip().lower() == "true"

    missing = []
    network = on("spark.authenticate") and on("spark.network.crypto.enabled")
    if not network and not on("spark.ssl.rpc.enabled"):
        if not on("spark.authenticate"):
            missing.append("spark.authenticate=true")
        if not on("spark.network.crypto.enabled"):
            missing.append("spark.network.crypto.enabled=true")
    if not on("spark.io.encryption.enabled"):
        missing.append("spark.io.encryption.enabled=true")
    return missing


def warning_text(master: str, missing: list[str]) -> str:
    return (
        f"this release runs on master {master!r} with {', '.join(missing)} not set: the level "
        "keys sent to the executors and the true counts they shuffle travel or rest "
        "unencrypted, and whoever reads them can remove the noise. Fix: start the session with "
        + " ".join(f"--conf {m}" for m in missing)
    )
