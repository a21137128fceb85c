"""Read Debezium PostgreSQL change events (Kafka Connect JSON, one Kafka record per line) into change
events, in pure Python. No Spark.

A line is one record's value as Kafka Connect's ``JsonConverter`` writes it (with ``schemas.enable=true`` an
envelope ``{"schema": ..., "payload": ...}``, without it the payload alone), or a whole record
``{"key": ..., "value": ..., "headers": ...}`` (what ``resolver``'s Kafka source and a sink that keeps keys
write). A ``null`` value is a tombstone: counted and skipped. Records of the transaction topic
(``provide.transaction.metadata``: ``status`` BEGIN/END) are counted (END: a transaction) and skipped. Each
change record is validated against ``schemas/debezium/change.json``; what fails goes to quarantine.
 What each change becomes (``resolver.models.ChangeEvent``):

* ``op`` c (create) and r (a snapshot read) are inserts, u an update, d a delete, t a truncate; m (a
  logical-decoding message) is counted as a message.
* ``after`` gives the column names and values, ``before`` the old key: with the record's key (its fields are
  the primary key) the key columns of ``before`` (deletes) or of ``after`` (updates, whose key did not
  change: Debezium sends a key change as a delete and a create); without a key, the columns of a delete's
  ``before`` that are not NULL (REPLICA IDENTITY DEFAULT sends only the key there; the table's schema file
  should then name its ``primary_key``), and an update's ``before`` when there is one (REPLICA IDENTITY FULL).
* Values become the text PostgreSQL prints and, from the envelope's schema, a PostgreSQL type
  (``resolver.formats.debezium_values``). The placeholder of an unchanged TOASTed value (``placeholder``,
  Debezium's ``unavailable.value.placeholder``) makes its column *absent*: the previous value carries on.
* A key change: Debezium sends the delete of the old key (then a tombstone) and the create of the new one,
  both from the same WAL record, so with the same ``source.lsn`` and ``txId``. They become one update from
  the old key to the new one, so unchanged TOASTed values and the row's history follow it: from the create
  alone when its ``__debezium.oldkey`` header names the old key (the delete, marked ``__debezium.newkey``,
  is then left out; ``resolver.formats.debezium_record``), else when the create follows the delete in the file
  (one topic partition delivers them in that order).

Order (``../shared/reference/wal2json_spec.md`` section 7 for wal2json's): pgoutput hands Debezium whole
transactions in commit order, and ``source.sequence`` is ``["<last commit LSN>", "<lsn>"]``: the first is the
end of the previous transaction's commit record (what wal2json calls ``nextlsn``), the same for every event of
a transaction and strictly increasing from one transaction to the next. It is the event's ``commit_lsn``: the
commit order, with no transaction metadata needed. ``position`` orders a transaction's changes by their own
WAL position, ``2 * (lsn - commit_lsn)`` plus 1 except for a delete (a key change's delete and create share
one LSN; the delete comes first). What this cannot do: the first transaction the connector streams after its
very first start has no previous commit (``sequence`` starts with null); its events are ordered by their own
``lsn`` instead, which is still the right order for every row. A snapshot row (``op: r``) is an insert at the
snapshot's LSN; its position is its line, so a snapshot sent twice in one file layout is deduplicated, and
sent again in another adds the same rows again (same values, same order).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from resolver.formats.debezium_record import NEW_KEY, OLD_KEY, codecs, header_key, is_whole_record, key_names
from resolver.formats.debezium_values import DEFAULT_PLACEHOLDER, ColumnCodec, is_placeholder, plain_text
from resolver.formats.names import qualified
from resolver.formats.wal2json_items import Count, Event, Quarantined, base_row, not_utf8
from resolver.formats.wal2json_record import BadRecord, check_record, decode_json, unexpected_failure
from resolver.models import Format

__all__ = ["read_debezium"]

_OPS = {"c": "insert", "r": "insert", "u": "update", "d": "delete", "t": "truncate"}
_POSITION_LIMIT = 2**31 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Change:
    """One change record read: its line, text, payload, the codecs of its columns, the key's names, and
    what its key-change headers say (``resolver.formats.debezium_record``): the old key a create moved from,
    and whether a delete is the first half of a key change."""

    __slots__ = ("codecs", "key", "line", "moved_from", "moving", "payload", "raw")

    def __init__(
        self,
        line: int,
        raw: str,
        payload: dict[str, Any],
        codecs: dict[str, ColumnCodec],
        key: list[str] | None,
        headers: Any = None,
    ) -> None:
        self.line, self.raw, self.payload, self.codecs, self.key = line, raw, payload, codecs, key
        op = payload.get("op")
        self.moved_from = header_key(headers, OLD_KEY) if op == "c" else None
        self.moving = op == "d" and header_key(headers, NEW_KEY) is not None

    @property
    def source(self) -> dict[str, Any]:
        return self.payload["source"]  # type: ignore[no-any-return]


def read_debezium(
    numbered: Iterator[tuple[int, str, bytes | None]],
    source_file: str,
    placeholder: str = DEFAULT_PLACEHOLDER,
) -> Iterator[Event | Quarantined | Count]:
    """Read one file's numbered lines (``resolver.formats.wal2json._decode``) as Debezium records."""
    held: _Change | None = None  # a delete that may be the first half of a key change
    for n, text, raw_bytes in numbered:
        if raw_bytes is not None:
            yield Quarantined(n, not_utf8(raw_bytes), text, raw_bytes)
            continue
        try:
            item = _record(n, text)
        except BadRecord as e:
            yield Quarantined(n, str(e), text)
            continue
        except Exception as e:  # a record the rules did not foresee: it alone is quarantined
            yield Quarantined(n, unexpected_failure(e), text)
            continue
        if isinstance(item, Count) and item.name == "tombstones":
            yield item  # a key change's tombstone sits between its delete and its create
            continue
        if held is not None:
            if isinstance(item, _Change) and _completes(held, item):
                yield _event(lambda h=held, c=item: _moved(h, c, source_file, placeholder), held)
                held = None
                continue
            yield _event(lambda h=held: _row(h, source_file, placeholder), held)
            held = None
        if isinstance(item, Count):
            yield item
        elif item.moving:
            continue  # the first half of a key change whose create names the old key: the create moves it
        elif item.moved_from is not None:
            yield _event(lambda c=item: _moved_by_header(c, source_file, placeholder), item)
        elif item.payload["op"] == "d":
            held = item
        else:
            yield _event(lambda c=item: _row(c, source_file, placeholder), item)
    if held is not None:
        yield _event(lambda h=held: _row(h, source_file, placeholder), held)


