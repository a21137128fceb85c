"""Per-table schema files and the PostgreSQL -> Spark type mapping (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resolver.config.tableschema import load_schemas, parse_schema
from resolver.errors import ConfigError
from resolver.pgtypes import spark_type

GOOD = """
table: public.customers
primary_key: [id]
columns:
  - name: mail
    type: string
    renamed_from: [email]
  - name: balance
    type: decimal(12,2)
"""


def test_the_design_doc_example_parses() -> None:
    schema = parse_schema(GOOD)
    assert schema.table == "public.customers" and schema.primary_key == ["id"]
    assert schema.rename_map() == {"email": "mail"}
    assert [c.type for c in schema.columns] == ["string", "decimal(12,2)"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD.replace("renamed_from", "renamed_form"),
            "s.yaml: columns[0].renamed_form: unknown key 'renamed_form' (did you mean 'renamed_from'?)",
        ),
        (
            GOOD.replace("primary_key", "primary_keys"),
            "s.yaml: primary_keys: unknown key 'primary_keys' (did you mean 'primary_key'?)",
        ),
        (
            GOOD.replace("type: string", "type: strng"),
            "s.yaml: columns[0].type: found 'strng', expected a Spark SQL type such as string, bigint, "
            "decimal(12,2), timestamp, array<int> (did you mean 'string'?)",
        ),
        (
            GOOD.replace("decimal(12,2)", "decimal(60,2)"),
            "s.yaml: columns[1].type: found 'decimal(60,2)': decimal precision must be 1..38",
        ),
        (
            GOOD.replace("table: public.customers", "table: customers"),
            "s.yaml: table: table name 'customers': found no schema, expected schema.table such as "
            "public.orders",
        ),
        (
            GOOD.replace("- name: balance", "- name: mail"),
            "s.yaml: (top level): column 'mail' is listed twice",
        ),
        (
            GOOD.replace("[email]", "[balance]"),
            "s.yaml: (top level): column 'mail' is renamed_from 'balance', "
            "which is also a current column name",
        ),
        ("table: public.t\ncolumns:\n  - type: int\n", "s.yaml: columns[0].name: missing, expected a value"),
        ("table: [unclosed\n", "s.yaml: not valid YAML at line 2 column 1"),
        ("- just\n- a list\n", "s.yaml: found list, expected a mapping with 'table' and 'columns'"),
    ],
)
def test_bad_schema_files_fail_with_path_found_and_expected(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_schema(text, "s.yaml")
    assert str(info.value).startswith(message)


def test_folder_loads_every_yaml_named_for_its_table(tmp_path: Path) -> None:
    (tmp_path / "public.customers.yaml").write_text(GOOD)
    (tmp_path / "README.md").write_text("not a schema")
    assert list(load_schemas(tmp_path)) == ["public.customers"]
    (tmp_path / "public.orders.yml").write_text("table: public.order\n")
    with pytest.raises(
        ConfigError,
        match=r"table is 'public.order' but the file is named 'public.orders.yml' "
        r"\(expected public.order.yaml\)",
    ):
        load_schemas(tmp_path)


@pytest.mark.parametrize(
    ("pg", "spark"),
    [
        ("smallint", "smallint"),
        ("int2", "smallint"),
        ("integer", "int"),
        ("int4", "int"),
        ("bigint", "bigint"),
        ("numeric(5,3)", "decimal(5,3)"),
        ("numeric(38,0)", "decimal(38,0)"),
        ("numeric(39,2)", "string"),
        ("numeric", "string"),
        ("real", "float"),
        ("double precision", "double"),
        ("float8", "double"),
        ("boolean", "boolean"),
        ("date", "date"),
        ("timestamp without time zone", "timestamp_ntz"),
        ("timestamp(3) without time zone", "timestamp_ntz"),
        ("timestamp with time zone", "timestamp"),
        ("timestamptz", "timestamp"),
        ("bytea", "binary"),
        ("character varying(30)", "string"),
        ("text[]", "string"),
        ("jsonb", "string"),
        ("uuid", "string"),
        ('"wal2json_Type"[]', "string"),
    ],
)
def test_type_mapping(pg: str, spark: str) -> None:
    assert spark_type(pg) == spark


def test_every_type_name_in_the_vectors_maps_to_a_valid_spark_type() -> None:
    index = Path(__file__).resolve().parents[3] / "shared/reference/wal2json_vectors/index.json"
    names = set()
    for vector in json.loads(index.read_text("utf-8")):
        for output in vector["outputs"]:
            for row in output["rows"]:
                try:
                    rec = json.loads(row)
                except ValueError:
                    continue
                for change in rec.get("change", [rec]):
                    names.update(change.get("columntypes", []))
                    names.update(c["type"] for c in change.get("columns", []) if "type" in c)
    assert len(names) > 40
    from resolver.config.tableschema import check_spark_type

    for name in names:
        assert check_spark_type(spark_type(name)) == spark_type(name)
