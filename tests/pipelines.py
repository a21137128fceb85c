"""Pipeline files over a landing folder in a test's folder, for the run and stream tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pipeline_file(folder: Path, max_files_per_batch: int = 2, **extra: str) -> Path:
    lines = [
        "source: {path: landing/, format: wal2json-v2}",
        "lake: lake/",
        f"max_files_per_batch: {max_files_per_batch}",
        *[f"{k}: {v}" for k, v in extra.items()],
    ]
    path = folder / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    (folder / "landing").mkdir(exist_ok=True)
    return path


def failing_orders_pipeline(folder: Path) -> Path:
    """A pipeline over the sample stream whose schema file fails public.orders (a column it does not list,
    with ``unknown_columns: fail``); ``schemas/public.orders.yaml`` is the file to remove to fix it."""
    schemas = folder / "schemas"
    schemas.mkdir()
    strict = "table: public.orders\nunknown_columns: fail\ncolumns:\n  - {name: customer_id}\n"
    (schemas / "public.orders.yaml").write_text(strict)
    pipeline = pipeline_file(folder, schemas="schemas/")
    (folder / "landing" / "0001.json").write_bytes((ROOT / "samples/wal2json-v2/0001.json").read_bytes())
    return pipeline
