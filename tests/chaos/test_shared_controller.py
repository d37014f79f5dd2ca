"""The shared controller against one tenant's input and against a frozen leader (issue 26):
another tenant's jobs all get runners, and no two leaders write at once."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.tenants import hostile_schedule, leader_freeze

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_a_schedule_from_the_year_1000_costs_other_tenants_nothing(
    run_case: RunCase,
) -> None:
    result = await run_case(hostile_schedule, "chaos-hostile-schedule")
    assert result.extra["lease_transitions"] == 0, result.extra
    assert not result.extra["controller_exited"], result.extra
    assert result.extra["leader"] == "replica-a", result.extra


async def test_a_frozen_leader_writes_nothing_when_it_wakes(run_case: RunCase) -> None:
    result = await run_case(leader_freeze, "chaos-leader-freeze")
    # The standby took over during the freeze; the woken leader found its fence closed and
    # stopped (LeaderElectionLost: exit status 1) instead of writing beside it.
    assert result.extra["lease_taken_s"] < 30, result.extra
    assert result.extra["frozen_exit_code"] not in (None, 0), result.extra
    assert result.runners_per_job <= 1.0, result.extra
