"""A new listener life continues the EphemeralRunnerSet's patch IDs instead of restarting at 0.

Patch ID 0 is never suppressed by the controller's cleanup marker (behaviours.md B3), so a
listener that starts at 0 after a takeover can make the controller create a runner for a job
that finished while no listener ran. Continuing the sequence closes that gap.
"""

from __future__ import annotations

import asyncio

import pytest
from listener_fakes import FakeActions, FakePatcher, config

from gharc.listener.app import Listener
from gharc.listener.scaler import MAX_PATCH_SEQ, Scaler
from testworld.wait import eventually

pytestmark = pytest.mark.looptime


class ContinuingPatcher(FakePatcher):
    def __init__(self, current: int | None) -> None:
        super().__init__()
        self.current = current

    async def current_patch_id(self) -> int | None:
        return self.current


async def _first_patch(patcher: FakePatcher, assigned: int) -> tuple[int, int]:
    listener = Listener(config(min_runners=0), FakeActions(initial_assigned=assigned), patcher)
    task = asyncio.create_task(listener.run())
    try:

        async def published() -> bool:
            return bool(patcher.replicas)

        await eventually(published, timeout=10)
        return patcher.replicas[0]
    finally:
        listener.request_stop()
        await asyncio.wait_for(task, 30)


async def test_successor_continues_after_the_predecessors_last_patch() -> None:
    assert await _first_patch(ContinuingPatcher(41), assigned=3) == (3, 42)


async def test_without_a_readable_runner_set_it_starts_at_zero_as_arc() -> None:
    assert await _first_patch(ContinuingPatcher(None), assigned=3) == (3, 0)
    assert await _first_patch(FakePatcher(), assigned=3) == (3, 0)


def test_continue_only_before_the_first_publish_and_within_range() -> None:
    scaler = Scaler(0, 10)
    scaler.continue_from(MAX_PATCH_SEQ)
    assert scaler.seq == -1
    scaler.continue_from(7)
    plan = scaler.plan(2)
    assert plan is not None and plan.patch_id == 8
    scaler.commit(plan)
    scaler.continue_from(100)
    assert scaler.seq == 8
