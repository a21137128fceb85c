"""``resolver capture`` landing in object storage (``s3://``, ``s3a://``: ``resolver.capture.landing``) on a
real PostgreSQL 15 + wal2json and the session's S3 server (moto's), without Spark: the snapshot, the drained
changes and a running capture's files are objects put whole under the prefix, the capture's state beside
them, nothing half-written or pending left, and ``--status`` counts them. ``resolver run`` reading a landing
folder in S3 is tests/e2e/test_s3.py's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from resolver.capture.snapshot import CaptureOptions, capture_once
from tests.harness.postgres import PgDatabase
from tests.harness.processes import ROOT, Resolver
from tests.harness.s3 import S3Server

pytestmark = [pytest.mark.postgres]


def test_a_capture_lands_its_snapshot_and_changes_as_objects(
    pg_db: PgDatabase, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_db.execute("CREATE TABLE public.kept (id int PRIMARY KEY, v text); CREATE TABLE public.other (id int)")
    pg_db.execute("INSERT INTO public.kept SELECT g, 'before' FROM generate_series(1, 50) g")
    bucket = s3_server.bucket("landing")
    access = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ACCESS_KEY_ID": "test"}
    access |= {"AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in access.items():
        monkeypatch.setenv(name, value)
    landing = f"s3a://{bucket.name}/landing"
    first = capture_once(CaptureOptions(pg_db.dsn, landing, "lake", ("public.kept",), file_bytes=100))
    assert first.snapshot_rows == {"public.kept": 50}, first.lines()
    assert len(first.files) > 2, first.files  # the copy cut into files of about 100 bytes of values
    assert all(f.startswith(f"{landing}/lake-") and "-snapshot-0000-" in f for f in first.files), first.files

    running = Resolver(
        *("capture", "--dsn", pg_db.dsn, "--landing", landing, "--slot", "lake", "--tables", "public.kept"),
        *("--interval", "1"),
    )
    running.until("streaming slot lake")
    pg_db.execute("UPDATE public.kept SET v = 'after' WHERE id <= 10")
    pg_db.execute("INSERT INTO public.other VALUES (1)")
    pg_db.execute("DELETE FROM public.kept WHERE id = 50")
    running.until("landed lake-")
    status, printed = running.stop(signal.SIGTERM, 120)
    assert status == 0, "\n".join(running.seen)

    keys = sorted(
        item["Key"]
        for page in bucket.client.get_paginator("list_objects_v2").paginate(Bucket=bucket.name)
        for item in page.get("Contents", [])
    )
    files = [k for k in keys if k.startswith("landing/lake-")]
    # nothing pending, hidden or partial; the routes file records the tables the capture saw (no partitions)
    assert keys == sorted([*files, "landing/_capture/lake.json", "landing/_capture/lake.partitions.json"]), (
        keys
    )
    state = json.loads(bucket.client.get_object(Bucket=bucket.name, Key=keys[0])["Body"].read())
    copied = [f"landing/{f}" for f in state["files"]["public.kept"]]
    assert state["tables"] == {"public.kept": 50} and copied == [k for k in files if "-snapshot-" in k]
    changes = []
    for key in copied:  # snapshot files: change events in Parquet, each file whole
        rows = pq.read_table(
            pa.BufferReader(bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read())
        )
        changes += [
            ("I", "kept")
            for r in rows.to_pylist()
            if (r["operation"], r["table"]) == ("insert", "public.kept")
        ]
    for key in (k for k in files if k not in copied):
        text = bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read().decode()
        records = [json.loads(line) for line in text.splitlines()]
        assert records[0]["action"] == "B" and records[-1]["action"] == "C", key  # whole transactions
        changes += [(r["action"], r.get("table")) for r in records if r["action"] in "IUD"]
    assert changes.count(("I", "kept")) == 50 and changes.count(("U", "kept")) == 10, changes
    assert ("D", "kept") in changes and all(table == "kept" for _, table in changes)

    command = [sys.executable, "-m", "resolver", "capture", "--dsn", pg_db.dsn, "--landing", landing]
    shown = subprocess.run(
        [*command, "--slot", "lake", "--status"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, **access},
    )
    assert shown.returncode == 0, shown.stderr
    assert f"files landed         {len(files)}" in shown.stdout, shown.stdout
