"""ARC's ``actions-metrics-server`` metrics (``github_workflow_job*``), from verified
``workflow_job`` deliveries.

ARC runs a second server for these; gharc's webhook server records them when started with
``--workflow-job-metrics`` (with ``--metrics-only`` it does nothing else, which is what the
legacy chart's ``actionsMetricsServer`` runs). Names, label names and buckets are ARC's, so
dashboards keep working. Two differences, both documented in docs/metrics.md:

* Durations come from the delivery's own timestamps (queue: ``started_at - created_at`` on
  ``in_progress``; run: ``completed_at - started_at`` on ``completed``), so they need no
  GitHub credentials and no job log download; ARC read them from the job's log and had no
  duration at all without credentials. ``exit_code`` is therefore ``na`` (or
  ``timed_out`` for a step that timed out), as in ARC without credentials.
* Cardinality is bounded. Label values are free text chosen by whoever writes workflows
  (job names, branch names), so at most ``max_series`` distinct label sets are kept; later
  ones are counted under the value ``other`` for every free-text label, and each value is
  cut to 128 characters. Only deliveries whose signature was verified get here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from gharc.kube import objects
from gharc.webhook.settings import WebhookSettings

#: ARC's label names, in ARC's order.
COMMON_LABELS = (
    "runs_on",
    "job_name",
    "organization",
    "repository",
    "repository_full_name",
    "owner",
    "workflow_name",
    "head_branch",
)

#: ARC's buckets (seconds): fine-grained up to 10 s, then up to an hour.
BUCKETS = (
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30, 40, 50, 60,
    70, 80, 90, 100, 110, 120, 150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200,
    1800, 2400, 3000, 3600,
)  # fmt: skip

#: GitHub's job conclusions; anything else is counted as "other".
CONCLUSIONS = (
    "success",
    "failure",
    "neutral",
    "cancelled",
    "skipped",
    "timed_out",
    "action_required",
    "stale",
    "startup_failure",
)

OTHER = "other"
MAX_VALUE_LENGTH = 128
MAX_SERIES = WebhookSettings.workflow_job_metrics_max_series
#: failed_step is a step index; indexes above this are "other" (a job has at most 1000 steps).
MAX_STEP_INDEX = 1000


def _text(value: Any) -> str:
    return value[:MAX_VALUE_LENGTH] if isinstance(value, str) else ""


def _obj(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _seconds(start: Any, end: Any) -> float | None:
    """``end - start`` in seconds, or None when either is missing or the order is wrong."""
    a, b = objects.parse_time(start), objects.parse_time(end)
    if a is None or b is None or b < a:
        return None
    return (b - a).total_seconds()


def common_labels(payload: Mapping[str, Any]) -> tuple[str, ...]:
    """ARC's common label values of a delivery (``organization`` is the org's login:
    webhook payloads carry no org ``name``, which ARC read, so ARC's value was empty)."""
    job = _obj(payload, "workflow_job")
    repo = _obj(payload, "repository")
    labels = job.get("labels")
    runs_on = ",".join(x for x in labels if isinstance(x, str)) if isinstance(labels, list) else ""
    return (
        _text(runs_on),
        _text(job.get("name")),
        _text(_obj(payload, "organization").get("login")),
        _text(repo.get("name")),
        _text(repo.get("full_name")),
        _text(_obj(repo, "owner").get("login")),
        _text(job.get("workflow_name")),
        _text(job.get("head_branch")),
    )


def failed_step(job: Mapping[str, Any]) -> tuple[str, str]:
    """(failed_step, exit_code) of a failed job, as ARC derives them from its steps: the
    index of the first failed or timed-out step, else ``null``; ``timed_out`` or ``na``."""
    steps = job.get("steps")
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        conclusion = step.get("conclusion") if isinstance(step, dict) else None
        if conclusion in ("failure", "timed_out"):
            index = str(i) if i <= MAX_STEP_INDEX else OTHER
            return index, "timed_out" if conclusion == "timed_out" else "na"
    return "null", "na"


class SeriesBudget:
    """At most ``limit`` distinct common label sets; later ones become all ``other``."""

    def __init__(self, limit: int = MAX_SERIES) -> None:
        self.limit = limit
        self._seen: set[tuple[str, ...]] = set()
        self.overflowed = 0

    def admit(self, labels: tuple[str, ...]) -> tuple[str, ...]:
        if labels in self._seen:
            return labels
        if len(self._seen) < self.limit:
            self._seen.add(labels)
            return labels
        self.overflowed += 1
        return (OTHER,) * len(labels)


class WorkflowJobMetrics:
    """The seven ``github_workflow_job*`` series of ARC's actions-metrics-server."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, max_series: int = MAX_SERIES
    ) -> None:
        reg = registry if registry is not None else REGISTRY
        self.budget = SeriesBudget(max_series)
        common = list(COMMON_LABELS)
        self.queued = Counter(
            "github_workflow_jobs_queued",
            "Workflow jobs queued (workflow_job deliveries with action queued).",
            common,
            registry=reg,
        )
        self.started = Counter(
            "github_workflow_jobs_started",
            "Workflow jobs started (workflow_job deliveries with action in_progress).",
            common,
            registry=reg,
        )
        self.completed = Counter(
            "github_workflow_jobs_completed",
            "Workflow jobs completed (workflow_job deliveries with action completed).",
            common,
            registry=reg,
        )
        self.conclusions = Counter(
            "github_workflow_job_conclusions",
            "Conclusions of completed workflow jobs.",
            [*common, "job_conclusion"],
            registry=reg,
        )
        self.failures = Counter(
            "github_workflow_job_failures",
            "Failed workflow jobs, by the first failed step and exit code.",
            [*common, "failed_step", "exit_code"],
            registry=reg,
        )
        self.queue_duration = Histogram(
            "github_workflow_job_queue_duration_seconds",
            "Seconds from a job's creation to its start (from the delivery's timestamps).",
            common,
            buckets=BUCKETS,
            registry=reg,
        )
        self.run_duration = Histogram(
            "github_workflow_job_run_duration_seconds",
            "Seconds from a job's start to its completion (from the delivery's timestamps).",
            [*common, "job_conclusion"],
            buckets=BUCKETS,
            registry=reg,
        )

    def record(self, payload: Mapping[str, Any], action: str) -> None:
        """Count one verified ``workflow_job`` delivery; other actions are not counted."""
        if action not in ("queued", "in_progress", "completed"):
            return
        labels = self.budget.admit(common_labels(payload))
        job = _obj(payload, "workflow_job")
        if action == "queued":
            self.queued.labels(*labels).inc()
        elif action == "in_progress":
            self.started.labels(*labels).inc()
            waited = _seconds(job.get("created_at"), job.get("started_at"))
            if waited is not None:
                self.queue_duration.labels(*labels).observe(waited)
        else:
            conclusion = job.get("conclusion")
            conclusion = conclusion if conclusion in CONCLUSIONS else OTHER
            self.completed.labels(*labels).inc()
            self.conclusions.labels(*labels, conclusion).inc()
            if conclusion == "failure":
                self.failures.labels(*labels, *failed_step(job)).inc()
            ran = _seconds(job.get("started_at"), job.get("completed_at"))
            if ran is not None:
                self.run_duration.labels(*labels, conclusion).observe(ran)
