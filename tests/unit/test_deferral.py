"""Which tables of a batch wait under a freshness bound, and whose waiting events a batch applies
(``resolver.batch.deferral.decide``, from the plan alone), and what the lake's markers keep of them
(``resolver.tablestate.Waiting``). No Spark: the plan's metadata and layouts are built by hand."""

from __future__ import annotations

import json

import pytest

from resolver.batch.deferral import decide, waiting_lines
from resolver.config.batch_options import Freshness
from resolver.config.pipeline import parse_pipeline
from resolver.errors import ConfigError
from resolver.lake.folders import Lake
from resolver.plan.batch_plan import BatchPlan
from resolver.plan.tablemeta import TableMeta
from resolver.tablelayout import Column_, TableLayout
from resolver.tablestate import TableState, Waiting

NOW = 1_800_000_000.0


def _layout(table: str, **changed: object) -> TableLayout:
    state = TableState(key=json.dumps(["id"]), key_source="primary_key", schema_version=1)
    columns = (Column_("id", "bigint"), Column_("body", "text"))
    given = {"key": ("id",), **changed}
    return TableLayout(table, columns, state=state, **given)  # type: ignore[arg-type]


def _plan(events: dict[str, int], waiting: dict[str, Waiting], **layouts: TableLayout | None) -> BatchPlan:
    meta = {t: TableMeta(t, events=n, lo=100, hi=200) for t, n in events.items()}
    shapes = {t: layouts.get(t.replace(".", "_"), _layout(t)) for t in events}
    return BatchPlan(Lake.at("/tmp/lake"), meta, shapes, waiting=waiting)


def test_a_waiting_entry_keeps_its_commits_count_range_and_start_through_its_text() -> None:
    first = Waiting((), 0, None, None, NOW).joined(7, 10, 300, 400)
    later = first.joined(9, 5, 150, 350).joined(None, 2, None, None)  # a batch bronze took nothing new of
    assert later == Waiting((7, 9), 17, 150, 400, NOW)
    assert Waiting.parse(later.text()) == later and Waiting.parse("") is None
    assert not later.due(600, NOW + 599) and later.due(600, NOW + 600)
    line = waiting_lines({"public.t": later}, 600)[0]
    assert line.startswith("public.t: 17 event(s) wait in bronze (commit LSN 0/96 to 0/190) since ")
    assert "applied by the first batch after" in line and "complete before commit LSN 0/96" in line


def test_a_small_table_waits_and_a_large_one_or_one_past_the_bound_is_applied() -> None:
    held = {
        "public.late": Waiting((3,), 50, 10, 20, NOW - 700),
        "public.full": Waiting((3,), 95, 10, 20, NOW),
    }
    plan = _plan({"public.small": 10, "public.big": 100, "public.late": 1, "public.full": 5}, held)
    got = decide(plan, Freshness(600, below_events=100), NOW)
    assert sorted(got.waits) == ["public.small"]  # new: waiting since the batch
    assert got.waits["public.small"] == Waiting((), 0, None, None, NOW)
    assert sorted(got.due) == ["public.full", "public.late"]  # reached the limit; past the bound


def test_without_a_bound_nothing_waits_and_everything_waiting_is_applied() -> None:
    held = {"public.absent": Waiting((3,), 5, 10, 20, NOW), "public.small": Waiting((4,), 5, 10, 20, NOW)}
    got = decide(_plan({"public.small": 1}, held), None, NOW)
    assert got.waits == {} and sorted(got.due) == ["public.absent", "public.small"]
    # with a bound, a table absent from the batch waits on until its bound runs out or it reaches the limit
    got = decide(_plan({"public.small": 1}, held), Freshness(600), NOW + 10)
    assert sorted(got.waits) == ["public.small"] and got.due == {}
    got = decide(_plan({"public.small": 1}, held), Freshness(600, below_events=5), NOW + 10)
    assert got.waits == {} and sorted(got.due) == ["public.absent", "public.small"]


@pytest.mark.parametrize(
    "changed",
    [
        {"schema_log": ({"column": "body"},)},  # a new column, logged
        {"renames": (("old", "body"),)},
        {"drops": {"body": ((1, 2),)}},
        {"rescan": {"body": (None, None)}},
        {"key": ("id", "body")},  # a new key
    ],
)
def test_a_batch_that_changes_more_than_rows_applies_the_table(changed: dict[str, object]) -> None:
    plan = _plan({"public.t": 1}, {}, public_t=_layout("public.t", **changed))
    assert decide(plan, Freshness(600), NOW).waits == {}


def test_a_new_table_and_one_whose_columns_are_unknown_never_wait() -> None:
    new = TableLayout("public.t", (Column_("id", "bigint"),), ("id",), "primary_key", TableState())
    assert decide(_plan({"public.t": 1}, {}, public_t=new), Freshness(600), NOW).waits == {}
    assert decide(_plan({"public.t": 1}, {}, public_t=None), Freshness(600), NOW).waits == {}


def test_a_bound_that_is_not_a_number_of_seconds_fails_with_one_line() -> None:
    for seconds in (-1, float("nan"), "10m"):
        with pytest.raises(ConfigError, match="freshness: found"):
            Freshness(seconds)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="below_events 0"):
        Freshness(60, below_events=0)


def test_a_pipeline_file_sets_the_bound() -> None:
    text = "source: {path: landing}\nlake: lake\nfreshness: {seconds: 600}\n"
    pipeline = parse_pipeline(text, "/tmp")
    assert pipeline.freshness is not None
    assert (pipeline.freshness.seconds, pipeline.freshness.below_events) == (600, 10_000)
    with pytest.raises(ConfigError, match="freshness"):
        parse_pipeline("source: {path: landing}\nlake: lake\nfreshness: {seconds: -5}\n", "/tmp")
