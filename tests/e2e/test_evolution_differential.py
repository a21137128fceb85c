"""Differential test of schema evolution against real PostgreSQL: a seeded random workload on one table mixes
row changes with ADD COLUMN, DROP COLUMN, RENAME COLUMN (with ``renamed_from`` hints) and type widenings at
random points, some inside transactions that also change rows. The state of the table is recorded after
every commit; the stream is captured by wal2json (both formats) and, in a run of its own, by a real Debezium
(``tests/harness/debezium.py``, started after CREATE TABLE, the connector settings README.md asks for), cut
into three files of whole transactions and ingested out of order. The history as of every commit's LSN (as
the format's reader gives it: for Debezium the end of the previous commit) must equal the recorded state on
the columns that existed then (under their lake names), and the snapshot the final ``SELECT *``.
 ``EVO_SEEDS=20 python -m pytest tests/e2e/test_evolution_differential.py`` runs more seeds (CI runs two,
seed 1 in format 2 and seed 2 in format 1; ``EVO_BOTH_FORMATS=1`` reads each seed in both formats),
through Debezium on seed 1 (``EVO_DEBEZIUM_SEEDS=N`` for more: each starts a connector and runs the workload).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.formats.wal2json import Event, read_lines
from resolver.lake.folders import history_path, snapshot_path
from resolver.models import Format
from tests.harness.debezium import MARKER_TOPIC, DebeziumCapture, payload
from tests.harness.postgres import PgDatabase, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

SEEDS = int(os.environ.get("EVO_SEEDS", "2"))
DEBEZIUM_SEEDS = int(os.environ.get("EVO_DEBEZIUM_SEEDS", "1"))  # each starts a Debezium: about a minute
#: the connector settings README.md's "From Debezium and Kafka" asks for
#: (tests/e2e/test_debezium_differential.py)
SETTINGS = {
    "decimal.handling.mode": "string",
    "interval.handling.mode": "string",
    "column.propagate.source.type": ".*",
    "skipped.operations": "none",
}
TRANSACTIONS = 40
WIDER = {
    "smallint": "integer",
    "integer": "bigint",
    "numeric(10,2)": "numeric(14,4)",
    "real": "double precision",
}


@dataclass
class Column:
    name: str  # current name in PostgreSQL
    lake: str  # the name the lake gives it: its last name (the schema file maps the earlier ones)
    type: str
    earlier: list[str] = field(default_factory=list)


@dataclass
class Workload:
    rng: random.Random
    columns: list[Column]  # the table's columns now
    ever: list[Column] = field(default_factory=list)  # every column it had, dropped ones too
    live: set[int] = field(default_factory=set)
    serial: int = 0

    def value(self, c: Column) -> str:
        if self.rng.random() < 0.15:
            return "NULL"
        if c.type in ("smallint", "integer", "bigint"):
            return str(self.rng.randrange(-300, 300))
        if c.type.startswith("numeric"):
            return f"{self.rng.randrange(-99999, 99999) / 100:.2f}"
        if c.type in ("real", "double precision"):
            return str(self.rng.choice([0.5, 1.25, -2.0, 3.5]))
        return (
            "'"
            + self.rng.choice(["", "x", "ünï", "a'b", f"t{self.rng.randrange(100)}"]).replace("'", "''")
            + "'"
        )

    def fresh(self) -> str:
        self.serial += 1
        return f"c{self.serial}"

    def dml(self) -> list[str]:
        values = [c for c in self.columns if c.name != "id"]
        choice = self.rng.random()
        if not self.live or choice < 0.35:
            key = self.rng.choice([k for k in range(1, 25) if k not in self.live])
            self.live.add(key)
            names = ", ".join(["id", *[c.name for c in values]])
            row = ", ".join([str(key), *[self.value(c) for c in values]])
            return [f"INSERT INTO evo ({names}) VALUES ({row})"]
        key = self.rng.choice(sorted(self.live))
        if choice < 0.75 and values:
            sets = self.rng.sample(values, k=self.rng.randint(1, len(values)))
            return [
                f"UPDATE evo SET {', '.join(f'{c.name} = {self.value(c)}' for c in sets)} WHERE id = {key}"
            ]
        if choice < 0.85:
            new = self.rng.choice([k for k in range(1, 25) if k not in self.live])
            self.live.discard(key)
            self.live.add(new)
            return [f"UPDATE evo SET id = {new} WHERE id = {key}"]
        self.live.discard(key)
        return [f"DELETE FROM evo WHERE id = {key}"]

    def alter(self) -> str:
        values = [c for c in self.columns if c.name != "id"]
        kind = self.rng.choice(["add", "drop", "rename", "widen"])
        if kind == "drop" and len(values) > 2:
            c = self.rng.choice(values)
            self.columns.remove(c)
            return f"ALTER TABLE evo DROP COLUMN {c.name}"
        if kind == "rename" and values:
            c = self.rng.choice(values)
            new = self.fresh()
            c.earlier.append(c.name)
            c.name = new
            return f"ALTER TABLE evo RENAME COLUMN {c.earlier[-1]} TO {new}"
        widenable = [c for c in values if c.type in WIDER]
        if kind == "widen" and widenable:
            c = self.rng.choice(widenable)
            c.type = WIDER[c.type]
            return f"ALTER TABLE evo ALTER COLUMN {c.name} TYPE {c.type}"
        c = Column(self.fresh(), "", self.rng.choice(["integer", "text", "numeric(10,2)", "smallint"]))
        self.columns.append(c)
        self.ever.append(c)
        return f"ALTER TABLE evo ADD COLUMN {c.name} {c.type}"


@dataclass
class Commit:
    xid: int
    state: dict[int, dict[str, Any]]  # id -> lake column name -> value
    rows: bool  # whether it changed rows (every row change hits a row): then it is in the stream


START = [("id", "integer"), ("a", "smallint"), ("b", "text"), ("m", "numeric(10,2)"), ("r", "real")]


def _create(db: PgDatabase) -> None:
    db.execute("CREATE TABLE evo (" + ", ".join(f"{n} {t}" for n, t in START) + ", PRIMARY KEY (id))")


def _run(db: PgDatabase, seed: int) -> tuple[list[Commit], Workload]:
    """Run the seed's workload on the table ``_create`` made (its captures started since)."""
    rng = random.Random(seed)
    w = Workload(rng, [Column(n, "", t) for n, t in START])
    w.ever = list(w.columns)
    scripts: list[list[str]] = []
    for _ in range(TRANSACTIONS):
        r = rng.random()
        if r < 0.15:
            scripts.append([w.alter()])
        elif r < 0.3:  # a schema change between row changes of one transaction
            scripts.append([*w.dml(), w.alter(), *w.dml()])
        else:
            scripts.append([s for _ in range(rng.randint(1, 3)) for s in w.dml()])
    names: dict[str, str] = {}  # any PostgreSQL name a column had -> its lake name (its last name)
    for c in w.ever:
        c.lake = c.name
        for old in [*c.earlier, c.name]:
            names[old] = c.lake
    commits = []
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        for script in scripts:
            conn.execute(b"BEGIN")
            xid = conn.execute(b"SELECT txid_current() % 4294967296").fetchone()
            assert xid is not None
            for statement in script:
                conn.execute(statement.encode())
            conn.execute(b"COMMIT")
            cur = conn.execute(b"SELECT * FROM evo")
            cols = [d.name for d in cur.description or []]
            state = {
                row[0]: {names.get(c, c): v for c, v in zip(cols, row, strict=True)} for row in cur.fetchall()
            }
            rows = any(not s.startswith("ALTER") for s in script)
            commits.append(Commit(int(xid[0]), state, rows))
    return commits, w


