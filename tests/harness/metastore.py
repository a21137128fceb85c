"""A real Hive Metastore server for the tests: Hive's own Thrift server (``HiveMetaStore``, the class a
cluster's metastore runs), from the Hive 2.3 jars PySpark ships (Maven Central's
``org.apache.hive:hive-metastore``), with an embedded Derby database in a temporary folder, started on a free
loopback port and stopped after. Spark reaches it as a cluster's driver does: ``hive.metastore.uris``. One
per session (the ``hive_metastore`` fixture, ``tests.harness.fixtures``); tests keep to their own schema."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pyspark

from tests.harness.postgres import free_port
from tests.harness.service import Service

_START_SECONDS = 120.0


class HiveMetastore(Service):
    """``HiveMetaStore -p PORT`` in a child JVM; ``conf()`` gives the ``resolver`` options that use it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    def conf(self) -> list[str]:
        """``--conf`` options of a ``resolver`` command (or a session's settings) that reach this server."""
        settings = {
            "spark.sql.catalogImplementation": "hive",
            "spark.hadoop.hive.metastore.uris": self.uri,
            "spark.sql.warehouse.dir": str(self.warehouse),
        }
        return [a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]

    def start(self) -> None:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("no java on PATH: the Hive Metastore server runs on the JVM Spark uses")
        jars = Path(pyspark.__file__).parent / "jars"
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        started = time.monotonic()
        derby = f"jdbc:derby:;databaseName={self.root / 'metastore_db'};create=true"
        hive = {
            "javax.jdo.option.ConnectionURL": derby,
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": str(self.warehouse),
            "hive.async.log.enabled": "false",  # its async logger needs a jar Spark does not ship
        }
        args = [a for k, v in hive.items() for a in ("--hiveconf", f"{k}={v}")]
        log = open(self.root / "metastore.log", "wb")  # noqa: SIM115  # the child writes it until stop()
        self.proc = subprocess.Popen(
            [
                java,
                "-Xmx384m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                f"-Dderby.system.home={self.root}",
                "-cp",
                f"{jars}/*",
                "org.apache.hadoop.hive.metastore.HiveMetaStore",
                "-p",
                str(self.port),
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
        )
        log.close()
        deadline = time.monotonic() + _START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                tail = (self.root / "metastore.log").read_text("utf-8", "replace")[-2000:]
                raise RuntimeError(f"the Hive Metastore server ended before it answered:\n{tail}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    self.start_seconds = time.monotonic() - started
                    return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            f"the Hive Metastore server did not answer on port {self.port} in {_START_SECONDS} s"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
