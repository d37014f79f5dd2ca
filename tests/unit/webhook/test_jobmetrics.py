"""ARC's github_workflow_job* metrics from deliveries: names, labels, durations from the
payload's timestamps, failed steps, and the bound on label sets."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gharc.settings.declare import UsageError
from gharc.webhook.jobmetrics import (
    COMMON_LABELS,
    OTHER,
    SeriesBudget,
    WorkflowJobMetrics,
    common_labels,
    failed_step,
)
from gharc.webhook.main import parse_args


def delivery(action: str, **job: Any) -> dict[str, Any]:
    return {
        "action": action,
        "workflow_job": {
            "id": 7,
            "name": "build",
            "labels": ["self-hosted", "linux"],
            "workflow_name": "CI",
            "head_branch": "main",
            "created_at": "2026-01-01T10:00:00Z",
            **job,
        },
        "repository": {"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}},
        "organization": {"login": "acme"},
    }


def value(reg: CollectorRegistry, name: str, **labels: str) -> float | None:
    return reg.get_sample_value(name, labels)


BASE = {
    "runs_on": "self-hosted,linux",
    "job_name": "build",
    "organization": "acme",
    "repository": "app",
    "repository_full_name": "acme/app",
    "owner": "acme",
    "workflow_name": "CI",
    "head_branch": "main",
}


def test_labels_are_arcs() -> None:
    assert dict(zip(COMMON_LABELS, common_labels(delivery("queued")), strict=True)) == BASE


def test_a_job_lifecycle_counts_and_times_it() -> None:
    reg = CollectorRegistry()
    m = WorkflowJobMetrics(reg)
    m.record(delivery("queued"), "queued")
    m.record(delivery("in_progress", started_at="2026-01-01T10:00:30Z"), "in_progress")
    done = delivery(
        "completed",
        started_at="2026-01-01T10:00:30Z",
        completed_at="2026-01-01T10:02:30Z",
        conclusion="success",
    )
    m.record(done, "completed")
    m.record(delivery("waiting"), "waiting")  # not one of ARC's three
    assert value(reg, "github_workflow_jobs_queued_total", **BASE) == 1
    assert value(reg, "github_workflow_jobs_started_total", **BASE) == 1
    assert value(reg, "github_workflow_jobs_completed_total", **BASE) == 1
    ok = {**BASE, "job_conclusion": "success"}
    assert value(reg, "github_workflow_job_conclusions_total", **ok) == 1
    assert value(reg, "github_workflow_job_queue_duration_seconds_sum", **BASE) == 30
    assert value(reg, "github_workflow_job_run_duration_seconds_sum", **ok) == 120
    assert value(reg, "github_workflow_job_failures_total", **BASE, failed_step="0") is None


def test_a_failure_names_its_first_failed_step() -> None:
    steps = [{"conclusion": "success"}, {"conclusion": "failure"}, {"conclusion": "skipped"}]
    assert failed_step({"steps": steps}) == ("1", "na")
    assert failed_step({"steps": [{"conclusion": "timed_out"}]}) == ("0", "timed_out")
    assert failed_step({}) == ("null", "na")
    reg = CollectorRegistry()
    m = WorkflowJobMetrics(reg)
    m.record(delivery("completed", conclusion="failure", steps=steps), "in_review")  # ignored
    m.record(delivery("completed", conclusion="failure", steps=steps), "completed")
    labels = {**BASE, "failed_step": "1", "exit_code": "na"}
    assert value(reg, "github_workflow_job_failures_total", **labels) == 1


def test_unknown_conclusions_and_bad_timestamps_do_not_mint_values() -> None:
    reg = CollectorRegistry()
    m = WorkflowJobMetrics(reg)
    odd = delivery("completed", conclusion="x" * 500, started_at="yesterday")
    m.record(odd, "completed")
    assert value(reg, "github_workflow_job_conclusions_total", **BASE, job_conclusion=OTHER) == 1
    assert value(reg, "github_workflow_job_run_duration_seconds_count", **BASE) is None
    backwards = delivery("in_progress", started_at="2026-01-01T09:00:00Z")
    m.record(backwards, "in_progress")
    assert value(reg, "github_workflow_job_queue_duration_seconds_count", **BASE) is None


def test_label_sets_beyond_the_budget_are_counted_as_other() -> None:
    reg = CollectorRegistry()
    m = WorkflowJobMetrics(reg, max_series=2)
    for i in range(5):
        m.record(delivery("queued", name=f"job-{i}"), "queued")
    m.record(delivery("queued", name="job-0"), "queued")  # known: keeps its own series
    names = [
        s.labels["job_name"]
        for metric in reg.collect()
        for s in metric.samples
        if s.name == "github_workflow_jobs_queued_total"
    ]
    assert sorted(names) == ["job-0", "job-1", OTHER]
    other = {k: OTHER for k in BASE}
    assert value(reg, "github_workflow_jobs_queued_total", **other) == 3
    assert value(reg, "github_workflow_jobs_queued_total", **{**BASE, "job_name": "job-0"}) == 2
    assert m.budget.overflowed == 3


def test_long_values_are_cut() -> None:
    labels = common_labels(delivery("queued", name="n" * 1000))
    assert len(labels[1]) == 128
    budget = SeriesBudget(1)
    assert budget.admit(("a",)) == ("a",)
    assert budget.admit(("b",)) == (OTHER,)


def test_flags() -> None:
    env = {"GITHUB_WEBHOOK_SECRET_TOKEN": "s"}
    args = parse_args(["--metrics-only", "--metrics-addr=:8080"], env)
    assert args.metrics_only and args.workflow_job_metrics
    assert args.workflow_job_metrics_max_series == 1000
    assert not parse_args([], env).workflow_job_metrics
    with pytest.raises(UsageError, match="--metrics-only serves nothing"):
        parse_args(["--metrics-only"], env)
    with pytest.raises(UsageError, match="must be positive"):
        parse_args(["--workflow-job-metrics-max-series=0"], env)
