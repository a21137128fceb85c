"""A seeded mutation fuzzer for the wal2json reader (no Spark session): no line raises, no line is lost.
 Inputs: ``samples/wal2json-v1`` and ``samples/wal2json-v2``, and every output of the upstream and local test
vectors (``../shared/reference/wal2json_vectors/index.json``, read as the ``format-version`` its call asked
for; format 1 when the call names none). A stream is one or two inputs of one format, with 0–4 mutations:
truncation, bit flips, duplicated and deleted lines, swapped quotes, 70-digit numbers, invalid UTF-8,
wal2json 2.5's ``{"change":[,{``, deep nesting, lines split and joined, blank lines, and framing lines
(``B``/``C`` records; ``{``, ``}``, ``]}`` and a chunk header for format 1) inserted anywhere. One stream in
ten is read as the other format.

For each stream:
* ``read_lines`` raises nothing and yields only ``Event``, ``Quarantined``, ``Fragment`` and ``Count``;
* every quarantine reason is one line ending in ``(rule: <rule>)``;
* every non-blank line is accounted for exactly once (``unaccounted`` below, after the
  ``resolver.formats.wal2json``
  module docstring): the line ranges of quarantined records, fragments, counted transactions, messages
  outside them and v2 events read without framing never overlap and cover every non-blank line; inside a
  counted v2 transaction each line but its B and C is exactly one event, quarantined change or message;
  a v1 transaction's events carry its first line;
* the rows a Spark task makes of them (``resolver.batch.read``'s task function, run here without Spark)
  convert to Arrow under the parse schema (an out-of-range number there would fail the task);
* ``detect_format`` raises nothing either.

``FUZZ_STREAMS`` (default 3,000: about 6 s on one core) sets the number of streams, ``FUZZ_SEED``
(default 14) the seed; stream ``i`` uses ``random.Random(f"{seed}:{i}")``, so a failure names the seed and
the stream that reproduce it (and keeps the stream's bytes in a file).
"""

from __future__ import annotations

import io
import json
import os
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from resolver.batch.pieces import pieces_of
from resolver.batch.read import _parse_files
from resolver.formats.wal2json import Count, Event, Fragment, Quarantined, detect_format, read_lines
from resolver.models import Format

V1, V2 = Format.WAL2JSON_V1, Format.WAL2JSON_V2
ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT.parent / "shared/reference/wal2json_vectors/index.json"
STREAMS = int(os.environ.get("FUZZ_STREAMS", "3000"))
SEED = int(os.environ.get("FUZZ_SEED", "14"))
_RULE = re.compile(r"\(rule: [A-Za-z0-9-]+\)$")


# --- the corpus ---------------------------------------------------------------------------------------
def corpus() -> list[tuple[Format, list[bytes]]]:
    """(format, lines) of every input: the samples and each vector output that has rows."""
    out = [(fmt, (ROOT / "samples" / fmt.value / "0001.json").read_bytes().split(b"\n")) for fmt in (V1, V2)]
    if INDEX.is_file():
        for vector in json.loads(INDEX.read_text("utf-8")):
            for output in vector["outputs"]:
                if output["rows"]:
                    fmt = V2 if re.search(r"'format-version',\s*'2'", output["call"]) else V1
                    rows = "\n".join(output["rows"]).encode("utf-8", "surrogateescape")
                    out.append((fmt, rows.split(b"\n")))
    return out


# --- mutations: each takes the stream's lines and returns new ones -------------------------------------
Mutation = Callable[[random.Random, list[bytes]], list[bytes]]


def _at(rng: random.Random, lines: list[bytes]) -> int:
    return rng.randrange(len(lines)) if lines else 0


