"""Time travel (``resolver.ops.timetravel.as_of``, ``resolver as-of``) on a lake of the samples, checked
against a plain-Python replay of the sample's events up to each point."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.errors import ConfigError
from resolver.formats.wal2json import format_lsn
from resolver.lake.folders import snapshot_path
from resolver.ops.timetravel import as_of, point
from tests.samplelake import COMMITS, MOVE, TABLES, sample_events, sample_lake

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shared sample lake (read only here)."""
    return str(sample_lake(spark, tmp_path_factory.getbasetemp()))


def replay(table: str, upto: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The table after the events ``upto`` accepts, replayed in order over dicts of the events' text, with
    each row's ``__start_lsn`` and ``__start_time``: the commit that last changed its values."""
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in sample_events():
        if e["table"] != table or not upto(e):
            continue
        if e["operation"] == "truncate":
            rows.clear()
            continue
        key = e["primary_key"]
        image = dict(zip(e.get("column_names") or [], e.get("column_values") or [], strict=True))
        old = dict(zip(e.get("old_key_names") or [], e.get("old_key_values") or [], strict=True)) or image
        start = {"__start_lsn": e["commit_lsn"], "__start_time": e["commit_time"]}
        if e["operation"] == "insert":
            rows[_key(key, image)] = {**image, **start}
        elif e["operation"] == "delete":
            rows.pop(_key(key, old), None)
        else:  # an update: absent columns keep their value; a change of nothing opens no version
            before = rows.pop(_key(key, old), {})
            after = {**before, **image}
            same = after == before and _key(key, after) == _key(key, old)
            rows[_key(key, after)] = after if same else {**after, **start}
    return sorted(rows.values(), key=lambda r: str(sorted(r.items())))


def _key(names: list[str], row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in names)


def _comparable(text: str | None, kind: T.DataType) -> Any:
    """An event's value text as the lake holds it (see ``_lake_rows``)."""
    if text is None:
        return None
    if isinstance(kind, T.LongType | T.IntegerType | T.ShortType):
        return int(text)
    if isinstance(kind, T.DecimalType):
        return Decimal(text)
    if isinstance(kind, T.DoubleType | T.FloatType):
        return float(text)
    if isinstance(kind, T.TimestampType):
        return _micros(datetime.fromisoformat(text))
    if isinstance(kind, T.BinaryType):
        return text.lower()
    return text


def _micros(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=t.tzinfo)) // timedelta(microseconds=1)


def _lake_rows(df: DataFrame) -> list[dict[str, Any]]:
    """Rows with timestamps as microseconds since the epoch and binary as hex: exact, and free of the
    Python process's time zone."""
    exact = [
        F.unix_micros(f.name).alias(f.name)
        if isinstance(f.dataType, T.TimestampType)
        else F.lower(F.hex(f.name)).alias(f.name)
        if isinstance(f.dataType, T.BinaryType)
        else F.col(f.name)
        for f in df.schema.fields
    ]
    return sorted((r.asDict() for r in df.select(*exact).collect()), key=lambda r: str(sorted(r.items())))


