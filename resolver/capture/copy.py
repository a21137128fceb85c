"""The tables' copy in a snapshot a new slot exports (``resolver capture``'s first half, docs/capture.md):
each table one transaction of inserts at the slot's consistent point (``resolver.capture.records``), read
in chunks of its heap by ``ctid`` ranges and written into files of about ``file_bytes``.

- **Chunks**: a table is cut into ranges of heap blocks (``ctid >= '(b,0)' AND ctid < '(e,0)'``, a TID
  range scan), each about ``file_bytes`` of heap, the last one open-ended. Every row the snapshot sees is in
  exactly one range (a row's ``ctid`` does not change while a snapshot can see it), with or without a key,
  and each range is one sequential read.
- **Processes**: a table of more than one chunk is copied by ``processes`` worker processes at once
  (``python -m resolver.capture.copy`` children), each on a connection of its own that imports the exported
  snapshot (``SET TRANSACTION SNAPSHOT``), so they all read the database as of the same point. A table of
  one chunk is copied here.
- **Rows**: PostgreSQL sends each row's values as the text the reader holds for them
  (``resolver.capture.records.values_query``) through ``COPY ... TO STDOUT (FORMAT csv)``; the worker
  spools them to a local file, and ``resolver.capture.snapshot_file.SnapshotParts`` turns them into change
  events in Parquet (pyarrow's CSV reader and Parquet writer: no Python per row).
- **Files**: ``<prefix>-<chunk>-<part>.parquet``, each about ``file_bytes`` of values, every one a complete
  set of inserts at the consistent point (a re-snapshot's first file begins with the table's truncate):
  nothing to stitch, each read by Spark's Parquet reader.

The exporting connection must stay open until every chunk is copied (the snapshot ends with it). Needs
psycopg 3, no Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.capture.landing import landing_at
from resolver.capture.records import SnapshotColumn, SnapshotTable, values_query
from resolver.capture.snapshot_file import SnapshotParts, SnapshotRows
from resolver.capture.source import SESSION_SETTINGS
from resolver.errors import ConfigError
from resolver.formats.names import qualified
from resolver.formats.wal2json_record import parse_commit_time

if TYPE_CHECKING:
    import psycopg

__all__ = ["Chunk", "TableCopy", "copy_chunk", "copy_table", "in_snapshot"]

_BLOCK_BYTES = 8192  # PostgreSQL's default block size; only used to size chunks
#: positions are 32-bit in a stream (and in the resolver's change store): a snapshot's stay below that
_POSITIONS = (1 << 31) - 1
_CHECK_BYTES = 1 << 20  # a worker looks for the capture that started it after each mebibyte of rows
#: COPY's CSV: NULL unquoted and empty, an empty text quoted (the snapshot file tells them apart)
_COPY_OPTIONS = "(FORMAT csv, ENCODING 'UTF8')"


@dataclass(frozen=True)
class TableCopy:
    """One table's copy: the database and the exported snapshot to read it in, where its files go
    (``landing``, names ``<prefix>-<chunk>-<part>.parquet``, each file about ``file_bytes``), the
    transaction's consistent point and time, and whether it begins with the table's truncate (a
    re-snapshot)."""

    dsn: str
    snapshot: str
    table: SnapshotTable
    landing: str
    prefix: str
    file_bytes: int
    lsn: int
    taken: str
    truncate: bool = False


@dataclass(frozen=True)
class Chunk:
    """A range of the heap blocks of one relation the copy reads (the table, or one leaf partition of a
    partitioned table; ``end`` None: to the end), whether it is the table's first (where a re-snapshot's
    truncate goes), and the position its rows start after (``base``): the blocks of the table's relations
    before it and its first block, times the most rows a block of this server holds
    (``MaxHeapTuplesPerPage``), so no two chunks' positions meet."""

    index: int
    relation: tuple[str, str]
    start: int
    end: int | None
    first: bool
    base: int


