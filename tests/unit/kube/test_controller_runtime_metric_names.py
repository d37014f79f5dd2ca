"""The metric names and labels ARC's dashboards query (issue 13): client-go's
``rest_client_*``, controller-runtime's workqueue gauges of stuck work, no ``_created``."""

from __future__ import annotations

import subprocess
import sys

from prometheus_client import REGISTRY

from gharc.kube import metrics
from gharc.kube.clock import FakeClock
from gharc.kube.workqueue import WorkQueue


def sample(name: str, labels: dict[str, str]) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_workqueue_reports_unfinished_and_longest_running_work() -> None:
    clock = FakeClock(100.0)
    queue: WorkQueue[str] = WorkQueue(name="metric-names-q", clock=clock)
    labels = {"name": "metric-names-q", "controller": "metric-names-q"}
    assert sample("workqueue_unfinished_work_seconds", labels) == 0.0
    queue.add("a")
    queue.add("b")
    await queue.get()
    clock.advance(3)
    await queue.get()
    clock.advance(2)
    assert sample("workqueue_longest_running_processor_seconds", labels) == 5.0
    assert sample("workqueue_unfinished_work_seconds", labels) == 7.0
    queue.done("a")
    queue.done("b")
    assert sample("workqueue_longest_running_processor_seconds", labels) == 0.0


def test_rest_client_metrics_carry_client_gos_labels() -> None:
    before = sample("rest_client_requests_total", {"code": "200", "method": "GET", "host": "h:1"})
    metrics.REST_CLIENT_REQUESTS.labels(code="200", method="GET", host="h:1").inc()
    after = sample("rest_client_requests_total", {"code": "200", "method": "GET", "host": "h:1"})
    assert after == (before or 0) + 1


def test_the_cli_process_exposes_no_created_series() -> None:
    code = (
        "import gharc.cli as cli; cli.process_defaults();"
        "from prometheus_client import Counter, generate_latest;"
        "Counter('probe_total', 'a probe').inc(); print(generate_latest().decode())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "probe_total 1.0" in out
    assert "_created" not in out
