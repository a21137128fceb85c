"""Quarantine reasons the policies give (``resolver.config.policy``): events of unknown tables, of unknown
columns, and carrying a type their lake column cannot widen to, as Spark expressions."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from resolver.config.policy import Policies, Policy
from resolver.config.tableschema import TableSchema
from resolver.errors import ConfigError
from resolver.plan.tablemeta import TableMeta
from resolver.tablelayout import TableLayout


def _event_text(table: str) -> Column:
    """'<table> <operation> at commit LSN X/Y, change N of its transaction' for a quarantine reason."""
    lsn = F.col("commit_lsn")
    hexed = F.concat(
        F.hex(F.shiftrightunsigned(lsn, 32)), F.lit("/"), F.hex(lsn.bitwiseAND(F.lit(0xFFFFFFFF)))
    )
    return F.concat(
        F.lit(f"{table} "),
        F.col("operation"),
        F.lit(" at commit LSN "),
        F.coalesce(hexed, F.lit("unknown")),
        F.lit(", change "),
        F.col("position").cast("string"),
        F.lit(" of its transaction"),
    )


def _carries(names: list[str]) -> Column:
    """The event carries one of these columns (new values or old key)."""
    wanted = F.array(*[F.lit(n) for n in names])
    return F.arrays_overlap(F.coalesce("column_names", F.array().cast("array<string>")), wanted) | (
        F.arrays_overlap(F.coalesce("old_key_names", F.array().cast("array<string>")), wanted)
    )


def unknown_reasons(
    meta: dict[str, TableMeta],
    schemas: Mapping[str, TableSchema] | None,
    policies: Policies,
    failed: dict[str, str] | None,
) -> list[Column]:
    """Quarantine reasons (Spark expressions, NULL for an event they do not catch) for unknown tables and
    columns; raises ``ConfigError`` for one a ``fail`` policy refuses (or, given ``failed``, records it
    there)."""
    if schemas is None:
        return []
    reasons: list[Column] = []
    for table in sorted(meta):
        try:
            reasons += _unknown_in(table, meta[table], schemas.get(table), policies)
        except ConfigError as e:
            if failed is None:
                raise
            failed[table] = str(e)
    return reasons


def _unknown_in(table: str, meta: TableMeta, schema: TableSchema | None, policies: Policies) -> list[Column]:
    """The quarantine reasons of one table (see ``unknown_reasons``)."""
    if schema is None:
        if policies.unknown_table == Policy.FAIL:
            raise ConfigError(
                f"table {table} has no schema file: found {meta.events + meta.skipped} event(s), the "
                f"first at {meta.where_first()}, expected {table}.yaml in the schemas folder "
                "(unknown_table is 'fail'; nothing was written)"
            )
        if policies.unknown_table == Policy.QUARANTINE:
            why = f": table {table} has no schema file (unknown_table: quarantine)"
            return [F.when(F.col("table") == table, F.concat(_event_text(table), F.lit(why)))]
        return []
    known = schema.known_columns()
    policy = schema.unknown_columns or policies.unknown_columns
    if known is None or policy == Policy.EVOLVE:
        return []
    unknown = [c for c in sorted(set(meta.columns) | set(meta.old_keys)) if c not in known]
    if unknown and policy == Policy.FAIL:
        raise ConfigError(
            f"table {table}: column {unknown[0]} is not in {table}.yaml, first at "
            f"{meta.where_first(unknown[0])}; "
            f"expected one of {', '.join(sorted(known))} "
            "(add it to the file's columns, or a renamed_from; "
            "unknown_columns is 'fail'; nothing was written)"
        )
    return [
        F.when(
            (F.col("table") == table) & _carries([column]),
            F.concat(
                _event_text(table),
                F.lit(f": column {column} is not in {table}.yaml (unknown_columns: quarantine)"),
            ),
        )
        for column in unknown
    ]


def _typed_columns() -> Column:
    """Each column an event carries as 'name\u0001PostgreSQL type' (new values and old key)."""
    empty = F.array().cast("array<string>")
    names = F.concat(F.coalesce("column_names", empty), F.coalesce("old_key_names", empty))
    types = F.concat(F.coalesce("column_types", empty), F.coalesce("old_key_types", empty))
    return F.zip_with(names, types, lambda n, t: F.concat(n, F.lit("\u0001"), F.coalesce(t, F.lit(""))))


def unsafe_reasons(
    layouts: dict[str, TableLayout | None], schemas: Mapping[str, TableSchema]
) -> list[Column]:
    """Quarantine reasons for the events carrying a type their lake column cannot widen to."""
    reasons: list[Column] = []
    for table, layout in sorted(layouts.items()):
        for column, pg_type, lake_type in layout.rejected if layout else ():
            hit = F.array_contains(_typed_columns(), F.lit(column + "\u0001" + (pg_type or "")))
            reasons.append(
                F.when(
                    (F.col("table") == table) & hit,
                    F.concat(
                        _event_text(table),
                        F.lit(
                            f": column {column} has type {pg_type}, which its lake column ({lake_type}) "
                            "cannot be widened to (unsafe_type_change: quarantine)"
                        ),
                    ),
                )
            )
    return reasons
