"""An open lake (issue 69): every Delta table a lake holds reads the same in delta-rs (``deltalake``),
Polars, DuckDB's delta extension (the ``duckdb-extension-delta`` wheel from PyPI, loaded from its file: no
extension download) and Spark — the same columns and rows, timestamps to the microsecond (an open version's
``__end_time``, 9999-12-31 23:59:59.999999, too) — and delta-rs's change feed of every silver table equals
Spark's. The lakes: the differential workload's (key changes, TOASTed values left out of updates, truncates,
every type of the workload), the sample stream's with deletion vectors on, and a schema-evolution lake (a
rename, widenings and a dropped column, rewritten into the silver tables by default); on that one every
change since version 0 reads once, with the new names (``resolver.ops.changes``)."""

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
from tests.harness.postgres import PgDatabase, write_lines
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
            if _metadata_change(path, e):
                continue  # the change store (the resolver's own, append-only) widens in its metadata

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


def _metadata_change(path: Path, error: Exception) -> bool:
    """Whether a reader refused a table of the resolver's own state (``_resolver/changes``: append-only,
    read by the resolver only) for the type widening or column mapping it keeps schema changes in."""
    refused = type(error).__name__ == "DeltaProtocolError"
    feature = "typeWidening" in str(error) or "columnMapping" in str(error)
    return refused and feature and "_resolver" in path.parts


def _deletion_vectors(error: Exception) -> bool:
    """Whether delta-rs refused a table for its deletion-vector reader feature (loudly: never wrong rows)."""
    return type(error).__name__ == "DeltaProtocolError" and "deletionVectors" in str(error)


def _last_rewrite(path: Path) -> int:
    """The version of the table's last rewrite for a schema change (0: none): Spark reads no change feed
    across it (``resolver.ops.changes`` does, below)."""
    from resolver.lake.tables import REWRITE_COMMIT

    history = deltalake.DeltaTable(str(path)).history()
    return max([h["version"] for h in history if h.get("userMetadata") == REWRITE_COMMIT], default=0)


def _feed_differences(spark: SparkSession, path: Path, since: int = 0) -> list[str]:
    """delta-rs's change feed of a silver table from version ``since`` against Spark's (the commit time left
    out: delta-rs gives it in milliseconds)."""
    spark_feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", since)
    want = spark_feed.load(str(path)).drop("_commit_timestamp").toArrow()
    try:
        feed = deltalake.DeltaTable(str(path)).load_cdf(starting_version=since)
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


#: the schema-evolution lake's table before and after its schema changes (the second batch carries them)
EVOLUTION_BEFORE = "CREATE TABLE evo (id int PRIMARY KEY, mail text, n int, amount numeric(10,2), gone text);"
EVOLUTION_FIRST = (
    "INSERT INTO evo VALUES (1, 'a@x', 1, 1.50, 'g1'), (2, 'b@x', 2, 2.25, 'g2'), (3, 'c@x', 3, 3.00, 'g3');"
    "UPDATE evo SET mail = 'b2@x' WHERE id = 2; DELETE FROM evo WHERE id = 3;"
)
EVOLUTION_SECOND = (
    "ALTER TABLE evo RENAME COLUMN mail TO email; ALTER TABLE evo ALTER COLUMN n TYPE bigint;"
    "ALTER TABLE evo ALTER COLUMN amount TYPE numeric(14,4); ALTER TABLE evo DROP COLUMN gone;"
    "INSERT INTO evo VALUES (4, 'd@x', 5000000000, 4.1234); UPDATE evo SET email = 'a2@x' WHERE id = 1;"
    "UPDATE evo SET id = 10 WHERE id = 2; DELETE FROM evo WHERE id = 4;"
)
EVOLUTION_HINT = "table: public.evo\ncolumns:\n  - name: email\n    renamed_from: [mail]\n"


