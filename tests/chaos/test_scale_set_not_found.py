"""Session creation answered 404 RunnerScaleSetNotFound for a while although the scale set
exists (ARC #3942): the listeners back off instead of crash looping, say so on their
AutoscalingListener, and hand out the jobs queued meanwhile once the service is back."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.incidents import scale_set_not_found, scale_set_not_found_pods

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_scale_set_not_found_is_ridden_out(run_case: RunCase) -> None:
    result = await run_case(scale_set_not_found, "chaos-scale-set-not-found")
    extra = result.extra
    assert result.runners_per_job <= 1.05, result
    assert extra["session_404s"] > 0, extra  # the fault did hit
    assert "BackOff" in extra["listener_phases"], extra
    # Paced by the restart ladder (5, 10, 20 s ...): a handful of attempts per listener in
    # 30 s, not a crash loop.
    assert extra["session_404s"] <= 6 * len(["nf-0", "nf-1"]), extra
    assert extra["acquired_during_fault"] == 0, extra
    # Every job queued during the fault starts within two minutes of it clearing.
    assert extra["last_start_after_clear_s"] is not None
    assert extra["last_start_after_clear_s"] < 120, extra
    assert result.recover_seconds is not None and result.recover_seconds < 120, extra


async def test_scale_set_not_found_with_listener_pods(run_case: RunCase) -> None:
    result = await run_case(scale_set_not_found_pods, "chaos-scale-set-not-found-pods")
    extra = result.extra
    assert extra["session_404s"] > 0, extra
    assert "BackOff" in extra["listener_phases"], extra
    assert extra["acquired_during_fault"] == 0, extra
    assert extra["last_start_after_clear_s"] is not None
    assert extra["last_start_after_clear_s"] < 120, extra
