"""What a batch does with events its tables' schema files did not foresee (docs/schema-evolution.md).
 Three situations, one enum of answers:

* an **unknown table**: a table with no schema file, when a schemas folder is given
  (``Policies.unknown_table``, set for the whole run);
* an **unknown column**: a column a table's schema file does not list, by name or ``renamed_from``
  (``unknown_columns``, per table or for the run; a file without a ``columns`` list accepts every column);
* an **unsafe type change**: a column type the lake cannot widen its column to (``unsafe_type_change``,
  per table or for the run; ``resolver.plan.evolution``).

Each decision depends only on the event and the schema files, never on what was delivered before, so the
lake stays a function of the set of events delivered (the one exception is documented at
``Policy.QUARANTINE``). This module does not import Spark.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, field_validator

from resolver.models import ResolverModel

__all__ = ["Policies", "Policy"]


class Policy(StrEnum):
    """What to do with events a table's schema file did not foresee."""

    EVOLVE = "evolve"
    """Take them: an unknown table is created from its events, an unknown column is added to the lake
    (NULL in earlier versions). Not accepted for ``unsafe_type_change``: the only way to take a type the
    lake cannot widen to would be a cast that loses values."""
    FAIL = "fail"
    """Refuse the whole batch before anything is written (bronze, quarantine and every table stay as they
    were), with one line naming the table, the column, what was found and where (file:line and commit
    LSN). Fix the schema file, or the policy, and run the batch again."""
    QUARANTINE = "quarantine"
    """Send each such change event whole to the ``quarantine`` table (its JSON in ``raw``, with the file,
    line and the reason) and apply the rest of the batch. Nothing of it reaches bronze or silver; after
    fixing the schema file, re-ingest the files the quarantine names. For unsafe type changes, "unsafe" is
    judged against the lake column's type when the event arrives: if events of the two types are delivered
    out of order, the side delivered later is the one quarantined."""


class Policies(ResolverModel):
    """The policies of a run (``ingest(..., options=BatchOptions(policies=...))``, ``resolver ingest
    --unknown-tables ...``). A table's schema file overrides ``unknown_columns`` and ``unsafe_type_change``
    for its table."""

    unknown_table: Policy = Field(
        default=Policy.EVOLVE,
        description="A table without a schema file (only when a schemas folder is given)",
    )
    unknown_columns: Policy = Field(
        default=Policy.EVOLVE, description="A column the table's schema file does not list"
    )
    unsafe_type_change: Policy = Field(
        default=Policy.FAIL, description="A type the lake column cannot widen to"
    )

    @field_validator("unsafe_type_change")
    @classmethod
    def _no_lossy_evolve(cls, value: Policy) -> Policy:
        return check_unsafe_type_policy(value)


def check_unsafe_type_policy(value: Policy) -> Policy:
    if value == Policy.EVOLVE:
        raise ValueError(
            "found 'evolve', expected 'fail' or 'quarantine': a type the lake cannot widen to cannot be "
            "taken without a lossy cast (pin the column's type in the schema file to cast on purpose)"
        )
    return value
