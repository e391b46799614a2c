"""Other files a key path can point to (``INFTDA_LEDGER_KEY_FILE``): a FIFO hung ``load()``,
``/dev/zero`` was read until MemoryError. Only a regular file (or a symlink to one) is a key
file, and at most what a key needs is read from it.

Each case runs in a child process with a memory cap and a time limit, so a regression hangs or
exhausts that process, not the test run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inftda_duckdb.ledger import chain

CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))
from inftda_duckdb.ledger import chain
try:
    key = chain.key_from_environment()
except Exception as exc:
    print(type(exc).__name__ + ": " + str(exc))
else:
    print("key of", len(key.secret), "bytes")
"""


def _key_from(path: Path | str) -> str:
    env = {**os.environ, chain.KEY_FILE: str(path)}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=60)
    return (done.stdout + done.stderr).strip()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "key.fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_at_once(fifo: Path) -> None:
    try:
        out = _key_from(fifo)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO as the ledger key hung")
    assert out.startswith("InputError") and "not a regular file" in out and str(fifo) in out


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_refused(device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    out = _key_from(device)
    assert out.startswith("InputError") and "not a regular file" in out, out


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "key"
    link.symlink_to("/dev/zero")
    out = _key_from(link)
    assert out.startswith("InputError") and "not a regular file" in out, out


def test_a_directory_is_refused(tmp_path: Path) -> None:
    out = _key_from(tmp_path)
    assert out.startswith("InputError") and "not a regular file" in out, out


def test_a_huge_file_is_not_read_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.key"
    with big.open("wb") as handle:  # sparse: 4 GiB the child could not hold in its 2 GiB
        handle.truncate(1 << 32)
    out = _key_from(big)
    assert out.startswith("InputError") and "at most" in out, out


def test_a_regular_key_file_and_a_symlink_to_one_are_read(tmp_path: Path) -> None:
    key = tmp_path / "ledger.key"
    key.write_bytes(b"k" * 32 + b"\n")
    link = tmp_path / "link.key"
    link.symlink_to(key)
    assert _key_from(key) == _key_from(link) == "key of 32 bytes"
