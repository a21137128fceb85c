"""Names from the stream are data: tables and columns that PostgreSQL accepts but that look like paths, SQL
or the lake's own suffixes are resolved like any other, each in its own folder inside the lake, and
nothing is written outside it. Checked against a real PostgreSQL 15 + wal2json, in two delivery orders."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.cli.main import main
from resolver.formats.names import qualified
from resolver.lake import folders as lake_layout
from resolver.spark import sql
from tests.harness.postgres import PgDatabase, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

UNICODE_63 = "ñ" * 31 + "t"  # 63 bytes: PostgreSQL's longest identifier

#: (schema, table, key column, value column): each one stopped the pipeline before names were data.
TABLES = [
    ("public", "x/../../../../tmp/resolver-escape", "id", "v"),
    ("public", "orders", "id", "v"),
    ("public", "orders__history", "id", "w"),
    ("public", 'we`ird"q', "id", "we`ird col"),
    ("public", "Mixed Case Spaces", "Key Id", "Some Value"),
    ("a.b", "c", "id", "v"),
    ("a", "b.c", "id", "x.y"),
    ("public", UNICODE_63, "id", "Ünïcödé"),
]


def _pg(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(schema: str, table: str) -> str:
    return f"{_pg(schema)}.{_pg(table)}"


def _workload(rng: random.Random, rounds: int, live: dict[int, set[int]]) -> list[str]:
    """Transactions over every table: inserts, updates, key changes and deletes (``live``: the keys each
    table holds, updated)."""
    next_id = 1 + max((k for ids in live.values() for k in ids), default=0) + rng.randrange(100)
    txns = []
    for _ in range(rounds):
        stmts = []
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(TABLES))
            schema, table, key, value = TABLES[i]
            name, ids = _table(schema, table), live[i]
            op = rng.choice(["insert", "insert", "update", "rekey", "delete"]) if ids else "insert"
            if op == "insert":
                stmts.append(
                    f"INSERT INTO {name} ({_pg(key)}, {_pg(value)}) VALUES ({next_id}, 'v{next_id}')"
                )
                ids.add(next_id)
                next_id += 1
            elif op == "update":
                k = rng.choice(sorted(ids))
                stmts.append(
                    f"UPDATE {name} SET {_pg(value)} = 'u{rng.randrange(1000)}' WHERE {_pg(key)} = {k}"
                )
            elif op == "rekey":
                k = rng.choice(sorted(ids))
                stmts.append(f"UPDATE {name} SET {_pg(key)} = {next_id} WHERE {_pg(key)} = {k}")
                ids.discard(k)
                ids.add(next_id)
                next_id += 1
            else:
                k = rng.choice(sorted(ids))
                stmts.append(f"DELETE FROM {name} WHERE {_pg(key)} = {k}")
                ids.discard(k)
        txns.append("BEGIN;\n" + ";\n".join(stmts) + ";\nCOMMIT;")
    return txns


def _files_outside(root: Path, lakes: tuple[Path, ...]) -> set[str]:
    """Every file under root that is not inside one of the lakes."""
    return {
        os.path.join(d, f)
        for d, _, files in os.walk(root)
        if not any(Path(d).is_relative_to(lake) for lake in lakes)
        for f in files
    }


def _lake_rows(spark: SparkSession, lake: Path, schema: str, table: str) -> list[tuple[int, str | None]]:
    _, _, key, value = next(t for t in TABLES if t[:2] == (schema, table))
    path = lake_layout.snapshot_path(str(lake), qualified(schema, table))
    df = spark.read.format("delta").load(path)
    return sorted(tuple(r) for r in df.select(sql.col(key), sql.col(value)).collect())


def test_tables_with_hostile_names_match_postgresql_in_any_order(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    for schema in {s for s, *_ in TABLES} - {"public"}:
        pg_db.execute(f"CREATE SCHEMA {_pg(schema)}")
    for schema, table, key, value in TABLES:
        pg_db.execute(f"CREATE TABLE {_table(schema, table)} ({_pg(key)} int PRIMARY KEY, {_pg(value)} text)")
    assert pg_db.query(f"SELECT octet_length(relname) FROM pg_class WHERE relname = '{UNICODE_63}'") == [
        (63,)
    ]
    pg_db.create_slot("s")
    rng = random.Random(14)
    files, states = [], []
    live: dict[int, set[int]] = {i: set() for i in range(len(TABLES))}
    for batch, fmt in ((1, 2), (2, 1)):  # one file of each format; the format is detected
        for txn in _workload(rng, 12, live):
            pg_db.execute(txn)
        path = tmp_path / "in" / f"{batch}.json"
        path.parent.mkdir(exist_ok=True)
        write_lines(path, pg_db.capture("s", fmt, consume=True))
        files.append(path)
        states.append(
            {
                (s, t): sorted(pg_db.query(f"SELECT {_pg(k)}, {_pg(v)} FROM {_table(s, t)}"))
                for s, t, k, v in TABLES
            }
        )
    assert all(states[-1].values()), "every table ends with rows"

    escape = Path("/tmp/resolver-escape")
    lakes = (tmp_path / "lake-in-order", tmp_path / "lake-reversed")
    around = sorted(os.listdir(tmp_path.parent))
    outside = _files_outside(tmp_path, lakes)
    for lake, order in zip(lakes, ([0, 1], [1, 0]), strict=True):
        for step, i in enumerate(order):
            assert main(["--debug", "ingest", str(files[i]), "--lake", str(lake)]) == 0
            if order == [0, 1]:  # after every batch, the lake is the database at that point
                for schema, table, *_ in TABLES:
                    got = _lake_rows(spark, lake, schema, table)
                    assert got == states[step][(schema, table)], (lake.name, step, qualified(schema, table))
        for schema, table, *_ in TABLES:
            assert _lake_rows(spark, lake, schema, table) == states[-1][(schema, table)], (lake.name, table)
        folders = sorted(os.listdir(lake / "silver"))
        assert len(folders) == 2 * len(TABLES), folders

    assert not escape.exists()
    assert sorted(os.listdir(tmp_path.parent)) == around
    assert _files_outside(tmp_path, lakes) == outside

    # the commands name a table the way PostgreSQL does
    lake = str(lakes[0])
    picked = [(s, t) for s, t, *_ in TABLES if "." in s + t or " " in t]
    assert main(["optimize", "--lake", lake, "--table", *[qualified(s, t) for s, t in picked]]) == 0
    for schema, table, key, value in TABLES:
        assert _lake_rows(spark, lakes[0], schema, table) == states[-1][(schema, table)], ("optimized", table)
        out = tmp_path / "as-of" / lake_layout.folder(qualified(schema, table))
        argv = ["as-of", "--lake", lake, "--table", qualified(schema, table), "--lsn", str(2**62)]
        assert main([*argv, "--out", str(out)]) == 0
        got = spark.read.parquet(str(out)).select(sql.col(key), sql.col(value)).collect()
        assert sorted(tuple(r) for r in got) == states[-1][(schema, table)], ("as-of", table)
