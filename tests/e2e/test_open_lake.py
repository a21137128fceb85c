"""An open lake (issue 69): every Delta table a lake holds reads the same in delta-rs (``deltalake``),
Polars, DuckDB's delta extension (the ``duckdb-extension-delta`` wheel from PyPI, loaded from its file: no
extension download) and Spark — the same columns and rows, timestamps to the microsecond (an open version's
``__end_time``, 9999-12-31 23:59:59.999999, too) — and delta-rs's change feed of every silver table equals
Spark's. The lakes: the differential workload's (key changes, TOASTed values left out of updates, truncates,
every type of the workload) and the sample stream's with deletion vectors on."""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from tests import difftest as d
from tests.harness.postgres import write_lines
from tests.pipelines import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
duckdb_extension_delta = pytest.importorskip("duckdb_extension_delta")


def _duckdb() -> Any:
    """A DuckDB connection with the delta extension loaded from the wheel's file."""
    folder = Path(duckdb_extension_delta.__file__).parent / "extensions"
    extension = next(folder.glob("*/delta.duckdb_extension"))
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    return con


def _value(v: Any) -> Any:
    """A value of any reader, as the others' compare: timestamps as naive UTC datetimes (microseconds), a
    struct as its sorted items, bytes as bytes."""
    if isinstance(v, datetime):
        return v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo is not None else v
    if isinstance(v, dict):
        return tuple(sorted((k, _value(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_value(x) for x in v)
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, Decimal):
        return v.normalize() if v.is_finite() else str(v)
    return v


def _rows(table: pa.Table) -> tuple[list[str], Counter[tuple[Any, ...]]]:
    names = sorted(table.column_names)
    rows = table.select(names).to_pylist()
    return names, Counter(tuple(_value(r[n]) for n in names) for r in rows)


def _tables(lake: Path) -> list[Path]:
    """Every Delta table under the lake."""
    return sorted(Path(root) for root, dirs, _ in os.walk(lake) if "_delta_log" in dirs)


def _differences(spark: SparkSession, path: Path, con: Any) -> list[str]:
    want = _rows(spark.read.format("delta").load(str(path)).toArrow())
    readers = {
        "deltalake": lambda: deltalake.DeltaTable(str(path)).to_pyarrow_table(),
        "polars": lambda: pl.read_delta(str(path)).to_arrow(),
        "duckdb": lambda: con.execute(f"SELECT * FROM delta_scan('{path}')").fetch_arrow_table(),
    }
    problems = []
    for name, read in readers.items():
        try:
            got = _rows(read())
        except Exception as e:  # noqa: BLE001  # a reader that refuses the table is a difference too
            if name == "deltalake" and _deletion_vectors(e):
                continue  # delta-rs 1.6 reads no table with deletion vectors, and says so (docs/silver.md)
            problems.append(f"{path.name}: {name} failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        if got[0] != want[0]:
            problems.append(f"{path.name}: {name} columns {got[0]}, Spark {want[0]}")
        elif got[1] != want[1]:
            extra, missing = got[1] - want[1], want[1] - got[1]
            problems.append(
                f"{path.name}: {name} differs from Spark in {sum(extra.values())} row(s), e.g. "
                f"{list(extra)[:1]} where Spark has {list(missing)[:1]}"
            )
    return problems


def _deletion_vectors(error: Exception) -> bool:
    """Whether delta-rs refused a table for its deletion-vector reader feature (loudly: never wrong rows)."""
    return type(error).__name__ == "DeltaProtocolError" and "deletionVectors" in str(error)


def _feed_differences(spark: SparkSession, path: Path) -> list[str]:
    """delta-rs's change feed of a silver table from version 0 against Spark's (the commit time left out:
    delta-rs gives it in milliseconds)."""
    spark_feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
    want = spark_feed.load(str(path)).drop("_commit_timestamp").toArrow()
    try:
        feed = deltalake.DeltaTable(str(path)).load_cdf(starting_version=0)
        got = pa.table(feed.read_all()).drop(
            ["_commit_timestamp"]
        )  # an arro3 table: any Arrow table reads it
    except Exception as e:  # noqa: BLE001
        if _deletion_vectors(e):
            return []
        return [f"{path.name}: delta-rs's load_cdf failed: {type(e).__name__}: {str(e)[:200]}"]
    if _rows(got) != _rows(want):
        return [f"{path.name}: delta-rs's change feed differs from Spark's"]
    return []


def test_every_table_of_a_lake_reads_the_same_in_every_reader(
    spark: SparkSession, captures: Any, tmp_path: Path
) -> None:
    cap = captures.get(d.REPLAY_SEED, d.REPLAY_TRANSACTIONS)
    differential = tmp_path / "differential"
    files = []
    for i, lines in enumerate(d.landed_files(cap, 3)):
        files.append(tmp_path / f"{i}.json")
        write_lines(files[-1], lines)
    ingest(spark, [str(files[0])], str(differential), "wal2json-v2")
    ingest(spark, [str(f) for f in files[1:]], str(differential), "wal2json-v2")
    vectors = tmp_path / "deletion-vectors"
    spark.conf.set("spark.resolver.deletionVectors.fromBytes", "0")
    try:
        sample = ROOT / "samples" / "seed000"
        for batch in ("batch1.json", "batch2.json", "batch3.json"):
            ingest(spark, [str(sample / batch)], str(vectors), "wal2json-v2")
    finally:
        spark.conf.unset("spark.resolver.deletionVectors.fromBytes")
    con = _duckdb()
    problems, silver = [], []
    for lake in (differential, vectors):
        for table in _tables(lake):
            problems += _differences(spark, table, con)
            if table.parent.name == "silver":
                silver.append(table)
    assert len(silver) >= 12, silver
    for table in silver:
        problems += _feed_differences(spark, table)
    history = next(t for t in silver if t.name.endswith("__history"))
    ends = pl.read_delta(str(history)).get_column("__end_time").max()
    assert ends == datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), ends  # not 2262-04-11
    assert not problems, "\n".join(problems)


def _reading_example() -> str:
    """The README's "Reading the lake" example."""
    block = (ROOT / "README.md").read_text("utf-8").split("<!-- reading-example -->", 1)[1]
    return re.search(r"```python\n(.+?)\n```", block, re.S).group(1)  # type: ignore[union-attr]


def test_the_readmes_reading_example_runs_on_the_sample_lake(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's Polars, delta-rs and DuckDB example, run as written on the quickstart's lake (the sample
    stream): it prints the customers and their history's versions, open ones ending at 9999-12-31."""
    ingest(spark, [str(ROOT / "samples" / "wal2json-v2")], str(tmp_path / "lake"), "wal2json-v2")
    monkeypatch.chdir(tmp_path)
    exec(compile(_reading_example(), "<README reading example>", "exec"), {})
    printed = capsys.readouterr().out
    assert "9999-12-31 23:59:59.999999" in printed, printed
    assert "2262" not in printed, printed


def test_optimize_rewrites_a_table_written_with_int96_timestamps_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A lake written before timestamps were microseconds: ``resolver optimize`` rewrites its INT96 table
    once (no row changes, no change-feed entry), after which Polars reads 9999-12-31, not 2262-04-11."""
    from resolver.ops.maintenance import optimize

    table = tmp_path / "lake" / "silver" / "public.old__history"
    end = datetime(9999, 12, 31, 23, 59, 59, 999999)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:  # as Spark wrote the lake's tables before
        rows = spark.createDataFrame([(1, end)], "id int, __end_time timestamp")
        rows.write.format("delta").option("delta.enableChangeDataFeed", "true").save(str(table))
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    assert pl.read_delta(str(table)).get_column("__end_time").max().year == 2262  # misread
    reports = optimize(spark, str(tmp_path / "lake"))
    assert [r["note"] for r in reports] == [
        "rewritten once with its timestamps as microseconds (they were INT96)"
    ]
    assert pl.read_delta(str(table)).get_column("__end_time").max() == end.replace(tzinfo=UTC)
    assert deltalake.DeltaTable(str(table)).to_pyarrow_table().num_rows == 1
    assert [r["note"] for r in optimize(spark, str(tmp_path / "lake"))] == [""]  # once
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
    assert feed.load(str(table)).count() == 1  # the rewrite is no change
