"""JSON Schemas for wal2json format-version 1 and 2 (schemas/wal2json/v1.json, v2.json).

No Spark needed. The schemas are compiled once with ``fastjsonschema`` and checked
against every row of the reference vectors in
``<repo>/../shared/reference/wal2json_vectors/index.json``:

* format-version 2: every row is one record and must validate with v2.json;
* format-version 1: every row that is a complete transaction object must validate
  with v1.json; write-in-chunks fragments are reassembled into one object first;
* rows that are not valid JSON (known wal2json bugs, spec sections 2.4, 5.2, 9.8)
  are listed explicitly in KNOWN_INVALID_JSON and must really fail ``json.loads``.

Rows are parsed with ``parse_float=decimal.Decimal`` (as the resolver does), so the
schemas must accept ``Decimal`` as a JSON number.

The mutation tests pin the ``name`` / ``path`` / ``rule`` attributes of
``fastjsonschema.JsonSchemaValueException`` that the resolver uses to format
quarantine reasons.
"""

from __future__ import annotations

import copy
import decimal
import json
import re
from pathlib import Path

import fastjsonschema  # noqa: E402  (a core dependency: never skipped)
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "schemas" / "wal2json"
INDEX_JSON = Path(__file__).resolve().parents[3] / "shared/reference/wal2json_vectors/index.json"


def _compile(name: str):
    with open(SCHEMA_DIR / name, encoding="utf-8") as fh:
        return fastjsonschema.compile(json.load(fh))


# Compiled once per test session.
VALIDATE_V1 = _compile("v1.json")
VALIDATE_V2 = _compile("v2.json")


def loads(text: str):
    return json.loads(text, parse_float=decimal.Decimal)


# --------------------------------------------------------------------------------------
# Vector collection
# --------------------------------------------------------------------------------------

# (vector name, output index, row index) -> why the row is not valid JSON.
KNOWN_INVALID_JSON = {
    (
        "local_A_transaction_metadata_options",
        0,
        1,
    ): "wal2json 2.5 bug: non-transactional message after a multi-change transaction -> '[,' (spec 2.4)",
    (
        "local_A_transaction_metadata_options",
        1,
        6,
    ): "wal2json 2.5 bug: non-transactional message after a multi-change transaction -> '[,' (spec 2.4)",
    (
        "local_A_transaction_metadata_options",
        2,
        1,
    ): "wal2json 2.5 bug: non-transactional message after a multi-change transaction -> '[,' (spec 2.4)",
    (
        "local_A_transaction_metadata_options",
        3,
        1,
    ): "wal2json 2.5 bug: non-transactional message after a multi-change transaction -> '[,' (spec 2.4)",
    (
        "local_D_invalid_json_and_lossy_edge_cases",
        0,
        1,
    ): "v2: unescaped schema-qualified quoted type name + include-default with '\"' (spec 5.2, 2.2)",
    (
        "local_D_invalid_json_and_lossy_edge_cases",
        1,
        0,
    ): "v1: unescaped schema-qualified quoted type name + include-default with '\"' (spec 5.2, 2.2)",
}

_CALL_OPT_RE = re.compile(r"'([a-z-]+)'\s*,\s*'([^']*)'")


def _output_options(output: dict) -> dict:
    """Plugin options of one decoding call.

    Upstream vectors carry ``options`` as [[name, value], ...]; the local vectors only
    have the SQL ``call`` text ('format-version','2',...), so parse that instead.
    """
    if "options" in output:
        return {k: v for k, v in output["options"]}
    return dict(_CALL_OPT_RE.findall(output.get("call", "")))


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in {"1", "t", "true", "on", "y", "yes"}


