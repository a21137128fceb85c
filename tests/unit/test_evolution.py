"""Column type changes: which are safe widenings, and the one-line refusal of the others (no Spark)."""

from __future__ import annotations

import pytest

from resolver.config.policy import Policy
from resolver.errors import ConfigError
from resolver.pgtypes import spark_type
from resolver.plan.evolution import evolve_type, widens


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("smallint", "integer"),
        ("integer", "bigint"),
        ("smallint", "bigint"),
        ("integer", "numeric(12,2)"),
        ("bigint", "numeric(20,0)"),
        ("numeric(10,2)", "numeric(12,4)"),
        ("numeric(10,2)", "numeric(11,2)"),
        ("real", "double precision"),
        ("integer", "double precision"),
        ("date", "timestamp without time zone"),
        ("character varying(10)", "character varying(200)"),  # both text in the lake
        ("character varying(10)", "text"),
    ],
)
def test_safe_widenings(old: str, new: str) -> None:
    assert widens(spark_type(old), spark_type(new))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("bigint", "integer"),  # narrowing
        ("text", "integer"),
        ("integer", "text"),  # lossless, but Delta cannot widen int to string in place
        ("numeric(10,4)", "numeric(10,2)"),  # scale shrinks
        ("numeric(12,4)", "numeric(12,5)"),  # one fewer integer digit
        ("integer", "numeric(9,0)"),  # 2147483647 has 10 digits
        ("bigint", "double precision"),  # 2^63-1 is not exact in a double
        ("double precision", "real"),
        ("timestamp without time zone", "timestamp with time zone"),  # no zone rule is safe in place
        ("numeric(12,2)", "numeric"),  # unconstrained numeric is text in the lake
    ],
)
def test_unsafe_changes(old: str, new: str) -> None:
    assert not widens(spark_type(old), spark_type(new))


def test_the_lake_type_is_the_widest_whatever_the_order() -> None:
    seen = [("int", "integer", 100, "a.json", 1), ("bigint", "bigint", 200, "a.json", 9)]
    forward, changes, _ = evolve_type("public.t", "n", "smallint", "smallint", seen)
    assert forward == "bigint" and [(c.old_type, c.new_type, c.lsn) for c in changes] == [
        ("smallint", "int", 100),
        ("int", "bigint", 200),
    ]
    backward, changes, _ = evolve_type(
        "public.t", "n", "bigint", None, [("smallint", "smallint", 50, "b", 1)]
    )
    assert backward == "bigint" and changes == []


def test_an_unsafe_change_fails_with_one_line() -> None:
    incoming = [("int", "integer", (0x16 << 32) | 0xB374D848, "landing/0003.json", 17)]
    with pytest.raises(ConfigError) as err:
        evolve_type("public.orders", "code", "string", "text", incoming)
    assert str(err.value) == (
        "table public.orders: column code changes type from string (PostgreSQL text) to int (PostgreSQL "
        "integer) at commit LSN 16/B374D848 (landing/0003.json:17), which is not a safe widening; nothing "
        "was written. Pin the column's type in public.orders.yaml (columns: - name: code, type: ...) "
        "to keep it"
    )


def test_an_unsafe_change_under_quarantine_keeps_the_lake_type_and_names_the_type_refused() -> None:
    incoming = [("int", "integer", 10, "a", 1), ("bigint", "bigint", 20, "b", 2)]
    typ, changes, refused = evolve_type("public.t", "code", "string", "text", incoming, Policy.QUARANTINE)
    assert (typ, changes, refused) == ("string", [], [("int", "integer"), ("bigint", "bigint")])
    wider, changes, refused = evolve_type(
        "public.t",
        "n",
        "int",
        None,
        [("bigint", "bigint", 5, "a", 1), ("string", "text", 9, "a", 2)],
        Policy.QUARANTINE,
    )
    assert (wider, [c.new_type for c in changes], refused) == ("bigint", ["bigint"], [("string", "text")])
