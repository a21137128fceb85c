"""The landing folder and the lake on a real S3-compatible server (moto's, started by the test on a free
loopback port and stopped after): ``resolver run`` in a child process, as a user runs it against S3
(``--packages org.apache.hadoop:hadoop-aws:3.4.1`` and ``--conf spark.hadoop.fs.s3a.*``), over a landing
folder that grows while a run is killed with SIGKILL in the middle of a batch; then the same pipeline as a
streaming query (``--stream --once``, its checkpoint in the lake on S3) killed in its first micro-batch and
started again. Ground truth is a real PostgreSQL: the lake (copied down from the server) equals the database
as of every commit (the differential check of tests/difftest.py), the ledger names the landed objects by
their ``s3a://`` URIs, and the locks the killed processes left in the lake's lock table were taken over and
released."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests import difftest as d
from tests.pgharness import PgServer

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

boto3 = pytest.importorskip("boto3")  # the [test] extra installs it (with moto[server])

ROOT = Path(__file__).resolve().parent.parent
SEED = 31
TRANSACTIONS = 20
FILES = 4
BUCKET = "cdc"
#: the Hadoop S3 connector of Spark 4.0's Hadoop (3.4.1): what a user adds to reach s3a:// from a laptop
PACKAGES = "org.apache.hadoop:hadoop-aws:3.4.1"


@dataclass
class S3:
    endpoint: str
    client: object

    def conf(self) -> list[str]:
        """The ``resolver`` options that point a local session at this server."""
        settings = {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.access.key": "test",
            "spark.hadoop.fs.s3a.secret.key": "test",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        }
        return ["--packages", PACKAGES, *[a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]]

    def put(self, key: str, lines: list[str]) -> None:
        body = "".join(line + "\n" for line in lines).encode("utf-8")
        self.client.put_object(Bucket=BUCKET, Key=key, Body=body)  # type: ignore[attr-defined]

    def download(self, prefix: str, to: Path) -> None:
        """Every object under ``prefix`` into the folder ``to`` (a Delta table's files are relative)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
        for page in pages:
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/"):  # a folder marker (Hadoop's mkdirs on S3 writes them)
                    continue
                target = to / obj["Key"][len(prefix) :].lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                self.client.download_file(BUCKET, obj["Key"], str(target))  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out
        )
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    try:
        for _ in range(100):
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # noqa: BLE001  # not listening yet
                if server.poll() is not None:
                    raise RuntimeError(f"moto's S3 server ended: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        else:
            raise RuntimeError(f"moto's S3 server did not start on {endpoint}: {log.read_text()[-2000:]}")
        yield S3(endpoint, client)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _resolver(args: list[str], kill_at: str | None = None) -> tuple[int, str]:
    """``python -m resolver ARGS`` in a child process; with ``kill_at``, SIGKILLed once a progress line
    contains it. Returns the exit status and what it printed on stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "resolver", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    seen = []
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line.rstrip())
        if kill_at is not None and line.startswith("resolver: ") and kill_at in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=900)
    return proc.returncode, "\n".join(seen)


def test_resolver_run_on_s3_with_a_killed_run_equals_postgresql(
    spark: SparkSession, pg_server: PgServer, s3: S3, tmp_path: Path
) -> None:
    cap, files = d.landed_files(pg_server, "s3_run", SEED, TRANSACTIONS, FILES)  # cut inside transactions too
    lake = f"s3a://{BUCKET}/lake"
    pipeline = tmp_path / "pipeline.yaml"
    source = f"source: {{path: 's3a://{BUCKET}/landing/', format: wal2json-v2}}"
    # one batch per run and per micro-batch: what this test adds is S3 (listing, reading, the lake, the
    # checkpoint and the lock table on it); batches of fewer files, their neighbours and held-back
    # transactions are test_run's and test_stream's, on a local folder
    pipeline.write_text(f"{source}\nlake: '{lake}'\nmax_files_per_batch: {FILES}\n")
    tables = d.tables_for(2)
    for i in range(2):
        s3.put(f"landing/{i:04d}.json", files[i])
    status, printed = _resolver(["run", str(pipeline), *s3.conf()], kill_at="done (1)")  # in its 1st batch
    assert status == -signal.SIGKILL, "the run ended before the kill point:\n" + printed
    for i in range(2, FILES):  # more files land while the lake is half-written
        s3.put(f"landing/{i:04d}.json", files[i])
    stream = ["run", str(pipeline), "--stream", "--once", *s3.conf()]
    status, printed = _resolver(stream, kill_at="done (1)")  # the stream's 1st micro-batch, cut short
    assert status == -signal.SIGKILL, "the stream ended before the kill point:\n" + printed
    assert "taking over the lock" in printed, printed
    status, printed = _resolver([*stream, "--wait", "300"])
    assert status == 0, printed
    assert "taking over the lock" in printed, printed
    local = tmp_path / "lake"
    s3.download("lake/", local)
    problems = d.check_lake(d.collect_silver(spark, local, tables), cap.timeline[2], tables)
    assert not problems, "\n".join(problems[:30])
    assert not (local / "quarantine").exists(), "a transaction cut by a file boundary was quarantined"
    ledger = spark.read.format("delta").load(str(local / "_resolver" / "ledger")).select("path").collect()
    assert {row["path"] for row in ledger} == {f"s3a://{BUCKET}/landing/{i:04d}.json" for i in range(FILES)}
    assert (local / "_resolver" / "stream" / "commits").is_dir()  # the stream's checkpoint, in the lake
    lock = spark.read.format("delta").load(str(local / "_resolver" / "lock")).collect()
    assert [(row["slot"], row["holder"]) for row in lock] == [(0, None)]
