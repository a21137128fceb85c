"""How a rename and a widening reach a table's snapshot and history (``resolver.lake.tables``): rewritten by
default into a plain Delta table (no column mapping, no type widening; every value kept; the earlier name in
the field's metadata; one commit marked as the rewrite), or in Delta's metadata with
``schema_changes: metadata``. The end-to-end cases (PostgreSQL's own ALTERs, every reader): tests/e2e/
test_open_lake.py and test_evolution_pg.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from resolver.lake import tables
from resolver.models import SchemaChanges
from resolver.tablelayout import Column_, TableLayout

pytestmark = pytest.mark.spark


def _open(spark: SparkSession, path: str, changes: SchemaChanges) -> DeltaTable:
    """The table at ``path`` opened by a batch whose layout renames mail to email and widens id and n."""
    layout = TableLayout(
        "public.t",
        (Column_("id", "bigint"), Column_("n", "bigint"), Column_("email", "string")),
        ("id",),
        renames=(("mail", "email"),),
        schema_changes=changes,
    )
    key = T.StructType([T.StructField("id", T.LongType())])
    source = T.StructType([T.StructField(c.name, T._parse_datatype_string(c.type)) for c in layout.columns])  # noqa: SLF001
    target = T.StructType([*source.fields, T.StructField("__key", key)])
    return tables._open(spark, path, tables._Spec(target, {}, ""), source, layout, changes)[0]  # noqa: SLF001


def _changed(spark: SparkSession, path: str, changes: SchemaChanges) -> DeltaTable:
    spark.createDataFrame(
        [(1, 10, "a@x", (1,)), (2, 20, "b@x", (2,))], "id int, n int, mail string, __key struct<id:int>"
    ).write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)
    return _open(spark, path, changes)


def test_a_rename_and_a_widening_are_rewritten_by_default(spark: SparkSession, tmp_path: Path) -> None:
    table = _changed(spark, str(tmp_path / "t"), SchemaChanges.REWRITE)
    rows = table.toDF()
    assert rows.dtypes == [
        ("id", "bigint"),
        ("n", "bigint"),
        ("email", "string"),
        ("__key", "struct<id:bigint>"),
    ]
    assert sorted(tuple(r) for r in rows.collect()) == [(1, 10, "a@x", (1,)), (2, 20, "b@x", (2,))]
    assert rows.schema["email"].metadata[tables.FORMER_NAMES] == ["mail"]
    detail = table.detail().first()
    assert detail is not None and detail["minReaderVersion"] == 1, detail  # a plain table
    assert not {"columnMapping", "typeWidening"} & set(detail["tableFeatures"] or [])
    last = table.history(1).first()
    assert last is not None and last["userMetadata"] == tables.REWRITE_COMMIT
    assert _changed_again(spark, table) == 0  # a second batch finds nothing to do


def test_metadata_renames_with_column_mapping_and_widens_in_place(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = _changed(spark, str(tmp_path / "t"), SchemaChanges.METADATA)
    rows = table.toDF()
    assert rows.dtypes == [
        ("id", "bigint"),
        ("n", "bigint"),
        ("email", "string"),
        ("__key", "struct<id:bigint>"),
    ]
    assert sorted(tuple(r) for r in rows.collect()) == [(1, 10, "a@x", (1,)), (2, 20, "b@x", (2,))]
    detail = table.detail().first()
    assert detail is not None and {"columnMapping", "typeWidening"} <= set(detail["tableFeatures"])
    assert all(h["userMetadata"] != tables.REWRITE_COMMIT for h in table.history().collect())


def _changed_again(spark: SparkSession, table: DeltaTable) -> int:
    """Commits a second open with the same layout makes."""
    path = table.detail().first()["location"]  # type: ignore[index]
    before = table.history(1).first()["version"]  # type: ignore[index]
    again = _open(spark, path, SchemaChanges.REWRITE)
    return int(again.history(1).first()["version"]) - int(before)  # type: ignore[index]
