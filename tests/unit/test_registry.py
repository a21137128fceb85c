"""The schema registry: ``resolver schemas infer`` and ``resolver schemas check`` (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from resolver.cli.main import main
from resolver.config.registry import check_schemas, infer_schemas, render
from resolver.config.tableschema import load_schemas
from resolver.errors import ConfigError

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_infer_writes_columns_types_and_keys_from_the_stream() -> None:
    schemas = infer_schemas([str(SAMPLES / "wal2json-v2")], "wal2json-v2")
    assert sorted(schemas) == ["public.audit_log", "public.customers", "public.orders"]
    orders = schemas["public.orders"]
    assert render(orders).splitlines()[1:] == [
        "table: public.orders",
        "primary_key: [customer_id, order_no]",
        "columns:",
        "- {name: customer_id, type: bigint, pg_type: bigint}",
        "- {name: order_no, type: int, pg_type: integer}",
        "- {name: amount, type: string, pg_type: numeric}",
        "- {name: status, type: string, pg_type: text}",
    ]
    # format 1 of the same workload gives the same files; either format is detected when not given
    assert infer_schemas([str(SAMPLES / "wal2json-v1")], "wal2json-v1") == schemas
    assert infer_schemas([str(SAMPLES / "wal2json-v1")]) == schemas
    assert infer_schemas([str(SAMPLES / "wal2json-v2")]) == schemas


def test_infer_and_check_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "schemas"
    assert (
        main(["schemas", "infer", str(SAMPLES / "wal2json-v2"), "--format", "wal2json-v2", "--out", str(out)])
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "public.audit_log.yaml",
        "public.customers.yaml",
        "public.orders.yaml",
    ]
    assert load_schemas(out)["public.customers"].primary_key == ["id"]
    assert main(["schemas", "check", str(out)]) == 0
    assert "3 schema file(s) valid" in capsys.readouterr().out
    # a second infer does not overwrite edited files unless asked
    again = ["schemas", "infer", str(SAMPLES / "wal2json-v2"), "--format", "wal2json-v2", "--out", str(out)]
    assert main(again) == 2
    assert "exists (expected a new file; pass --overwrite to replace it)" in capsys.readouterr().err
    assert main([*again, "--overwrite"]) == 0


def test_infer_without_format_detects_it_and_refuses_mixed_or_unknown_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "schemas"
    assert main(["schemas", "infer", str(SAMPLES / "wal2json-v2"), "--out", str(out)]) == 0
    assert len(list(out.iterdir())) == 3
    capsys.readouterr()
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in ("wal2json-v1", "wal2json-v2"):
        (mixed / f"{name}.json").write_bytes((SAMPLES / name / "0001.json").read_bytes())
    assert main(["schemas", "infer", str(mixed), "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"resolver: error: the input mixes formats: '{mixed / 'wal2json-v1.json'}' is wal2json-v1, "
        f"'{mixed / 'wal2json-v2.json'}' is wal2json-v2 (expected files of one format)"
    ]
    with pytest.raises(ConfigError, match="cannot tell the format of .*README.md'"):
        infer_schemas([str(SAMPLES.parent / "README.md")])
    assert not (tmp_path / "x").exists()


def test_check_names_the_file_the_path_and_a_close_match(tmp_path: Path) -> None:
    (tmp_path / "public.t.yaml").write_text(
        "table: public.t\nprimary_key: [idd]\ncolumns:\n  - name: id\n  - name: mail\n", "utf-8"
    )
    assert check_schemas(tmp_path)  # listing only some columns is fine: the lake is what tells a typo
    with pytest.raises(ConfigError) as err:
        check_schemas(tmp_path, {"public.t": ["id", "mail", "age"]})
    assert str(err.value) == (
        f"{tmp_path / 'public.t.yaml'}: primary_key[0]: found 'idd', which is not a column of the lake's "
        "public.t (did you mean 'id'?)"
    )
    (tmp_path / "public.t.yaml").write_text(
        "table: public.t\ncolumns:\n  - name: email\n    renamed_from: [mial]\n", "utf-8"
    )
    assert check_schemas(tmp_path)  # valid on its own
    with pytest.raises(ConfigError) as err:
        check_schemas(tmp_path, {"public.t": ["id", "mail"]})
    assert str(err.value) == (
        f"{tmp_path / 'public.t.yaml'}: columns[0].renamed_from[0]: found 'mial', which is not a column of "
        "the lake's public.t (did you mean 'mail'?)"
    )


def test_infer_reads_debezium_records_detected_from_the_file(tmp_path: Path) -> None:
    vectors = Path(__file__).resolve().parents[1] / "vectors" / "debezium"
    out = tmp_path / "schemas"
    assert main(["schemas", "infer", str(vectors / "envelope.jsonl"), "--out", str(out)]) == 0
    schemas = load_schemas(out)
    assert sorted(schemas) == ["public.items", "public.types_demo"]
    assert render(schemas["public.items"]).splitlines()[1:] == [
        "table: public.items",
        "primary_key: [id]",  # from the records' keys
        "columns:",
        "- {name: id, type: int, pg_type: integer}",
        "- {name: name, type: string, pg_type: text}",
        "- {name: big, type: string, pg_type: text}",
    ]
    demo = {c.name: c.pg_type for c in schemas["public.types_demo"].columns}  # column.propagate.source.type
    assert demo["n12"] == "numeric(12,3)" and demo["tstz"] == "timestamp with time zone"
    assert demo["ia"] == "integer[]" and demo["b"] == "bytea"