def copy_table(copy: TableCopy, conn: psycopg.Connection[Any], processes: int) -> tuple[int, list[str]]:
    """Copy the table (``conn``: a connection in the snapshot, to size the chunks); returns its rows and
    its files in order, every file durable. A partitioned table's leaves are copied one after the other,
    each in chunks of its own, into files named for the table."""
    sizes = [(relation, *_heap(conn, relation)) for relation in copy.table.relations]
    total = sum(blocks + 1 for _, blocks, _ in sizes)
    per_block = sizes[0][2] if sizes else 0
    if total * per_block >= _POSITIONS:
        raise ConfigError(
            f"table {copy.table.qualified} has {total} heap blocks: a snapshot's positions hold at most "
            f"{_POSITIONS // per_block - 1} (about {_POSITIONS // per_block * _BLOCK_BYTES >> 30} GiB of "
            "heap): "
            "expected a smaller table (copy it in parts by hand, or let the stream bring its rows)"
        )
    chunks: list[Chunk] = []
    offset = 0
    for relation, blocks, rows_per_block in sizes:
        chunks += _chunks(relation, blocks, copy.file_bytes, rows_per_block, offset, len(chunks))
        offset += blocks + 1
    if len(chunks) == 1 or processes <= 1:
        done = [copy_chunk(copy, chunk) for chunk in chunks]
    else:
        done = _in_processes(copy, chunks, processes)
    return sum(rows for rows, _ in done), [f for _, files in done for f in files]


