"""The lake on disk: table folders and paths, Delta reads and writes, the lake's tables, its lock and the
per-table lock, deletion vectors."""
