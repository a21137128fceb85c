"""The per-table steps of a batch: explode the events against the table's layout, store them, find the
affected keys, resolve them into versions, merge history and snapshot, quarantine bad values."""