def _collect():
    """Walk index.json once and sort every row into the buckets below."""
    v2_rows = []  # (id, text)
    v1_objects = []  # (id, text) complete transaction objects
    v1_chunked = []  # (id, reassembled text) from write-in-chunks fragments
    invalid = {}  # key -> text of rows that fail json.loads
    fragments = []  # ids of rows consumed by chunk reassembly

    with open(INDEX_JSON, encoding="utf-8") as fh:
        vectors = json.load(fh)

    for vector in vectors:
        name = vector["name"]
        for out_idx, output in enumerate(vector["outputs"]):
            opts = _output_options(output)
            version = opts.get("format-version", "1")
            chunked = version == "1" and _truthy(opts.get("write-in-chunks"))
            buffer = None  # list of (row idx, text) while reassembling a chunked transaction
            for row_idx, text in enumerate(output["rows"]):
                key = (name, out_idx, row_idx)
                row_id = f"{name}#{out_idx}.{row_idx}"

                if chunked:
                    compact = "".join(text.split())
                    if buffer is not None:
                        buffer.append((row_idx, text))
                        if compact == "]}":
                            first = buffer[0][0]
                            v1_chunked.append(
                                (f"{name}#{out_idx}.{first}-{row_idx}", "".join(t for _, t in buffer))
                            )
                            fragments.extend(f"{name}#{out_idx}.{i}" for i, _ in buffer)
                            buffer = None
                        continue
                    if compact.startswith("{") and compact.endswith('"change":['):
                        buffer = [(row_idx, text)]  # transaction header
                        continue
                    # otherwise: a standalone object (non-transactional message)

                try:
                    loads(text)
                except ValueError:
                    invalid[key] = text
                    continue
                if version == "2":
                    v2_rows.append((row_id, text))
                else:
                    v1_objects.append((row_id, text))
            assert buffer is None, f"unterminated write-in-chunks transaction in {name}#{out_idx}"

    return v2_rows, v1_objects, v1_chunked, invalid, fragments


if INDEX_JSON.is_file():
    V2_ROWS, V1_OBJECTS, V1_CHUNKED, INVALID_ROWS, FRAGMENTS = _collect()
else:  # pragma: no cover - only when shared/ is not checked out beside the repo
    V2_ROWS, V1_OBJECTS, V1_CHUNKED, INVALID_ROWS, FRAGMENTS = [], [], [], {}, []

needs_vectors = pytest.mark.usefixtures()  # the vectors are part of ../shared, which CI always has


def _params(rows):
    return [pytest.param(text, id=row_id) for row_id, text in rows]


# --------------------------------------------------------------------------------------
# Real vectors validate
# --------------------------------------------------------------------------------------


@needs_vectors
@pytest.mark.parametrize("text", _params(V2_ROWS))
def test_v2_vector_row_validates(text):
    VALIDATE_V2(loads(text))


@needs_vectors
@pytest.mark.parametrize("text", _params(V1_OBJECTS))
def test_v1_vector_object_validates(text):
    VALIDATE_V1(loads(text))


@needs_vectors
@pytest.mark.parametrize("text", _params(V1_CHUNKED))
def test_v1_write_in_chunks_reassembled_validates(text):
    VALIDATE_V1(loads(text))


@needs_vectors
def test_vector_counts_and_skips():
    # Exactly the documented invalid-JSON rows are skipped, nothing else.
    assert set(INVALID_ROWS) == set(KNOWN_INVALID_JSON)
    for text in INVALID_ROWS.values():
        with pytest.raises(ValueError):
            json.loads(text)
    # Sanity: the corpus really exercises both formats and chunk reassembly.
    assert len(V2_ROWS) > 500
    assert len(V1_OBJECTS) > 150
    assert len(V1_CHUNKED) == 4  # 22_cmdline: 2 empty txns; local_A: 1 with 4 changes + 1 empty
    assert len(FRAGMENTS) == 12  # rows consumed by the 4 reassembled transactions


