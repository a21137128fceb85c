"""What users write: pipeline files, per-table schema files, Kafka sources, policies, the schema registry
and the options of a batch. Pure Python: no Spark."""
