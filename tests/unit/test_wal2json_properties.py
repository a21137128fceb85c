"""Property tests (hypothesis) for the wal2json reader: nothing is lost, whatever the damage or the cut.
 For any stream of v2 transactions, any lines damaged, and any cut into two files:
* every line of a change is accounted for exactly once: an event, a quarantined record, or a fragment;
* the events of undamaged, uncut transactions are exactly the changes the stream holds, in order;
* fragments of the two files together hold the cut transaction's changes with consistent positions.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from resolver.formats.wal2json import Event, Fragment, Quarantined, format_lsn, read_lines
from resolver.models import Format

V2 = Format.WAL2JSON_V2


@st.composite
def streams(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Transactions of format-2 records (B, changes and messages, C) with increasing commit LSNs."""
    txns = []
    lsn = 0x1000
    for xid in range(draw(st.integers(1, 6))):
        lsn += 0x100
        frame = {"xid": 500 + xid, "lsn": format_lsn(lsn), "nextlsn": format_lsn(lsn + 0x30)}
        body = []
        for i in range(draw(st.integers(0, 5))):
            action = draw(st.sampled_from("IUDTM"))
            rec: dict[str, Any] = {"action": action, "xid": frame["xid"], "lsn": format_lsn(lsn - 0x80 + i)}
            if action == "M":
                rec.update(transactional=True, prefix="p", content="c")
            else:
                rec.update(schema="public", table=draw(st.sampled_from(["a", "b"])))
                value = draw(st.one_of(st.none(), st.integers(-(2**70), 2**70), st.text(max_size=5)))
                if action in "IU":
                    rec["columns"] = [
                        {"name": "id", "type": "bigint", "value": i},
                        {"name": "v", "value": value},
                    ]
                if action in "UD":
                    rec["identity"] = [{"name": "id", "type": "bigint", "value": i}]
            body.append(rec)
        txns.append([{"action": "B", **frame}, *body, {"action": "C", **frame}])
    return txns


DAMAGE = [
    lambda s: s[: len(s) // 2],  # cut short: not JSON
    lambda s: s.replace('"action":"', '"action":"X', 1),  # unknown action
    lambda s: "\x00garbage\x00",
]


@settings(max_examples=150, deadline=None)
@given(txns=streams(), data=st.data())
def test_every_change_line_is_accounted_for_exactly_once(
    txns: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    lines = [json.dumps(r, separators=(",", ":")) for t in txns for r in t]
    damaged = set(data.draw(st.sets(st.integers(0, len(lines) - 1), max_size=3)))
    for i in damaged:
        lines[i] = data.draw(st.sampled_from(DAMAGE))(lines[i])
    cut = data.draw(st.integers(0, len(lines)))
    files = [lines[:cut], lines[cut:]]

    seen: dict[tuple[int, int], str] = {}
    fragments: list[tuple[int, Fragment]] = []
    for f, part in enumerate(files):
        for item in read_lines([s.encode() for s in part], f"f{f}", V2):
            if isinstance(item, Event):
                key, what = (f, item.row["source_line"]), "event"
            elif isinstance(item, Quarantined):
                key, what = (f, item.line), "quarantine"
            elif isinstance(item, Fragment):
                key, what = (f, item.line), "fragment"
                fragments.append((f, item))
            else:
                continue
            assert key not in seen, f"line {key} reported twice"
            seen[key] = what

    records = [r for t in txns for r in t]
    for i, rec in enumerate(records):
        f, line = (0, i + 1) if i < cut else (1, i - cut + 1)
        if i in damaged or rec["action"] in "IUDT":
            assert (f, line) in seen, f"line {line} of file {f} ({rec['action']}) was lost"

    # A transaction that is whole in one file and undamaged yields exactly its changes, in order.
    start = 0
    for t in txns:
        span = range(start, start + len(t))
        start += len(t)
        if damaged & set(span) or (span.start < cut < span.stop):
            continue
        f = 0 if span.stop <= cut else 1
        offset = 0 if f == 0 else cut
        got = [seen.get((f, i - offset + 1)) for i in span if records[i]["action"] in "IUDT"]
        assert got == ["event"] * len(got)

    # Each file has at most one head and one tail; each carries one commit LSN and increasing positions.
    for f in (0, 1):
        for role in ("tail", "head"):
            part = [fr for g, fr in fragments if g == f and fr.role == role]
            positions = [fr.row["position"] for fr in part if fr.row is not None]
            assert positions == sorted(set(positions))
            assert len({fr.commit_lsn for fr in part}) <= 1
