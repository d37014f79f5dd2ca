"""What one scale set's listener metrics cost: series, traced memory and scrape time.

A tenant writes ``listenerMetrics`` in its AutoscalingRunnerSet; in-process listeners all
live in the controller, so that config spends the controller's memory and its scrape time.
This builds one listener's :class:`~gharc.listener.metrics.ListenerMetrics` (no GitHub, no
Kubernetes), feeds it ``--jobs`` started and completed jobs with ``--names`` distinct job
names, and prints the series in one scrape, the memory tracemalloc saw allocated for them
and how long the scrape took. ``--buckets N`` gives the three job histograms N buckets (the
hostile config of issue 26 used 20,000); ``--off`` builds the metrics as a listener whose
metrics are disabled does.

    .venv/bin/python bench/listener_metrics_cost.py [--buckets 20000] [--names 12] [--off]
"""

from __future__ import annotations

import argparse
import inspect
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

from gharc.github.models import JobCompleted, JobStarted
from gharc.listener.config import MetricsConfig
from gharc.listener.metrics import ListenerMetrics, default_metrics_config

JOB_LABELS = ["enterprise", "organization", "repository", "job_name", "event_name"]


def hostile(buckets: int) -> MetricsConfig:
    """ARC's default metric set, with ``buckets`` buckets in each job histogram."""
    cfg = default_metrics_config()
    bounds = [float(i + 1) for i in range(buckets)]
    for hist in cfg.histograms.values():
        hist.buckets = list(bounds)
    return cfg


def build(config: MetricsConfig, enabled: bool) -> ListenerMetrics:
    kwargs: dict[str, object] = {"name": "set", "namespace": "ns", "config": config}
    if "enabled" in inspect.signature(ListenerMetrics).parameters:
        kwargs["enabled"] = enabled
    return ListenerMetrics(**kwargs)  # type: ignore[arg-type]


def feed(metrics: ListenerMetrics, jobs: int, names: int) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(jobs):
        common = {
            "owner_name": "acme",
            "repository_name": "app",
            "job_display_name": f"job-{i % names}",
            "event_name": "push",
            "queue_time": t0,
            "scale_set_assign_time": t0 + timedelta(seconds=1),
            "runner_assign_time": t0 + timedelta(seconds=2),
        }
        metrics.record_job_started(JobStarted(**common))  # type: ignore[arg-type]
        metrics.record_job_completed(
            JobCompleted(result="succeeded", finish_time=t0 + timedelta(seconds=9), **common)  # type: ignore[arg-type]
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, default=0, help="buckets per job histogram")
    parser.add_argument("--names", type=int, default=12, help="distinct job names")
    parser.add_argument("--jobs", type=int, default=0, help="jobs (default: one per name)")
    parser.add_argument("--off", action="store_true", help="metrics disabled")
    args = parser.parse_args()
    config = hostile(args.buckets) if args.buckets else default_metrics_config()
    tracemalloc.start()
    metrics = build(config, not args.off)
    feed(metrics, args.jobs or args.names, args.names)
    traced, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    started = time.perf_counter()
    text = metrics.exposition().decode()
    scrape = time.perf_counter() - started
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    print(
        f"buckets={args.buckets or 'default'} names={args.names} off={args.off}: "
        f"series={series} traced={traced / 2**20:.1f} MiB "
        f"({traced / max(1, args.names) / 2**20:.2f} MiB per name) scrape={scrape:.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
