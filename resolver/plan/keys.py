"""A table's key: the one the schema file or the batch reports, and how it evolves as evidence
accumulates (no key -> index identity -> FULL identity). No Spark."""

from __future__ import annotations

from resolver.config.tableschema import TableSchema
from resolver.errors import ConfigError
from resolver.lake.folders import KEY_SOURCE_PROPERTY
from resolver.plan.tablemeta import TableMeta


def reported_key(
    meta: TableMeta, schema: TableSchema | None, renamed: dict[str, str], names: list[str]
) -> tuple[tuple[str, ...], str] | None:
    """The key the schema file or the batch gives, and where it came from (``KEY_SOURCES``).

    Without a primary key, the replica identity of the batch's updates and deletes is the key, unless it is
    REPLICA IDENTITY FULL (the whole old row; key = every column). Format 1 leaves NULL old values out of
    a FULL identity, so FULL shows as identities that differ between events or that hold every column; an
    index identity (USING INDEX) is the same NOT NULL columns in every event."""
    if schema and schema.primary_key:
        return tuple(schema.primary_key), "schema_file"
    if meta.pks:
        pks = sorted({tuple(renamed.get(k, k) for k in pk) for pk in meta.pks})
        if len(pks) > 1:
            raise ConfigError(
                f"table {meta.table}: the batch reports different primary keys "
                f"{', '.join(str(list(p)) for p in pks)}; if a key column was renamed, add renamed_from "
                f"hints to {meta.table}.yaml (columns: - name: <new name>, renamed_from: [<old name>])"
            )
        return pks[0], "primary_key"
    idents = {tuple(sorted(renamed.get(k, k) for k in ident)) for ident in meta.identities}
    if not idents:
        return None
    if len(idents) > 1 or any(set(i) >= set(names) and len(i) > 1 for i in idents):
        return tuple(names), "identity_full"
    ident = set(next(iter(idents)))
    return tuple(n for n in names if n in ident), "identity"


def evolve_key(
    table: str,
    key: tuple[str, ...],
    props: dict[str, str],
    reported: tuple[tuple[str, ...], str] | None,
    names: list[str],
) -> tuple[tuple[str, ...], str]:
    """The table's key after this batch, given the lake's key and what the batch reports. Evidence only
    accumulates (no key -> index identity -> FULL identity), so the result does not depend on the order in
    which batches arrive; a key change that evidence cannot explain fails with one line."""
    source = props.get(KEY_SOURCE_PROPERTY, "primary_key")
    if reported is None or source == "schema_file":
        return key, source
    new_key, new_source = reported
    if new_source == "schema_file":
        return new_key, new_source  # pinned by the user (a different key re-keys the lake)
    if new_source == "primary_key":
        if source in ("primary_key", "identity") and new_key == key:
            return key, "primary_key"
        if source in ("all_columns", "identity_full"):
            raise ConfigError(
                f"table {table}: the stream now reports primary key {list(new_key)} but the lake was created "
                f"without one (every column is its key); pin primary_key in {table}.yaml"
            )
        raise ConfigError(
            f"table {table}: the stream reports key {list(new_key)} but the lake was created with "
            f"key {list(key)}; pin primary_key in {table}.yaml"
        )
    if source == "primary_key":
        return key, source  # an identity (FULL, or format 1 without include-pk) never overrides the key
    if source == "identity_full":
        return key, source
    if new_source == "identity_full":
        return (key if source == "all_columns" else tuple(names)), "identity_full"
    if source == "identity" and new_key != key:
        return tuple(names), "identity_full"  # an index identity never changes: it was FULL all along
    return new_key, "identity"
