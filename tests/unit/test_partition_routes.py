"""A partition's changes under its root's name (``resolver.formats.partition_routes``,
``resolver.formats.routed_items``): routes by commit LSN, patterns, a root's truncate with its partitions',
a partition truncated alone quarantined, and the routes file read back as written. No Spark."""

from __future__ import annotations

import json

import pytest

from resolver.formats.partition_routes import CopyAgain, PartitionRoutes, Route, RoutesFile
from resolver.formats.routed_items import route_items
from resolver.formats.wal2json import Count, Event, Fragment, Quarantined, read_lines
from resolver.models import Format

ROUTES = PartitionRoutes(
    (
        Route("public.m_2024", "public.m", 0),
        Route("public.m_2025", "public.m", 0),  # an intermediate partitioned table
        Route("public.m_2025_a", "public.m", 0),
        Route("public.x", "public.m", 0x200),  # attached at 0/200
        Route("public.old", "public.m", 0, 0x300),  # detached at 0/300
    ),
    (("audit.log_*", "audit.log"),),
)


def _lines(*records: dict[str, object]) -> list[bytes]:
    return [json.dumps(r).encode() + b"\n" for r in records]


def _txn(xid: int, commit: str, *changes: dict[str, object]) -> list[dict[str, object]]:
    frame = {"xid": xid, "timestamp": "2024-01-01 00:00:00+00", "lsn": commit, "nextlsn": commit}
    return [{"action": "B", **frame}, *changes, {"action": "C", **frame}]


def _change(action: str, table: str, lsn: str = "0/10", schema: str = "public") -> dict[str, object]:
    change: dict[str, object] = {"action": action, "xid": 1, "lsn": lsn, "schema": schema, "table": table}
    if action == "I":
        change["columns"] = [{"name": "id", "type": "integer", "value": 1}]
    return change


def _routed(*records: dict[str, object]) -> list[Event | Quarantined | Fragment | Count]:
    return list(route_items(read_lines(_lines(*records), "f.json", Format.WAL2JSON_V2), ROUTES))


def _events(items: list[Event | Quarantined | Fragment | Count]) -> list[tuple[str, str]]:
    return [(i.row["table"], i.row["operation"]) for i in items if isinstance(i, Event)]


@pytest.mark.parametrize(
    ("table", "commit", "root"),
    [
        ("public.m_2024", 0x100, "public.m"),
        ("public.m_2025_a", 0x100, "public.m"),
        ("public.x", 0x1FF, None),  # before it was attached: a table of its own
        ("public.x", 0x200, "public.m"),
        ("public.old", 0x2FF, "public.m"),
        ("public.old", 0x300, None),  # detached
        ("audit.log_2025_01", 0x1, "audit.log"),
        ("audit.log", 0x1, None),  # the table a pattern names is not its own partition
        ("public.other", 0x1, None),
    ],
)
def test_a_relation_is_routed_to_its_root_while_its_route_holds(
    table: str, commit: int, root: str | None
) -> None:
    assert ROUTES.root_of(table, commit) == root


def test_changes_of_partitions_are_named_for_their_root() -> None:
    items = _routed(
        *_txn(7, "0/100", _change("I", "m_2024"), _change("I", "m_2025_a"), _change("I", "other")),
        *_txn(8, "0/180", _change("I", "x")),  # public.x before its route begins
        *_txn(9, "0/280", _change("I", "x"), _change("I", "log_2025_01", schema="audit")),
    )
    assert _events(items) == [
        ("public.m", "insert"),
        ("public.m", "insert"),
        ("public.other", "insert"),
        ("public.x", "insert"),
        ("public.m", "insert"),
        ("audit.log", "insert"),
    ]


def test_a_roots_truncate_is_kept_and_its_partitions_truncates_are_part_of_it() -> None:
    """TRUNCATE m: wal2json prints the root, then every partition (intermediate ones too), one change LSN."""
    truncate = [_change("T", t, "0/150") for t in ("m", "m_2024", "m_2025", "m_2025_a")]
    items = _routed(*_txn(7, "0/160", *truncate))
    assert _events(items) == [("public.m", "truncate")]
    assert [i.name for i in items if isinstance(i, Count) and i.name == "partition_truncates"] == [
        "partition_truncates"
    ] * 3
    assert not [i for i in items if isinstance(i, Quarantined)]


def test_a_partition_truncated_alone_is_quarantined_with_the_table_to_copy_again() -> None:
    items = _routed(
        *_txn(7, "0/160", _change("T", "m_2024", "0/150")),
        *_txn(8, "0/190", _change("T", "log_1", "0/170", schema="audit"), _change("T", "other", "0/170")),
    )
    assert _events(items) == [("public.other", "truncate")]  # never a truncate of public.m or audit.log
    quarantined = [i for i in items if isinstance(i, Quarantined)]
    assert [(q.line, q.reason.split(":")[0]) for q in quarantined] == [
        (2, "a TRUNCATE of public.m_2024, a partition of public.m, at 0/160"),
        (5, "a TRUNCATE of audit.log_1, a partition of audit.log, at 0/190"),
    ]
    assert "resolver capture --resnapshot 'public.m'" in quarantined[0].reason
    assert json.loads(quarantined[0].raw)["table"] == "public.m_2024"


def test_a_fragments_partition_is_named_for_its_root_and_its_lone_truncate_quarantined() -> None:
    """A transaction cut by the end of the file: its lines become fragments, routed the same way."""
    head = _txn(7, "0/100", _change("I", "m_2024"), _change("T", "m_2025_a", "0/90"))[:-1]
    items = _routed(*head)
    fragments = [i for i in items if isinstance(i, Fragment)]
    assert [f.row["table"] for f in fragments if f.row is not None] == ["public.m"]
    assert len(fragments) == 3  # B, the insert, the truncate's line (now no change)
    assert [q.line for q in items if isinstance(q, Quarantined)] == [3]


def test_no_routes_leave_every_item_as_it_is() -> None:
    records = _txn(7, "0/100", _change("T", "m_2024", "0/90"), _change("I", "m_2024"))
    read = list(read_lines(_lines(*records), "f.json", Format.WAL2JSON_V2))
    routed = list(route_items(read_lines(_lines(*records), "f.json", Format.WAL2JSON_V2), PartitionRoutes()))
    assert [type(i) for i in routed] == [type(i) for i in read]
    assert _events(routed) == [("public.m_2024", "truncate"), ("public.m_2024", "insert")]


def test_a_routes_file_reads_back_as_written() -> None:
    written = RoutesFile(
        "shop",
        [Route('public."Mixed Case"', "public.m", 0), Route("public.old", "public.m", 0x10, 0x1A2B3C4D5)],
        [CopyAgain("public.m", 0x1A2B3C4D5, "partition public.old was detached or dropped")],
        {16384: 'public."Mixed Case"'},
    )
    read = RoutesFile.parse(written.text())
    assert read == written
    assert json.loads(written.text())["routes"][1] == {
        "relation": "public.old",
        "root": "public.m",
        "from": "0/10",
        "until": "1/A2B3C4D5",
    }
    assert read.copy_again[0].line() == (
        "table public.m: partition public.old was detached or dropped at 1/A2B3C4D5, and its rows moved "
        "without change events: copy it again (resolver capture --resnapshot 'public.m')"
    )
    with pytest.raises(ValueError, match="format 2"):
        RoutesFile.parse('{"format": 2}')
