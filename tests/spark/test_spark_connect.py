"""Spark Connect: ``release`` and ``preview`` on a session from ``SparkSession.builder.remote``
(Databricks' Standard and Serverless compute, any ``sc://`` server) give the classic session's
seeded outputs (the pinned hashes), charge the same source key, and stop on Ctrl-C.

The test starts a local Spark Connect server (PySpark 4 bundles its jar: ``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer``, offline) under the same settings as
the classic tests' session (local[2], ``spark.driver.maxResultSize=1m``), and runs the client in a
process of its own (:mod:`connect_client`): a process that made a classic SparkContext cannot
make a Connect session. Was: ``[JVM_ATTRIBUTE_NOT_SUPPORTED] Attribute sparkContext is not
supported in Spark Connect`` at the first call.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pinned
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyspark.sql.connect.session")

import pyspark

from inftda_duckdb.ledger import SourceId

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = os.path.dirname(pyspark.__file__)
    port = free_port()
    logs = tmp_path_factory.mktemp("connect")
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    settings = {"spark.connect.grpc.binding.port": port, "spark.ui.enabled": "false",
                "spark.driver.maxResultSize": "1m", "spark.sql.shuffle.partitions": 4,
                "spark.sql.session.timeZone": "UTC",
                "spark.sql.warehouse.dir": str(logs / "warehouse")}
    command = [os.path.join(home, "bin", "spark-submit"), "--class", SERVER,
               "--master", "local[2, 2]"]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    with open(logs / "server.log", "w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail("the Spark Connect server stopped: "
                            + (logs / "server.log").read_text()[-2000:])
            with socket.socket() as s:
                if s.connect_ex(("localhost", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the Spark Connect server did not start within 180 s")
        yield f"sc://localhost:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)


def test_release_and_preview_on_spark_connect(connect_url: str, tmp_path: Path) -> None:
    client = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("connect_client.py")), connect_url,
         str(tmp_path)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=900)
    assert client.returncode == 0, client.stderr[-4000:]
    out = json.loads(client.stdout.strip().splitlines()[-1])
    assert out["connect"].startswith("pyspark.sql.connect")
    assert out["digests"] == pinned.PINNED  # the classic session's seeded outputs
    assert out["keys"] == [SourceId.file(str(tmp_path / "trips")).key] * len(pinned.CASES)
    assert [r["column"] for r in out["preview"]] == pinned.COLUMNS
    assert out["named_total"] == 20_000
    before, after = out["before_charge"], out["after_charge"]
    assert before["charged"] is False and "nothing was spent" in before["text"]
    assert after["charged"] is True and "rho 1 on name:slow is spent" in after["text"]
    assert before["seconds"] < 15 and after["seconds"] < 15  # not the ~10 s x 2 of the rows
    assert out["charges"] == len(pinned.CASES)  # the interrupted release charged nothing
    assert out["still_works"] == 3
