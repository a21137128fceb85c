"""The report of ``bench.parse_speed``: the table of cases, the ratios that matter, the machine line, and
``bench/PARSE_RESULTS.md``."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from bench.wal2json_input import Layout

__all__ = ["RESULTS", "Row", "machine_line", "mb", "report"]

RESULTS = Path(__file__).resolve().parent / "PARSE_RESULTS.md"


@dataclass
class Row:
    key: str
    label: str
    median: float
    runs: list[float]
    layout: Layout  # the input it read: events/s and MB/s are of it
    ref: float  # median time of spark.read.json on the same format's file


def table(rows: list[Row]) -> list[str]:
    w = max(len(r.label) for r in rows)
    out = [
        f"{'case':<{w}} | {'median s':>8} | {'runs s':<22} | {'events/s':>10} | {'MB/s':>6} | "
        f"{'time / json':>11}",
        f"{'-' * w}-|-{'-' * 8}-|-{'-' * 22}-|-{'-' * 10}-|-{'-' * 6}-|-{'-' * 11}",
    ]
    for r in rows:
        runs_s = " ".join(f"{x:.2f}" for x in r.runs)
        out.append(
            f"{r.label:<{w}} | {r.median:>8.2f} | {runs_s:<22} | {r.layout.events / r.median:>10,.0f} | "
            f"{r.layout.size / 1e6 / r.median:>6.1f} | {r.median / r.ref:>10.2f}x"
        )
    return out


def summary(med: dict[str, float], loads: list[float]) -> list[str]:
    """The ratios: each format's parse against Spark's reader, then Debezium against wal2json."""
    out = []
    formats = (("wal2json", "a", "d", "b", "py-wal2json"), ("Debezium", "g", "j", "h", "py-debezium"))
    for name, one, two, ref, py in formats:
        if one in med:
            out.append(
                f"{name}, ours / spark.read.json (median time; >1 = ours slower): 1 file "
                f"{med[one] / med[ref]:.2f}x, 2 files {med[two] / med[ref]:.2f}x; speed-up of 2 files "
                f"(2 tasks) over 1 file (1 task): {med[one] / med[two]:.2f}x; Spark overhead on our parse "
                f"(1 task) over the bare pure-Python reader: {med[one] / med[py]:.2f}x"
            )
    if "e" in med:
        out.append(
            f"the URI reader (binaryFile, how object-store files are read) against the local one, wal2json: "
            f"1 file {med['e'] / med['a']:.2f}x, 2 files {med['f'] / med['d']:.2f}x the time"
        )
    if "a" in med and "g" in med:
        pairs = [
            ("ours, 1 file", "g", "a"),
            ("ours, 2 files", "j", "d"),
            ("pure-Python read_lines", "py-debezium", "py-wal2json"),
            ("json.loads per line", "js-debezium", "js-wal2json"),
            ("spark.read.json", "h", "b"),
        ]
        out.append(
            "Debezium against wal2json, the same events (time ratio; >1 = Debezium slower): "
            + ", ".join(f"{label} {med[d] / med[w]:.2f}x" for label, d, w in pairs)
        )
    out.append(
        f"1-minute load average during the Spark runs: {min(loads):.2f}–{max(loads):.2f} "
        f"(at {os.getloadavg()[0]:.2f} after the pure-Python runs); on {_nproc()} cores anything well "
        "above 2 means other processes competed for the CPU and the times above are inflated"
    )
    return out


def _input_line(f: str, layout: Layout) -> str:
    if f == "wal2json":
        what = (
            f"one wal2json format-version-2 file, {layout.events:,} events (I {layout.ops['I']:,} / "
            f"U {layout.ops['U']:,} / D {layout.ops['D']:,}) in {layout.transactions:,} transactions"
        )
    else:
        what = (
            "the same events as Debezium records (`bench/debezium_input.py`: one whole Kafka record "
            "`{topic, partition, offset, key, value}` a line, as resolver's Kafka source lands them, key "
            "and value in the schema envelope, `decimal.handling.mode=string`, "
            f"`column.propagate.source.type=.*`, a tombstone after each of the {layout.ops['D']:,} deletes, "
            "no transaction metadata)"
        )
    return (
        f"input, {f}: {what}, {layout.lines:,} lines, {mb(layout.size)} ({layout.size / layout.events:,.0f} "
        f"bytes per event); 2-file layout cut at a transaction boundary: {mb(layout.part_sizes[0])} + "
        f"{mb(layout.part_sizes[1])}"
    )


def report(
    rows: list[Row],
    lay: dict[str, Layout],
    args: argparse.Namespace,
    command: str,
    loads: list[float],
    warmup: int,
) -> None:
    """Print the table and the ratios; write ``RESULTS``."""
    lines, notes = table(rows), summary({r.key: r.median for r in rows}, loads)
    print()
    print("\n".join(lines))
    print()
    print("\n".join(notes))
    md = [
        "# Parse speed: wal2json and Debezium, ours vs `spark.read.json`",
        "",
        f"- machine: {machine_line()}",
        f"- command: `{command}` (from the repository root; Spark master local[2] via `local_session()`)",
        *[f"- {_input_line(f, layout)}" for f, layout in lay.items()],
        f"- seed {args.seed}; {args.repeat} timed runs per Spark case, interleaved, after one warm-up of "
        f"every case on {min(warmup, args.events):,} events; events/s = input events / median time; "
        "`time / json` = median time / that of `spark.read.json` on the same format's file",
        "- ours times `b = read_wal2json(spark, paths, fmt); b.counts(); b.unpersist()` and checks the "
        "counts (events, quarantined 0, transactions, tombstones); `spark.read.json` includes Spark's "
        "schema-inference pass over the whole file; `spark.read.text` only splits lines; (e)/(f) are (a)/(d) "
        "with the paths given as file:// URIs, read as object-store files are (Spark's binaryFile source, "
        "the whole file handed to the task)",
        "",
        "```",
        *lines,
        "```",
        "",
        *[f"- {s}" for s in notes],
        "",
    ]
    RESULTS.write_text("\n".join(md), encoding="utf-8")
    print(f"\nwrote {RESULTS}")


def machine_line() -> str:
    mem = "?"
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                    break
    except OSError:
        pass
    vers = []
    for mod in ("pyspark", "delta", "pyarrow", "fastjsonschema"):
        try:
            from importlib.metadata import version

            dist = {"delta": "delta-spark"}.get(mod, mod)
            vers.append(f"{dist} {version(dist)}")
        except Exception:  # noqa: BLE001
            pass
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"nproc {_nproc()}, RAM {mem}, {platform.python_implementation()} {platform.python_version()}, "
        f"{', '.join(vers)}, {platform.system()} {platform.machine()}, {now}"
    )


def _nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 0


def mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"
