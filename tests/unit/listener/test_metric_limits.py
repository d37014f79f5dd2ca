"""What one scale set's listenerMetrics may cost the process serving it (issue 26).

A tenant writes ``listenerMetrics``; in-process listeners all live in the controller, so
buckets, label values and series are bounded per scale set, a limit reached is said once,
and a listener whose metrics are off keeps nothing per job.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from listener_fakes import config
from prometheus_client.parser import text_string_to_metric_families

from gharc.github.config import parse_config_url
from gharc.github.models import JobCompleted, JobStarted
from gharc.listener.config import MetricsConfig
from gharc.listener.metric_limits import (
    MAX_HISTOGRAM_BUCKETS,
    MAX_LABEL_VALUES,
    MAX_SERIES,
    OTHER,
    MetricLimits,
)
from gharc.listener.metrics import (
    JOB_QUEUE_DURATION,
    ListenerMetrics,
    default_metrics_config,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def hostile(buckets: int = 20_000) -> MetricsConfig:
    """ARC's metric set with ``buckets`` buckets in each job histogram (issue 26's config)."""
    cfg = default_metrics_config()
    for hist in cfg.histograms.values():
        hist.buckets = [float(i + 1) for i in range(buckets)]
    return cfg


def started(name: str, repository: str = "app", event: str = "push") -> JobStarted:
    return JobStarted(
        owner_name="acme",
        repository_name=repository,
        job_display_name=name,
        event_name=event,
        queue_time=T0,
        scale_set_assign_time=T0 + timedelta(seconds=1),
        runner_assign_time=T0 + timedelta(seconds=2),
    )


def completed(name: str) -> JobCompleted:
    return JobCompleted(
        owner_name="acme",
        repository_name="app",
        job_display_name=name,
        event_name="push",
        result="succeeded",
        runner_assign_time=T0 + timedelta(seconds=2),
        finish_time=T0 + timedelta(seconds=9),
    )


def samples(metrics: ListenerMetrics) -> list[Any]:
    text = metrics.exposition().decode()
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def label_values(metrics: ListenerMetrics, label: str) -> set[str]:
    return {s.labels[label] for s in samples(metrics) if label in s.labels}


def test_20000_buckets_are_cut_to_the_first_64() -> None:
    metrics = ListenerMetrics(name="set", namespace="ns", config=hostile())
    metrics.record_job_started(started("build"))
    buckets = [s for s in samples(metrics) if s.name == JOB_QUEUE_DURATION + "_bucket"]
    assert MAX_HISTOGRAM_BUCKETS == 64
    assert len(buckets) == MAX_HISTOGRAM_BUCKETS + 1  # and +Inf
    assert buckets[MAX_HISTOGRAM_BUCKETS - 1].labels["le"] == "64.0"


def test_1000_job_names_give_at_most_the_cap_and_other() -> None:
    metrics = ListenerMetrics(name="set", namespace="ns")
    for i in range(1000):
        metrics.record_job_started(started(f"job-{i}"))
        metrics.record_job_completed(completed(f"job-{i}"))
    names = label_values(metrics, "job_name")
    assert len(names) <= MAX_LABEL_VALUES + 1
    assert OTHER in names
    assert "job-0" in names and "job-999" not in names


def test_the_series_of_one_scale_set_stay_bounded() -> None:
    limits = MetricLimits(label_values=1000, series=2_000)
    metrics = ListenerMetrics(name="set", namespace="ns", config=hostile(), limits=limits)
    for i in range(300):
        metrics.record_job_started(started(f"job-{i}", repository=f"repo-{i % 7}"))
        metrics.record_job_completed(completed(f"job-{i}"))
    count = len(samples(metrics))
    # The budget, plus at most one overflow child per job metric (5 of them, 68 or fewer
    # samples each), plus the scale set's gauges.
    assert count <= limits.series + 5 * (MAX_HISTOGRAM_BUCKETS + 4)
    assert OTHER in label_values(metrics, "job_name")


def test_the_hostile_config_of_issue_26_stays_small() -> None:
    metrics = ListenerMetrics(name="set", namespace="ns", config=hostile())
    for i in range(MAX_LABEL_VALUES):  # within the label cap: the series cap must hold
        metrics.record_job_started(started(f"job-{i}"))
        metrics.record_job_completed(completed(f"job-{i}"))
    assert len(samples(metrics)) <= MAX_SERIES + 5 * (MAX_HISTOGRAM_BUCKETS + 4) + 20


def test_each_limit_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    caplog.set_level(logging.WARNING, logger="gharc.listener.metrics")
    metrics = ListenerMetrics(name="set", namespace="ns", config=hostile())
    metrics.on_limit = seen.append
    for i in range(1000):
        metrics.record_job_started(started(f"job-{i}"))
    job_name_lines = [r for r in caplog.records if "job_name" in r.getMessage()]
    assert len(job_name_lines) == 1, [r.getMessage() for r in caplog.records]
    assert len([n for n in seen if "job_name" in n]) == 1
    # the bucket cuts (one per histogram) were said at construction, before on_limit was set
    assert len([n for n in metrics.limit_notices if "buckets" in n]) == 3
    assert len(metrics.limit_notices) == len(set(metrics.limit_notices))


def test_disabled_metrics_keep_nothing_per_job_name() -> None:
    cfg = config(metrics_addr="")  # ARC's default metrics, served nowhere
    metrics = ListenerMetrics.for_listener(cfg, parse_config_url("https://github.com/acme"))
    for i in range(1000):
        metrics.record_job_started(started(f"job-{i}"))
        metrics.record_job_completed(completed(f"job-{i}"))
    assert label_values(metrics, "job_name") == set()
    assert len(samples(metrics)) == 0
    metrics.record_dropped("malformed")  # the one metric that is always on
    assert len(samples(metrics)) == 2  # _total and _created


def test_hosted_listeners_with_metrics_off_keep_nothing_per_job_name() -> None:
    from gharc.controllers.scaleset.inprocesslisteners import hosted_metrics

    raw = config().model_dump()
    raw.pop("metrics_addr", None)  # what listener_config writes with --listener-metrics-addr=0
    metrics = hosted_metrics(raw)
    for i in range(1000):
        metrics.record_job_started(started(f"job-{i}"))
    assert len(samples(metrics)) == 0


def test_the_scale_set_gauges_keep_their_labels_when_the_budget_is_spent() -> None:
    limits = MetricLimits(label_values=3, series=50)
    metrics = ListenerMetrics(name="set", namespace="ns", organization="acme", limits=limits)
    for i in range(50):
        metrics.record_job_started(started(f"job-{i}", repository=f"repo-{i}"))
    metrics.record_desired_runners(3)
    (desired,) = [s for s in samples(metrics) if s.name == "gha_desired_runners"]
    assert desired.labels["organization"] == "acme" and desired.labels["name"] == "set"
    assert desired.labels["repository"] == ""
