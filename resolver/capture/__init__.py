"""``resolver capture``: from a PostgreSQL database to a landing folder, the snapshot of its rows and then
its changes through a replication slot (docs/capture.md). psycopg and psycopg2, no Spark."""
