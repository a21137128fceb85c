"""How fast is ``read_wal2json`` compared with Spark's own JSON reader?

    python -m bench.parse_speed [--events N] [--repeat K] [--seed S] [--keep] [--tmpdir DIR]
    python -m bench.parse_speed --profile [--events N]     # cProfile the pure-Python reader only (no Spark)

1. Writes (plain Python, seeded, deterministic) a wal2json format-version-2 file of exactly N change events
   shaped like ``samples/wal2json-v2/0001.json``: B … C transactions of 1–10 changes with include-xids,
   include-timestamp and include-lsn fields, I/U/D on ``public.customers`` (bigint, text, numeric(12,2),
   double, text[], jsonb, bytea, text, timestamptz) and ``public.orders`` (bigint, integer, numeric, text),
   ``identity`` on U/D, ``pk`` everywhere. A second layout holds the same lines cut in two files at the
   transaction boundary nearest the middle.
2. In one warm SparkSession (``resolver.session.local_session()``, local[2]), after one warm-up run of
   everything on a small file, times K runs each of (a) our parse (one Spark task per file), (b)
   ``spark.read.json(path).count()`` (schema inference pass + count), (c) ``spark.read.text(path).count()``
   (a floor: just reading the lines), (d) our parse over the 2-file layout, (e)/(f) (a)/(d) with file:// URIs
   (the object-store reader: Spark's binaryFile source); and, outside Spark, one run of
   the pure-Python reader ``resolver.wal2json.read_lines`` on one core (plus plain ``json.loads`` of every
   line, the floor for any Python parser).
3. Prints a table and writes it to ``bench/PARSE_RESULTS.md`` with the machine and the command.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "PARSE_RESULTS.md"
WARMUP_EVENTS = 20_000


# --- the input file -----------------------------------------------------------------------------------
@dataclass
class Layout:
    path: str  # the whole stream in one file
    parts: list[str]  # the same lines in two files, cut at a transaction boundary
    events: int
    transactions: int
    lines: int
    size: int
    part_sizes: list[int]
    ops: dict[str, int]


def _j(s: str | None) -> str:
    """A JSON value as wal2json prints it (UTF-8 kept as is, not \\u-escaped)."""
    return "null" if s is None else json.dumps(s, ensure_ascii=False)


def _lsn(v: int) -> str:
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


_FIRST = [
    "Alice",
    "Bob",
    "Zoë",
    "Ünal",
    "Chloé",
    "Dmitri",
    "Aiko",
    "José",
    "Fatima",
    "Liam",
    "Noah",
    "Mia",
    "Søren",
    "Ingrid",
    "Wei",
    "Priya",
    "Olivia",
    "Mateo",
    "Hana",
    "Omar",
    "Renée",
    "Kwame",
    "Ana",
    "Yusuf",
]
_LAST = [
    "Martin",
    "Stone",
    "Ünïcødé 日本語 🚀",
    "Müller",
    "O'Brien",
    "Nakamura",
    "García",
    "Kowalski",
    "Smith",
    "Dubois",
    "Rossi",
    "Singh",
    "Chen",
    "Novák",
    "Andersen",
    '"The Rock" Johnson',
]
_TAGS = [
    "{}",
    "{vip}",
    '{vip,"early adopter"}',
    '{naïve,"a,b","say \\"hi\\"",NULL}',
    "{beta,newsletter}",
    '{"gold member",eu}',
    '{""}',
    "{churn-risk,b2b,annual}",
    None,
]
_NOTES = [
    'line 1\nline 2\t"quoted" \\ backslash',
    "called back, wants invoice",
    "",
    "prefers email",
    "VAT id: FR40303265045",
    "address: 1 rue de la Paix\n75002 Paris",
    "⚠ disputed charge",
]
_STATUS = ["new", "paid", "shipped", "delivered", "returned"]

_CUST_COLS = (
    '[{{"name":"id","type":"bigint","value":{}}},{{"name":"name","type":"text","value":{}}},'
    '{{"name":"email","type":"text","value":{}}},{{"name":"balance","type":"numeric(12,2)","value":{}}},'
    '{{"name":"score","type":"double precision","value":{}}},{{"name":"tags","type":"text[]","value":{}}},'
    '{{"name":"profile","type":"jsonb","value":{}}},{{"name":"avatar","type":"bytea","value":{}}},'
    '{{"name":"notes","type":"text","value":{}}},'
    '{{"name":"created_at","type":"timestamp with time zone","value":{}}}]'
).format
_CUST_IDENT = '"identity":[{{"name":"id","type":"bigint","value":{}}}],'.format
_CUST_PK = '"pk":[{"name":"id","type":"bigint"}]}\n'
_ORD_COLS = (
    '[{{"name":"customer_id","type":"bigint","value":{}}},{{"name":"order_no","type":"integer","value":{}}},'
    '{{"name":"amount","type":"numeric","value":{}}},{{"name":"status","type":"text","value":"{}"}}]'
).format
_ORD_IDENT = (
    '"identity":[{{"name":"customer_id","type":"bigint","value":{}}},'
    '{{"name":"order_no","type":"integer","value":{}}}],'
).format
_ORD_PK = '"pk":[{"name":"customer_id","type":"bigint"},{"name":"order_no","type":"integer"}]}\n'


def generate(directory: str, name: str, n_events: int, seed: int) -> Layout:
    """Write exactly ``n_events`` change events (1–10 per transaction) and the 2-file layout of the same."""
    rng = random.Random(seed)
    rand, randrange, choice = rng.random, rng.randrange, rng.choice

    # value pools (already JSON-encoded), so the hot loop only picks and formats
    names = [(_j(f"{f} {la}"), _ascii(f"{f}.{la}")) for f in _FIRST for la in _LAST]
    tags = [_j(t) for t in _TAGS]
    notes = [_j(t) for t in _NOTES]
    profiles = []
    for i in range(64):
        doc: dict[str, object] = {"tier": choice(["gold", "silver", "bronze"])}
        if i % 2:
            doc["langs"] = rng.sample(["en", "fr", "de", "ja", "pt"], k=1 + i % 3)
        if i % 3 == 0:
            doc["credit"] = float(f"{randrange(0, 500)}.{randrange(0, 100):02d}")
        if i % 5 == 0:
            doc["name"], doc["emoji"] = "Zoë", "🚀"
        profiles.append(_j(json.dumps(doc, ensure_ascii=False)))  # jsonb text, then as a JSON string
    profiles += ['"{}"', "null"]
    avatars = [_j(rng.randbytes(randrange(0, 48)).hex()) for _ in range(128)] + ["null"] * 96
    base = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    created = []
    for _ in range(4096):
        t = base + dt.timedelta(seconds=randrange(0, 3 * 365 * 86400))
        us = randrange(0, 1_000_000) if rand() < 0.3 else 0
        created.append(f'"{t:%Y-%m-%d %H:%M:%S}{_frac(us)}+00"')

    def customer_row(cid: int) -> list[str]:
        nm, local = names[randrange(len(names))]
        c = randrange(0, 10_000_000)
        score = "null" if rand() < 0.1 else repr(round(rand() * 5, randrange(1, 4)))
        return [
            nm,
            f'"{local}{cid}@example.com"',
            f"{c // 100}.{c % 100:02d}",
            score,
            choice(tags),
            choice(profiles),
            choice(avatars),
            "null" if rand() < 0.7 else choice(notes),
            choice(created),
        ]

    def amount() -> str:
        if rand() < 0.01:  # numeric without typmod: exact digits beyond a double
            return f"{randrange(10**29, 10**30)}.{randrange(10**29, 10**30)}"
        c = randrange(100, 100_000)
        return f"{c // 100}.{c % 100:02d}"

    customers: dict[int, list[str]] = {}
    live_c: list[int] = []
    orders: dict[tuple[int, int], list[str]] = {}
    live_o: list[tuple[int, int]] = []
    next_order: dict[int, int] = {}
    next_id = 1
    ops = {"I": 0, "U": 0, "D": 0}

    lsn = 0x16_B374D848
    xid = 729
    t_us = int(dt.datetime(2026, 11, 21, 16, 24, 52, 897531, tzinfo=dt.UTC).timestamp()) * 1_000_000 + 897531
    sec_cache = (-1, "")

    path = os.path.join(directory, name)
    events = txns = lines = size = 0
    half_target = None
    cut = 0
    buf: list[bytes] = []
    buffered = 0
    with open(path, "wb") as out:
        while events < n_events:
            k = min(randrange(1, 11), n_events - events)
            xid += 1 if rand() < 0.9 else randrange(2, 5)
            t_us += randrange(80, 4000)
            sec, us = divmod(t_us, 1_000_000)
            if sec != sec_cache[0]:
                sec_cache = (sec, dt.datetime.fromtimestamp(sec, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"))
            ts = f"{sec_cache[1]}{_frac(us)}+00"
            prefix = f'"xid":{xid},"timestamp":"{ts}","lsn":"'
            body: list[str] = []
            for _ in range(k):
                change_lsn = _lsn(lsn)
                if rand() < 0.5:  # public.customers
                    lsn += randrange(0x100, 0x200, 8)
                    r = rand()
                    if not live_c or r < 0.5:
                        op, cid = "I", next_id
                        next_id += 1
                        row = customers[cid] = customer_row(cid)
                        live_c.append(cid)
                        tail = f'"columns":{_CUST_COLS(cid, *row)},{_CUST_PK}'
                    elif r < 0.85:
                        op, cid = "U", live_c[randrange(len(live_c))]
                        row = customers[cid]
                        c = randrange(0, 10_000_000)
                        row[2] = f"{c // 100}.{c % 100:02d}"
                        if rand() < 0.3:
                            row[4] = choice(tags)
                        if rand() < 0.2:
                            row[7] = choice(notes)
                        tail = f'"columns":{_CUST_COLS(cid, *row)},{_CUST_IDENT(cid)}{_CUST_PK}'
                    else:
                        op = "D"
                        i = randrange(len(live_c))
                        cid = live_c[i]
                        live_c[i] = live_c[-1]
                        live_c.pop()
                        del customers[cid]
                        tail = f"{_CUST_IDENT(cid)}{_CUST_PK}"
                    table = "customers"
                else:  # public.orders
                    lsn += randrange(0x90, 0x110, 8)
                    r = rand()
                    if not live_o or r < 0.5:
                        op = "I"
                        cid = live_c[randrange(len(live_c))] if live_c else randrange(1, next_id + 1)
                        ono = next_order[cid] = next_order.get(cid, 0) + 1
                        row = orders[(cid, ono)] = [amount(), "new"]
                        live_o.append((cid, ono))
                        tail = f'"columns":{_ORD_COLS(cid, ono, *row)},{_ORD_PK}'
                    elif r < 0.85:
                        op = "U"
                        cid, ono = live_o[randrange(len(live_o))]
                        row = orders[(cid, ono)]
                        row[1] = _STATUS[min(_STATUS.index(row[1]) + 1, len(_STATUS) - 1)]
                        tail = f'"columns":{_ORD_COLS(cid, ono, *row)},{_ORD_IDENT(cid, ono)}{_ORD_PK}'
                    else:
                        op = "D"
                        i = randrange(len(live_o))
                        cid, ono = live_o[i]
                        live_o[i] = live_o[-1]
                        live_o.pop()
                        del orders[(cid, ono)]
                        tail = f"{_ORD_IDENT(cid, ono)}{_ORD_PK}"
                    table = "orders"
                ops[op] += 1
                body.append(
                    f'{{"action":"{op}",{prefix}{change_lsn}","schema":"public","table":"{table}",{tail}'
                )
            commit = f'{prefix}{_lsn(lsn)}","nextlsn":"{_lsn(lsn + 0x30)}"}}\n'
            lsn += 0x30
            data = f'{{"action":"B",{commit}{"".join(body)}{{"action":"C",{commit}'.encode()
            buf.append(data)
            buffered += len(data)
            size += len(data)
            events += k
            txns += 1
            lines += k + 2
            if half_target is None and events >= n_events // 2:
                half_target, cut = True, size  # the first transaction boundary past half of the events
            if buffered >= 1 << 23:
                out.write(b"".join(buf))
                buf, buffered = [], 0
        out.write(b"".join(buf))

    stem, ext = os.path.splitext(name)
    split_dir = os.path.join(directory, f"{stem}-split")
    os.makedirs(split_dir, exist_ok=True)
    parts = [os.path.join(split_dir, f"{stem}-1{ext}"), os.path.join(split_dir, f"{stem}-2{ext}")]
    _copy_range(path, parts[0], 0, cut)
    _copy_range(path, parts[1], cut, size - cut)
    return Layout(path, parts, events, txns, lines, size, [cut, size - cut], ops)


def _frac(us: int) -> str:
    """PostgreSQL prints microseconds with trailing zeros dropped (``.89945``), none when zero."""
    return f".{us:06d}".rstrip("0") if us else ""


def _ascii(s: str) -> str:
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()
    return "".join(ch for ch in s.lower() if ch.isalnum() or ch == ".")


def _copy_range(src: str, dst: str, start: int, length: int) -> None:
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        fi.seek(start)
        while length > 0:
            chunk = fi.read(min(length, 1 << 24))
            if not chunk:
                raise OSError(f"{src}: short read")
            fo.write(chunk)
            length -= len(chunk)


# --- timing ---------------------------------------------------------------------------------------------
def _timed(fn, *args):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def ours(spark, paths: list[str]) -> dict[str, int]:  # type: ignore[no-untyped-def]
    from resolver.read import read_wal2json

    b = read_wal2json(spark, paths, "wal2json-v2")
    counts = b.counts()
    b.unpersist()
    return counts


def spark_json(spark, path: str) -> int:  # type: ignore[no-untyped-def]
    return int(spark.read.json(path).count())


def spark_text(spark, path: str) -> int:  # type: ignore[no-untyped-def]
    return int(spark.read.text(path).count())


def pure_python(path: str) -> int:
    from resolver.models import Format
    from resolver.wal2json import Event, read_lines

    n = 0
    with open(path, "rb") as fh:
        for item in read_lines(fh, path, Format.WAL2JSON_V2):
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
    if (
        counts.get("events") != layout.events
        or counts.get("quarantined")
        or counts.get("transactions") != layout.transactions
    ):
        raise SystemExit(
            f"our parse disagrees with the generator: {counts} (expected {layout.events} events, "
            f"{layout.transactions} transactions, 0 quarantined)"
        )


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
    nproc = _nproc()
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
        f"nproc {nproc}, RAM {mem}, {platform.python_implementation()} {platform.python_version()}, "
        f"{', '.join(vers)}, {platform.system()} {platform.machine()}, {now}"
    )


def _nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 0


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def bench(args: argparse.Namespace) -> None:
    tmp = tempfile.mkdtemp(prefix="parse_speed_", dir=args.tmpdir)
    try:
        t_gen, layout = _timed(generate, tmp, "wal2json-v2.json", args.events, args.seed)
        print(
            f"input: {layout.path}: {_mb(layout.size)} ({layout.size:,} bytes), {layout.events:,} events "
            f"(I {layout.ops['I']:,} / U {layout.ops['U']:,} / D {layout.ops['D']:,}), "
            f"{layout.transactions:,} transactions, {layout.lines:,} lines; written in {t_gen:.1f} s",
            flush=True,
        )
        parts = zip(layout.parts, layout.part_sizes, strict=True)
        print(f"2-file layout: {', '.join(f'{os.path.basename(p)} {_mb(s)}' for p, s in parts)}", flush=True)
        small = generate(tmp, "warmup.json", min(WARMUP_EVENTS, args.events), args.seed + 1)

        # the pure-Python reader must accept every line before we time anything
        n = pure_python(small.path)
        if n != small.events:
            raise SystemExit(
                f"pure-Python reader found {n} events in the warm-up file, expected {small.events}"
            )

        from resolver.session import local_session

        t0 = time.perf_counter()
        spark = local_session("parse-speed")
        print(
            f"SparkSession up in {time.perf_counter() - t0:.1f} s (master {spark.sparkContext.master})",
            flush=True,
        )

        uri, uri_parts = f"file://{layout.path}", [f"file://{p}" for p in layout.parts]
        # one warm-up run of everything (JVM JIT, Python workers, schema compile in the workers)
        _check_ours(ours(spark, [f"file://{small.path}"]), small)
        _check_ours(ours(spark, [small.path]), small)
        _check_ours(ours(spark, small.parts), small)
        spark_json(spark, small.path)
        spark_text(spark, small.path)
        print("warm-up done", flush=True)

        cases = [
            ("a", "ours, 1 file (1 task)", lambda: _check_ours(ours(spark, [layout.path]), layout)),
            ("b", "spark.read.json(path).count()", lambda: spark_json(spark, layout.path)),
            ("c", "spark.read.text(path).count()", lambda: spark_text(spark, layout.path)),
            ("d", "ours, 2 files (2 tasks)", lambda: _check_ours(ours(spark, layout.parts), layout)),
            # a URI is read as s3a://, abfss://, gs:// files are: binaryFile hands each task the whole file
            ("e", "ours, 1 file by URI (binaryFile)", lambda: _check_ours(ours(spark, [uri]), layout)),
            ("f", "ours, 2 files by URI (binaryFile)", lambda: _check_ours(ours(spark, uri_parts), layout)),
        ]
        times: dict[str, list[float]] = {key: [] for key, *_ in cases}
        loads = [os.getloadavg()[0]]
        for k in range(args.repeat):  # interleaved, so drift in the machine hits every case alike
            for key, label, fn in cases:
                t, _ = _timed(fn)
                times[key].append(t)
                loads.append(os.getloadavg()[0])
                print(
                    f"  run {k + 1}/{args.repeat} ({key}) {label}: {t:.2f} s (load {loads[-1]:.2f})",
                    flush=True,
                )
        spark.stop()

        # outside Spark, one core (a fresh Python process would be the same: nothing here is cached but the
        # compiled schema, which the warm-up check above already built)
        t_py, n_py = _timed(pure_python, layout.path)
        if n_py != layout.events:
            raise SystemExit(f"pure-Python reader found {n_py} events, expected {layout.events}")
        print(f"  pure-Python read_lines: {t_py:.2f} s", flush=True)
        t_js, _ = _timed(json_loads_only, layout.path)
        print(f"  json.loads per line: {t_js:.2f} s", flush=True)

        med = {key: statistics.median(v) for key, v in times.items()}
        ref = med["b"]
        rows = [(f"({key}) {label}", med[key], times[key]) for key, label, _ in cases]
        rows += [
            ("(py) read_lines, pure Python, 1 core", t_py, [t_py]),
            ("(py) json.loads per line only, 1 core", t_js, [t_js]),
        ]
        w = max(len(r[0]) for r in rows)
        table = [
            f"{'case':<{w}} | {'median s':>8} | {'runs s':<22} | {'events/s':>10} | {'MB/s':>6} | "
            f"{'time / (b)':>10}",
            f"{'-' * w}-|-{'-' * 8}-|-{'-' * 22}-|-{'-' * 10}-|-{'-' * 6}-|-{'-' * 10}",
        ]
        for label, m, runs in rows:
            runs_s = " ".join(f"{x:.2f}" for x in runs)
            table.append(
                f"{label:<{w}} | {m:>8.2f} | {runs_s:<22} | {layout.events / m:>10,.0f} | "
                f"{layout.size / 1e6 / m:>6.1f} | {m / ref:>9.2f}x"
            )
        summary = [
            f"ratio ours / spark.read.json (median time; >1 = ours slower): 1 file {med['a'] / ref:.2f}x, "
            f"2 files {med['d'] / ref:.2f}x",
            f"speed-up of 2 files (2 tasks) over 1 file (1 task): {med['a'] / med['d']:.2f}x",
            f"the URI reader (binaryFile, how object-store files are read) against the local one: 1 file "
            f"{med['e'] / med['a']:.2f}x, 2 files {med['f'] / med['d']:.2f}x the time",
            f"Spark overhead on our parse (1 task) over the bare pure-Python reader: {med['a'] / t_py:.2f}x",
            f"1-minute load average during the Spark runs: {min(loads):.2f}–{max(loads):.2f} "
            f"(at {os.getloadavg()[0]:.2f} after the pure-Python runs); on {_nproc()} cores anything well "
            "above 2 means other processes competed for the CPU and the times above are inflated",
        ]
        input_line = (
            f"input: one wal2json format-version-2 file, {layout.events:,} events "
            f"(I {layout.ops['I']:,} / U {layout.ops['U']:,} / D {layout.ops['D']:,}) in "
            f"{layout.transactions:,} transactions, {layout.lines:,} lines, {_mb(layout.size)}; "
            f"2-file layout cut at a transaction boundary: {_mb(layout.part_sizes[0])} + "
            f"{_mb(layout.part_sizes[1])}; seed {args.seed}; {args.repeat} timed runs per Spark case "
            f"after one warm-up on {small.events:,} events; events/s = input events / median time"
        )
        command = "python -m bench.parse_speed" + "".join(f" {a}" for a in sys.argv[1:])
        machine = machine_line()

        print()
        print("\n".join(table))
        print()
        print("\n".join(summary))
        md = [
            "# Parse speed: `read_wal2json` vs `spark.read.json`",
            "",
            f"- machine: {machine}",
            f"- command: `{command}` (from the repository root; Spark master local[2] via `local_session()`)",
            f"- {input_line}",
            "- (a)/(d) time `b = read_wal2json(spark, paths, 'wal2json-v2'); b.counts(); b.unpersist()`; "
            "(b) includes Spark's schema-inference pass over the whole file; (c) only splits lines; "
            "(e)/(f) are (a)/(d) with the paths given as file:// URIs, read as object-store files are "
            "(Spark's binaryFile source, the whole file handed to the task)",
            "",
            "```",
            *table,
            "```",
            "",
            *[f"- {s}" for s in summary],
            "",
        ]
        RESULTS.write_text("\n".join(md), encoding="utf-8")
        print(f"\nwrote {RESULTS}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def profile(args: argparse.Namespace) -> None:
    tmp = tempfile.mkdtemp(prefix="parse_speed_", dir=args.tmpdir)
    try:
        layout = generate(tmp, "wal2json-v2.json", args.events, args.seed)
        pure_python(layout.path)  # compile the schema outside the profile
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        n = pure_python(layout.path)
        prof.disable()
        print(f"{n:,} events, {_mb(layout.size)}, {time.perf_counter() - t0:.2f} s under cProfile")
        for key in ("cumulative", "tottime"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).strip_dirs().sort_stats(key).print_stats(10)
            print(f"--- top 10 by {key} ---")
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
