"""Listener kill: a listener pod's process is SIGKILLed mid-burst (``--listener-mode=Pod``);
its successor pod comes after B1's first backoff and resumes the message session."""

from __future__ import annotations

import pytest

from gharc.testing.chaos import CaseResult, problems
from gharc.testing.chaos.cases import listener_kill
from gharc.testing.worlds import WorldFactory

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_listener_kill_mid_burst(
    worlds: WorldFactory, chaos_results: list[CaseResult]
) -> None:
    result = await listener_kill(worlds, "chaos-listener-kill")
    chaos_results.append(result)
    assert not problems(result), (problems(result), result.extra)
    assert result.extra["session_409s"] == 0, result.extra
    # The target is 10 s (5 s backoff + a pod start); a loaded 2-core machine gets
    # a looser bound, the table shows the measured number.
    assert result.recover_seconds is not None
    assert result.recover_seconds < 30, result.extra
