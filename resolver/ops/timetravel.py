"""Time travel for users: a source table as it was at a commit, read from its history table.
 The history table ``<lake>/silver/<schema>.<table>__history`` holds every version of every row with the
interval of commits it was current for (``docs/silver.md``), so the table at commit LSN ``l`` is one filter,
``__start_lsn <= l AND __end_lsn > l``, and at commit time ``t`` the same on ``__start_time``/``__end_time``.
A version that ended because the row went away (``__is_deleted``: deleted, truncated, moved to another key)
covers its own interval and no later one, so a deleted row is live up to its delete and not after.
 This reads the *source database's* past, not the lake's: it does not use Delta time travel (``VERSION AS
OF``), and ``VACUUM`` never changes what it returns (``docs/operations.md``).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.errors import ConfigError
from resolver.formats.names import TableName
from resolver.lake import delta
from resolver.lake.folders import HISTORY, history_path, silver_tables, snapshot_path
from resolver.lsn import format_lsn, parse_lsn
from resolver.paths import is_uri
from resolver.spark import sql

log = logging.getLogger(__name__)

__all__ = ["Point", "as_of", "history_table", "history_tables", "point"]

MAX_LSN = 2**63 - 1
"""``__end_lsn`` of an open version: the largest LSN the lake can hold."""
_LSN_TEXT = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Point:
    """A moment of the source database: a commit LSN, or a commit time (aware, UTC)."""

    lsn: int | None = None
    time: datetime | None = None

    def __str__(self) -> str:
        if self.lsn is not None:
            return f"LSN {format_lsn(self.lsn)}"
        assert self.time is not None
        return f"time {self.time.isoformat(sep=' ')}"

    def live(self) -> Column:
        """The history rows current at this point."""
        if self.lsn is not None:
            lsn = F.lit(self.lsn)
            return (F.col("__start_lsn") <= lsn) & (F.col("__end_lsn") > lsn)
        assert self.time is not None
        # microseconds since the epoch: exact, and independent of the session's and Python's time zones
        t = F.timestamp_micros(F.lit((self.time - _EPOCH) // timedelta(microseconds=1)))
        return (F.col("__start_time") <= t) & (F.col("__end_time") > t)


def point(*, time: datetime | str | None = None, lsn: int | str | None = None) -> Point:
    """Check and parse an as-of point (no Spark): exactly one of ``time`` (a datetime or ISO text, UTC when
    it has no offset) and ``lsn`` (an int, PostgreSQL's text form ``'0/16B3748'``, or decimal text).
    Raises ``ConfigError`` (one line) for anything else."""
    if (time is None) == (lsn is None):
        found = "both time and lsn" if time is not None else "neither time nor lsn"
        raise ConfigError(f"as of: found {found}, expected exactly one of them")
    if lsn is not None:
        return Point(lsn=_lsn(lsn))
    assert time is not None
    return Point(time=_time(time))


def _lsn(value: int | str) -> int:
    expected = "expected PostgreSQL's text form such as '0/16B3748' or a decimal integer such as 23803720"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"as of: found LSN {value!r} of type {type(value).__name__}, {expected}")
    if isinstance(value, str):
        text = value.strip()
        if _LSN_TEXT.fullmatch(text):
            value = parse_lsn(text)
        elif text.isascii() and text.isdigit():
            value = int(text)
        else:
            raise ConfigError(f"as of: found LSN {value!r}, {expected}")
    if not 0 <= value < MAX_LSN:
        raise ConfigError(
            f"as of: found LSN {value}, expected 0 to {MAX_LSN - 1} ({format_lsn(MAX_LSN - 1)}, the largest "
            "commit LSN the lake holds)"
        )
    return value


def _time(value: datetime | str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ConfigError(
                f"as of: found time {value!r}, expected an ISO timestamp such as '2026-11-21 16:30:12.615' "
                "(UTC) or '2026-11-21T17:30:12.615+01:00'"
            ) from None
    if not isinstance(value, datetime):
        raise ConfigError(
            f"as of: found time {value!r} of type {type(value).__name__}, expected a datetime or ISO text"
        )
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def history_tables(lake: str) -> list[str]:
    """The source tables (``<schema>.<table>``) whose history the lake keeps, sorted (no Spark)."""
    return sorted(table for name, table in silver_tables(lake).items() if name.endswith(HISTORY))


def history_table(lake: str, table: str, spark: SparkSession | None = None) -> str:
    """The path of ``table``'s history table in ``lake``; ``ConfigError`` (one line, with the lake's tables
    and a "did you mean") when there is none. ``table`` is named as PostgreSQL does (``public."Mixed Case"``).
    Looks at the file system only (no Spark), except for a lake named by a URI, which ``spark`` looks in."""
    path = history_path(lake, TableName(table))
    if is_uri(lake):
        if spark is None or delta.is_table(spark, path):
            return path  # checked once Spark runs
        raise ConfigError(f"table {table}: no history table at {path}, expected a lake written by resolver")
    if os.path.isdir(os.path.join(path, "_delta_log")):
        return path
    if not os.path.isdir(lake):
        raise ConfigError(
            f"lake {lake} not found, expected a folder written by resolver ingest or resolver run"
        )
    known = history_tables(lake)
    if not known:
        raise ConfigError(
            f"table {table}: lake {lake} has no history table (silver/<schema>.<table>__history), "
            "expected a lake written by resolver ingest or resolver run"
        )
    if os.path.isdir(os.path.join(snapshot_path(lake, TableName(table)), "_delta_log")):
        raise ConfigError(
            f"table {table} has a snapshot but no history in lake {lake} (its outputs leave the history "
            f"out), expected one of {', '.join(known)}"
        )
    hint = difflib.get_close_matches(table, known, n=1)
    mean = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise ConfigError(f"table {table!r} not found in lake {lake}, expected one of {', '.join(known)}{mean}")


def as_of(
    spark: SparkSession,
    lake: str | None,
    table: str,
    *,
    time: datetime | str | None = None,
    lsn: int | str | None = None,
) -> DataFrame:
    """The source table ``table`` (``<schema>.<table>``) as it was at a commit time or a commit LSN.

    Give exactly one of ``time`` (a datetime, or ISO text such as ``'2026-11-21 16:30:12.615'``; UTC when it
    has no offset) and ``lsn`` (an int, or PostgreSQL's text form such as ``'0/1932990'``). The rows are
    those the source table held once the transactions committed at or before that point were applied, with
    the same columns as the snapshot table: the source columns, ``__start_lsn`` and ``__start_time`` (the
    commit that gave the row these values). The LSN form is exact; the time form is as exact as
    PostgreSQL's commit timestamps (``docs/silver.md``) and finds nothing in a table whose stream had no
    timestamps. A point before the table's first commit gives no rows, a point after its last one the
    table as it is now. Raises ``ConfigError`` (one line) for an unknown table (with a "did you mean"),
    both or neither of ``time`` and ``lsn``, or a bad LSN or time. With ``lake`` None, ``table`` is the
    name the lake's catalog registered (``spark_catalog.cdc.public__customers``, ``resolver.lake.catalog``).

    When events of the table wait in bronze under a freshness bound (docs/silver.md, "Tables that wait"),
    the history holds none of them: a point at or after the first of them is logged as a warning (logger
    ``resolver.ops.timetravel``) with up to which commit the table is complete.

    The DataFrame is lazy and unordered: one scan of the history table, in which Delta skips the files
    whose column statistics rule the point out.

    Example::

        from resolver import local_session
        from resolver.ops.timetravel import as_of
        spark = local_session()
        as_of(spark, "lake", "public.customers", lsn="0/1932990").orderBy("id").show()
        as_of(spark, "lake", "public.customers", time="2026-11-21 16:30:12.615").count()
    """
    at = point(time=time, lsn=lsn)
    if lake is None:
        from resolver.lake.catalog import locate

        lake, table = locate(spark, table)
    history = spark.read.format("delta").load(history_table(lake, table, spark))
    _warn_waiting(spark, lake, table, at.lsn)
    columns = [c for c in history.columns if not c.startswith("__")] + ["__start_lsn", "__start_time"]
    return history.filter(at.live()).select(*[sql.col(c) for c in columns])


def _warn_waiting(spark: SparkSession, lake: str, table: str, lsn: int | None) -> None:
    """Log a warning when events of ``table`` wait in bronze that a point at LSN ``lsn`` (None: a time,
    which waiting events are not placed by) may need (``resolver.batch.deferral``)."""
    from resolver.batch.deferral import waiting_note
    from resolver.lake.folders import Lake
    from resolver.lake.markers import read_lake_markers

    waiting = read_lake_markers(spark, Lake.at(lake).markers).waiting.get(table)
    if waiting is None or (lsn is not None and waiting.lo is not None and lsn < waiting.lo):
        return
    log.warning("%s: %s (resolver run or ingest without a freshness bound applies them)", table,
                waiting_note(waiting))  # fmt: skip
