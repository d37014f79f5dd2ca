"""Disruptions of the cluster's own making: evicted runner pods (B2) and a scale set
uninstalled while its jobs run. Each counts the jobs that never got a runner: 0."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.disruptions import EVICTED_PODS, evictions, scale_set_deleted

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_evicted_runner_pods_are_replaced(run_case: RunCase) -> None:
    result = await run_case(evictions, "chaos-evictions")
    assert result.extra["evicted"] == EVICTED_PODS, result.extra
    assert result.recover_seconds is not None, result.extra


async def test_a_scale_set_deleted_mid_run_is_finalized_and_the_other_goes_on(
    run_case: RunCase,
) -> None:
    result = await run_case(scale_set_deleted, "chaos-scale-set-deleted")
    assert result.extra["deleted_at_github"] is True, result.extra
    assert result.extra["keep_jobs_after_delete_with_runner"] > 0, result.extra
    assert result.recover_seconds is not None and result.recover_seconds < 90, result.extra