def _in_processes(copy: TableCopy, chunks: list[Chunk], processes: int) -> list[tuple[int, list[str]]]:
    """Each chunk copied by a ``python -m resolver.capture.copy`` child (its job on stdin as JSON, its rows
    and files on stdout), at most ``processes`` at once. Children of their own, not a multiprocessing pool:
    nothing of this process (its connections, its threads, a caller's script) is copied or run again."""
    done: dict[int, tuple[int, list[str]]] = {}
    waiting: list[Chunk] = list(chunks)
    running: dict[int, subprocess.Popen[str]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < processes:
                chunk = waiting.pop(0)
                child = subprocess.Popen(
                    [sys.executable, "-m", "resolver.capture.copy"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                assert child.stdin is not None
                child.stdin.write(json.dumps({"copy": asdict(copy), "chunk": asdict(chunk)}))
                child.stdin.close()
                running[chunk.index] = child
            ended = [i for i, child in running.items() if child.poll() is not None]
            if not ended:
                time.sleep(0.05)
            for index in ended:
                child = running.pop(index)
                assert child.stdout is not None and child.stderr is not None
                out, err = child.stdout.read(), child.stderr.read()
                if child.returncode != 0:
                    raise RuntimeError(
                        f"copying chunk {index} of {copy.table.qualified} failed ({child.returncode}):\n"
                        f"{err[-3000:]}"
                    )
                rows, files = json.loads(out)
                done[index] = (int(rows), list(files))
    finally:
        for child in running.values():
            child.kill()
    return [done[chunk.index] for chunk in chunks]


def _from_job(job: dict[str, Any]) -> tuple[TableCopy, Chunk]:
    """The copy and chunk a child was given (``_in_processes``)."""
    table = job["copy"]["table"]
    columns = tuple(SnapshotColumn(**c) for c in table["columns"])
    keys = tuple(SnapshotColumn(**c) for c in table["primary_key"])
    leaves = tuple((str(s), str(n)) for s, n in table["leaves"])
    snapshot = SnapshotTable(table["schema"], table["name"], columns, keys, leaves, table["partitioned"])
    copy = TableCopy(**{**job["copy"], "table": snapshot})
    chunk = job["chunk"]
    return copy, Chunk(**{**chunk, "relation": (str(chunk["relation"][0]), str(chunk["relation"][1]))})


def copy_chunk(copy: TableCopy, chunk: Chunk) -> tuple[int, list[str]]:
    """One chunk of the table into its snapshot files, on a connection of its own in the exported snapshot;
    its rows and files (in a worker process, or here)."""
    import psycopg

    table, taken = copy.table, parse_commit_time(copy.taken)
    assert taken is not None
    rows = SnapshotRows(
        qualified(table.schema, table.name),
        tuple(c.name for c in table.columns),
        tuple(c.type for c in table.columns),
        tuple(c.name for c in table.primary_key),
        copy.lsn,
        taken,
    )
    prefix = f"{copy.prefix}-{chunk.index:05d}"
    parts = SnapshotParts(landing_at(copy.landing), prefix, copy.file_bytes, rows, chunk.base)
    if chunk.first and copy.truncate:
        parts.truncate()
    with tempfile.TemporaryDirectory(prefix="resolver-copy-") as spool:
        csv = Path(spool) / "rows.csv"
        with psycopg.connect(copy.dsn) as conn:
            in_snapshot(conn, copy.snapshot)
            _copy_rows(conn, copy, chunk, csv)
        count = parts.write_csv(csv)
    return count, parts.close()


def in_snapshot(conn: psycopg.Connection[Any], snapshot: str) -> None:
    """Make ``conn``'s transaction a read-only one in the exported ``snapshot``, printing values as the
    stream does (``SESSION_SETTINGS``)."""
    import psycopg

    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'".encode())
    for setting, value in SESSION_SETTINGS.items():
        conn.execute(f"SET {setting} = '{value}'".encode())


def _heap(conn: psycopg.Connection[Any], relation: tuple[str, str]) -> tuple[int, int]:
    """A relation's heap blocks now (at least as many as its snapshot's rows lie in) and the most rows a
    block holds (``MaxHeapTuplesPerPage``: the block less its header, over a tuple's header and line
    pointer)."""
    from psycopg import sql

    name = sql.SQL("{}.{}").format(sql.Identifier(relation[0]), sql.Identifier(relation[1])).as_string(conn)
    query = "SELECT pg_relation_size(%s::regclass), current_setting('block_size')::int"
    size, block = conn.execute(query, (name,)).fetchone()  # type: ignore[misc]
    return int(size) // int(block), (int(block) - 24) // 28


def _chunks(
    relation: tuple[str, str], blocks: int, file_bytes: int, rows_per_block: int, offset: int, first: int
) -> list[Chunk]:
    """A relation's ranges of about ``file_bytes`` of heap each, the last open-ended (rows added after the
    sizing are not in the snapshot, but a table may have grown); ``offset``: the blocks of the table's
    relations before it, ``first``: the index of its first chunk."""
    step = max(1, file_bytes // _BLOCK_BYTES)
    starts = list(range(0, max(blocks, 1), step))
    ends: list[int | None] = [*starts[1:], None]
    return [
        Chunk(first + i, relation, start, ends[i], first + i == 0, (offset + start) * rows_per_block)
        for i, start in enumerate(starts)
    ]


def _copy_rows(conn: psycopg.Connection[Any], copy: TableCopy, chunk: Chunk, csv: Path) -> None:
    """The chunk's rows (``values_query``), in ``ctid`` order, as PostgreSQL's CSV into the file ``csv``."""
    from psycopg import sql

    where = sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({chunk.start},0)"))
    if chunk.end is not None:
        where = sql.SQL("{} AND ctid < {}::tid").format(where, sql.Literal(f"({chunk.end},0)"))
    query = values_query(copy.table, chunk.relation, where)
    parent, size = os.getppid(), 0
    with (
        open(csv, "wb") as out,
        conn.cursor() as cursor,
        cursor.copy(sql.SQL("COPY ({}) TO STDOUT " + _COPY_OPTIONS).format(query)) as rows,
    ):
        for block in rows:
            out.write(block)
            size += len(block)
            if size >= _CHECK_BYTES:
                size = 0
                if os.getppid() != parent:
                    raise SystemExit("the capture that started this copy is gone")  # killed: stop with it


if __name__ == "__main__":  # a worker of _in_processes: one chunk, its job on stdin
    rows, files = copy_chunk(*_from_job(json.load(sys.stdin)))
    print(json.dumps([rows, files]))
