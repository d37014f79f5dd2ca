"""Runner processes that hang after their job (ARC #4603: a slot held for 7 hours): the
controller finishes them after --runner-hang-timeout and their slots come back."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.incidents import hung_runner

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_hung_runners_are_finished(run_case: RunCase) -> None:
    result = await run_case(hung_runner, "chaos-hung-runner")
    assert "error" not in result.extra, result.extra
    assert result.extra["hung"] == 2, result.extra
    # Hang timeout 5 s, checked every 2 s: each hung pod goes within about 10 s of hanging.
    assert result.recover_seconds is not None
    assert result.recover_seconds < 60, result.extra
