"""Message poll errors: a window of 503s, then one of 429s, in the middle of a burst; the
listeners ride them out in process, keep their sessions and hand out the queued jobs."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.cases import poll_errors

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_poll_5xx_and_429_windows(run_case: RunCase) -> None:
    result = await run_case(poll_errors, "chaos-poll-errors")
    extra = result.extra
    assert extra["poll_503s"] > 0 and extra["poll_429s"] > 0, extra  # the faults did hit
    assert extra["session_409s"] == 0, extra
    assert extra["sessions_kept"] == extra["scale_sets"], extra
    if result.recover_seconds is not None:  # None: every job got through the windows
        assert result.recover_seconds < 45, extra
