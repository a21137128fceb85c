"""Regenerate the quickstart sample captures:  python samples/regenerate.py

Starts a throw-away PostgreSQL + wal2json server (tests/harness/postgres.py), creates the database
``quickstart``, runs samples/schema.sql, creates the logical slot ``quickstart`` (plugin wal2json), runs
samples/workload.sql and peeks the slot twice with the harness defaults (include-xids, include-timestamp,
include-lsn, include-pk, include-types = 1; format 2 also include-transaction=1; decoding session with
DateStyle=ISO, TimeZone=UTC, extra_float_digits=1, bytea_output=hex, IntervalStyle=postgres). It writes:

* samples/wal2json-v1/0001.json  format-version 1, compact: one transaction (one JSON object) per line
* samples/wal2json-v2/0001.json  format-version 2: one record (B/I/U/D/T/M/C) per line
* samples/dirty/0001.json        the v2 lines, all kept in order, plus four bad lines (below)
* samples/expected/<schema>.<table>.json  final table contents: ``SELECT <col>::text, ... ORDER BY <pk>``
  as a JSON list of objects (PostgreSQL text output, NULL as null), for comparing resolved tables.

The bad lines of samples/dirty/0001.json, each derived from a v2 line and inserted right after the C that
ends that line's transaction (between transactions), so that skipping (quarantining) exactly these four
lines must give the same result as the clean capture:

1. after the first I record: the same line cut to its first half (truncated, not valid JSON);
2. after the first U record: the same record with "action":"X" (unknown action);
3. after the first I record of public.orders: the same record without its "columns" key;
4. after the first M record: a line of binary garbage (NUL, invalid UTF-8 bytes, ESC; no newline in it).

xid, lsn and timestamps change on every run; everything else is deterministic.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.harness.postgres import PgDatabase, PgServer, write_lines  # noqa: E402

SAMPLES = ROOT / "samples"
DATABASE = "quickstart"
SLOT = "quickstart"
GARBAGE = b"\x00\x9f\x92\x96 \xff\xfe binary \xc3\x28 garbage \x80\x81\x1b[0m \x00"


def _record(line: str) -> dict[str, Any]:
    value = json.loads(line)
    assert isinstance(value, dict)
    return value


def dirty_lines(v2: list[str]) -> tuple[list[str | bytes], list[int]]:
    """The v2 lines with the four bad lines inserted; also their 1-based line numbers in the result."""
    records = [_record(line) for line in v2]

    def first(action: str, table: str | None = None) -> int:
        return next(
            i
            for i, r in enumerate(records)
            if r["action"] == action and (table is None or r.get("table") == table)
        )

    first_insert, first_update = first("I"), first("U")
    order_insert, first_message = first("I", "orders"), first("M")
    without_columns = {k: v for k, v in records[order_insert].items() if k != "columns"}
    bad: dict[int, str | bytes] = {
        first_insert: v2[first_insert][: len(v2[first_insert]) // 2],
        first_update: v2[first_update].replace('"action":"U"', '"action":"X"', 1),
        order_insert: json.dumps(without_columns, ensure_ascii=False, separators=(",", ":")),
        first_message: GARBAGE,
    }
    # Each bad line goes right after the C that ends the transaction of the line it was made from: between
    # transactions, so it takes no position inside one and the good records keep their (commit, position).
    after: dict[int, list[str | bytes]] = {}
    for i in sorted(bad):
        commit = next(j for j in range(i, len(records)) if records[j]["action"] == "C")
        after.setdefault(commit, []).append(bad[i])
    out: list[str | bytes] = []
    numbers: list[int] = []
    for i, line in enumerate(v2):
        out.append(line)
        for extra in after.get(i, []):
            out.append(extra)
            numbers.append(len(out))
    return out, numbers


def expected_tables(db: PgDatabase) -> dict[str, list[dict[str, str | None]]]:
    tables = db.query(
        "SELECT table_schema, table_name FROM information_schema.tables"
        " WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1, 2"
    )
    result: dict[str, list[dict[str, str | None]]] = {}
    for schema, table in tables:
        qualified = f'"{schema}"."{table}"'
        columns = [
            row[0]
            for row in db.query(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (schema, table),
            )
        ]
        pk = [
            row[0]
            for row in db.query(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                " AND a.attnum = ANY (i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary"
                " ORDER BY array_position(i.indkey::int2[], a.attnum)",
                (qualified,),
            )
        ]
        select = ", ".join(f'"{c}"::text' for c in columns)
        order = ", ".join(f't."{c}"' for c in pk)  # t.: the input column, not the ::text output column
        rows = db.query(f"SELECT {select} FROM {qualified} AS t ORDER BY {order}")
        result[f"{schema}.{table}"] = [dict(zip(columns, row, strict=True)) for row in rows]
    return result


def check(v1: list[str], v2: list[str]) -> None:
    """Fail loudly if the capture no longer shows the cases the workload is meant to produce."""
    records = [_record(line) for line in v2]
    actions = [r["action"] for r in records]
    assert {"B", "I", "U", "D", "T", "M", "C"} <= set(actions), actions
    pairs = zip(actions, actions[1:], strict=False)
    assert any(a == "B" and b == "C" for a, b in pairs), "no empty (DDL) transaction"
    toast_update = [
        r
        for r in records
        if r["action"] == "U"
        and r["table"] == "customers"
        and {"name": "id", "type": "bigint", "value": 7} in r["columns"]
    ]
    assert toast_update and all(c["name"] != "notes" for c in toast_update[0]["columns"]), "notes not omitted"
    assert len(v1) == actions.count("B"), "format 1 should have one line per transaction"


def main() -> None:
    with PgServer() as pg:
        db = pg.create_database(DATABASE)
        db.execute((SAMPLES / "schema.sql").read_text(encoding="utf-8"))
        db.create_slot(SLOT)
        db.execute((SAMPLES / "workload.sql").read_text(encoding="utf-8"))
        v1 = db.capture(SLOT, 1)
        v2 = db.capture(SLOT, 2)
        tables = expected_tables(db)
        version = pg.query("SELECT version()")[0][0]
        print(f"server: {version}; start {pg.start_seconds:.2f}s")
    check(v1, v2)
    write_lines(SAMPLES / "wal2json-v1" / "0001.json", v1)
    write_lines(SAMPLES / "wal2json-v2" / "0001.json", v2)
    dirty, bad_numbers = dirty_lines(v2)
    write_lines(SAMPLES / "dirty" / "0001.json", dirty)
    for name, rows in tables.items():
        path = SAMPLES / "expected" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(rows)} rows")
    print(f"samples/wal2json-v1/0001.json: {len(v1)} transactions")
    print(f"samples/wal2json-v2/0001.json: {len(v2)} records")
    print(f"samples/dirty/0001.json: {len(dirty)} lines, bad lines (1-based): {bad_numbers}")


if __name__ == "__main__":
    main()
