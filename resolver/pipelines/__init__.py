"""Running a pipeline file: ``resolver run`` batch by batch, ``--stream``, and landing Kafka topics."""
