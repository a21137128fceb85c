"""Speed of the resolver against the seeds' algorithms and the usual MERGE recipes, goal by goal.

    python -m bench --quick            # scaled down (about 1/50 of the issue's sizes), median of 3
    python -m bench                    # the issue's sizes (500k/50M-row targets, 10M-row history, ...)
    python -m bench --quick --goals G1,G8 --keep --tmpdir /big/disk

Method (``bench/README.md`` has the details):

1. One warm SparkSession (``resolver.local_session``, local[2], ``spark.ui.retainedJobs`` raised so the
   status store keeps every job id).
2. Checks before timing (``bench.checks``): the direct seed of a target equals what the resolver writes
   for the same target, and every baseline gives our result on a small generated batch where its semantics
   allow; a baseline that fails is not timed (its goal says why). The checks also warm every code path up.
3. Each goal times both sides on fresh copies of the same seeded tables, ``repeat`` runs each (full mode:
   one more, discarded), and reports the ratio of the medians, the Spark jobs per run (status-store job
   ids, all threads) and the Delta commits' MERGE metrics (files scanned, removed, rows copied).
4. Prints one line per goal and writes ``bench/RESULTS.md`` with the machine line, the command and scale.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

from bench.goals import FULL, QUICK, Bench, Goal
from bench.many_tables import many_table_goals

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
GOALS = ("G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8", "G9", "G11", "G12")


def _verify_job_counter(spark) -> str:  # type: ignore[no-untyped-def]
    """The job counter against a known number of jobs: 5 collects (1 job each), 2 of them from threads."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.metrics import measure

    def work() -> None:
        for _ in range(3):
            spark.range(10).collect()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda _: spark.range(10).collect(), range(2)))

    got = measure(spark, work, {}).jobs
    if got != 5:
        raise SystemExit(
            f"the Spark job counter saw {got} jobs for 5 known ones; refusing to report job counts"
        )
    return "job counter verified: 5 known jobs (2 from other threads) counted as 5"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="scaled-down sizes, median of 3 (see the docstring)")
    p.add_argument("--goals", default=",".join(GOALS), help="comma-separated goals to run (default: all)")
    p.add_argument("--tmpdir", default=None, help="where to put the lakes (default: the system temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the generated lakes and files")
    p.add_argument(
        "--results", default=RESULTS, help="the Markdown file to write (default: bench/RESULTS.md)"
    )
    args = p.parse_args(argv)
    wanted = [g.strip().upper() for g in args.goals.split(",") if g.strip()]
    unknown = [g for g in wanted if g not in GOALS]
    if unknown:
        p.error(f"unknown goal(s) {unknown}; choose from {', '.join(GOALS)}")
    scale = QUICK if args.quick else FULL

    from bench.checks import check_baselines
    from bench.parse_speed import machine_line
    from resolver import local_session

    started = time.perf_counter()
    loads = [os.getloadavg()[0]]
    spark = local_session("bench", spark__ui__retainedJobs="1000000", spark__ui__retainedStages="1000000")
    work = tempfile.mkdtemp(prefix="bench_", dir=args.tmpdir)
    try:
        lines = [_verify_job_counter(spark)]
        print(lines[0])
        print("checks (each baseline vs ours on a small batch) ...")
        refused = {}
        for c in check_baselines(spark, os.path.join(work, "checks")):
            print(f"  {'ok ' if c.ok else 'NO '} {c.name}{'' if c.ok else ': ' + c.why}")
            if not c.ok:
                refused[c.name] = c.why
        bench = Bench(spark, scale, work, refused)
        goals: list[Goal] = []
        for g in wanted:
            print(f"{g} ...")
            t = time.perf_counter()
            steps: dict[str, Callable[[], Goal | list[Goal]]] = {
                "G1": bench.g1_target_size,
                "G2": bench.g2_history,
                "G3": bench.g3_small_batch,
                "G4": bench.g4_resolution,
                "G5": bench.g5_chains,
                "G6": bench.g6_late,
                "G7": bench.g7_run,
                "G8": bench.g8_reapply,
                "G9": lambda: many_table_goals(bench, {"g9", "small", "waiting"}),
                "G11": bench.g11_aging,
                "G12": lambda: many_table_goals(bench, {"g12"}),
            }
            try:
                step = steps[g]()
            except Exception as e:  # noqa: BLE001 (one goal's failure is reported; the others still run)
                step = Goal(f"{g} (failed)", None, "-", None, note=f"{type(e).__name__}: {str(e)[:500]}")
            goals += step if isinstance(step, list) else [step]
            loads.append(os.getloadavg()[0])
            print(f"  ({time.perf_counter() - t:.0f} s)")
        wall = time.perf_counter() - started
        table = _table(goals)
        print()
        print("\n".join(table))
        for goal in goals:
            print(f"\n{goal.name}: {goal.verdict}")
            for d in [*goal.detail, goal.note, goal.why if goal.passed is False else ""]:
                if d:
                    print(f"  {d}")
        command = "python -m bench" + "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv))
        _write(goals, table, refused, lines, command, scale.name, machine_line(), wall, loads, args.results)
        print(f"\nwall time {wall / 60:.1f} min; wrote {args.results}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _table(goals: list[Goal]) -> list[str]:
    w = max(len(g.name) for g in goals)
    out = [
        f"{'goal':<{w}} | {'ratio':>8} | {'target':>7} | result",
        f"{'-' * w}-|-{'-' * 8}-|-{'-' * 7}-|-------",
    ]
    for g in goals:
        ratio = "-" if g.ratio is None else f"{'>' if g.lower_bound else ''}{g.ratio:.2f}x"
        out.append(f"{g.name:<{w}} | {ratio:>8} | {g.target:>7} | {g.verdict}")
    return out


def _write(
    goals: list[Goal],
    table: list[str],
    refused: dict[str, str],
    lines: list[str],
    command: str,
    scale: str,
    machine: str,
    wall: float,
    loads: list[float],
    path: str = RESULTS,
) -> None:
    md = [
        "# Resolver benchmarks: goals of issues 6 and 68",
        "",
        f"- machine: {machine}",
        f"- command: `{command}` (from the repository root; Spark local[2] via `local_session()`), "
        f"wall time {wall / 60:.1f} min",
        f"- scale: {scale}",
        f"- 1-minute load average while running: {min(loads):.1f}-{max(loads):.1f} on 2 cores (above 2: "
        "other "
        "processes competed for the CPU and absolute times are inflated; ratios are measured side by side)",
        f"- {lines[0]}",
        "",
        "```",
        *table,
        "```",
        "",
        "## Per goal",
        "",
    ]
    for g in goals:
        md.append(f"### {g.name}: {g.verdict}")
        md.append("")
        md += [f"- {d}" for d in [*g.detail, g.note] if d]
        if g.passed is False and g.why:
            md += ["", f"Missed. {g.why}"]
        md.append("")
    if refused:
        md += ["## Baselines not timed (their check against ours failed)", ""]
        md += [f"- {name}: {why}" for name, why in refused.items()]
        md.append("")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(md))


if __name__ == "__main__":
    main()
