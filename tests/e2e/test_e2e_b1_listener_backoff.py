"""B1 end to end: a listener failing with 401 is restarted with growing gaps, then recovers.

The scenario (tests/e2e/_e2e_b1.py) runs in the background of the session on its own thread
and event loop, next to the other tests; this test, ordered last, collects it."""

from __future__ import annotations

import itertools

import pytest
from _e2e_b1 import MAX_PODS_IN_WINDOW, B1Result

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.b1_result
@pytest.mark.timeout(600)
async def test_listener_401_backs_off_and_recovers(b1_background: object) -> None:
    wait = getattr(b1_background, "wait", None)
    assert wait is not None
    res = await wait(560)
    assert isinstance(res, B1Result)
    seen = sorted(res.pod_first_seen.values())
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(seen)]
    detail = f"listener pods first seen at {seen} s (gaps {gaps})"
    assert res.pods_in_window < MAX_PODS_IN_WINDOW, detail
    assert res.pods_in_window >= 4, f"the failing listener was not restarted: {detail}"
    assert res.failed_pods >= 3, detail
    # Growing gaps: each restart waits longer than the one before (5, 10, 20, 40, 80 s).
    assert all(b > a for a, b in itertools.pairwise(gaps)), detail
    assert res.recovered_after is not None
    assert res.jobs_completed == res.jobs == 3
