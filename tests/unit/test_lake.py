"""Table names as PostgreSQL writes them (resolver.formats.names), their folders in the lake
(resolver.lake.folders) and their quoting in Spark SQL (resolver.spark.sql): one-to-one, inside the lake,
readable for ordinary names. No Spark."""

from __future__ import annotations

import os
import string
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resolver.errors import ConfigError
from resolver.formats.names import TableName, qualified, quote_part, split_qualified
from resolver.lake import folders as lake
from resolver.spark import sql

HOSTILE = [
    ("public", "orders"),
    ("public", "orders__history"),
    ("public", "orders_~5Fhistory"),
    ("public", "x/../../../../tmp/resolver-escape"),
    ("public", ".."),
    ("public", "."),
    ("public", 'we`ird"q'),
    ("public", "Mixed Case Spaces"),
    ("a.b", "c"),
    ("a", "b.c"),
    ("public", "ñ" * 31 + "t"),
    ("ñ" * 31 + "t", "ü" * 31 + "u"),
    ("public", "~41"),
    ("public", "A"),
    ("public", "a"),
]

#: Any identifier PostgreSQL takes: 1 to 63 bytes, no NUL.
IDENT = st.text(st.characters(min_codepoint=1, blacklist_categories=("Cs",)), min_size=1).filter(
    lambda s: len(s.encode("utf-8")) <= 63
)


def test_ordinary_names_are_their_own_folder() -> None:
    assert lake.folder("public.orders") == "public.orders"
    assert lake.folder("sales.order_lines_2024") == "sales.order_lines_2024"
    assert lake.table_of("public.orders") == "public.orders"


def test_the_documented_examples() -> None:
    assert lake.folder('public."Mixed Case"') == "public.~4Dixed~20~43ase"
    assert lake.folder('public."x/../y"') == "public.x~2F~2E~2E~2Fy"
    assert lake.folder('"a.b".c') == "a~2Eb.c"
    assert lake.folder('a."b.c"') == "a.b~2Ec"
    assert lake.folder("public.orders__history") == "public.orders_~5Fhistory"


def test_hostile_names_get_distinct_folders_inside_the_lake(tmp_path: Path) -> None:
    names = [qualified(s, t) for s, t in HOSTILE]
    folders = [lake.folder(n) for n in names]
    assert len(set(folders)) == len(folders)
    every = folders + [f + lake.HISTORY for f in folders]
    assert len(set(every)) == len(every), "no snapshot is another table's history"
    for name, f in zip(names, folders, strict=True):
        assert "/" not in f and f not in (".", "..") and len(f.encode()) <= lake.MAX_FOLDER
        assert set(f) <= set(string.ascii_lowercase + string.digits + "_-.~" + string.hexdigits)
        for path in (lake.snapshot_path(str(tmp_path), name), lake.history_path(str(tmp_path), name)):
            assert os.path.dirname(path) == str(tmp_path / "silver")
        assert lake.table_of(f) in (name, None)


def test_a_long_unicode_name_is_hashed_and_still_distinct() -> None:
    a = qualified("ñ" * 31 + "t", "ü" * 31 + "u")
    b = qualified("ñ" * 31 + "t", "ü" * 31 + "v")
    assert len(lake.folder(a).encode()) <= lake.MAX_FOLDER and "~~" in lake.folder(a)
    assert lake.folder(a) != lake.folder(b)
    assert lake.table_of(lake.folder(a)) is None  # the table property resolver.table tells


@given(IDENT, IDENT)
def test_folder_and_name_round_trip(schema: str, table: str) -> None:
    name = qualified(schema, table)
    assert split_qualified(name) == (schema, table)
    assert TableName(name).schema == schema and TableName(name).table == table
    f = lake.folder(name)
    assert "/" not in f and f not in (".", "..") and not f.endswith(lake.HISTORY)
    assert lake.table_of(f) in (name, None)
    if "~~" not in f:
        assert lake.table_of(f) == name


