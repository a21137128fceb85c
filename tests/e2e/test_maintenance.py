"""Maintenance (``resolver.ops.maintenance``, ``resolver optimize`` / ``vacuum``) on a copy of the samples'
lake: fewer files, the same rows, and time travel through the history table untouched by vacuum."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from resolver.errors import ConfigError
from resolver.lake.delta import partition_columns
from resolver.lake.folders import KEY_PROPERTY, history_path
from resolver.lake.lake_tables import lake_tables
from resolver.lake.tables import REWRITE_COMMIT
from resolver.ops.maintenance import optimize, vacuum
from resolver.ops.timetravel import as_of
from tests.samplelake import COMMITS, MOVE, TABLES, sample_lake

pytestmark = pytest.mark.spark

CLUSTERED = "extra/clustered"
"""A table with liquid clustering, put into the lake copy (the samples' tables do not use it)."""
WIDE = "extra/wide"
"""A table keyed by its 40th column, which Delta keeps no statistics for (it does for the first 32)."""
POINTS = (MOVE, COMMITS[-1][0])
OLDER = "silver/public.customers__history"
"""A history as releases before its partitioning by ``__is_current`` wrote it (one folder of files)."""


def _content(spark: SparkSession, lake: str, tables: list[str]) -> dict[str, Counter[str]]:
    """Every row of every table (as text, counted), read a few tables at a time."""

    def rows(name: str) -> Counter[str]:
        return Counter(repr(r) for r in spark.read.format("delta").load(os.path.join(lake, name)).collect())

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(tables, pool.map(rows, tables), strict=True))


def _files(spark: SparkSession, lake: str, name: str) -> list[str]:
    return spark.read.format("delta").load(os.path.join(lake, name)).inputFiles()


