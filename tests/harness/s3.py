"""A real S3-compatible server for the tests: moto's, started on a free loopback port and stopped after
(``moto[server]`` and ``boto3`` come with the ``[test]`` extra). One per session: the ``s3_server``
fixture (``tests.harness.fixtures``); each test keeps to its own bucket (``S3Server.bucket``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.service import Service


def hadoop_aws_package() -> str:
    """The Hadoop S3 connector of the installed Spark's own Hadoop (3.4.1 for Spark 4.0, 3.5.0 for 4.2): what
    a user adds to reach s3a:// from a laptop. Read from the Hadoop client jar pyspark ships."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    if not found:
        raise RuntimeError(f"no hadoop-client-api-*.jar in {jars}: which Hadoop does this Spark run?")
    version = found[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    return f"org.apache.hadoop:hadoop-aws:{version}"


@dataclass
class Bucket:
    """One bucket of the server, with what a test needs: put landing files, download the lake, and the
    ``resolver`` options that point a local session at the server."""

    name: str
    endpoint: str
    client: Any

    def conf(self) -> list[str]:
        settings = {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.access.key": "test",
            "spark.hadoop.fs.s3a.secret.key": "test",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        }
        options = [a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]
        return ["--packages", hadoop_aws_package(), *options]

    def put(self, key: str, lines: list[str]) -> None:
        body = "".join(line + "\n" for line in lines).encode("utf-8")
        self.client.put_object(Bucket=self.name, Key=key, Body=body)

    def download(self, prefix: str, to: Path) -> None:
        """Every object under ``prefix`` into the folder ``to`` (a Delta table's files are relative)."""
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix):
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/"):  # a folder marker (Hadoop's mkdirs on S3 writes them)
                    continue
                target = to / obj["Key"][len(prefix) :].lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                self.client.download_file(self.name, obj["Key"], str(target))


class S3Server(Service):
    """moto's S3 server in a child process; ``start`` waits until it answers, ``stop`` ends it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.endpoint = ""
        self.client: Any = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import boto3

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with open(self.log, "wb") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=out,
            )
        self.endpoint = f"http://127.0.0.1:{port}"
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        for _ in range(100):
            try:
                self.client.list_buckets()
                return
            except Exception:  # noqa: BLE001  # not listening yet
                if self._proc.poll() is not None:
                    raise RuntimeError(f"moto's S3 server ended: {self.log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        raise RuntimeError(
            f"moto's S3 server did not start on {self.endpoint}: {self.log.read_text()[-2000:]}"
        )

    def bucket(self, prefix: str = "cdc") -> Bucket:
        """A new, empty bucket of its own."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.client.create_bucket(Bucket=name)
        return Bucket(name, self.endpoint, self.client)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=30)
            self._proc = None
