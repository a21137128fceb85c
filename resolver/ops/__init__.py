"""Operating a lake: OPTIMIZE and VACUUM, time travel (a table as of a version, time or LSN)."""
