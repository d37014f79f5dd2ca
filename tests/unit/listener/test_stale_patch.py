"""A count whose statistics predate the set's last cleanup is read again (B3), but a set
that keeps cleaning up, or a service that does not answer, never leaves it unsent."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest
from listener_fakes import FakeActions, FakePatcher, config

from gharc.github.models import RunnerScaleSetStatistic
from gharc.listener.app import STALE_PATCH_ATTEMPTS, Listener
from gharc.listener.runnerset_writes import StaleStatistics

pytestmark = pytest.mark.looptime


class Actions(FakeActions):
    def __init__(self, assigned: int, *, fail_reads: bool = False) -> None:
        super().__init__(initial_assigned=assigned)
        self.fail_reads = fail_reads
        self.reads = 0

    async def get_runner_scale_set_by_id(self, scale_set_id: int) -> SimpleNamespace:
        self.reads += 1
        if self.fail_reads:
            raise httpx.ConnectError("refused")
        return SimpleNamespace(
            statistics=RunnerScaleSetStatistic(total_assigned_jobs=self.initial_assigned)
        )


class MovingMarkerPatcher(FakePatcher):
    """Every conditional patch finds the cleanup marker moved on."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[int] = []

    async def patch_replicas_after(self, replicas: int, patch_id: int, marker: int) -> None:
        self.refused.append(marker)
        raise StaleStatistics(marker + 1)


def _listener(actions: Actions, patcher: FakePatcher) -> Listener:
    listener = Listener(config(min_runners=0), actions, patcher)
    listener.step_attempts = 1
    listener.handler.record_statistics(RunnerScaleSetStatistic(total_assigned_jobs=4), 7)
    listener.scaler.mark_dirty()
    return listener


async def test_a_marker_that_keeps_moving_still_gets_a_fresh_count() -> None:
    actions, patcher = Actions(assigned=3), MovingMarkerPatcher()
    listener = _listener(actions, patcher)
    assert await listener.publish()
    # Refused against 7, then against the marker each refusal reported; read again each time.
    assert patcher.refused == [7, 8][: STALE_PATCH_ATTEMPTS - 1]
    assert actions.reads == STALE_PATCH_ATTEMPTS - 1
    # The last attempt goes out unconditionally, with the count read after the cleanup.
    assert patcher.replicas == [(3, 0)]
    assert listener.stale_patches == STALE_PATCH_ATTEMPTS - 1


async def test_unreadable_statistics_still_send_the_known_count() -> None:
    actions, patcher = Actions(assigned=3, fail_reads=True), MovingMarkerPatcher()
    listener = _listener(actions, patcher)
    assert await listener.publish()
    assert patcher.refused == [7]
    assert patcher.replicas == [(4, 0)]  # nothing fresher to send: the count known goes out


async def test_without_a_known_marker_the_patch_is_unconditional() -> None:
    actions, patcher = Actions(assigned=3), MovingMarkerPatcher()
    listener = _listener(actions, patcher)
    listener.handler.record_statistics(RunnerScaleSetStatistic(total_assigned_jobs=4), None)
    assert await listener.publish()
    assert patcher.refused == [] and patcher.replicas == [(4, 0)]
