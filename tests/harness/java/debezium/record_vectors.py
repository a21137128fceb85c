"""Record the Debezium test vectors tests/vectors/debezium/envelope.jsonl and plain.jsonl.

One run of WORKLOAD on a throw-away PostgreSQL 15, captured by two Debezium engines at once (one with the
JSON converter's ``{schema, payload}`` envelope, one without), so both files hold the same changes with the
same LSNs and transaction ids. The harness's marker rows and their transactions are left out.

Run from the repository root:
``python tests/harness/java/debezium/record_vectors.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from tests.harness.debezium import MARKER_TOPIC, TRANSACTION_TOPIC, DebeziumCapture, payload  # noqa: E402
from tests.harness.postgres import PgServer  # noqa: E402

BIG = random.Random(20240229).randbytes(11200).hex()  # 22400 characters: stored out of line (TOAST)
TYPES = "id, n12, n, ts, tstz, d, t, b, j, ia, ta, flag, dp, u"  # the columns of the first rows
SCHEMA = """
CREATE TABLE public.items (id int PRIMARY KEY, name text, big text);
CREATE TABLE public.types_demo (
    id bigint PRIMARY KEY, n12 numeric(12,3), n numeric, ts timestamp, tstz timestamptz, d date, t time,
    b bytea, j jsonb, ia int[], ta text[], flag boolean, dp double precision, u uuid
);
"""
#: one list of statements per transaction, in order (%(big)s is BIG)
WORKLOAD: list[list[str]] = [
    ["INSERT INTO items VALUES (1, 'one', NULL)"],
    ["INSERT INTO items VALUES (2, 'two', %(big)s)"],
    [
        f"INSERT INTO types_demo ({TYPES}) VALUES (1, 12345.678, 3.14159265358979323846264338327950288,"
        " '2024-02-29 13:45:56.123456', '2024-02-29 13:45:56.123456+02', '2024-02-29', '23:59:59.999999',"
        """ '\\x00ff10', '{"a": [1, 2.5, null], "b": {"c": "d"}}', '{1,2,NULL,-3}',"""
        """ '{"x","y z",NULL,"q\\"d"}',"""
        " true, 1.5e-10, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')",
        f"INSERT INTO types_demo ({TYPES}) VALUES (2, -0.001, 100000000000000000000, '1970-01-01 00:00:00',"
        " '1969-12-31 23:59:59.5+00', '1900-01-01', '00:00:00', '\\x', '[]', '{}', '{}', false, -2.25,"
        " '00000000-0000-0000-0000-000000000000')",
    ],
    ["UPDATE items SET name = 'two, renamed' WHERE id = 2"],  # big is TOASTed and unchanged
    ["UPDATE items SET id = 20 WHERE id = 2"],  # primary-key update, big unchanged
    ["DELETE FROM items WHERE id = 1"],
    ["INSERT INTO items VALUES (1, 'one, again', 'short')"],  # re-insert of a deleted key
    ["ALTER TABLE types_demo ADD COLUMN note text"],
    ["INSERT INTO types_demo (id, note) VALUES (3, 'added column')"],
    ["ALTER TABLE types_demo DROP COLUMN flag"],
    ["UPDATE types_demo SET n12 = 1.5, note = 'after the drop' WHERE id = 3"],
    [  # several changes to two tables in one transaction
        "INSERT INTO items VALUES (4, 'four', NULL)",
        "UPDATE types_demo SET j = '{\"k\": true}', ia = '{7}' WHERE id = 1",
        "DELETE FROM types_demo WHERE id = 2",
        "UPDATE items SET name = 'twenty' WHERE id = 20",
    ],
    ["TRUNCATE types_demo"],
    ["INSERT INTO types_demo (id, n12, note) VALUES (5, 5, 'after the truncate')"],
]
#: two transactions open at once: (connection, statement); A begins first, B commits first
INTERLEAVED: list[tuple[str, str]] = [
    ("A", "INSERT INTO items VALUES (5, 'A first', NULL)"),
    ("B", "INSERT INTO items VALUES (6, 'B first', NULL)"),
    ("A", "UPDATE types_demo SET note = 'A second' WHERE id = 5"),
    ("B", "UPDATE items SET name = 'B second' WHERE id = 4"),
    ("B", "COMMIT"),
    ("A", "COMMIT"),
]


def run_workload(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statements in WORKLOAD:
            with conn.transaction():
                for sql in statements:
                    if "%(big)s" in sql:
                        conn.execute(sql, {"big": BIG})
                    else:
                        conn.execute(sql.encode())  # bytes: no placeholder parsing
    # not autocommit: each connection's first statement opens its transaction
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
        conns = {"A": first, "B": second}
        for name, sql in INTERLEAVED:
            if sql == "COMMIT":
                conns[name].commit()
            else:
                conns[name].execute(sql.encode())


def without_markers(path: Path) -> list[str]:
    """The file's lines, unchanged, minus the marker table's and the BEGIN/END of the marker transactions."""
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    markers = {payload(r["value"])["source"]["txId"] for r in records if r["topic"] == MARKER_TOPIC}

    def is_marker(record: dict[str, Any]) -> bool:
        if record["topic"] == MARKER_TOPIC:
            return True
        value = payload(record["value"])
        return record["topic"] == TRANSACTION_TOPIC and int(value["id"].split(":")[0]) in markers

    return [line for line, r in zip(lines, records, strict=True) if not is_marker(r)]


def record(out_dir: Path) -> dict[str, int]:
    """Run the workload and write the two files; the number of lines of each."""
    counts = {}
    with PgServer() as pg, tempfile.TemporaryDirectory() as tmp:
        db = pg.create_database("vectors")
        db.execute(SCHEMA)
        extra = {"skipped.operations": "none"}  # Debezium 3 skips truncates ('t') by default
        files = {"envelope.jsonl": True, "plain.jsonl": False}
        tables = ["public.items", "public.types_demo"]
        captures = {
            name: DebeziumCapture(db.dsn, Path(tmp) / name, tables, schemas=schemas, extra=extra)
            for name, schemas in files.items()
        }
        try:
            for capture in captures.values():
                capture.start()
            run_workload(db.dsn)
            for capture in captures.values():
                capture.sync()
        finally:
            for capture in captures.values():
                capture.stop()
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, capture in captures.items():
            lines = without_markers(capture.out)
            (out_dir / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            counts[name] = len(lines)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "vectors" / "debezium")
    args = parser.parse_args()
    for name, count in record(args.out).items():
        print(f"{args.out / name}: {count} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
