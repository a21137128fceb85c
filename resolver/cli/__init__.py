"""The ``resolver`` command line: the parser and its commands, their printing and Spark options."""
