"""How one batch is taken in: the options of ``ingest``, ``apply_changes`` and ``plan_changes`` in one object
(``BatchOptions``), with the read window of a batch cut from a stream that goes on
(``resolver.formats.stitch_plan.ReadWindow``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from resolver.catalog_target import Catalog
from resolver.config.pipeline import TableSettings
from resolver.config.policy import Policies
from resolver.errors import ConfigError
from resolver.formats.stitch_plan import CLOSED, ReadWindow
from resolver.models import TableSummary

__all__ = ["BatchOptions", "Freshness", "ReadWindow", "batch_options"]


@dataclass(frozen=True)
class Freshness:
    """How stale a small table's silver tables may grow: a table with fewer than ``below_events`` events
    waiting (its new ones counted) waits in bronze until its oldest have waited ``seconds``; then, or when
    a batch brings it that many, they are applied. ``seconds`` 0 applies everything at once (as no bound
    does)."""

    seconds: float
    below_events: int = 10_000

    def __post_init__(self) -> None:
        if not (isinstance(self.seconds, int | float) and math.isfinite(self.seconds) and self.seconds >= 0):
            raise ConfigError(f"freshness: found {self.seconds!r} seconds, expected a number of 0 or more")
        if not isinstance(self.below_events, int) or self.below_events < 1:
            raise ConfigError(
                f"freshness: found below_events {self.below_events!r}, expected a whole number of 1 or more"
            )


@dataclass(frozen=True)
class BatchOptions:
    """The options of one batch (all optional):

    - ``policies``: what happens to unknown tables and columns and unsafe type changes
      (``resolver.config.policy``; a quarantined event is counted under ``quarantined``, not ``accepted``);
    - ``settings``: each table's ``resolver.config.pipeline.TableSettings`` (outputs, key override, tracked
      columns, clustering);
    - ``include``: tables it says no to get no silver tables (their events still go to bronze);
    - ``isolate``: a table that fails (in planning or while applying) does not stop the others: its summary
      carries the ``error``;
    - ``on_table``: called with each table's summary as soon as the table is done;
    - ``window``: the batch's :class:`ReadWindow` in a stream read in pieces;
    - ``partitions``: partitions' names (shell patterns) -> the table their changes belong to, beside the
      routes ``resolver capture`` recorded (``resolver.formats.partition_routes``);
    - ``catalog``: register the lake's tables by name there (``resolver.lake.catalog``; None: paths only);
    - ``freshness``: small tables' silver writes wait in bronze under this bound (:class:`Freshness`,
      ``resolver.batch.deferral``; None: every table is applied in every batch, and whatever waited too).
      Only ``ingest`` (and ``resolver run``) take it: ``apply_changes`` has no bronze to leave events in.
    """

    policies: Policies = field(default_factory=Policies)
    settings: Callable[[str], TableSettings] | None = None
    include: Callable[[str], bool] | None = None
    isolate: bool = False
    on_table: Callable[[TableSummary], None] | None = None
    window: ReadWindow = CLOSED
    partitions: Mapping[str, str] | None = None
    catalog: Catalog | None = None
    freshness: Freshness | None = None


def batch_options(options: object) -> BatchOptions:
    """``options`` as given to ``ingest``, ``apply_changes`` or ``plan_changes`` (None: the defaults);
    anything else fails with one line (a ``Policies`` passed where the options go, as before BatchOptions
    existed)."""
    if options is None:
        return BatchOptions()
    if not isinstance(options, BatchOptions):
        hint = " (policies go in BatchOptions(policies=...))" if isinstance(options, Policies) else ""
        raise TypeError(f"options: expected a resolver.BatchOptions, found {type(options).__name__}{hint}")
    return options
