"""The report computes its numbers from observed job times and counters."""

from __future__ import annotations

import math
from pathlib import Path

from testworld.sim.report import JobTimes, Report, Sample, github_calls, percentile


def test_percentile_uses_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert math.isnan(percentile([], 50))


def test_summary_counts_latency_waste_and_unpicked_jobs() -> None:
    r = Report(
        jobs={
            "a": JobTimes(0, 1, 5),
            "b": JobTimes(0, 3, 6),
            "c": JobTimes(2, None, None),
        },
        runners_created=4,
        github_calls={"POST /acquirejobs": 3},
    )
    s = r.summary()
    assert s["jobs_never_picked_up"] == 1
    assert r.never_picked_up == ["c"]
    assert s["pickup_latency_p50_s"] == 1
    assert s["pickup_latency_p99_s"] == 3
    assert s["wasted_runners"] == 2
    assert s["runners_per_job"] == round(4 / 3, 3)
    assert s["github_calls_per_job"] == {"POST /acquirejobs": 1.0}
    assert "never picked up" in r.text()


def test_write_produces_a_png_and_a_self_contained_page(tmp_path: Path) -> None:
    r = Report(
        jobs={"a": JobTimes(0, 1, 2)},
        samples=[Sample(0, 1, 0, {"pending": 1}), Sample(1, 0, 1, {"running": 1})],
        runners_created=1,
    )
    paths = r.write(tmp_path)
    assert paths["png"].read_bytes().startswith(b"\x89PNG")
    page = paths["html"].read_text()
    assert "data:image/png;base64," in page and "<script" not in page


def test_github_calls_leave_out_the_fakes_own_routes() -> None:
    table = {
        ("POST", "/api/v3/orgs/{org}/actions/runners/registration-token", 201): 2,
        ("POST", "/api/v3/orgs/{org}/actions/runners/registration-token", 503): 1,
        ("GET", "/_fake/state", 200): 7,
        ("GET", "/_runner/jobs/next", 200): 9,
    }
    assert github_calls(table) == {"POST /api/v3/orgs/{org}/actions/runners/registration-token": 3}