def _record(n: int, text: str) -> _Change | Count:
    """Decode and validate one line; a tombstone, a transaction record or a message becomes a Count."""
    if text.strip() == "null":
        return Count("tombstones", 1, n, n)
    obj = decode_json(text)
    names: list[str] | None = None
    headers = None
    if is_whole_record(obj):
        names, headers = key_names(obj.get("key")), obj.get("headers")  # its key names the primary key
        obj = obj["value"]
        if obj is None:
            return Count("tombstones", 1, n, n)
    obj = check_record(obj, Format.DEBEZIUM_JSON)
    schema, payload = (obj["schema"], obj["payload"]) if "payload" in obj and "schema" in obj else (None, obj)
    if "status" in payload:
        return Count("transactions", 1 if payload["status"] == "END" else 0, n, n)
    if payload["op"] == "m":
        return Count("messages", 1, n, n)
    return _Change(n, text, payload, codecs(schema), names, headers)


def _completes(deleted: _Change, created: _Change) -> bool:
    """Whether ``created`` is the second half of the key change whose first half is ``deleted``."""
    a, b = deleted.source, created.source
    return created.payload["op"] == "c" and (a["schema"], a["table"], a["lsn"], a.get("txId")) == (
        b["schema"],
        b["table"],
        b["lsn"],
        b.get("txId"),
    )


def _event(build: Any, change: _Change) -> Event | Quarantined:
    try:
        return Event(build())
    except BadRecord as e:
        return Quarantined(change.line, str(e), change.raw)
    except Exception as e:
        return Quarantined(change.line, unexpected_failure(e), change.raw)


def _order(change: _Change, second_half: bool) -> tuple[int, int]:
    """(commit_lsn, position) of a change (see the module's Order)."""
    src, op = change.source, change.payload["op"]
    lsn = int(src["lsn"])
    if op == "r":
        return lsn, change.line
    commit = _last_commit(src.get("sequence"))
    commit = lsn if commit is None else commit
    position = 2 * (lsn - commit) + (0 if op == "d" and not second_half else 1)
    if abs(position) > _POSITION_LIMIT:
        raise BadRecord(
            f"data.source.lsn: found {lsn}, more than 1 GiB of WAL from its transaction's start "
            f"{commit}; the change's place in its transaction does not fit (rule: position-range)"
        )
    return commit, position


