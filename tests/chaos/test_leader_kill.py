"""Leader kill: the elected controller (listeners in process) is SIGKILLed mid-burst; the
standby replica takes the Lease and resumes every listener's message session."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.cases import leader_kill

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


@pytest.mark.relies_on("session-409")
async def test_leader_kill_mid_burst(run_case: RunCase) -> None:
    result = await run_case(leader_kill, "chaos-leader-kill")
    # The successor resumed the sessions instead of creating new ones against a 409.
    assert result.extra["session_409s"] == 0, result.extra
    assert result.extra["sessions_resumed"] == result.extra["scale_sets"], result.extra
    # The Lease expires 15 s after the kill; the next job's runner follows within seconds.
    assert result.recover_seconds is not None
    assert result.recover_seconds < 60, result.extra