def _expected(df: DataFrame, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    types = {f.name: f.dataType for f in df.schema.fields}
    out = [
        {
            **{c: _comparable(r.get(c), types[c]) for c in df.columns if not c.startswith("__")},
            "__start_lsn": r["__start_lsn"],
            "__start_time": _micros(r["__start_time"]),
        }
        for r in rows
    ]
    return sorted(out, key=lambda r: str(sorted(r.items())))


@pytest.mark.parametrize(
    "lsn",
    [
        pytest.param(lambda: COMMITS[0][0] - 1, id="before the first commit"),
        pytest.param(lambda: MOVE - 1, id="just before the key change"),
        pytest.param(lambda: MOVE, id="at the key change"),
        pytest.param(lambda: COMMITS[-1][0] - 1, id="just before the truncate"),
        pytest.param(lambda: COMMITS[-1][0], id="at the last commit"),
    ],
)
def test_as_of_lsn_equals_a_replay_of_the_events(
    spark: SparkSession, lake: str, lsn: Callable[[], int]
) -> None:
    at = lsn()
    for table in TABLES:
        got = as_of(spark, lake, table, lsn=format_lsn(at))
        assert got.columns == spark.read.format("delta").load(snapshot_path(lake, table)).columns
        assert _lake_rows(got) == _expected(got, replay(table, lambda e: e["commit_lsn"] <= at)), (table, at)


def test_key_changes_deletes_and_truncates_end_where_they_happen(spark: SparkSession, lake: str) -> None:
    ids = {
        lsn: sorted(r.id for r in as_of(spark, lake, "public.customers", lsn=lsn).collect())
        for lsn in (MOVE - 1, MOVE)
    }
    assert ids == {MOVE - 1: [1, 2, 3, 4, 5, 6], MOVE: [1, 3, 4, 5, 6, 20]}
    assert as_of(spark, lake, "public.audit_log", lsn=COMMITS[-1][0] - 1).count() == 1
    assert as_of(spark, lake, "public.audit_log", lsn=COMMITS[-1][0]).isEmpty()


def test_as_of_the_last_commit_is_the_snapshot(spark: SparkSession, lake: str) -> None:
    for table in TABLES:
        snapshot = spark.read.format("delta").load(snapshot_path(lake, table))
        assert _lake_rows(as_of(spark, lake, table, lsn=COMMITS[-1][0])) == _lake_rows(snapshot), table


def test_as_of_time_equals_a_replay_up_to_that_commit_time(spark: SparkSession, lake: str) -> None:
    moved_at = next(t for lsn, t in COMMITS if lsn == MOVE)
    for when, until in (
        (moved_at.isoformat(), moved_at),  # ISO text with an offset, exactly a commit time
        ((moved_at - timedelta(microseconds=1)).replace(tzinfo=None), moved_at - timedelta(microseconds=1)),
        ("2000-01-01", datetime.fromisoformat("2000-01-01T00:00:00+00:00")),  # before the first commit
    ):
        for table in ("public.customers", "public.orders"):
            got = as_of(spark, lake, table, time=when)
            assert _lake_rows(got) == _expected(
                got, replay(table, lambda e, u=until: e["commit_time"] <= u)
            ), when


def test_lsn_forms_are_the_same_point() -> None:
    assert point(lsn="0/1932990") == point(lsn=26421648) == point(lsn="26421648") == point(lsn=" 0/1932990 ")
    assert point(time="2026-11-21 16:30:12.5") == point(
        time=datetime.fromisoformat("2026-11-21T17:30:12.5+01:00")
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "as of: found neither time nor lsn, expected exactly one of them"),
        ({"time": "2026-11-21", "lsn": 1}, "as of: found both time and lsn, expected exactly one of them"),
        (
            {"lsn": "0/XYZ"},
            "as of: found LSN '0/XYZ', expected PostgreSQL's text form such as '0/16B3748' or a decimal "
            "integer such as 23803720",
        ),
        (
            {"lsn": 1.5},
            "as of: found LSN 1.5 of type float, expected PostgreSQL's text form such as '0/16B3748' or a "
            "decimal integer such as 23803720",
        ),
        (
            {"lsn": "FFFFFFFF/FFFFFFFF"},
            "as of: found LSN 18446744073709551615, expected 0 to 9223372036854775806 (7FFFFFFF/FFFFFFFE, "
            "the largest commit LSN the lake holds)",
        ),
        (
            {"time": "yesterday"},
            "as of: found time 'yesterday', expected an ISO timestamp such as '2026-11-21 16:30:12.615' "
            "(UTC) or '2026-11-21T17:30:12.615+01:00'",
        ),
    ],
)
def test_bad_points_are_one_line(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        point(**kwargs)
    assert str(error.value) == message


def test_unknown_tables_list_the_lake_with_a_hint(spark: SparkSession, lake: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        as_of(spark, lake, "public.custmers", lsn=1)
    assert str(error.value) == (
        f"table 'public.custmers' not found in lake {lake}, expected one of public.audit_log, "
        "public.customers, public.orders (did you mean 'public.customers'?)"
    )
    with pytest.raises(ConfigError, match=r"^table 'invoices' not found in lake .*public.orders$"):
        as_of(spark, lake, "invoices", lsn=1)
    with pytest.raises(ConfigError) as error:
        as_of(spark, str(tmp_path / "nope"), "public.orders", lsn=1)
    assert str(error.value) == (
        f"lake {tmp_path / 'nope'} not found, expected a folder written by resolver ingest or resolver run"
    )


# --- the command -------------------------------------------------------------------------------------------
def test_cli_prints_the_rows_in_key_order(
    cli: Callable[..., int], lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("as-of", "--lake", lake, "--table", "public.orders", "--lsn", format_lsn(MOVE)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["customer_id", "order_no", "amount", "status", "__start_lsn", "__start_time"]
    assert [ln.split()[:4] for ln in lines[1:-1]] == [
        ["1", "1", "19.99", "shipped"],
        ["1", "2", "5.00", "new"],
        ["3", "1", "123456789012345678901234567890.123456...", "quote"],  # cut at 40 characters
        ["20", "1", "250.00", "new"],
    ]
    shipped = COMMITS[5]  # order (1, 1) got its status 'shipped' there
    assert lines[1].split()[4:] == [
        str(shipped[0]),
        *f"{shipped[1]:%Y-%m-%d %H:%M:%S.%f}".rstrip("0").split(),
    ]
    assert lines[-1] == f"4 row(s) in public.orders as of LSN {format_lsn(MOVE)}"


def test_cli_limits_what_it_prints_and_says_how_many_in_all(
    cli: Callable[..., int], lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    at = format_lsn(COMMITS[-1][0])
    assert cli("as-of", "--lake", lake, "--table", "public.customers", "--lsn", at, "--limit", "2") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines[1:-1]] == ["1", "3"]
    assert lines[-1] == f"6 row(s) in public.customers as of LSN {at}; 2 shown (--limit 2)"
    assert cli("as-of", "--lake", lake, "--table", "public.customers", "--lsn", at) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"6 row(s) in public.customers as of LSN {at}"
    assert " " + "x" * 37 + "... " in out  # long values are cut, control characters escaped
    assert ' line 1\\nline 2\\t"quoted" \\ backslash ' in out


def test_cli_writes_every_row_to_out(
    cli: Callable[..., int],
    spark: SparkSession,
    lake: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "customers.csv"
    when = str(COMMITS[-1][1])
    args = ["as-of", "--lake", lake, "--table", "public.customers", "--time", when, "--out", str(out)]
    assert cli(*args, "--out-format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == [
        f"wrote 6 row(s) of public.customers as of time {datetime.fromisoformat(when).isoformat(sep=' ')} to "
        f"{out} (csv)"
    ]
    written = spark.read.options(header="true", multiLine="true", escape='"').csv(str(out))
    assert sorted(r.id for r in written.select("id").collect()) == ["1", "20", "3", "4", "6", "7"]
    assert written.filter("id = '1'").first()["avatar"] == "\\x89504e470d0a1a0a"
    with pytest.raises(ConfigError) as error:
        cli(*args)
    assert str(error.value) == f"as-of: --out {out} exists, expected a new path (remove it or choose another)"


def test_cli_checks_its_arguments_before_spark(cli: Callable[..., int], lake: str) -> None:
    with pytest.raises(ConfigError) as error:
        cli("as-of", "--lake", lake, "--table", "public.orders", "--lsn", "1", "--out-format", "csv")
    assert str(error.value) == "as-of: found --out-format csv without --out, expected both or neither"
    with pytest.raises(SystemExit):  # argparse: exactly one of --time and --lsn
        cli("as-of", "--lake", lake, "--table", "public.orders")
