"""Legacy mode's webhook server SIGKILLed mid-burst and restarted (issue 28): the jobs of
the deliveries lost meanwhile are found by the queued-job poll within a minute, duplicate
deliveries add no runner, and the poll's unchanged listings cost no quota."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.legacy import legacy_webhook_restart

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


@pytest.mark.relies_on("rest-304-free", "webhook-no-retry")
async def test_legacy_webhook_restart_mid_burst(run_case: RunCase) -> None:
    result = await run_case(legacy_webhook_restart, "chaos-legacy-webhook")
    extra = result.extra
    # The outage lost deliveries (else the case proves nothing) and duplicates were sent.
    assert extra["lost_queued"] >= 1, extra
    assert extra["duplicates_sent"] >= 1, extra
    # Issue 28: a lost delivery's job found within 60 s, not 10 minutes.
    assert extra["lost_max_wait_s"] is not None and extra["lost_max_wait_s"] < 60, extra
    assert extra["max_wait_s"] is not None and extra["max_wait_s"] < 60, extra
    # Runners no job used: at most one per lost delivery (no poll can tell a finished
    # ephemeral runner's replacement is not needed before it is made), and none is left
    # once the burst is done (run_case: 0 leftovers, 0 orphans). Duplicates add none.
    assert extra["runners_without_job"] <= extra["lost_queued"] + extra["lost_completed"], extra
    # Unchanged listings were revalidated for free.
    assert extra["poll_rest_304"] >= 1, extra
