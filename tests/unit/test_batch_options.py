"""The options of one batch (``resolver.config.batch_options``): the defaults, and one line for anything else
passed where the options go. No Spark."""

from __future__ import annotations

import pytest

from resolver.config.batch_options import BatchOptions, batch_options
from resolver.config.policy import Policies, Policy
from resolver.formats.stitch_plan import CLOSED


def test_no_options_are_the_defaults_and_options_are_kept() -> None:
    default = batch_options(None)
    assert default == BatchOptions()
    assert default.policies == Policies() and default.window == CLOSED and not default.isolate
    given = BatchOptions(policies=Policies(unknown_table=Policy.QUARANTINE), isolate=True)
    assert batch_options(given) is given


def test_policies_where_the_options_go_fail_with_one_line_saying_where_they_go() -> None:
    with pytest.raises(TypeError) as err:
        batch_options(Policies(unknown_table=Policy.FAIL))
    assert str(err.value) == (
        "options: expected a resolver.BatchOptions, found Policies "
        "(policies go in BatchOptions(policies=...))"
    )
    with pytest.raises(TypeError, match=r"^options: expected a resolver.BatchOptions, found dict$"):
        batch_options({"isolate": True})
