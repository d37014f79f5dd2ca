"""JIT configs fail while every other endpoint answers (issue 28 §7): a 503 window, then a
429 window, each with a burst pending. The pending runners share the JIT config breaker and
the credential's rate limit, and every job gets a runner afterwards."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.jit_errors import jit_errors

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_jit_503_and_429_windows(run_case: RunCase) -> None:
    result = await run_case(jit_errors, "chaos-jit-errors")
    extra = result.extra
    pending = extra["pending_runners"]
    assert extra["polls_ok"] > 0, extra  # the other endpoints did answer meanwhile
    assert extra["jit_calls_503"] > 0 and extra["jit_calls_429"] > 0, extra  # faults hit
    # One breaker per endpoint class: the first wave (at most a call per runner: the breaker
    # opens after 5 failures, plus calls already under way), then at most 2 probes per
    # backoff step (2, 4, 8 s fail inside 15 s). Measured with 8 runners: 14 calls; with
    # one breaker per host, which each answered poll closed: 42.
    assert extra["jit_calls_503"] <= 2 * pending + 2 * 3, extra
    # A 429 holds every runner's JIT call until its Retry-After lifts: the calls under way
    # when the first one came, then one JIT config probe per hold. Measured: 5-10. Before,
    # a listener's long poll could be the probe (it answers when it ends: after the 1 s
    # grace every held runner went), and so could a statistics read, whose 200 released
    # them all at once, as did a poll's answer sent before the 429: 5-24, 24 when each
    # runner drew a 429 in every hold.
    assert extra["jit_calls_429"] <= pending + extra["jit_429_holds"], extra