def _schema_file(folder: Path, w: Workload) -> None:
    lines = ["table: public.evo", "columns:"]
    for c in w.ever:
        if c.earlier:
            lines += [f"  - name: {c.lake}", f"    renamed_from: [{', '.join(c.earlier)}]"]
    folder.mkdir(exist_ok=True)
    (folder / "public.evo.yaml").write_text("\n".join(lines if len(lines) > 2 else lines[:1]) + "\n", "utf-8")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (Decimal, float, int)) and isinstance(b, (Decimal, float, int)) and a is not True:
        return Decimal(str(a)) == Decimal(str(b))
    return a == b


def _ingest_thirds(spark: SparkSession, txns: list[list[str]], folder: Path, fmt: str, schemas: Path) -> str:
    """Write whole transactions as three files, ingest them out of order (the last first); the lake."""
    third = -(-len(txns) // 3)
    files = []
    for i in range(0, len(txns), third):
        f = folder / f"{fmt}-{i}.json"
        write_lines(f, [line for t in txns[i : i + third] for line in t])
        files.append(str(f))
    lake = str(folder / f"lake-{fmt}")
    for f in [files[-1], *files[:-1]]:
        summary = ingest(spark, [f], lake, fmt, str(schemas))
        assert summary.quarantined == 0, f"{fmt}: {f} had {summary.quarantined} quarantined"
    return lake


def _commit_lsns(lines: list[str], fmt: str) -> dict[int, int]:
    """xid -> commit LSN, as the format's reader gives them to the lake."""
    parsed = read_lines((line.encode() for line in lines), fmt, Format(fmt))
    return {e.row["xid"]: e.row["commit_lsn"] for e in parsed if isinstance(e, Event)}


def _differences(spark: SparkSession, lake: str, commits: list[Commit], lsn_of: dict[int, int]) -> list[str]:
    """Where the lake's history as of each commit's LSN, or its snapshot, differs from PostgreSQL's."""
    history = [
        r.asDict() for r in spark.read.format("delta").load(history_path(lake, "public.evo")).collect()
    ]
    problems = []
    for n, commit in enumerate(commits):
        lsn = lsn_of.get(commit.xid)
        if lsn is None:  # a transaction of schema changes only: nothing in the stream
            problems += [f"commit #{n}: xid {commit.xid} changed rows but is not in the stream"] * commit.rows
            continue
        got = {r["id"]: r for r in history if r["__start_lsn"] <= lsn < r["__end_lsn"]}
        if set(got) != set(commit.state):
            problems.append(f"commit #{n}: keys {sorted(got)} != {sorted(commit.state)}")
            continue
        for key, row in commit.state.items():
            for col, value in row.items():
                if not _same(got[key].get(col, "<missing>"), value):
                    problems.append(f"commit #{n} id {key} {col}: lake {got[key].get(col)!r} != {value!r}")
    snapshot = spark.read.format("delta").load(snapshot_path(lake, "public.evo")).collect()
    snap = {r["id"]: r.asDict() for r in snapshot}
    final = commits[-1].state
    if set(snap) != set(final):
        return [*problems, f"snapshot: keys {sorted(snap)} != {sorted(final)}"]
    for key, row in final.items():
        problems += [f"snapshot id {key} {c}" for c, v in row.items() if not _same(snap[key].get(c), v)]
    return problems


def _formats(seed: int) -> tuple[str, ...]:
    """The wal2json formats a seed's capture is ingested in: one each, in turn (seed 1 format 2, seed 2
    format 1, ...), so CI's two seeds read both; ``EVO_BOTH_FORMATS=1`` reads every seed in both. A lake
    costs three ingests, and what differs between the formats is their reader, not the evolution."""
    both = ("wal2json-v2", "wal2json-v1")
    return both if os.environ.get("EVO_BOTH_FORMATS") == "1" else (both[(seed - 1) % 2],)


@pytest.mark.parametrize("seed", range(1, SEEDS + 1))
def test_history_follows_schema_changes_at_every_commit(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path, seed: int
) -> None:
    _create(pg_db)
    pg_db.create_slot("s")
    commits, w = _run(pg_db, seed)
    schemas = tmp_path / "schemas"
    _schema_file(schemas, w)
    for fmt in _formats(seed):
        lines = pg_db.capture("s", int(fmt[-1]))
        txns: list[list[str]] = []
        for line in lines:
            if fmt == "wal2json-v1" or '"action":"B"' in line:
                txns.append([])
            txns[-1].append(line)
        lake = _ingest_thirds(spark, txns, tmp_path, fmt, schemas)
        problems = _differences(spark, lake, commits, _commit_lsns(lines, fmt))
        assert not problems, f"seed {seed}, {fmt}:\n" + "\n".join(problems[:20])


@pytest.mark.parametrize("seed", range(1, DEBEZIUM_SEEDS + 1))
def test_history_from_debezium_follows_schema_changes_at_every_commit(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path, seed: int
) -> None:
    _create(pg_db)
    with DebeziumCapture(pg_db.dsn, tmp_path / "capture.jsonl", ["public.evo"], extra=SETTINGS) as capture:
        capture.sync()  # the marker's transaction streams first: every workload one has a previous commit
        commits, w = _run(pg_db, seed)
        capture.sync()
        records = [r for r in capture.lines() if r["topic"] != MARKER_TOPIC]
    schemas = tmp_path / "schemas"
    _schema_file(schemas, w)
    lines = [json.dumps(r) for r in records]
    txns: list[list[str]] = []  # by source.txId; tombstones and transaction records go with the one before
    current = None
    for line, record in zip(lines, records, strict=True):
        txid = ((payload(record["value"]) or {}).get("source") or {}).get("txId")
        if not txns or txid not in (None, current) and current is not None:
            txns.append([])
        current = current if txid is None else txid
        txns[-1].append(line)
    lake = _ingest_thirds(spark, txns, tmp_path, "debezium-json", schemas)
    problems = _differences(spark, lake, commits, _commit_lsns(lines, "debezium-json"))
    assert not problems, f"seed {seed}, Debezium:\n" + "\n".join(problems[:20])
