"""Stitch format-2 transactions cut by a file boundary back together, in Spark.

A transaction whose B is at the end of one file of a batch and whose C is at the start of the next reaches
Spark as fragment rows (``resolver.wal2json.Fragment``, parsed by ``resolver.read``): the file's ``tail``
(B … end of file k) and the next file's ``head`` (start of file k+1 … C). ``stitch`` joins each tail with
its head into the transaction's events; a fragment that finds no partner is quarantined whole with rule
``framing``, unless its partner is in another batch of a stream read in pieces (``open_start``,
``open_end``). The rows keep the fragments' own columns; the caller selects what it needs.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["stitch"]

_TAIL_REASON = (
    "incomplete transaction: begun in this file, no commit before the end of the input (the next "
    "file of the batch does not continue it); it is not applied (rule: framing)"
)
_HEAD_REASON = (
    "incomplete transaction: its commit is in this file but its begin is not at the end of the "
    "previous file of the batch; it is not applied (rule: framing)"
)


def stitch(
    fragments: DataFrame, files: int, *, open_start: bool = False, open_end: bool = False
) -> tuple[DataFrame, DataFrame]:
    """Join each transaction's tail (B … end of file k) with its head (start of file k+1 … C).

    ``fragments`` are the fragment rows of a batch of ``files`` files. Returns the events of the joined
    transactions (positions renumbered across the cut, commit LSN from B or C) and the lines of fragments
    that found no partner, as quarantine rows (``kind``, ``reason`` set); both with the fragments' columns.
    With ``open_start`` or ``open_end`` (a stream read in pieces), a fragment whose partner is in another
    batch is left out of the second (``_in_another_batch``)."""
    columns = fragments.columns
    tagged = _tagged(fragments)
    events = (
        tagged.filter(F.col("matched") & F.col("table").isNotNull())
        .withColumn("position", F.col("position") + F.coalesce(F.col("offset"), F.lit(0)))
        .withColumn("commit_lsn", F.coalesce("commit_lsn", "pair_lsn"))
        .select(*columns)
    )
    reason = F.when(F.col("role") == "tail", F.lit(_TAIL_REASON)).otherwise(F.lit(_HEAD_REASON))
    cut_off = (
        tagged.filter(~F.col("matched"))
        .withColumn("reason", reason)
        .withColumn("kind", F.lit("quarantine"))
        .select(*columns)
    )
    return events, cut_off.filter(~_in_another_batch(files, open_start, open_end))


def _tagged(fragments: DataFrame) -> DataFrame:
    """The fragments, each with its partner's file (``tail_file`` or ``head_file``) when it has one, the
    tail's event count (``offset``, on head rows), the tail's commit LSN (``pair_lsn``) and ``matched``."""
    summary = fragments.groupBy("file_index", "role").agg(
        F.max("commit_lsn").alias("lsn"), F.count("table").alias("n")
    )
    tails = summary.filter(F.col("role") == "tail").select(
        F.col("file_index").alias("tail_file"), F.col("lsn").alias("tail_lsn"), F.col("n").alias("offset")
    )
    heads = summary.filter(F.col("role") == "head").select(
        F.col("file_index").alias("head_file"), F.col("lsn").alias("head_lsn")
    )
    pairs = tails.join(
        heads,
        (F.col("head_file") == F.col("tail_file") + 1) & F.col("head_lsn").eqNullSafe(F.col("tail_lsn")),
    )
    return (
        fragments.join(
            pairs.select("tail_file", "tail_lsn"),
            (F.col("role") == "tail") & (F.col("file_index") == F.col("tail_file")),
            "left",
        )
        .join(
            pairs.select("head_file", "offset", F.col("tail_lsn").alias("pair_lsn")),
            (F.col("role") == "head") & (F.col("file_index") == F.col("head_file")),
            "left",
        )
        .withColumn("matched", F.col("tail_file").isNotNull() | F.col("head_file").isNotNull())
    )


def _in_another_batch(files: int, open_start: bool, open_end: bool) -> Column:
    """A fragment whose partner is in another batch: with an open end, a tail of the last file (the
    transaction goes on in a file that has not landed yet); with an open start, a head of the first file
    (it was stitched to the file before it in an earlier batch)."""
    later = F.lit(False)
    if open_end:
        later = later | ((F.col("role") == "tail") & (F.col("file_index") == files - 1))
    if open_start:
        later = later | ((F.col("role") == "head") & (F.col("file_index") == 0))
    return later