def _contains_decimal(obj) -> bool:
    if isinstance(obj, decimal.Decimal):
        return True
    if isinstance(obj, dict):
        return any(_contains_decimal(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_contains_decimal(v) for v in obj)
    return False


@needs_vectors
def test_vectors_include_decimal_values():
    # So the vector tests above really prove fastjsonschema accepts Decimal numbers.
    assert sum(_contains_decimal(loads(t)) for _, t in V2_ROWS) > 0
    assert sum(_contains_decimal(loads(t)) for _, t in V1_OBJECTS) > 0


# --------------------------------------------------------------------------------------
# Decimal / scalar handling
# --------------------------------------------------------------------------------------


def test_decimal_is_accepted_as_number():
    rec = loads(
        '{"action":"I","table":"t","columns":['
        '{"name":"n","type":"numeric","value":12345678901234567890.000000001},'
        '{"name":"f","type":"double precision","value":1e+300},'
        '{"name":"s","type":"numeric(5,2)","value":1.50}]}'
    )
    assert isinstance(rec["columns"][0]["value"], decimal.Decimal)
    assert rec["columns"][2]["value"] == decimal.Decimal("1.50")
    VALIDATE_V2(rec)
    VALIDATE_V1(
        {
            "change": [
                {
                    "kind": "insert",
                    "table": "t",
                    "columnnames": ["n"],
                    "columnvalues": [decimal.Decimal("3.540")],
                }
            ]
        }
    )


def test_decimal_is_not_an_integer():
    # 1.0 parsed as Decimal is not a valid xid (wal2json prints xids with %u).
    with pytest.raises(fastjsonschema.JsonSchemaValueException) as exc:
        VALIDATE_V2(loads('{"action":"B","xid":1.0}'))
    assert (exc.value.name, exc.value.rule) == ("data.xid", "type")


def test_bool_is_not_an_integer():
    with pytest.raises(fastjsonschema.JsonSchemaValueException) as exc:
        VALIDATE_V1({"xid": True, "change": []})
    assert (exc.value.name, exc.value.rule) == ("data.xid", "type")


# --------------------------------------------------------------------------------------
# Mutations: expected fastjsonschema error name/path/rule
# --------------------------------------------------------------------------------------

# Base records copied from the vectors (local_A outputs 4/5, local_C, 18_include_pk).
V2_BEGIN = {
    "action": "B",
    "xid": 1224,
    "timestamp": "2026-11-21 16:03:14.746799+00",
    "origin": 0,
    "lsn": "0/32671D8",
    "nextlsn": "0/3267208",
}
V2_INSERT = {
    "action": "I",
    "xid": 1224,
    "timestamp": "2026-11-21 16:03:14.746799+00",
    "origin": 0,
    "lsn": "0/3267030",
    "schema": "public",
    "table": "opt_t",
    "columns": [
        {
            "name": "id",
            "type": "integer",
            "typeoid": 23,
            "value": 1,
            "optional": False,
            "position": 1,
            "default": None,
        },
        {
            "name": "v",
            "type": "text",
            "typeoid": 25,
            "value": "a",
            "optional": False,
            "position": 2,
            "default": None,
        },
    ],
    "pk": [{"name": "id", "type": "integer", "typeoid": 23}],
}
V2_UPDATE = {
    "action": "U",
    "schema": "public",
    "table": "opt_t",
    "columns": [{"name": "id", "type": "integer", "value": 1}, {"name": "v", "type": "text", "value": "b"}],
    "identity": [{"name": "id", "type": "integer", "value": 1}],
}
V2_DELETE = {
    "action": "D",
    "schema": "public",
    "table": "opt_t",
    "identity": [{"name": "id", "type": "integer", "value": 1}],
}
V2_TRUNCATE = {"action": "T", "xid": 1225, "lsn": "0/3267DA8", "schema": "public", "table": "opt_t"}
V2_MESSAGE_NONTX = {
    "action": "M",
    "xid": None,
    "timestamp": None,
    "origin": None,
    "lsn": "0/3267250",
    "transactional": False,
    "prefix": "pfx",
    "content": "non-tx message",
}

V1_TXN = {
    "xid": 1224,
    "nextlsn": "0/3267208",
    "timestamp": "2026-11-21 16:03:14.746799+00",
    "origin": 0,
    "change": [
        {
            "kind": "insert",
            "schema": "public",
            "table": "opt_t",
            "columnnames": ["id", "v", "w"],
            "columntypes": ["integer", "text", "integer"],
            "columnvalues": [1, "a", None],
            "pk": {"pknames": ["id"], "pktypes": ["integer"]},
        },
        {
            "kind": "update",
            "schema": "public",
            "table": "opt_t",
            "columnnames": ["id", "v", "w"],
            "columntypes": ["integer", "text", "integer"],
            "columnvalues": [1, "b", None],
            "oldkeys": {"keynames": ["id"], "keytypes": ["integer"], "keyvalues": [1]},
        },
        {"kind": "message", "transactional": True, "prefix": "pfx", "content": "tx message"},
        {
            "kind": "delete",
            "schema": "public",
            "table": "opt_t",
            "oldkeys": {"keynames": ["id"], "keytypes": ["integer"], "keyvalues": [1]},
        },
    ],
}


def test_base_records_are_valid():
    for rec in (V2_BEGIN, V2_INSERT, V2_UPDATE, V2_DELETE, V2_TRUNCATE, V2_MESSAGE_NONTX):
        VALIDATE_V2(rec)
    VALIDATE_V1(V1_TXN)


def _mutate(base, fn):
    rec = copy.deepcopy(base)
    result = fn(rec)
    return rec if result is None else result


def _set(path, value):
    def fn(rec):
        target = rec
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return fn


def _del(path):
    def fn(rec):
        target = rec
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return fn


# (id, base, mutation, expected name, expected rule)
V2_MUTATIONS = [
    ("unknown-action", V2_INSERT, _set(["action"], "X"), "data.action", "enum"),
    ("lowercase-action", V2_BEGIN, _set(["action"], "b"), "data.action", "enum"),
    ("missing-action", V2_INSERT, _del(["action"]), "data", "required"),
    ("not-an-object", V2_INSERT, lambda rec: [rec], "data", "type"),
    ("I-missing-columns", V2_INSERT, _del(["columns"]), "data", "required"),
    ("I-missing-table", V2_INSERT, _del(["table"]), "data", "required"),
    ("I-typo-key", V2_INSERT, lambda rec: rec.update(tabel="x"), "data", "additionalProperties"),
    ("I-with-identity", V2_INSERT, _set(["identity"], []), "data", "additionalProperties"),
    ("I-value-object", V2_INSERT, _set(["columns", 0, "value"], {"a": 1}), "data.columns[0].value", "type"),
    ("I-value-array", V2_INSERT, _set(["columns", 1, "value"], [1, 2]), "data.columns[1].value", "type"),
    ("I-column-missing-value", V2_INSERT, _del(["columns", 0, "value"]), "data.columns[0]", "required"),
    (
        "I-column-typo-key",
        V2_INSERT,
        _set(["columns", 0, "vaule"], 1),
        "data.columns[0]",
        "additionalProperties",
    ),
    ("I-column-name-number", V2_INSERT, _set(["columns", 0, "name"], 1), "data.columns[0].name", "type"),
    ("I-columns-not-array", V2_INSERT, _set(["columns"], {}), "data.columns", "type"),
    ("I-pk-with-value", V2_INSERT, _set(["pk", 0, "value"], 1), "data.pk[0]", "additionalProperties"),
    ("I-lsn-lowercase", V2_INSERT, _set(["lsn"], "0/3267a30"), "data.lsn", "pattern"),
    ("I-lsn-null", V2_INSERT, _set(["lsn"], None), "data.lsn", "type"),
    ("I-xid-null", V2_INSERT, _set(["xid"], None), "data.xid", "type"),
    ("I-xid-string", V2_INSERT, _set(["xid"], "1224"), "data.xid", "type"),
    ("I-xid-negative", V2_INSERT, _set(["xid"], -1), "data.xid", "minimum"),
    ("U-missing-identity", V2_UPDATE, _del(["identity"]), "data", "required"),
    (
        "U-identity-value-object",
        V2_UPDATE,
        _set(["identity", 0, "value"], {}),
        "data.identity[0].value",
        "type",
    ),
    (
        "U-identity-extra-key",
        V2_UPDATE,
        _set(["identity", 0, "optional"], True),
        "data.identity[0]",
        "additionalProperties",
    ),
    ("D-missing-identity", V2_DELETE, _del(["identity"]), "data", "required"),
    ("D-with-columns", V2_DELETE, _set(["columns"], []), "data", "additionalProperties"),
    ("T-missing-table", V2_TRUNCATE, _del(["table"]), "data", "required"),
    ("B-with-table", V2_BEGIN, _set(["table"], "t"), "data", "additionalProperties"),
    ("B-nextlsn-bad", V2_BEGIN, _set(["nextlsn"], "3267208"), "data.nextlsn", "pattern"),
    ("M-missing-content", V2_MESSAGE_NONTX, _del(["content"]), "data", "required"),
    (
        "M-transactional-string",
        V2_MESSAGE_NONTX,
        _set(["transactional"], "false"),
        "data.transactional",
        "type",
    ),
    ("M-with-table", V2_MESSAGE_NONTX, _set(["table"], "t"), "data", "additionalProperties"),
]

V1_MUTATIONS = [
    ("unknown-kind", V1_TXN, _set(["change", 0, "kind"], "upsert"), "data.change[0].kind", "enum"),
    ("truncate-kind", V1_TXN, _set(["change", 3, "kind"], "truncate"), "data.change[3].kind", "enum"),
    ("missing-kind", V1_TXN, _del(["change", 1, "kind"]), "data.change[1]", "required"),
    ("missing-change", V1_TXN, _del(["change"]), "data", "required"),
    ("top-typo-key", V1_TXN, lambda rec: rec.update(xids=1), "data", "additionalProperties"),
    ("change-not-array", V1_TXN, _set(["change"], {}), "data.change", "type"),
    ("nextlsn-bad", V1_TXN, _set(["nextlsn"], "0/32672g8"), "data.nextlsn", "pattern"),
    ("xid-negative", V1_TXN, _set(["xid"], -1), "data.xid", "minimum"),
    (
        "insert-missing-columnvalues",
        V1_TXN,
        _del(["change", 0, "columnvalues"]),
        "data.change[0]",
        "required",
    ),
    (
        "insert-with-oldkeys",
        V1_TXN,
        _set(["change", 0, "oldkeys"], {"keynames": [], "keyvalues": []}),
        "data.change[0]",
        "additionalProperties",
    ),
    (
        "insert-typo-key",
        V1_TXN,
        _set(["change", 0, "columnname"], ["id"]),
        "data.change[0]",
        "additionalProperties",
    ),
    (
        "insert-value-object",
        V1_TXN,
        _set(["change", 0, "columnvalues", 1], {"a": 1}),
        "data.change[0].columnvalues[1]",
        "type",
    ),
    (
        "insert-pk-missing-pktypes",
        V1_TXN,
        _del(["change", 0, "pk", "pktypes"]),
        "data.change[0].pk",
        "required",
    ),
    ("update-missing-oldkeys", V1_TXN, _del(["change", 1, "oldkeys"]), "data.change[1]", "required"),
    (
        "update-keyvalue-array",
        V1_TXN,
        _set(["change", 1, "oldkeys", "keyvalues", 0], [1]),
        "data.change[1].oldkeys.keyvalues[0]",
        "type",
    ),
    (
        "update-oldkeys-typo",
        V1_TXN,
        _set(["change", 1, "oldkeys", "keyname"], ["id"]),
        "data.change[1].oldkeys",
        "additionalProperties",
    ),
    (
        "message-transactional-string",
        V1_TXN,
        _set(["change", 2, "transactional"], "true"),
        "data.change[2].transactional",
        "type",
    ),
    (
        "message-with-table",
        V1_TXN,
        _set(["change", 2, "table"], "t"),
        "data.change[2]",
        "additionalProperties",
    ),
    ("delete-missing-oldkeys", V1_TXN, _del(["change", 3, "oldkeys"]), "data.change[3]", "required"),
    (
        "delete-with-columnvalues",
        V1_TXN,
        _set(["change", 3, "columnvalues"], [1]),
        "data.change[3]",
        "additionalProperties",
    ),
]


def _split_name(name: str) -> list[str]:
    return [part for part in re.split(r"[.\[\]]+", name) if part]


def _check_mutation(validate, base, fn, name, rule):
    rec = _mutate(base, fn)
    with pytest.raises(fastjsonschema.JsonSchemaValueException) as exc:
        validate(rec)
    err = exc.value
    assert (err.name, err.rule) == (name, rule), err.message
    assert err.path == _split_name(name)


@pytest.mark.parametrize(
    "base, fn, name, rule", [pytest.param(b, f, n, r, id=i) for i, b, f, n, r in V2_MUTATIONS]
)
def test_v2_mutation_fails(base, fn, name, rule):
    _check_mutation(VALIDATE_V2, base, fn, name, rule)


@pytest.mark.parametrize(
    "base, fn, name, rule", [pytest.param(b, f, n, r, id=i) for i, b, f, n, r in V1_MUTATIONS]
)
def test_v1_mutation_fails(base, fn, name, rule):
    _check_mutation(VALIDATE_V1, base, fn, name, rule)


def test_error_attributes_for_unknown_action():
    """Document the exact exception attributes the resolver formats quarantine reasons from."""
    with pytest.raises(fastjsonschema.JsonSchemaValueException) as exc:
        VALIDATE_V2({"action": "X"})
    err = exc.value
    assert err.name == "data.action"
    assert err.path == ["data", "action"]
    assert err.rule == "enum"
    assert err.value == "X"
    assert err.rule_definition == ["B", "C", "I", "U", "D", "T", "M"]
    assert err.message == "data.action must be one of ['B', 'C', 'I', 'U', 'D', 'T', 'M']"


def test_v1_message_standalone_nontransactional_is_valid():
    # 2.6 prints a non-transactional message as its own object with no xid/lsn/timestamp.
    VALIDATE_V1({"change": [{"kind": "message", "transactional": False, "prefix": "pfx", "content": "x"}]})


def test_v2_nontransactional_message_nulls_only_on_M():
    VALIDATE_V2(V2_MESSAGE_NONTX)
    for action in ("B", "C"):
        with pytest.raises(fastjsonschema.JsonSchemaValueException) as exc:
            VALIDATE_V2({"action": action, "xid": None})
        assert (exc.value.name, exc.value.rule) == ("data.xid", "type")
    with pytest.raises(fastjsonschema.JsonSchemaValueException) as exc:
        VALIDATE_V2({**V2_MESSAGE_NONTX, "lsn": None})
    assert (exc.value.name, exc.value.rule) == ("data.lsn", "type")
