"""The database ``resolver capture`` reads: its connections, what it must allow before a slot is made, the
tables it holds and their locks while they are copied. Every refusal is one line saying what was found and
what is expected (docs/capture.md, "Requirements"). Needs psycopg 3 (the ``[capture]`` extra), no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from resolver.capture.records import SnapshotColumn, SnapshotTable, streamed_type
from resolver.errors import ConfigError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SESSION_SETTINGS",
    "check_source",
    "connect",
    "lock_tables",
    "replication_refused",
    "slot_error",
    "source_tables",
    "SYSTEM_SCHEMAS",
]

#: The settings of every session that prints values (the snapshot's copy and the slot's decoding): the
#: README's PGOPTIONS, so copied and streamed values print the same text.
SESSION_SETTINGS = {
    "DateStyle": "ISO",
    "TimeZone": "UTC",
    "extra_float_digits": "1",
    "bytea_output": "hex",
    "IntervalStyle": "postgres",
}
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")
#: what a replication slot's name may be, and the words that say so


def connect(dsn: str) -> psycopg.Connection[Any]:
    """An autocommit connection with ``SESSION_SETTINGS``; one line when psycopg is missing or the database
    cannot be reached."""
    try:
        import psycopg
    except ImportError:
        raise ConfigError(
            "psycopg is not installed: expected it for resolver capture "
            "(pip install 'pg-change-resolver[capture]')"
        ) from None
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as exc:
        found = " ".join(str(exc).split())
        raise ConfigError(
            f"could not connect to the database ({found}): expected a reachable --dsn"
        ) from None
    for name, value in SESSION_SETTINGS.items():
        conn.execute(f"SET {name} = '{value}'".encode())
    return conn


def check_source(conn: psycopg.Connection[Any]) -> None:
    """What logical decoding needs of the server and the role, checked before a slot is made or read:
    ``wal_level`` logical, and a role with REPLICATION (or a superuser)."""
    level = str(conn.execute("SHOW wal_level").fetchone()[0])  # type: ignore[index]
    if level != "logical":
        raise ConfigError(
            f"the database's wal_level is {level}: expected logical for resolver capture "
            "(ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL)"
        )
    role, allowed = conn.execute(
        "SELECT rolname, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user"
    ).fetchone()  # type: ignore[misc]
    if not allowed:
        raise ConfigError(
            f"role {role} has no REPLICATION privilege: expected it to create and read a replication slot "
            f"(ALTER ROLE {role} REPLICATION)"
        )


def replication_refused(error: Exception) -> ConfigError:
    """A replication connection (the snapshot's slot is created over one, a running capture streams over
    one) the server refused: the one line that says why."""
    found = " ".join(str(error).split())
    return ConfigError(
        f"could not open a replication connection ({found}): expected a free WAL sender on the server "
        "(max_wal_senders) for a role with REPLICATION"
    )


def slot_error(slot: str, message: str) -> ConfigError:
    """Creating the slot failed with the server's ``message``: the one line that says why."""
    found = " ".join(message.replace("ERROR:", "").split())
    if "wal2json" in found and ("could not access file" in found or "could not load library" in found):
        return ConfigError(
            f"the server has no wal2json output plugin ({found}): expected wal2json installed where "
            "PostgreSQL loads libraries (Debian: apt install postgresql-15-wal2json)"
        )
    return ConfigError(f"could not create the replication slot {slot}: {found}")


def source_tables(conn: psycopg.Connection[Any], roots: bool = True) -> list[SnapshotTable]:
    """Every ordinary table outside the system schemas, with its columns and primary key, read in the
    connection's snapshot. With ``roots`` (the default), a partitioned table is one table named for its
    root, holding its leaf partitions (every level down; ``SnapshotTable.leaves``), and no partition is a
    table of its own; without it, each leaf partition is a table of its own, as wal2json names them, and
    a partitioned table holds no rows of its own to copy."""
    kinds = "c.relkind IN ('r', 'p') AND NOT c.relispartition" if roots else "c.relkind = 'r'"
    found = conn.execute(
        "SELECT c.oid, n.nspname, c.relname, c.relkind::text FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE {kinds} AND c.relpersistence = 'p' AND n.nspname <> ALL(%s) "
        "AND n.nspname NOT LIKE 'pg\\_%%' ORDER BY n.nspname, c.relname",
        (list(SYSTEM_SCHEMAS),),
    ).fetchall()
    tables = []
    for oid, schema, name, kind in found:
        columns = tuple(
            SnapshotColumn(n, streamed_type(t), oid)
            for n, t, oid in conn.execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid::int FROM pg_attribute a "
                "WHERE a.attrelid = %s AND a.attnum > 0 "
                "AND NOT a.attisdropped ORDER BY a.attnum",
                (oid,),
            ).fetchall()
        )
        keys = [
            str(r[0])
            for r in conn.execute(
                "SELECT a.attname FROM pg_index i "
                "JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(n, o) ON true "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n "
                "WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.o",
                (oid,),
            ).fetchall()
        ]
        leaves: tuple[tuple[str, str], ...] = ()
        if kind == "p":  # the partitions that hold its rows (ordinary tables: not foreign ones)
            leaves = tuple(
                (str(s), str(n))
                for s, n in conn.execute(
                    "SELECT n.nspname, c.relname FROM pg_partition_tree(%s::regclass) t "
                    "JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE t.isleaf AND c.relkind = 'r' ORDER BY n.nspname, c.relname",
                    (oid,),
                ).fetchall()
            )
        by_name = {c.name: c for c in columns}
        tables.append(
            SnapshotTable(schema, name, columns, tuple(by_name[k] for k in keys), leaves, kind == "p")
        )
    return tables


def lock_tables(conn: psycopg.Connection[Any], tables: Sequence[SnapshotTable]) -> None:
    """Hold ``ACCESS SHARE`` on every table to copy until the copy's transaction ends (as ``pg_dump`` does):
    a ``DROP`` or a rewriting ``ALTER`` then waits for the copy instead of breaking it; a partitioned table
    is locked with its partitions (a ``DETACH`` or ``DROP`` of one waits too). A table dropped between the
    snapshot and this lock is one line (the next capture takes a snapshot without it)."""
    import psycopg
    from psycopg import sql

    for table in tables:
        lock = (
            "LOCK TABLE {}.{} IN ACCESS SHARE MODE"
            if table.partitioned
            else ("LOCK TABLE ONLY {}.{} IN ACCESS SHARE MODE")
        )
        statement = sql.SQL(lock).format(sql.Identifier(table.schema), sql.Identifier(table.name))
        try:
            conn.execute(statement)
        except psycopg.errors.UndefinedTable:
            raise ConfigError(
                f"table {table.qualified} was dropped while its snapshot was being taken: expected the "
                "captured tables to stay while they are copied (capture again: a new snapshot leaves it out)"
            ) from None
