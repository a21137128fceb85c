"""How the lake chooses a table's key from what batches report (``resolver.batch.silver``, docs/silver.md
"Key").

Pure functions, no Spark: the evidence a batch gives, and how the lake's key evolves with it. The rule that
makes delivery order irrelevant: evidence only accumulates (no key -> index identity -> FULL identity).
"""

from __future__ import annotations

from typing import Any

import pytest

from resolver.config.tableschema import TableSchema
from resolver.errors import ConfigError
from resolver.plan.keys import evolve_key, reported_key
from resolver.plan.tablemeta import TableMeta

NAMES = ["rid", "msg", "amt"]


def meta(pks: list[list[str]] | None = None, identities: list[list[str]] | None = None) -> TableMeta:
    return TableMeta("t", pks=pks or [], identities=identities or [])


def props(key: list[str], source: str) -> dict[str, str]:
    return {"resolver.key": str(key).replace("'", '"'), "resolver.keySource": source}


@pytest.mark.parametrize(
    ("identities", "expected"),
    [
        ([], None),
        ([["rid", "amt"]], (("rid", "amt"), "identity")),  # an index identity, or FULL with msg NULL
        ([["rid", "amt"], ["rid", "msg", "amt"]], (("rid", "msg", "amt"), "identity_full")),
        ([["amt", "rid", "msg"]], (("rid", "msg", "amt"), "identity_full")),
        ([["rid"]], (("rid",), "identity")),
    ],
)
def test_the_identity_a_batch_reports(identities: list[list[str]], expected: Any) -> None:
    assert reported_key(meta(identities=identities), None, {}, NAMES) == expected


def test_a_schema_file_and_a_primary_key_come_before_the_identity() -> None:
    pinned = TableSchema.model_validate({"table": "public.logs", "primary_key": ["rid"]})
    both = meta([["amt"]], [["rid", "msg", "amt"]])
    assert reported_key(both, pinned, {}, NAMES) == (("rid",), "schema_file")
    assert reported_key(both, None, {}, NAMES) == (("amt",), "primary_key")
    assert reported_key(meta([["old"]]), None, {"old": "amt"}, NAMES) == (("amt",), "primary_key")


@pytest.mark.parametrize(
    ("lake", "reported", "expected"),
    [
        # no key yet (inserts only) -> the first identity seen
        ((["rid", "msg", "amt"], "all_columns"), None, (("rid", "msg", "amt"), "all_columns")),
        ((["rid", "msg", "amt"], "all_columns"), (("rid",), "identity"), (("rid",), "identity")),
        # an index identity never changes, so another one proves FULL
        ((["rid", "amt"], "identity"), (("rid", "amt"), "identity"), (("rid", "amt"), "identity")),
        ((["rid", "amt"], "identity"), (("rid", "msg"), "identity"), (tuple(NAMES), "identity_full")),
        ((["rid", "amt"], "identity"), (tuple(NAMES), "identity_full"), (tuple(NAMES), "identity_full")),
        # FULL stays FULL, whatever subset of the row a later batch sends
        ((NAMES, "identity_full"), (("rid", "amt"), "identity"), (tuple(NAMES), "identity_full")),
        ((NAMES, "identity_full"), None, (tuple(NAMES), "identity_full")),
        # a primary key is never overridden by an identity, and confirms an equal one
        ((["rid"], "primary_key"), (tuple(NAMES), "identity_full"), (("rid",), "primary_key")),
        ((["rid"], "identity"), (("rid",), "primary_key"), (("rid",), "primary_key")),
        # a pinned key wins
        ((["rid"], "schema_file"), (("amt",), "primary_key"), (("rid",), "schema_file")),
        ((["rid"], "primary_key"), (("amt",), "schema_file"), (("amt",), "schema_file")),
    ],
)
def test_the_lake_key_only_gains_evidence(lake: Any, reported: Any, expected: Any) -> None:
    assert evolve_key("public.logs", tuple(lake[0]), props(*lake), reported, NAMES) == expected


def test_both_orders_of_two_batches_end_with_the_same_key() -> None:
    index_like, full = (("rid", "amt"), "identity"), (tuple(NAMES), "identity_full")
    first = evolve_key("t", ("rid", "amt"), props(["rid", "amt"], "identity"), full, NAMES)
    second = evolve_key("t", tuple(NAMES), props(NAMES, "identity_full"), index_like, NAMES)
    assert first == second == (tuple(NAMES), "identity_full")


@pytest.mark.parametrize(
    ("lake", "reported", "message"),
    [
        (
            (["rid"], "primary_key"),
            (("amt",), "primary_key"),
            "table public.logs: the stream reports key ['amt'] but the lake was created with key ['rid']; "
            "pin primary_key in public.logs.yaml",
        ),
        (
            (NAMES, "identity_full"),
            (("rid",), "primary_key"),
            "table public.logs: the stream now reports primary key ['rid'] but the lake was created without "
            "one (every column is its key); pin primary_key in public.logs.yaml",
        ),
    ],
)
def test_a_key_no_evidence_explains_fails_with_one_line(lake: Any, reported: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        evolve_key("public.logs", tuple(lake[0]), props(*lake), reported, NAMES)
    assert str(err.value) == message