def _last_commit(sequence: str | None) -> int | None:
    if not sequence:
        return None
    try:
        parts = json.loads(sequence)
        return int(parts[0]) if parts and parts[0] is not None else None
    except (ValueError, TypeError, IndexError):
        raise BadRecord(
            f"data.source.sequence: found {sequence!r}, expected a JSON array of two LSNs as text "
            "(rule: format)"
        ) from None


def _row(change: _Change, source_file: str, placeholder: str) -> dict[str, Any]:
    p, src = change.payload, change.source
    op = _OPS[p["op"]]
    row = base_row(source_file, change.line, qualified(src["schema"], src["table"]), op)
    commit, position = _order(change, second_half=False)
    row.update(commit_lsn=commit, position=position, change_lsn=int(src["lsn"]), xid=src.get("txId"))
    row["commit_time"] = _commit_time(src)
    if op in ("insert", "update"):
        _columns(row, "column", p["after"], change.codecs, placeholder, None)
    if op == "delete":
        _columns(
            row, "old_key", p["before"], change.codecs, placeholder, change.key or _not_null(p["before"])
        )
    elif op == "update" and change.key:
        _columns(row, "old_key", p["after"], change.codecs, placeholder, change.key)
    elif op == "update" and p.get("before"):
        _columns(row, "old_key", p["before"], change.codecs, placeholder, None)
    if change.key is not None:
        row["primary_key"] = change.key
    return row


def _commit_time(src: dict[str, Any]) -> datetime | None:
    """The transaction's commit time: ``source.ts_us`` (Debezium 2.6 and later), else ``ts_ms``."""
    if src.get("ts_us") is not None:
        return _EPOCH + timedelta(microseconds=int(src["ts_us"]))
    if src.get("ts_ms") is not None:
        return _EPOCH + timedelta(milliseconds=int(src["ts_ms"]))
    return None


def _moved(deleted: _Change, created: _Change, source_file: str, placeholder: str) -> dict[str, Any]:
    """A key change: one update from the delete's old key to the create's row."""
    row = _row(created, source_file, placeholder)
    row["operation"] = "update"
    row["source_line"] = deleted.line
    row["commit_lsn"], row["position"] = _order(deleted, second_half=False)
    before = deleted.payload["before"]
    _columns(row, "old_key", before, deleted.codecs, placeholder, deleted.key or _not_null(before))
    return row


def _moved_by_header(created: _Change, source_file: str, placeholder: str) -> dict[str, Any]:
    """A key change told by the create's header: one update from that old key to the create's row, in the
    delete's place (as ``_moved`` makes it from both halves)."""
    row = _row(created, source_file, placeholder)
    row["operation"] = "update"
    row["position"] -= 1  # the delete's: 2 * (lsn - commit_lsn), the create's plus 1
    old = created.moved_from or {}
    _columns(row, "old_key", old, created.codecs, placeholder, list(old))
    return row


def _text(codec: ColumnCodec | None, value: Any) -> str | None:
    """A value's text; one Debezium encodes in a way the codec cannot read (a date past year 9999, an
    ``infinity`` timestamp) keeps its JSON text, which then fails its column's type: the value goes to
    quarantine with it, the event is still applied."""
    if codec is None:
        return plain_text(value)
    try:
        return codec.text(value)
    except (ValueError, OverflowError, TypeError, KeyError, ArithmeticError):
        return plain_text(value)


def _not_null(image: dict[str, Any]) -> list[str]:
    return [name for name, value in image.items() if value is not None]


def _columns(
    row: dict[str, Any],
    prefix: str,
    image: dict[str, Any],
    codecs: dict[str, ColumnCodec],
    placeholder: str,
    only: list[str] | None,
) -> None:
    """Set ``<prefix>_names/_types/_values`` from an image; placeholders leave their column out."""
    names = [
        n for n in (only if only is not None else image) if not is_placeholder(image.get(n), placeholder)
    ]
    typed = [codecs.get(n) for n in names]
    row[f"{prefix}_names"] = names
    row[f"{prefix}_values"] = [_text(c, image.get(n)) for n, c in zip(names, typed, strict=True)]
    types = [c.pg_type if c else None for c in typed]
    row[f"{prefix}_types"] = types if names and all(types) else None
