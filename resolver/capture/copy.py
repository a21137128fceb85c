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
- **Lines**: PostgreSQL prints each row's ``I`` line (``resolver.capture.records.insert_query``) and sends it
  through ``COPY ... TO STDOUT`` in CSV with a quote and a delimiter no line holds (a JSON text escapes
  every control character), so each line arrives as it is; the copy only moves bytes into files.
- **Files**: ``<prefix>-<chunk>-<part>.json``; the transaction's ``B`` opens the first chunk's first file,
  its ``C`` closes the last chunk's last file; the files between lie wholly inside it, as a reader stitches
  them back together (``resolver.batch.stitch``), and each is read by a task of its own.

The exporting connection must stay open until every chunk is copied (the snapshot ends with it). Needs
psycopg 3, no Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from resolver.capture.landing import Landing, landing_at
from resolver.capture.records import (
    SnapshotColumn,
    SnapshotTable,
    insert_query,
    transaction_end,
    transaction_head,
)
from resolver.capture.source import SESSION_SETTINGS

if TYPE_CHECKING:
    import psycopg

__all__ = ["Chunk", "TableCopy", "copy_chunk", "copy_table", "in_snapshot"]

_BLOCK_BYTES = 8192  # PostgreSQL's default block size; only used to size chunks
_BUFFER_BYTES = 1 << 20  # bytes of lines gathered from the copy before they are written
#: COPY's CSV with a quote and a delimiter that no line holds: every line is sent as it is
_COPY_OPTIONS = "(FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02', ENCODING 'UTF8')"


@dataclass(frozen=True)
class TableCopy:
    """One table's copy: the database and the exported snapshot to read it in, where its files go
    (``landing``, names ``<prefix>-<chunk>-<part>.json``, each file about ``file_bytes``), the transaction's
    consistent point and time, and whether it begins with the table's truncate (a re-snapshot)."""

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
    """A range of a table's heap blocks (``end`` None: to the end) and where it falls in the transaction."""

    index: int
    start: int
    end: int | None
    first: bool
    last: bool


def copy_table(copy: TableCopy, conn: psycopg.Connection[Any], processes: int) -> tuple[int, list[str]]:
    """Copy the table (``conn``: a connection in the snapshot, to size the chunks); returns its rows and
    its files in order, every file durable."""
    chunks = _chunks(_blocks(conn, copy.table), copy.file_bytes)
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
    waiting, running = list(chunks), {}
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
    copy = TableCopy(**{**job["copy"], "table": SnapshotTable(table["schema"], table["name"], columns, keys)})
    return copy, Chunk(**job["chunk"])


def copy_chunk(copy: TableCopy, chunk: Chunk) -> tuple[int, list[str]]:
    """One chunk of the table into its files, on a connection of its own in the exported snapshot; its rows
    and files (in a worker process, or here)."""
    import psycopg

    parts = _Parts(landing_at(copy.landing), f"{copy.prefix}-{chunk.index:05d}", copy.file_bytes)
    if chunk.first:
        truncated = [copy.table] if copy.truncate else []
        parts.write(
            "".join(f"{line}\n" for line in transaction_head(copy.lsn, copy.taken, truncated=truncated))
        )
    with psycopg.connect(copy.dsn) as conn:
        in_snapshot(conn, copy.snapshot)
        rows = _copy_rows(conn, copy, chunk, parts)
    if chunk.last:
        parts.write(transaction_end(copy.lsn, copy.taken) + "\n")
    return rows, parts.close()


def in_snapshot(conn: psycopg.Connection[Any], snapshot: str) -> None:
    """Make ``conn``'s transaction a read-only one in the exported ``snapshot``, printing values as the
    stream does (``SESSION_SETTINGS``)."""
    import psycopg

    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'".encode())
    for setting, value in SESSION_SETTINGS.items():
        conn.execute(f"SET {setting} = '{value}'".encode())


class _Parts:
    """Lines into files of about ``limit`` bytes each (``<prefix>-<k>.json`` for the k-th, from 0), cut
    between lines, each durable once it is published."""

    def __init__(self, landing: Landing, prefix: str, limit: int) -> None:
        self.landing, self.prefix, self.limit = landing, prefix, limit
        self.names: list[str] = []
        self.part, self.size = landing.open_part(self._name()), 0

    def _name(self) -> str:
        return f"{self.prefix}-{len(self.names):04d}.json"

    def write(self, lines: str) -> None:
        """Whole lines (``lines`` ends with a newline); a file ends at the first line end at or past the
        limit."""
        while lines:
            if self.size >= self.limit:
                self.names.append(self._name())
                self.part.publish(self.names[-1])
                self.part, self.size = self.landing.open_part(self._name()), 0
            end = len(lines)
            if self.size + end > self.limit:
                end = lines.index("\n", max(0, self.limit - self.size - 1)) + 1
            self.part.out.write(lines[:end])
            self.size += end
            lines = lines[end:]

    def close(self) -> list[str]:
        """Publish the last file; the names in order."""
        self.names.append(self._name())
        self.part.publish(self.names[-1])
        return self.names


def _blocks(conn: psycopg.Connection[Any], table: SnapshotTable) -> int:
    """The table's heap blocks now (at least as many as its snapshot's rows lie in)."""
    from psycopg import sql

    name = sql.SQL("{}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name)).as_string(conn)
    query = "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int"
    return int(conn.execute(query, (name,)).fetchone()[0])  # type: ignore[index]


def _chunks(blocks: int, file_bytes: int) -> list[Chunk]:
    """Ranges of about ``file_bytes`` of heap each; the last open-ended (rows added after the sizing are
    not in the snapshot, but a table may have grown)."""
    step = max(1, file_bytes // _BLOCK_BYTES)
    starts = list(range(0, max(blocks, 1), step))
    return [
        Chunk(i, start, starts[i + 1] if i + 1 < len(starts) else None, i == 0, i + 1 == len(starts))
        for i, start in enumerate(starts)
    ]


def _copy_rows(conn: psycopg.Connection[Any], copy: TableCopy, chunk: Chunk, parts: _Parts) -> int:
    """The chunk's ``I`` lines, in ``ctid`` order, into ``parts``; how many."""
    from psycopg import sql

    where = sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({chunk.start},0)"))
    if chunk.end is not None:
        where = sql.SQL("{} AND ctid < {}::tid").format(where, sql.Literal(f"({chunk.end},0)"))
    query = insert_query(copy.table, copy.lsn, copy.taken, where)
    parent, rows, held, size = os.getppid(), 0, [], 0
    with (
        conn.cursor() as cursor,
        cursor.copy(sql.SQL("COPY ({}) TO STDOUT " + _COPY_OPTIONS).format(query)) as out,
    ):
        for block in out:
            held.append(bytes(block))
            size += len(block)
            if size >= _BUFFER_BYTES:
                data = b"".join(held)
                end = data.rindex(b"\n") + 1
                held, size = [data[end:]], len(data) - end
                rows += data.count(b"\n", 0, end)
                parts.write(data[:end].decode("utf-8"))
                if os.getppid() != parent:
                    raise SystemExit("the capture that started this copy is gone")  # killed: stop with it
    data = b"".join(held)
    rows += data.count(b"\n")
    parts.write(data.decode("utf-8"))
    return rows


if __name__ == "__main__":  # a worker of _in_processes: one chunk, its job on stdin
    rows, files = copy_chunk(*_from_job(json.load(sys.stdin)))
    print(json.dumps([rows, files]))
