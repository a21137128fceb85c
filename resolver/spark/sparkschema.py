"""Spark and Arrow schemas derived from the pydantic models, so each field is declared once."""

from __future__ import annotations

import types
import typing
from datetime import datetime
from enum import Enum
from typing import Any

import pyarrow as pa
from pydantic import BaseModel
from pyspark.sql import types as T

from resolver.models import ChangeEvent, QuarantineRecord

__all__ = ["EVENT_SCHEMA", "QUARANTINE_SCHEMA", "arrow_schema", "spark_schema"]


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(inner type, nullable) for ``X | None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        return (args[0] if len(args) == 1 else annotation), nullable
    return annotation, False


def _spark_type(annotation: Any) -> tuple[T.DataType, bool]:
    inner, nullable = _unwrap(annotation)
    if typing.get_origin(inner) is list:
        element, element_nullable = _spark_type(typing.get_args(inner)[0])
        return T.ArrayType(element, element_nullable), nullable
    if isinstance(inner, type):
        if issubclass(inner, bool):
            return T.BooleanType(), nullable
        if issubclass(inner, Enum | str):
            return T.StringType(), nullable
        if issubclass(inner, int):
            return T.LongType(), nullable
        if issubclass(inner, datetime):
            return T.TimestampType(), nullable
        if issubclass(inner, bytes):
            return T.BinaryType(), nullable
    raise TypeError(f"no Spark type for annotation {annotation!r}")


def spark_schema(model: type[BaseModel]) -> T.StructType:
    """The Spark schema of a model: one field per model field, in declaration order."""
    fields = []
    for name, info in model.model_fields.items():
        dtype, nullable = _spark_type(info.annotation)
        fields.append(T.StructField(name, dtype, nullable, metadata={"comment": info.description or ""}))
    return T.StructType(fields)


def _arrow_type(dtype: T.DataType) -> pa.DataType:
    if isinstance(dtype, T.ArrayType):
        return pa.list_(pa.field("element", _arrow_type(dtype.elementType), dtype.containsNull))
    return {
        T.StringType: pa.string(),
        T.LongType: pa.int64(),
        T.IntegerType: pa.int32(),
        T.BooleanType: pa.bool_(),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
        T.BinaryType: pa.binary(),
    }[type(dtype)]


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema ``mapInArrow`` must produce for a Spark schema."""
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in schema.fields])


EVENT_SCHEMA = spark_schema(ChangeEvent)
"""Bronze's rows and a batch's events (``resolver.models.ChangeEvent``)."""
QUARANTINE_SCHEMA = spark_schema(QuarantineRecord)
"""The quarantine table's rows (``resolver.models.QuarantineRecord``)."""
