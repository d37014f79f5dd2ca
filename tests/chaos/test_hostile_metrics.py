"""A tenant's hostile listenerMetrics (20,000 buckets, many job names) against the shared
controller, while another tenant's scale set runs jobs (issue 26): the controller keeps its
Lease, no job waits for a runner, the scrape stays small and each bound is one event."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from gharc.listener.metric_limits import MAX_HISTOGRAM_BUCKETS, MAX_SERIES
from testworld.chaos.hostile_metrics import LABEL_VALUES, hostile_metrics_tenant

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_hostile_listener_metrics_cost_the_controller_little(run_case: RunCase) -> None:
    result = await run_case(hostile_metrics_tenant, "chaos-hostile-metrics")
    extra = result.extra
    assert result.never_got_runner == 0 and extra["victim_never_got_runner"] == 0, extra
    assert extra["leader"] == "tenants", extra  # never lost its Lease, never exited
    # 4 histograms' worth of samples at most per label value: buckets were cut to 64
    per_value = 3 * (MAX_HISTOGRAM_BUCKETS + 4) + 2
    assert extra["hostile_samples"] <= (LABEL_VALUES + 1) * per_value, extra
    assert extra["hostile_samples"] <= MAX_SERIES, extra
    assert extra["job_name_values"] <= LABEL_VALUES + 1 and extra["other_counted"], extra
    assert extra["scrape_s"] < 2.0 and extra["scrape_bytes"] < 2_000_000, extra
    assert extra["limit_events"] >= 4 and extra["limit_event_repeats"] == 0, extra
