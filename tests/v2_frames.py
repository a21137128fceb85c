"""Format-2 wal2json transactions written by hand for the Spark tests: tables ``public.<name>`` keyed by a
bigint ``id`` with a text ``body``."""

from __future__ import annotations

import json
from typing import Any

from resolver.lsn import format_lsn

#: one change: (action I/U/D, table name in ``public``, id, body, the old id of an update that changes it)
Change = tuple[str, str, int, str | None, int | None]


def v2_txn(lsn: int, *changes: Change) -> list[str]:
    """A format-2 transaction committed at ``lsn`` (its xid too), as its lines."""
    frame = {"xid": lsn, "timestamp": f"2024-01-01 00:{lsn // 60 % 60:02d}:{lsn % 60:02d}+00"}
    frame |= {"lsn": format_lsn(lsn), "nextlsn": format_lsn(lsn)}
    out = [json.dumps({"action": "B", **frame})]
    for action, table, key, text, old in changes:
        record: dict[str, Any] = {"action": action, "xid": lsn, "lsn": format_lsn(lsn), "schema": "public"}
        record |= {"table": table, "pk": [{"name": "id", "type": "bigint"}]}
        if action in ("I", "U"):
            record["columns"] = [
                {"name": "id", "type": "bigint", "value": key},
                {"name": "body", "type": "text", "value": text},
            ]
        if action in ("U", "D"):
            record["identity"] = [{"name": "id", "type": "bigint", "value": key if old is None else old}]
        out.append(json.dumps(record))
    out.append(json.dumps({"action": "C", **frame}))
    return out