def _as_of_all(spark: SparkSession, lake: str) -> dict[tuple[str, int], Counter[str]]:
    return {
        (t, lsn): Counter(repr(r) for r in as_of(spark, lake, t, lsn=lsn).collect())
        for t in TABLES
        for lsn in POINTS
    }


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A copy of the shared sample lake (two batches), plus two tables of its own written in two appends:
    a clustered one and a wide one."""
    copy = tmp_path_factory.mktemp("maintenance") / "lake"
    shutil.copytree(sample_lake(spark, tmp_path_factory.getbasetemp()), copy)
    path = str(copy / CLUSTERED)
    DeltaTable.createIfNotExists(spark).location(path).addColumn("id", "bigint").clusterBy("id").execute()
    wide = spark.range(10).select(*[F.col("id").alias(f"c{i}") for i in range(40)])
    builder = DeltaTable.createIfNotExists(spark).location(str(copy / WIDE)).addColumns(wide.schema)
    builder.property(KEY_PROPERTY, '["c39"]').execute()
    for lo in (0, 10):
        spark.range(lo, lo + 10).write.format("delta").mode("append").save(path)
        wide.write.format("delta").mode("append").save(str(copy / WIDE))
    older = spark.read.format("delta").load(str(copy / OLDER)).localCheckpoint()
    older.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(str(copy / OLDER))
    return str(copy)


@pytest.fixture(scope="module")
def optimized(spark: SparkSession, lake: str) -> dict[str, Any]:
    """The lake before ``optimize`` (rows, files, as-of answers, the history's version) and its result."""
    tables = lake_tables(lake)
    before = {
        "rows": _content(spark, lake, tables),
        "files": {t: _files(spark, lake, t) for t in tables},
        "as_of": _as_of_all(spark, lake),
        "version": DeltaTable.forPath(spark, history_path(lake, "public.customers")).history(1).first()[0],
    }
    return {"tables": tables, "before": before, "result": optimize(spark, lake)}


@pytest.fixture(scope="module")
def vacuumed(spark: SparkSession, lake: str, optimized: dict[str, Any]) -> dict[str, Any]:
    """After ``optimize``: a dry run for one source table's tables, then a vacuum of every table keeping no
    old file (``force``)."""
    listed = vacuum(spark, lake, retain_hours=0, tables=["public.customers"], dry_run=True, force=True)
    on_disk = {t["table"]: [os.path.exists(f) for f in t["files_to_delete"]] for t in listed}
    return {"listed": listed, "on_disk": on_disk, "result": vacuum(spark, lake, retain_hours=0, force=True)}


def test_optimize_leaves_one_file_per_table_partition_and_the_same_rows(
    spark: SparkSession, lake: str, optimized: dict[str, Any]
) -> None:
    tables, before, result = optimized["tables"], optimized["before"], optimized["result"]
    assert [t["table"] for t in result] == tables
    assert "bronze/change_events" in tables and "_resolver/changes/public.orders" in tables
    for t in result:
        files = before["files"][t["table"]]
        assert t["files_before"] == len(files)
        partitions = 2 if t["table"].endswith("__history") else 1  # a history's: open and closed versions
        assert t["files_after"] == len(_files(spark, lake, t["table"])) == min(len(files), partitions), t
        if t["table"] != OLDER:  # (its OPTIMIZE removed the files of its rewrite, below)
            assert t["files_removed"] == (len(files) if len(files) > 1 or t["layout"] == "z-order" else 0), t
    assert sum(t["files_after"] for t in result) < sum(t["files_before"] for t in result)
    for name in (
        "bronze/change_events",
        "_resolver/changes/public.customers",
        "_resolver/changes/public.orders",
    ):
        assert len(before["files"][name]) >= 2, name  # append-only: a file per batch at least
    assert _content(spark, lake, tables) == before["rows"]


def test_optimize_partitions_a_history_an_older_release_wrote(
    spark: SparkSession, lake: str, optimized: dict[str, Any]
) -> None:
    before = {os.path.basename(os.path.dirname(f)) for f in optimized["before"]["files"][OLDER]}
    after = {os.path.basename(os.path.dirname(f)) for f in _files(spark, lake, OLDER)}
    assert before == {"public.customers__history"}
    assert after == {"__is_current=true", "__is_current=false"}
    assert partition_columns(DeltaTable.forPath(spark, os.path.join(lake, OLDER))) == ["__is_current"]
    note = {t["table"]: t["note"] for t in optimized["result"]}[OLDER]
    assert note == "rewritten once, partitioned by __is_current (open versions apart from closed ones)"
    # the rewrite changed no row: every row and every as-of answer as before (the content test reads them)
    commits = DeltaTable.forPath(spark, os.path.join(lake, OLDER)).history().collect()
    assert REWRITE_COMMIT in [c["userMetadata"] for c in commits]  # left out of ``resolver changes``


def test_optimize_orders_silver_tables_by_their_key(optimized: dict[str, Any]) -> None:
    layouts = {t["table"]: (t["layout"], t["columns"], t["note"]) for t in optimized["result"]}
    assert layouts["silver/public.orders"] == ("z-order", ["customer_id", "order_no"], "")
    assert layouts["silver/public.orders__history"] == ("z-order", ["customer_id", "order_no"], "")
    assert layouts["_resolver/changes/public.customers"] == ("z-order", ["__key.id"], "")
    assert layouts["bronze/change_events"] == ("compaction", [], "")
    assert layouts[CLUSTERED] == ("clustering", ["id"], "")
    assert layouts[WIDE] == ("compaction", [], "no statistics for c39: compacted without Z-order")


def test_vacuum_refuses_a_short_retention_without_force(spark: SparkSession, lake: str) -> None:
    with pytest.raises(ConfigError) as error:
        vacuum(spark, lake, retain_hours=1)
    assert str(error.value) == (
        "vacuum: found a retention of 1 hours, expected at least 168 (Delta's "
        "delta.deletedFileRetentionDuration default): a shorter one deletes files that running queries and "
        "Delta time travel to recent versions still read, and breaks them; pass force=True (--force) only "
        "when nothing reads or writes the lake"
    )
    with pytest.raises(ConfigError, match=r"^vacuum: found a retention of -1 hours, expected 0 or more$"):
        vacuum(spark, lake, retain_hours=-1, force=True)


def test_vacuum_dry_run_lists_the_files_no_version_needs(
    spark: SparkSession, lake: str, optimized: dict[str, Any], vacuumed: dict[str, Any]
) -> None:
    listed = {t["table"]: {f"file:{f}" for f in t["files_to_delete"]} for t in vacuumed["listed"]}
    assert list(listed) == [
        "_resolver/changes/public.customers",
        "silver/public.customers",
        "silver/public.customers__history",
    ]
    for name, files in listed.items():
        live = set(_files(spark, lake, name))
        assert set(optimized["before"]["files"][name]) - live <= files, name  # what optimize replaced ...
        assert files and not files & live, name  # ... and no file the table uses
    assert all(all(exists) for exists in vacuumed["on_disk"].values())  # listed, not deleted


def test_vacuum_deletes_them_and_keeps_rows_and_as_of(
    spark: SparkSession, lake: str, optimized: dict[str, Any], vacuumed: dict[str, Any]
) -> None:
    deleted = {t["table"]: t["files_deleted"] for t in vacuumed["result"]}
    assert list(deleted) == optimized["tables"]
    assert {t: deleted[t] for t in vacuumed["on_disk"]} == {
        t["table"]: len(t["files_to_delete"]) for t in vacuumed["listed"]
    }
    assert not any(os.path.exists(f) for t in vacuumed["listed"] for f in t["files_to_delete"])
    assert spark.conf.get("spark.databricks.delta.retentionDurationCheck.enabled") == "true"
    assert _content(spark, lake, optimized["tables"]) == optimized["before"]["rows"]
    assert _as_of_all(spark, lake) == optimized["before"]["as_of"]  # as_of reads the history, not old files
    old = spark.read.format("delta").option("versionAsOf", optimized["before"]["version"])
    with pytest.raises(Exception, match="FILE_NOT_EXIST|FileNotFound|does not exist"):  # Delta time travel
        old.load(history_path(lake, "public.customers")).collect()


# --- the commands ------------------------------------------------------------------------------------------
def test_optimize_and_vacuum_commands(
    cli: Callable[..., int],
    spark: SparkSession,
    lake: str,
    vacuumed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    spark.range(20, 30, numPartitions=1).write.format("delta").mode("append").save(
        os.path.join(lake, CLUSTERED)
    )
    assert cli("optimize", "--lake", lake, "--table", "silver/public.orders", CLUSTERED) == 0
    captured = capsys.readouterr()
    assert _words(captured.out) == [
        "table layout by files before removed added files after",
        "extra/clustered clustering id 2 2 1 1",
        "silver/public.orders z-order customer_id, order_no 1 0 0 1",  # already Z-ordered: not rewritten
        "2 table(s): 3 file(s) -> 2",
    ]
    assert "resolver: note: silver/public.orders: nothing written since its last Z-order" in captured.err
    assert not os.path.exists(os.path.join(lake, "_resolver", "run.lock"))  # the lock is given back

    args = ("vacuum", "--lake", lake, "--table", CLUSTERED, "--retain-hours", "0", "--force")
    assert cli(*args, "--dry-run") == 0
    out = _words(capsys.readouterr().out)
    assert out[:2] == ["table files to delete", "extra/clustered 2"]
    assert len(out) == 4 and all(line.startswith("would delete extra/clustered/") for line in out[2:])
    assert cli(*args) == 0
    assert _words(capsys.readouterr().out) == ["table files deleted", "extra/clustered 2"]


def _words(out: str) -> list[str]:
    return [" ".join(line.split()) for line in out.splitlines()]


def test_cli_checks_its_arguments_before_spark(cli: Callable[..., int], lake: str) -> None:
    with pytest.raises(ConfigError, match=r"^vacuum: found a retention of 1 hours, expected at least 168 "):
        cli("vacuum", "--lake", lake, "--retain-hours", "1")
    with pytest.raises(ConfigError) as error:
        cli("optimize", "--lake", lake, "--table", "public.order")
    assert str(error.value).startswith(
        f"table 'public.order' not found in lake {lake}, expected a source table (public.audit_log, "
        "public.customers, public.orders) or a Delta table of the lake (_resolver/changes/public.audit_log, "
    )
    assert str(error.value).endswith(" (did you mean 'public.orders'?)")
    with pytest.raises(ConfigError) as error:
        cli("optimize", "--lake", str(Path(lake) / "nope"))
    assert str(error.value) == (
        f"lake {Path(lake) / 'nope'} not found, expected a folder written by resolver ingest or resolver run"
    )


def test_a_lake_named_by_a_uri_is_listed_and_maintained_through_spark(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from resolver.files.hadoop_files import HadoopFiles
    from resolver.lake.lake_tables import select_tables

    copy = tmp_path_factory.mktemp("maintenance_uri") / "lake"
    shutil.copytree(sample_lake(spark, tmp_path_factory.getbasetemp()), copy)
    path, uri = str(copy), f"file://{copy}"
    files = HadoopFiles(spark)
    assert lake_tables(uri, files) == lake_tables(path)
    chosen = select_tables(uri, ["public.customers"], files)
    assert chosen == select_tables(path, ["public.customers"]) and len(chosen) == 3
    rows = _content(spark, path, chosen)
    done = optimize(spark, uri, ["public.customers"])
    assert [t["table"] for t in done] == chosen
    assert all(t["files_after"] <= t["files_before"] for t in done)
    assert _content(spark, path, chosen) == rows
    listed = vacuum(spark, uri, retain_hours=0, tables=["public.customers"], dry_run=True, force=True)
    assert [t["table"] for t in listed] == chosen
    assert sum(len(t["files_to_delete"]) for t in listed) >= sum(t["files_removed"] for t in done) > 0
