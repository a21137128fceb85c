"""Spark itself: the local session and the supported Spark/Delta pairs, Spark schemas of the models, SQL
helpers, the steps that name Spark's jobs, the metrics a job observes on its way and the pool that
applies tables in parallel."""