@given(IDENT, IDENT, IDENT, IDENT)
def test_two_tables_never_share_a_folder(s1: str, t1: str, s2: str, t2: str) -> None:
    if (s1, t1) != (s2, t2):
        assert lake.folder(qualified(s1, t1)) != lake.folder(qualified(s2, t2))


def test_names_are_parsed_the_way_postgresql_does() -> None:
    assert split_qualified("orders") == ("public", "orders")
    assert split_qualified("Public.Orders") == ("public", "orders")  # unquoted parts fold to lower case
    assert split_qualified('public."Mixed Case"') == ("public", "Mixed Case")
    assert split_qualified('"a.b".c') == ("a.b", "c")
    assert split_qualified('a."b.c"') == ("a", "b.c")
    assert split_qualified('public."we`ird""q"') == ("public", 'we`ird"q')
    assert quote_part("orders") == "orders" and quote_part("Orders") == '"Orders"'
    assert str(TableName("Public.Orders")) == "public.orders"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a.b.c", "3 dotted parts"),
        ('public."open', "never closed"),
        ('public.""', "empty quoted name"),
        ("public.", "ends with '.'"),
        ('"a"b.c', "after a quoted name"),
    ],
)
def test_a_malformed_table_name_is_one_line(text: str, found: str) -> None:
    with pytest.raises(ConfigError) as err:
        split_qualified(text)
    assert found in str(err.value) and "\n" not in str(err.value)


def test_inside_refuses_a_path_that_leaves_the_lake(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not inside the lake"):
        lake.inside(str(tmp_path), "silver", "../../etc")
    with pytest.raises(ValueError, match="not inside the lake"):
        lake.inside(str(tmp_path), ".")


def test_sql_quoting() -> None:
    assert sql.ident("a.b") == "`a.b`"
    assert sql.ident("we`ird") == "`we``ird`"
    assert sql.delta_path("/l/a`b") == "delta.`/l/a``b`"
    assert sql.string("it's a \\ path") == "'it\\'s a \\\\ path'"
    assert sql.literal(5) == "5"
    assert sql.literal("o'k") == "'o\\'k'"
    assert sql.literal(date(2024, 1, 2)) == "DATE'2024-01-02'"
    with pytest.raises(TypeError):
        sql.literal(True)


def test_a_type_as_sql_text_quotes_its_field_names() -> None:
    from pyspark.sql import types as T

    key = T.StructType(
        [T.StructField("we`ird a.b", T.DecimalType(12, 2)), T.StructField("t", T.TimestampNTZType())]
    )
    assert sql.type_sql(key) == "STRUCT<`we``ird a.b`: decimal(12,2), `t`: timestamp_ntz>"
    nested = T.MapType(T.StringType(), T.ArrayType(T.LongType()))
    assert sql.type_sql(nested) == "MAP<string, ARRAY<bigint>>"


@pytest.mark.parametrize("root", ["lake", "lake/", "s3a://bucket/lake/", "file:/tmp/lake"])
def test_a_lake_resolved_once_names_each_table_inside_it(
    root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Lake.at`` resolves the root once (a plain path made absolute, a URI as given, without its trailing
    slash) and every table's paths come from it, one path component per table folder, never outside."""
    monkeypatch.chdir(tmp_path)
    at = lake.Lake.at(root)
    assert lake.Lake.at(at) is at and at.name == root
    base = root.rstrip("/") if at.uri else str(tmp_path / "lake")
    join = (lambda *p: "/".join((base, *p))) if at.uri else (lambda *p: os.path.join(base, *p))
    assert (at.root, at.bronze, at.quarantine, at.ledger) == (
        base, join("bronze", "change_events"), join("quarantine"), join("_resolver", "ledger")
    )  # fmt: skip
    assert at.lock == join("_resolver", "lock" if at.uri else "run.lock")
    for name in [qualified(s, t) for s, t in HOSTILE]:
        paths = at.table(name)
        assert paths.table == name and paths.schema_log == join("_resolver", "schema_log")
        assert paths.changes == join("_resolver", "changes", lake.folder(name))
        assert (paths.snapshot, paths.history) == (
            join("silver", lake.folder(name)), join("silver", lake.folder(name) + lake.HISTORY)
        )  # fmt: skip