def truncate(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    data = b"\n".join(lines)
    return data[: rng.randrange(len(data) + 1)].split(b"\n")


def flip(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    i = _at(rng, lines)
    if not lines or not lines[i]:
        return lines
    line = bytearray(lines[i])
    for _ in range(rng.randint(1, 3)):
        line[rng.randrange(len(line))] ^= 1 << rng.randrange(8)
    return [*lines[:i], bytes(line), *lines[i + 1 :]]


def duplicate(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    if not lines:
        return lines
    copy = lines[_at(rng, lines)]
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], copy, *lines[at:]]


def delete(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    i = _at(rng, lines)
    return [*lines[:i], *lines[i + 1 :]]


def swap_quotes(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    i = _at(rng, lines)
    if not lines or b'"' not in lines[i]:
        return lines
    quotes = [m.start() for m in re.finditer(rb'"', lines[i])]
    line = bytearray(lines[i])
    for q in rng.sample(quotes, min(len(quotes), rng.randint(1, 2))):
        line[q] = ord(rng.choice("'`"))
    return [*lines[:i], bytes(line), *lines[i + 1 :]]


def long_number(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    i = _at(rng, lines)
    numbers = list(re.finditer(rb"-?\d+(?:\.\d+)?", lines[i])) if lines else []
    if not numbers:
        return lines
    m = rng.choice(numbers)
    digits = str(rng.randrange(10**69, 10**70)).encode()
    big = rng.choice([digits, b"-" + digits, digits + b".5", digits + b"e999", b"0." + digits])
    return [*lines[:i], lines[i][: m.start()] + big + lines[i][m.end() :], *lines[i + 1 :]]


def bad_utf8(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    i = _at(rng, lines)
    if not lines:
        return [b"\xff"]
    j = rng.randrange(len(lines[i]) + 1)
    junk = rng.choice([b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"])
    return [*lines[:i], lines[i][:j] + junk + lines[i][j:], *lines[i + 1 :]]


BUG_25 = b'{"change":[,{"kind":"message","transactional":false,"prefix":"p","content":"c"}]}'


def bug_25(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    """wal2json 2.5's invalid ``{"change":[,{`` (a line of it, or an existing ``"change":[`` made into it)."""
    i = _at(rng, lines)
    if lines and b'"change":[{' in lines[i] and rng.random() < 0.5:
        return [*lines[:i], lines[i].replace(b'"change":[{', b'"change":[,{', 1), *lines[i + 1 :]]
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], BUG_25, *lines[at:]]


def deep(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    """A deeply nested line, or a record's value nested deeply."""
    depth = rng.choice([60, 63, 64, 65, 66, 200, 999, 1000, 5000])
    nested = rng.choice(
        [
            b"[" * depth,
            b"[" * depth + b"1" + b"]" * depth,
            b'{"a":' * depth + b"1" + b"}" * depth,
            b"[1," * depth,
        ]
    )
    i = _at(rng, lines)
    if lines and b'"value":' in lines[i] and rng.random() < 0.5:
        return [*lines[:i], lines[i].replace(b'"value":', b'"value":' + nested + b",", 1), *lines[i + 1 :]]
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], nested, *lines[at:]]


def split(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    i = _at(rng, lines)
    if not lines:
        return lines
    j = rng.randrange(len(lines[i]) + 1)
    return [*lines[:i], lines[i][:j], lines[i][j:], *lines[i + 1 :]]


def join(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    if len(lines) < 2:
        return lines
    i = rng.randrange(len(lines) - 1)
    return [*lines[:i], lines[i] + rng.choice([b"", b" "]) + lines[i + 1], *lines[i + 2 :]]


def blank(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], rng.choice([b"", b"  ", b"\t", b"\r", b" \r"]), *lines[at:]]


def framing(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    """A B or C record (format 2), or a line that opens or closes a spread format-1 object."""
    xid, lsn = rng.randrange(1, 1000), rng.randrange(1, 1 << 32)
    frame = f'"xid":{xid},"lsn":"0/{lsn:X}","nextlsn":"0/{lsn + 0x30:X}"}}'.encode()
    line = rng.choice(
        [
            b'{"action":"B",' + frame,
            b'{"action":"C",' + frame,
            b'{"action":"C",' + frame,
            b"{",
            b"}",
            b"]}",
            b'{"xid":%d,"change":[' % xid,
            b'\t\t,{"kind":"delete","table":"t","oldkeys":{"keynames":["a"],"keyvalues":[1]}}',
        ]
    )
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], line, *lines[at:]]


MUTATIONS: list[Mutation] = [
    truncate,
    flip,
    duplicate,
    delete,
    swap_quotes,
    long_number,
    bad_utf8,
    bug_25,
    deep,
    split,
    join,
    blank,
    framing,
    framing,
]


def stream(seed: int, i: int, inputs: list[tuple[Format, list[bytes]]]) -> tuple[Format, bytes, list[str]]:
    """Stream ``i`` of ``seed``: the format to read it as, its bytes, and what was done to it."""
    rng = random.Random(f"{seed}:{i}")
    fmt, lines = rng.choice(inputs)
    done = [f"input of {fmt.value} ({len(lines)} lines)"]
    if rng.random() < 0.3:
        more = rng.choice([lines for f, lines in inputs if f is fmt])
        lines = lines + more
        done.append(f"+ another input ({len(more)} lines)")
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4])):
        mutation = rng.choice(MUTATIONS)
        lines = mutation(rng, list(lines))
        done.append(mutation.__name__)
    if rng.random() < 0.1:
        fmt = V2 if fmt is V1 else V1
    return fmt, b"\n".join(lines), done


# --- the checks ---------------------------------------------------------------------------------------
def unaccounted(data: bytes, items: list[Any], fmt: Format) -> list[str]:
    """What is wrong with the line accounting of ``items`` (``read_lines`` of ``data``); empty when every
    non-blank line is accounted for exactly once (see the module docstring)."""
    lines = io.BytesIO(data).readlines()  # what the reader iterates over
    nonblank = {n for n, b in enumerate(lines, 1) if b.strip()}
    txns = [(c.line, c.last) for c in items if isinstance(c, Count) and c.name == "transactions"]
    problems = [f"transaction count without lines: {t}" for t in txns if not 0 < t[0] <= t[1]]
    top: Counter[int] = Counter()
    nested: Counter[int] = Counter()

    def txn_of(n: int) -> tuple[int, int] | None:
        return next((t for t in txns if t[0] <= n <= t[1]), None)

    def claim(first: int, last: int, what: str) -> None:
        span = [n for n in range(first, last + 1) if n in nonblank]
        if first not in nonblank or last not in nonblank:
            problems.append(f"{what} names lines {first}..{last}, which start or end on no line")
        home = txn_of(first)
        if home is None:
            top.update(span)
        elif last > home[1]:
            problems.append(f"{what} lines {first}..{last} run past its transaction {home}")
        else:
            nested.update(span)

    for item in items:
        if isinstance(item, Count):
            if item.name == "transactions":
                top.update(n for n in range(item.line, item.last + 1) if n in nonblank)
            elif item.line:
                claim(item.line, item.last, f"count {item.name}")
            elif not (fmt is V1 and item.name == "messages"):
                problems.append(f"a count that names no lines: {item}")
        elif isinstance(item, Quarantined):
            claim(item.line, item.last or item.line, f"quarantined ({item.reason})")
            if "\n" in item.reason or not _RULE.search(item.reason):
                problems.append(f"reason is not one line ending in (rule: …): {item.reason!r}")
        elif isinstance(item, Fragment):
            claim(item.line, item.line, "fragment")
        elif isinstance(item, Event):
            line = item.row["source_line"]
            if fmt is V2:
                claim(line, line, "event")
            elif (home := txn_of(line)) is None or home[0] != line:
                problems.append(f"v1 event at line {line} is not at the first line of a transaction")
        else:
            problems.append(f"unexpected item {item!r}")
    for n in sorted(nonblank):
        if top[n] != 1:
            problems.append(f"line {n} is claimed {top[n]} times at the top level: {lines[n - 1][:80]!r}")
    for first, last in txns:
        for n in range(first, last + 1):
            want = 1 if fmt is V2 and first < n < last and n in nonblank else 0
            if nested[n] != want:
                problems.append(f"line {n} in transaction {first}..{last} is claimed {nested[n]} times")
    return problems


def task_rows(path: Path, fmt: Format) -> int:
    """The rows a Spark task makes of one file (``resolver.batch.read``'s task function, called directly), the
    file read in pieces of 1 KiB where its format allows (``resolver.batch.pieces``)."""
    pieces = pieces_of([str(path)], fmt, 1024)
    run = _parse_files([str(path)], pieces, fmt)
    index = pa.RecordBatch.from_pydict({"file_index": pa.array(range(len(pieces)), pa.int32())})
    return sum(batch.num_rows for batch in run(iter([index])))


def check(fmt: Format, data: bytes, path: Path) -> list[str]:
    """Every problem with one stream (an exception is one)."""
    try:
        items = list(read_lines(io.BytesIO(data), "fuzz.json", fmt))
        problems = unaccounted(data, items, fmt)
        path.write_bytes(data)
        task_rows(path, fmt)
        detect_format(io.BytesIO(data))
    except Exception as e:  # noqa: BLE001 - the failure is the finding
        return [f"raised {type(e).__name__}: {e}"]
    return problems


def test_no_mutated_stream_raises_or_loses_a_line(tmp_path: Path) -> None:
    inputs = corpus()
    print(f"fuzz: FUZZ_SEED={SEED} FUZZ_STREAMS={STREAMS}, {len(inputs)} inputs")
    for i in range(STREAMS):
        fmt, data, done = stream(SEED, i, inputs)
        problems = check(fmt, data, tmp_path / "stream.json")
        if problems:
            kept = tmp_path.parent / f"fuzz-{SEED}-{i}.json"
            kept.write_bytes(data)
            raise AssertionError(
                f"stream {i} of FUZZ_SEED={SEED} ({', '.join(done)}; read as {fmt.value}; bytes in {kept}): "
                + "; ".join(problems[:5])
                + f"\nreproduce: FUZZ_SEED={SEED} FUZZ_STREAMS={i + 1} pytest tests/unit/test_fuzz.py"
            )


def test_the_accounting_check_finds_a_lost_and_a_doubled_line() -> None:
    data = (ROOT / "samples/wal2json-v2/0001.json").read_bytes()
    items = list(read_lines(io.BytesIO(data), "f", V2))
    assert unaccounted(data, items, V2) == []
    event = next(i for i in items if isinstance(i, Event))
    lost = [i for i in items if i is not event]
    assert any("claimed 0 times" in p for p in unaccounted(data, lost, V2))
    doubled = [*items, Quarantined(event.row["source_line"], "x (rule: x)", "")]
    assert any("claimed 2 times" in p for p in unaccounted(data, doubled, V2))
    one_line = b'{"xid":1,"change":[]}\n'
    txn = list(read_lines(io.BytesIO(one_line), "f", V1))
    assert unaccounted(one_line, txn, V1) == []
    assert any("0 times at the top level" in p for p in unaccounted(one_line, txn[1:], V1))
