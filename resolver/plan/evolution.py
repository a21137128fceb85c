"""Column type changes between the stream and the lake (docs/schema-evolution.md). No Spark here.
 PostgreSQL says nothing about ``ALTER COLUMN ... TYPE`` in the stream: the events just start carrying another
type name. Each type the batch carries for a column is mapped to Spark (``resolver.pgtypes``) and compared
with the lake column's type:

* the same type: nothing to do;
* a *safe widening* of the lake type (every old value is exactly a value of the new type, and Delta can
  widen the column in place without rewriting files; ``WIDENINGS``): the lake column is widened;
* a narrower type the lake type already holds exactly (events older than a widening, delivered late):
  the values are cast up, nothing changes;
* anything else is *unsafe* (``text -> integer``, a numeric scale that shrinks, ``integer -> text``, which
  Delta cannot widen in place): the table's ``unsafe_type_change`` policy decides
  (``resolver.config.policy.Policy``: fail the batch before anything is written, or quarantine the events).
 Whether two types are compatible does not depend on which one arrives first, so the lake's final type is
the widest one of the events delivered, in any order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from resolver.config.policy import Policy
from resolver.errors import ConfigError
from resolver.lsn import format_lsn

__all__ = ["TypeChange", "evolve_type", "widens"]

_INTEGERS = ["tinyint", "smallint", "int", "bigint"]
_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t.replace(" ", ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def widens(old: str, new: str) -> bool:
    """Whether a Delta column of Spark type ``old`` can be widened in place to ``new`` with every value
    kept exactly (Delta 4.0 type widening, restricted to lossless changes)."""
    old, new = old.replace(" ", ""), new.replace(" ", "")
    if old == new:
        return True
    if old in _INTEGERS and new in _INTEGERS:
        return _INTEGERS.index(old) <= _INTEGERS.index(new)
    if old in ("tinyint", "smallint", "int") and new == "double":
        return True  # at most 10 digits: exact in a double
    if old == "float" and new == "double":
        return True
    if old == "date" and new == "timestamp_ntz":
        return True
    to = _decimal(new)
    if to is None:
        return False
    if old in _DIGITS:  # integer -> decimal(p, s) with room for every value
        return to[0] - to[1] >= _DIGITS[old]
    frm = _decimal(old)
    return frm is not None and to[1] >= frm[1] and to[0] - to[1] >= frm[0] - frm[1]


@dataclass(frozen=True)
class TypeChange:
    """A column whose lake type is widened by this batch, from the event at ``lsn`` on."""

    table: str
    column: str
    old_type: str
    new_type: str
    lsn: int | None
    pg_type: str | None = None


def evolve_type(
    table: str,
    column: str,
    lake_type: str,
    lake_pg_type: str | None,
    incoming: list[tuple[str, str | None, int | None, str, int]],
    policy: Policy = Policy.FAIL,
) -> tuple[str, list[TypeChange], list[tuple[str, str | None]]]:
    """The column's lake type after this batch, the changes to make, and the (Spark type, PostgreSQL type)
    pairs whose events are quarantined.

    ``incoming`` lists each type the batch carries for the column as (Spark type, PostgreSQL type, first
    commit LSN, file, line), in LSN order. Raises ``ConfigError`` for an unsafe change under ``fail``."""
    current = lake_type
    changes: list[TypeChange] = []
    rejected: list[tuple[str, str | None]] = []
    for spark_t, pg_t, lsn, file, line in incoming:
        if widens(spark_t, current):
            continue  # the same, or narrower: the lake already holds these values exactly
        if widens(current, spark_t):
            changes.append(TypeChange(table, column, current, spark_t, lsn, pg_t))
            current = spark_t
            continue
        if policy == Policy.QUARANTINE:
            rejected.append((spark_t, pg_t))
            continue
        was = f"{current}" + (f" (PostgreSQL {lake_pg_type})" if lake_pg_type else "")
        at = format_lsn(lsn) if lsn is not None else "unknown"
        raise ConfigError(
            f"table {table}: column {column} changes type from {was} to {spark_t} (PostgreSQL {pg_t}) at "
            f"commit LSN {at} ({file}:{line}), which is not a safe widening; nothing was written. "
            f"Pin the column's type in {table}.yaml (columns: - name: {column}, type: ...) to keep it"
        )
    return current, changes, rejected
