"""One batch: read and stitch the files, append the new events to bronze, apply every table
(``resolver.batch.ingest.ingest``, ``resolver.batch.silver.apply_changes``)."""
