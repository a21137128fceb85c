"""Input files: listing a landing folder or URI, its format, and reading files through Spark's Hadoop file
systems."""
