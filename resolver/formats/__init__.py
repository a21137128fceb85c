"""The change formats: wal2json (format 1 and 2) and Debezium JSON read line by line into change events,
their detection, source table names and the plan for stitching transactions cut by files. Pure Python: no
Spark, no database."""
