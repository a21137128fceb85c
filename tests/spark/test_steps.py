"""``resolver.spark.steps``: the jobs of a step carry its name, the thread's description comes back
afterwards, and ``python -m bench.steps`` attributes Delta's own job descriptions to the step that ran
them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from pyspark.sql import SparkSession

from bench.jvm_cpu import ENDED, GROUPS, OTHER, JvmCpu, driver_pid
from bench.steps import job_descriptions, step_of
from resolver.spark.steps import DESCRIPTION, step


def test_step_of_reads_the_step_through_deltas_words() -> None:
    assert step_of("Delta: Delta: public.t: affected keys: Filtering files for query: Compute snapshot") == (
        "affected keys"
    )
    assert (
        step_of("public.t: history merge - MERGE operation - scanning files for matches") == "history merge"
    )
    assert step_of("ingest: bronze - MERGE operation - writing new files for only inserts") == "bronze"
    assert step_of("public.plan: resolve") == "resolve"  # a table named like a step
    assert step_of("Delta: Compute snapshot for version: 2") == "(no step)"


@pytest.mark.spark
def test_jobs_of_a_step_carry_its_name_and_the_description_is_put_back(spark: SparkSession) -> None:
    sc = spark.sparkContext
    sc.setLocalProperty(DESCRIPTION, "outer work")
    try:
        before = set(job_descriptions(spark))
        with step(spark, 'public."we: ird"', "counts"):
            spark.range(7).collect()
        assert sc.getLocalProperty(DESCRIPTION) == "outer work"
        spark.range(3).collect()
        new = {i: d for i, d in job_descriptions(spark).items() if i not in before}
        assert sorted(new.values()) == ["outer work", 'public."we: ird": counts']
        assert [step_of(d) for d in sorted(new.values())] == ["(no step)", "counts"]
    finally:
        sc.setLocalProperty(DESCRIPTION, None)  # type: ignore[arg-type]


@pytest.mark.spark
def test_the_driver_jvm_cpu_is_read_by_thread_group(spark: SparkSession) -> None:
    cpu = JvmCpu(driver_pid(spark))
    before = cpu.read()
    groups = {group for group, _ in before.threads.values()}
    assert {"JIT compiler", "driver (Python's calls)"} <= groups  # every driver has both
    assert before.process >= sum(seconds for _, seconds in before.threads.values()) > 0
    with ThreadPoolExecutor(2) as pool:  # Python threads of their own: JVM threads that end with them
        list(pool.map(lambda n: spark.range(n).selectExpr("sum(id * id) AS s").collect(), [100_000, 200_000]))
    spent = cpu.since(before)
    assert set(spent) <= {group for group, _ in GROUPS} | {OTHER, ENDED}
    assert all(seconds >= 0 for seconds in spent.values())
    assert sum(spent.values()) > 0
    assert list(spent.values()) == sorted(spent.values(), reverse=True)