def _evolution_lake(spark: SparkSession, pg_db: PgDatabase, tmp_path: Path) -> Path:
    """The schema-evolution lake: ``public.evo`` in two batches, the second with a rename (hinted), two
    widenings and a dropped column."""
    pg_db.execute(EVOLUTION_BEFORE)
    pg_db.create_slot("evo")
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "public.evo.yaml").write_text(EVOLUTION_HINT, "utf-8")
    lake = tmp_path / "evolution"
    for i, statements in enumerate((EVOLUTION_FIRST, EVOLUTION_SECOND)):
        pg_db.execute(statements)
        path = tmp_path / f"evo{i}.json"
        write_lines(path, pg_db.capture("evo", 2, consume=True))
        ingest(spark, [str(path)], str(lake), "wal2json-v2", str(schemas))
    return lake


def test_every_table_of_a_lake_reads_the_same_in_every_reader(
    spark: SparkSession, captures: Any, pg_db: PgDatabase, tmp_path: Path
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
    evolution = _evolution_lake(spark, pg_db, tmp_path)
    con = _duckdb()
    problems, silver = [], []
    for lake in (differential, vectors, evolution):
        for table in _tables(lake):
            problems += _differences(spark, table, con)
            if table.parent.name == "silver":
                silver.append(table)
    assert len(silver) >= 14, silver
    for table in silver:
        problems += _feed_differences(spark, table, since=_last_rewrite(table))
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


def test_every_change_since_version_0_reads_once_with_the_new_names(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Across the rewrite for a rename and two widenings, ``changes`` gives the snapshot's every change from
    version 0 with the current names and types, each once (the rewrite's own feed, every row deleted and
    inserted again, left out): replaying them in commit order gives the snapshot; the value written under
    the old name reads under the new one. Spark alone refuses this read."""
    from resolver.ops.changes import changes

    lake = _evolution_lake(spark, pg_db, tmp_path)
    snapshot = lake / "silver" / "public.evo"
    with pytest.raises(Exception, match="DELTA_CHANGE_DATA_FEED_INCOMPATIBLE"):
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(
            str(snapshot)
        ).collect()
    feed = changes(spark, str(lake), "public.evo", version=0)
    assert dict(feed.dtypes)["n"] == "bigint" and dict(feed.dtypes)["amount"] == "decimal(14,4)"
    assert "email" in feed.columns and "mail" not in feed.columns
    rows = [r.asDict() for r in feed.orderBy("_commit_version").collect()]
    firsts = [r for r in rows if r["id"] == 1 and r["_change_type"] == "insert"]
    assert len(firsts) == 1 and firsts[0]["email"] == "a@x", rows  # once, under its new name
    state: dict[Any, dict[str, Any]] = {}
    for version in sorted({r["_commit_version"] for r in rows}):
        for r in [r for r in rows if r["_commit_version"] == version]:  # deletes before inserts
            if r["_change_type"] in ("delete", "update_preimage"):
                assert state.pop(r["id"]) == _image(r), r
        for r in [r for r in rows if r["_commit_version"] == version]:
            if r["_change_type"] in ("insert", "update_postimage"):
                assert r["id"] not in state, r
                state[r["id"]] = _image(r)
    now = [r.asDict() for r in spark.read.format("delta").load(str(snapshot)).collect()]
    assert state == {r["id"]: _image(r) for r in now}
    assert sorted(state) == [1, 10]
    # since an LSN: every version that began or ended after it (all of them after LSN 0)
    history = spark.read.format("delta").load(str(lake / "silver" / "public.evo__history"))
    since = changes(spark, str(lake), "public.evo", lsn=0)
    assert since.exceptAll(history).isEmpty() and history.exceptAll(since).isEmpty()
    # the command line prints the same changes
    from resolver.cli.main import main

    capsys.readouterr()
    assert main(["changes", "--lake", str(lake), "--table", "public.evo", "--since", "0"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1].startswith(f"{len(rows)} change(s) of public.evo since version 0"), printed
    assert "email" in printed[0] and "a2@x" in "\n".join(printed)
    assert main(["changes", "--lake", str(lake), "--table", "public.evo", "--since", "later"]) == 2
    assert "expected a Delta version (0, 12) or an LSN (0/1932D58)" in capsys.readouterr().err


def _image(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_")}
