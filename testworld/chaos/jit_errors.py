"""A chaos case of the Actions service failing JIT configs only (issue 28 §7).

``generatejitconfig`` answers 503 while every other endpoint answers, then 429 with
``Retry-After``. The listeners' message polls and statistics reads keep succeeding
meanwhile: with one breaker per (host, credential) each of those successes closed it, and
the pending runners sent their JIT config calls again every 2 s (111 in 30 s). Measured from
the outside (the fake GitHub's call counts), like :mod:`.cases`.
"""

from __future__ import annotations

import asyncio
import time

from testworld.chaos.cases import SHORT_POLL, SMALL, Sizes, burst, start_scale_sets
from testworld.chaos.measure import first_runner_after, outcome, wait_for_jobs
from testworld.chaos.report import CaseResult
from testworld.worlds import WorldFactory

JIT = "*/generatejitconfig"
#: The 503 window, seconds: long enough for the breaker's windows 2, 4 and 8 s to fail.
JIT_503_WINDOW = 15.0
#: The 429 window and its Retry-After, seconds: two holds and the start of a third.
JIT_429_WINDOW = 10.0
JIT_RETRY_AFTER = 4


async def jit_errors(factory: WorldFactory, namespace: str, sizes: Sizes = SMALL) -> CaseResult:
    """A burst lands in a JIT config 503 window, the next one in a 429 window.

    ``scale_sets * max_runners`` runners are pending in each window. The JIT breaker stays
    open through the 503s whatever the other endpoints answer (a few probes per backoff
    step, not a call per runner every 2 s), and a 429 holds every runner's JIT call until
    its Retry-After lifts. Afterwards every job gets a runner."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL)
    gh = world.github
    sets = [f"je-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    pending = sizes.scale_sets * sizes.max_runners

    t_503 = time.time()
    gh.add_fault("status", route=JIT, method="POST", status=503, seconds=JIT_503_WINDOW)
    first = burst(world, sets, sizes.max_runners, 1000, sizes)
    await asyncio.sleep(JIT_503_WINDOW)
    t_503_end = time.time()
    calls_503 = gh.calls(JIT, method="POST", status=503)
    await wait_for_jobs(world, first)
    recover_503 = first_runner_after(first, t_503_end)

    gh.add_fault(
        "secondary_rate_limit",
        route=JIT,
        method="POST",
        status=429,
        retry_after=JIT_RETRY_AFTER,
        seconds=JIT_429_WINDOW,
    )
    t_429 = time.time()
    second = burst(world, sets, sizes.max_runners, 1100, sizes)
    await asyncio.sleep(JIT_429_WINDOW)
    t_429_end = time.time()
    calls_429 = gh.calls(JIT, method="POST", status=429)

    result = await outcome(world, "jit-503-429", first + second, namespace=ns, scale_sets=sets)
    result.recover_seconds = recover_503
    result.extra.update(
        pending_runners=pending,
        jit_503_window_s=round(t_503_end - t_503, 1),
        jit_calls_503=calls_503,
        jit_429_window_s=round(t_429_end - t_429, 1),
        jit_calls_429=calls_429,
        jit_429_holds=int(JIT_429_WINDOW // JIT_RETRY_AFTER) + 1,
        recover_429_s=first_runner_after(second, t_429_end),
        polls_ok=gh.calls("/_services/broker/{session_id}/messages", method="GET", status=202)
        + gh.calls("/_services/broker/{session_id}/messages", method="GET", status=200),
    )
    return result


JIT_ERRORS = {"jit-503-429": jit_errors}
