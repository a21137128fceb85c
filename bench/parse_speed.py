"""How fast do our readers parse wal2json and Debezium, compared with Spark's own JSON reader?

    python -m bench.parse_speed [--events N] [--format both|wal2json|debezium] [--repeat K] [--seed S]
                                [--keep] [--tmpdir DIR]
    python -m bench.parse_speed --profile [--events N] [--format F]   # cProfile the pure-Python reader only

1. Writes (plain Python, seeded, deterministic) a wal2json format-version-2 file of exactly N change events
   (``bench.wal2json_input``) and, for Debezium, the very same events as the records Debezium's PostgreSQL
   connector sends (``bench.debezium_input``: one whole Kafka record a line, the schema envelope, the
   README's connector settings, a tombstone after each delete). Each input also comes cut in two files at
   the transaction boundary nearest the middle.
2. In one warm SparkSession (``resolver.spark.session.local_session()``, local[2]), after one warm-up run of
   everything on a small input, times K runs of each case, interleaved. wal2json: (a) our parse (one Spark
   task per file), (b) ``spark.read.json(path).count()`` (schema inference pass + count), (c)
   ``spark.read.text(path).count()`` (a floor: just reading the lines), (d) our parse over the 2-file
   layout, (e)/(f) (a)/(d) with file:// URIs (the object-store reader: Spark's binaryFile source).
   Debezium: (g), (h), (i), (j) as (a), (b), (c), (d). Then, outside Spark, one run of the pure-Python
   reader ``resolver.formats.wal2json.read_lines`` on one core per format (plus plain ``json.loads`` of every
   line, the floor for any Python parser).
3. Prints a table and writes it to ``bench/PARSE_RESULTS.md`` with the machine and the command
   (``bench.parse_report``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench import debezium_input, wal2json_input
from bench.parse_report import Row, machine_line, mb, report
from bench.wal2json_input import Layout

__all__ = ["machine_line", "main", "ours", "pure_python"]

WARMUP_EVENTS = 20_000
FORMATS = {"wal2json": "wal2json-v2", "debezium": "debezium-json"}


@dataclass
class Case:
    key: str
    label: str
    run: Callable[[], object]
    layout: Layout
    ref: str  # the key of spark.read.json on the same format's file


# --- what is timed --------------------------------------------------------------------------------------
def _timed(fn, *args):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def ours(spark, paths: list[str], fmt: str = "wal2json-v2") -> dict[str, int]:  # type: ignore[no-untyped-def]
    from resolver.batch.read import read_wal2json

    b = read_wal2json(spark, paths, fmt)
    counts = b.counts()
    b.unpersist()
    return counts


def spark_json(spark, path: str) -> int:  # type: ignore[no-untyped-def]
    return int(spark.read.json(path).count())


def spark_text(spark, path: str) -> int:  # type: ignore[no-untyped-def]
    return int(spark.read.text(path).count())


def pure_python(path: str, fmt: str = "wal2json-v2") -> int:
    """Events ``read_lines`` finds in one file (anything else it yields is not counted)."""
    from resolver.formats.wal2json import Event, read_lines
    from resolver.models import Format

    n = 0
    with open(path, "rb") as fh:
        for item in read_lines(fh, path, Format(fmt)):
            if type(item) is Event:
                n += 1
    return n


def json_loads_only(path: str) -> int:
    loads = json.loads
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            loads(line)
            n += 1
    return n


def _check_ours(counts: dict[str, int], layout: Layout) -> None:
    got = {k: counts.get(k, 0) for k in layout.expected}
    if got != layout.expected:
        raise SystemExit(
            f"our parse of {layout.path} disagrees with the generator: {got}, expected {layout.expected}"
        )


# --- the inputs and the cases ---------------------------------------------------------------------------
def inputs(tmp: str, name: str, n_events: int, seed: int, formats: list[str]) -> dict[str, Layout]:
    """The inputs of ``formats``; the Debezium one holds the events of the wal2json one."""
    w2j = wal2json_input.generate(tmp, f"{name}.json", n_events, seed)
    out = {"wal2json": w2j} if "wal2json" in formats else {}
    if "debezium" in formats:
        out["debezium"] = debezium_input.generate(tmp, f"{name}-debezium.jsonl", w2j)
    return out


def cases(spark, lay: dict[str, Layout]) -> list[Case]:  # type: ignore[no-untyped-def]
    def parse(layout: Layout, paths: list[str]) -> Callable[[], object]:
        return lambda: _check_ours(ours(spark, paths, layout.fmt), layout)

    out = []
    if "wal2json" in lay:
        w = lay["wal2json"]
        uri, uri_parts = f"file://{w.path}", [f"file://{p}" for p in w.parts]
        out += [
            Case("a", "wal2json: ours, 1 file (1 task)", parse(w, [w.path]), w, "b"),
            Case("b", "wal2json: spark.read.json(path).count()", lambda: spark_json(spark, w.path), w, "b"),
            Case("c", "wal2json: spark.read.text(path).count()", lambda: spark_text(spark, w.path), w, "b"),
            Case("d", "wal2json: ours, 2 files (2 tasks)", parse(w, w.parts), w, "b"),
            # a URI is read as s3a://, abfss://, gs:// files are: binaryFile hands each task the whole file
            Case("e", "wal2json: ours, 1 file by URI (binaryFile)", parse(w, [uri]), w, "b"),
            Case("f", "wal2json: ours, 2 files by URI (binaryFile)", parse(w, uri_parts), w, "b"),
        ]
    if "debezium" in lay:
        d = lay["debezium"]
        out += [
            Case("g", "Debezium: ours, 1 file (1 task)", parse(d, [d.path]), d, "h"),
            Case("h", "Debezium: spark.read.json(path).count()", lambda: spark_json(spark, d.path), d, "h"),
            Case("i", "Debezium: spark.read.text(path).count()", lambda: spark_text(spark, d.path), d, "h"),
            Case("j", "Debezium: ours, 2 files (2 tasks)", parse(d, d.parts), d, "h"),
        ]
    return out


def _describe(layout: Layout, what: str) -> str:
    parts = " + ".join(mb(s) for s in layout.part_sizes)
    return (
        f"{what}: {layout.path}: {mb(layout.size)}, {layout.events:,} events (I {layout.ops['I']:,} / "
        f"U {layout.ops['U']:,} / D {layout.ops['D']:,}), {layout.lines:,} lines; 2 files: {parts}"
    )


def bench(args: argparse.Namespace) -> None:
    formats = ["wal2json", "debezium"] if args.format == "both" else [args.format]
    tmp = tempfile.mkdtemp(prefix="parse_speed_", dir=args.tmpdir)
    try:
        t_gen, lay = _timed(inputs, tmp, "input", args.events, args.seed, formats)
        for f, layout in lay.items():
            print(_describe(layout, f), flush=True)
        print(f"inputs written in {t_gen:.1f} s", flush=True)
        small = inputs(tmp, "warmup", min(WARMUP_EVENTS, args.events), args.seed + 1, formats)
        for layout in small.values():  # the pure-Python reader must accept every line before we time anything
            n = pure_python(layout.path, layout.fmt)
            if n != layout.events:
                raise SystemExit(
                    f"pure-Python reader found {n} events in {layout.path}, expected {layout.events}"
                )

        from resolver.spark.session import local_session

        t0 = time.perf_counter()
        spark = local_session("parse-speed")
        print(
            f"SparkSession up in {time.perf_counter() - t0:.1f} s (master {spark.sparkContext.master})",
            flush=True,
        )
        for case in cases(spark, small):  # one warm-up run of everything (JIT, Python workers, schemas)
            case.run()
        print("warm-up done", flush=True)

        todo = cases(spark, lay)
        times: dict[str, list[float]] = {c.key: [] for c in todo}
        loads = [os.getloadavg()[0]]
        for k in range(args.repeat):  # interleaved, so drift in the machine hits every case alike
            for c in todo:
                t, _ = _timed(c.run)
                times[c.key].append(t)
                loads.append(os.getloadavg()[0])
                print(
                    f"  run {k + 1}/{args.repeat} ({c.key}) {c.label}: {t:.2f} s (load {loads[-1]:.2f})",
                    flush=True,
                )
        spark.stop()
        med = {key: statistics.median(v) for key, v in times.items()}
        rows = [
            Row(c.key, f"({c.key}) {c.label}", med[c.key], times[c.key], c.layout, med[c.ref]) for c in todo
        ]

        # outside Spark, one core (nothing is cached but the compiled schemas, which the warm-up built)
        for f, layout in lay.items():
            name = "Debezium" if f == "debezium" else f
            ref = med["h" if f == "debezium" else "b"]
            t_py, n_py = _timed(pure_python, layout.path, layout.fmt)
            if n_py != layout.events:
                raise SystemExit(f"pure-Python reader found {n_py} events, expected {layout.events}")
            t_js, _ = _timed(json_loads_only, layout.path)
            print(
                f"  {name}: pure-Python read_lines {t_py:.2f} s, json.loads per line {t_js:.2f} s", flush=True
            )
            rows += [
                Row(f"py-{f}", f"(py) {name}: read_lines, pure Python, 1 core", t_py, [t_py], layout, ref),
                Row(f"js-{f}", f"(py) {name}: json.loads per line only, 1 core", t_js, [t_js], layout, ref),
            ]
        command = "python -m bench.parse_speed" + "".join(f" {a}" for a in sys.argv[1:])
        report(rows, lay, args, command, loads, WARMUP_EVENTS)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def profile(args: argparse.Namespace) -> None:
    formats = ["wal2json", "debezium"] if args.format == "both" else [args.format]
    tmp = tempfile.mkdtemp(prefix="parse_speed_", dir=args.tmpdir)
    try:
        for f, layout in inputs(tmp, "input", args.events, args.seed, formats).items():
            pure_python(layout.path, layout.fmt)  # compile the schema outside the profile
            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.enable()
            n = pure_python(layout.path, layout.fmt)
            prof.disable()
            print(
                f"=== {f}: {n:,} events, {mb(layout.size)}, {time.perf_counter() - t0:.2f} s under cProfile"
            )
            for key in ("cumulative", "tottime"):
                s = io.StringIO()
                pstats.Stats(prof, stream=s).strip_dirs().sort_stats(key).print_stats(12)
                print(f"--- top 12 by {key} ---")
                text = s.getvalue()
                print(text[text.find("   ncalls") :] if "   ncalls" in text else text)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.parse_speed", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--events", type=int, default=1_000_000, help="change events in the input (default 1,000,000)"
    )
    p.add_argument(
        "--format",
        choices=["both", *FORMATS],
        default="both",
        help="which input to time: wal2json, debezium (the same events as Debezium records), both (default)",
    )
    p.add_argument("--repeat", type=int, default=3, help="timed runs per Spark case (default 3)")
    p.add_argument("--seed", type=int, default=42, help="generator seed (default 42)")
    p.add_argument("--tmpdir", default=None, help="where to write the input (default: the system temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument(
        "--profile",
        action="store_true",
        help="only cProfile the pure-Python reader over --events events (no Spark, no results file)",
    )
    args = p.parse_args(argv)
    if args.events < 1 or args.repeat < 1:
        p.error("--events and --repeat must be at least 1")
    if args.profile:
        profile(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
