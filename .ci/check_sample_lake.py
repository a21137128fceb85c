"""CI: the lake the README's first command wrote holds, for every table of samples/expected/, exactly the
rows PostgreSQL had at the end of the sample workload.

    python .ci/check_sample_lake.py LAKE samples/expected

samples/expected/<schema>.<table>.json is the table as PostgreSQL printed it (``SELECT col::text``). A silver
value matches when its text equals PostgreSQL's, up to how Spark prints the type: binary as ``\\x`` + hex,
a timestamp without PostgreSQL's ``+00`` (the lake is UTC), a double compared as a number, and NaN and
±Infinity as NULL (wal2json prints those as null: the stream does not carry them). Exits 1 with one line
per difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _text(value: Any, dtype: str) -> str | None:
    if value is None:
        return None
    if dtype == "binary":
        return "\\x" + bytes(value).hex()
    if dtype in ("double", "float"):
        return repr(float(value))
    return str(value)


def _pg(value: str | None, dtype: str) -> str | None:
    if value is None:
        return None
    if dtype.startswith("timestamp") and value.endswith("+00"):
        return value[:-3]
    if dtype in ("double", "float"):
        return None if value in ("NaN", "Infinity", "-Infinity") else repr(float(value))
    return value


def _show(row: tuple[str, ...]) -> str:
    return repr(tuple(v if len(v) <= 40 else v[:37] + "..." for v in row))


def main(lake: str, expected_dir: str) -> int:
    from pyspark.sql import functions as F

    from resolver import local_session

    spark = local_session()
    problems: list[str] = []
    files = sorted(Path(expected_dir).glob("*.json"))
    if not files:
        problems.append(f"no expected tables in {expected_dir}")
    for file in files:
        table = file.name.removesuffix(".json")
        path = Path(lake) / "silver" / table
        if not (path / "_delta_log").is_dir():
            problems.append(f"{table}: no silver table at {path}")
            continue
        want: list[dict[str, str | None]] = json.loads(file.read_text("utf-8"))
        df = spark.read.format("delta").load(str(path.resolve()))
        types = dict(df.dtypes)
        columns = [c for c in df.columns if not c.startswith("__")]
        keep = ("binary", "double", "float")
        cast = [F.col(c) if types[c] in keep else F.col(c).cast("string").alias(c) for c in columns]
        got = sorted(
            tuple(_text(r[c], types[c]) or "\0" for c in columns) for r in df.select(*cast).collect()
        )
        exp = sorted(tuple(_pg(row.get(c), types[c]) or "\0" for c in columns) for row in want)
        if want and set(want[0]) != set(columns):
            problems.append(f"{table}: columns {columns}, expected {sorted(want[0])}")
        elif got != exp:
            problems.append(f"{table}: {len(got)} row(s) differ from {file} ({len(exp)} row(s)):")
            problems += [f"  only in lake:     {_show(r)}" for r in got if r not in exp]
            problems += [f"  only in expected: {_show(r)}" for r in exp if r not in got]
        else:
            print(f"check_sample_lake: {table}: {len(got)} row(s) as expected")
    for line in problems:
        print(f"check_sample_lake: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
