"""The wal2json input of ``bench.parse_speed``: a seeded, deterministic wal2json format-version-2 file of
exactly N change events, and the same lines cut in two files at a transaction boundary.

The file is shaped like ``samples/wal2json-v2/0001.json``: B … C transactions of 1–10 changes with
include-xids, include-timestamp and include-lsn fields, I/U/D on ``public.customers`` (bigint, text,
numeric(12,2), double, text[], jsonb, bytea, text, timestamptz) and ``public.orders`` (bigint, integer,
numeric, text), ``identity`` on U/D, ``pk`` everywhere. ``bench.debezium_input`` renders the same events as
Debezium records.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import unicodedata
from dataclasses import dataclass, field

__all__ = ["Layout", "generate", "split_in_two"]


@dataclass
class Layout:
    """One generated input: where it is, what it holds, and what our reader must count in it."""

    path: str  # the whole stream in one file
    parts: list[str]  # the same lines in two files, cut at a transaction boundary
    events: int
    transactions: int
    lines: int
    size: int
    part_sizes: list[int]
    ops: dict[str, int]  # I / U / D
    fmt: str = "wal2json-v2"
    expected: dict[str, int] = field(default_factory=dict)  # ParsedBatch.counts() entries to check

    def __post_init__(self) -> None:
        if not self.expected:
            self.expected = {"events": self.events, "quarantined": 0, "transactions": self.transactions}


def _j(s: str | None) -> str:
    """A JSON value as wal2json prints it (UTF-8 kept as is, not \\u-escaped)."""
    return "null" if s is None else json.dumps(s, ensure_ascii=False)


def _lsn(v: int) -> str:
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


_FIRST = (
    "Alice|Bob|Zoë|Ünal|Chloé|Dmitri|Aiko|José|Fatima|Liam|Noah|Mia|"
    "Søren|Ingrid|Wei|Priya|Olivia|Mateo|Hana|Omar|Renée|Kwame|Ana|Yusuf"
).split("|")
_LAST = (
    "Martin|Stone|Ünïcødé 日本語 🚀|Müller|O'Brien|Nakamura|García|Kowalski|"
    'Smith|Dubois|Rossi|Singh|Chen|Novák|Andersen|"The Rock" Johnson'
).split("|")
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

    parts = split_in_two(path, cut, size)
    return Layout(path, parts, events, txns, lines, size, [cut, size - cut], ops)


def _frac(us: int) -> str:
    """PostgreSQL prints microseconds with trailing zeros dropped (``.89945``), none when zero."""
    return f".{us:06d}".rstrip("0") if us else ""


def _ascii(s: str) -> str:
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()
    return "".join(ch for ch in s.lower() if ch.isalnum() or ch == ".")


def split_in_two(path: str, cut: int, size: int) -> list[str]:
    """Copy bytes ``[0, cut)`` and ``[cut, size)`` of ``path`` into ``<stem>-split/<stem>-1<ext>``, ``-2``."""
    stem, ext = os.path.splitext(os.path.basename(path))
    split_dir = os.path.join(os.path.dirname(path), f"{stem}-split")
    os.makedirs(split_dir, exist_ok=True)
    parts = [os.path.join(split_dir, f"{stem}-1{ext}"), os.path.join(split_dir, f"{stem}-2{ext}")]
    _copy_range(path, parts[0], 0, cut)
    _copy_range(path, parts[1], cut, size - cut)
    return parts


def _copy_range(src: str, dst: str, start: int, length: int) -> None:
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        fi.seek(start)
        while length > 0:
            chunk = fi.read(min(length, 1 << 24))
            if not chunk:
                raise OSError(f"{src}: short read")
            fo.write(chunk)
            length -= len(chunk)
