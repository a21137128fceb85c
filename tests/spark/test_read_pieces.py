"""Format-2 files read in pieces (``spark.resolver.readPieceBytes``, ``resolver.batch.pieces``) give the same
batch as read whole: the same events, field by field (positions and commit LSNs of the transactions a piece
boundary cut included), every line quarantined the same, the same counts, and the same file where a
transaction left open at the end began. The pieces here are far smaller than a transaction, down to pieces
that hold no line at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.batch.pieces import PIECE_SETTING
from resolver.batch.read import ParsedBatch, read_wal2json
from resolver.errors import ConfigError
from resolver.formats.stitch_plan import ReadWindow

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
B = '{"action":"B","xid":7,"lsn":"0/10","nextlsn":"0/%X"}'
C = '{"action":"C","xid":7,"lsn":"0/11","nextlsn":"0/%X"}'
I = '{"action":"I","schema":"public","table":"t","columns":[{"name":"id","type":"integer","value":%d}]}'  # noqa: E741
M = '{"action":"M","transactional":true,"prefix":"p","content":"c"}'


def _stream(first: int, last: int, lsn: int) -> list[str]:
    return [B % lsn, *[I % i for i in range(first, last)], M, C % lsn]


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    """The samples' clean and dirty streams, and a stream whose transactions span files and lines that are
    blank, not JSON, or left open at the end."""
    ours = [
        [*_stream(0, 30, 0x100), "", *_stream(30, 32, 0x200)[:-1]],  # its second transaction goes on below
        [I % 99, "not json", *_stream(32, 34, 0x200)[-2:], "\r", *_stream(40, 70, 0x300)],
        [*_stream(70, 75, 0x400), *_stream(75, 90, 0x500)[:-3]],  # left open at the end
    ]
    paths = [str(SAMPLES / "wal2json-v2" / "0001.json"), str(SAMPLES / "dirty" / "0001.json")]
    for n, lines in enumerate(ours):
        path = tmp_path / f"{n}.json"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


@pytest.fixture
def piece_size(spark: SparkSession) -> Iterator[object]:
    def set_size(size: int | None) -> None:
        if size is None:
            spark.conf.unset(PIECE_SETTING)
        else:
            spark.conf.set(PIECE_SETTING, str(size))

    yield set_size
    spark.conf.unset(PIECE_SETTING)


def _read(spark: SparkSession, files: list[str], window: ReadWindow) -> tuple[object, ...]:
    batch: ParsedBatch = read_wal2json(spark, files, "wal2json-v2", window=window)
    try:
        events = sorted(tuple(r) for r in batch.events.collect())
        bad = batch.quarantine.collect()
        quarantined = sorted((r["source_file"], r["source_line"], r["raw"]) for r in bad)
        counts = {k: v for k, v in batch.counts().items() if k != "fragment"}
        return events, quarantined, counts, batch.open_from
    finally:
        batch.unpersist()


@pytest.mark.parametrize("window", [ReadWindow(), ReadWindow(open_start=True, open_end=True)])
def test_a_batch_read_in_pieces_equals_it_read_whole(
    spark: SparkSession, files: list[str], piece_size, window: ReadWindow
) -> None:
    piece_size(None)
    whole = _read(spark, files, window)
    events, quarantined, counts, open_from = whole
    assert len(events) > 100 and quarantined and counts["transactions"] > 10
    assert (open_from is not None) == window.open_end
    for size in (40, 4096):
        piece_size(size)
        assert _read(spark, files, window) == whole, f"pieces of {size} bytes"


def test_a_piece_size_that_is_not_a_whole_number_fails_in_one_line(
    spark: SparkSession, files: list[str], piece_size
) -> None:
    piece_size("8MB")
    with pytest.raises(ConfigError, match=r"spark.resolver.readPieceBytes is '8MB'; expected a whole number"):
        read_wal2json(spark, files, "wal2json-v2")
