"""Planning a batch before anything is written: its facts per table, each table's layout (columns, key, type
changes, drops), the policies' refusals and the schema log."""
