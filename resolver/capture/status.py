"""``resolver capture --status``: how far a capture's slot is behind its database, read from PostgreSQL and
the landing folder without changing either (docs/capture.md, "Lag").

- **lag bytes**: WAL written since the slot's confirmed position (what the next capture has to read);
- **lag seconds**: how long ago the oldest transaction the slot still holds committed (0 when it holds none);
- **retained WAL**: what PostgreSQL keeps on disk for the slot (from its restart position), and the server's
  own verdict on it (``wal_status``: reserved, extended, unreserved, lost);
- the landing folder's files from this slot and the snapshot's position.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from resolver.capture.landing import landing_at
from resolver.capture.source import check_source, connect
from resolver.errors import ConfigError
from resolver.formats.snapshot_files import SUFFIX

__all__ = ["CaptureStatus", "capture_status"]


@dataclass(frozen=True)
class CaptureStatus:
    slot: str
    confirmed_lsn: str
    current_lsn: str
    lag_bytes: int
    lag_seconds: float | None  # None: the slot is read by a running capture at this moment
    retained_bytes: int
    wal_status: str
    active: bool
    snapshot_lsn: str | None
    files: int

    def lines(self) -> list[str]:
        seconds = "(in use by a running capture)" if self.lag_seconds is None else f"{self.lag_seconds:.1f}"
        return [
            f"slot                 {self.slot} ({'active' if self.active else 'idle'})",
            f"confirmed up to      {self.confirmed_lsn}",
            f"server at            {self.current_lsn}",
            f"lag bytes            {self.lag_bytes}",
            f"lag seconds          {seconds}",
            f"retained WAL bytes   {self.retained_bytes} ({self.wal_status})",
            f"snapshot at          {self.snapshot_lsn or '(none recorded in the landing folder)'}",
            f"files landed         {self.files}",
        ]


def capture_status(dsn: str, landing: str, slot: str) -> CaptureStatus:
    """The slot's lag and the landing folder's files; one line when the slot does not exist."""
    place = landing_at(landing)
    with connect(dsn) as conn:
        check_source(conn)
        row = conn.execute(
            "SELECT confirmed_flush_lsn::text, pg_current_wal_lsn()::text, "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, coalesce(wal_status, ''), active "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        ).fetchone()
        if row is None:
            raise ConfigError(
                f"slot {slot} does not exist: expected the slot of a capture (resolver capture --slot {slot} "
                "creates it and takes the snapshot)"
            )
        confirmed, current, lag, retained, wal_status, active = row
        seconds = None if active else _oldest_held(conn, slot)
    state = place.read(f"_capture/{slot}.json")
    snapshot = json.loads(state).get("snapshot_lsn") if state is not None else None
    files = len(place.names(f"{slot}-*.json")) + len(place.names(f"{slot}-*{SUFFIX}"))  # stream + snapshot
    return CaptureStatus(
        slot, confirmed, current, int(lag), seconds, int(retained), wal_status, bool(active), snapshot, files
    )


def _oldest_held(conn, slot: str) -> float:  # type: ignore[no-untyped-def]
    """Seconds since the oldest transaction the slot holds committed: its first record, peeked (the slot
    does not move), with its commit time; 0 when it holds none."""
    options = ["format-version", "2", "include-timestamp", "1", "include-transaction", "1"]
    row = conn.execute(
        "SELECT extract(epoch FROM now() - (data::json->>'timestamp')::timestamptz)::float8 "
        "FROM pg_logical_slot_peek_changes(%s, NULL, 1, VARIADIC %s::text[]) LIMIT 1",
        (slot, options),
    ).fetchone()
    return max(0.0, float(row[0])) if row and row[0] is not None else 0.0
