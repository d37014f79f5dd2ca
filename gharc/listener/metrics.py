"""The listener's Prometheus metrics: ARC's names, label sets and buckets, plus three of gharc's.

Dashboards built for ARC (``cmd/ghalistener/metrics``) must keep working, so the names,
the default label sets and the default histogram buckets are ARC's. The ``metrics`` config
key may choose a subset and other labels, as in ARC; an unknown metric name is logged and
skipped (ARC does the same) rather than failing the listener.

gharc adds what users asked ARC for: ``gha_available_jobs`` and ``gha_acquired_jobs`` (#3154)
from the statistics, and ``gha_job_queue_duration_seconds`` (#3423), from a job's queue time
to its runner assignment.

Every listener has its own :class:`CollectorRegistry`, so tests can run several in one
process and nothing leaks into the default registry.

The config is a tenant's and in-process listeners share the controller, so what it may cost
is bounded (:mod:`gharc.listener.metric_limits`): buckets per histogram, values per label,
samples per scale set. A listener whose metrics are off records none of ARC's metrics at
all: nothing is kept per job name that nobody can scrape.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest, start_wsgi_server

from gharc.github.config import GitHubConfig
from gharc.github.models import (
    JobCompleted,
    JobStarted,
    RunnerScaleSetStatistic,
)
from gharc.listener.config import ListenerConfig, MetricsConfig
from gharc.listener.metric_limits import (
    MetricLimits,
    SeriesBudget,
    capped_buckets,
    overflow_key,
)

__all__ = [
    "DEFAULT_BUCKETS",
    "ListenerMetrics",
    "MetricsServer",
    "default_metrics_config",
    "parse_workflow_ref",
]

log = logging.getLogger("gharc.listener.metrics")

# Label keys (ARC's).
NAME = "name"
NAMESPACE = "namespace"
ENTERPRISE = "enterprise"
ORGANIZATION = "organization"
REPOSITORY = "repository"
JOB_NAME = "job_name"
JOB_WORKFLOW_REF = "job_workflow_ref"
JOB_WORKFLOW_NAME = "job_workflow_name"
JOB_WORKFLOW_TARGET = "job_workflow_target"
EVENT_NAME = "event_name"
JOB_RESULT = "job_result"

ASSIGNED_JOBS = "gha_assigned_jobs"
RUNNING_JOBS = "gha_running_jobs"
REGISTERED_RUNNERS = "gha_registered_runners"
BUSY_RUNNERS = "gha_busy_runners"
MIN_RUNNERS = "gha_min_runners"
MAX_RUNNERS = "gha_max_runners"
DESIRED_RUNNERS = "gha_desired_runners"
IDLE_RUNNERS = "gha_idle_runners"
AVAILABLE_JOBS = "gha_available_jobs"
ACQUIRED_JOBS = "gha_acquired_jobs"
STARTED_JOBS_TOTAL = "gha_started_jobs_total"
COMPLETED_JOBS_TOTAL = "gha_completed_jobs_total"
JOB_STARTUP_DURATION = "gha_job_startup_duration_seconds"
JOB_EXECUTION_DURATION = "gha_job_execution_duration_seconds"
JOB_QUEUE_DURATION = "gha_job_queue_duration_seconds"

#: gharc's own: messages given up on instead of being redelivered forever. ``reason`` is
#: ``malformed`` (the message could not be read), ``job`` (one job message in a batch could
#: not be read; the rest was handled) or ``error`` (handling failed with a non-transient
#: error, such as a bug). Each is also logged at warning or error level.
DROPPED = "gharc_listener_messages_dropped_total"
_DROPPED_HELP = "Queue messages (or job messages in one) that were logged, deleted and skipped."

_GAUGE_HELP = {
    ASSIGNED_JOBS: "Number of jobs assigned to this scale set.",
    RUNNING_JOBS: "Number of jobs running (or about to be run).",
    REGISTERED_RUNNERS: "Number of runners registered by the scale set.",
    BUSY_RUNNERS: "Number of registered runners running a job.",
    MIN_RUNNERS: "Minimum number of runners.",
    MAX_RUNNERS: "Maximum number of runners.",
    DESIRED_RUNNERS: "Number of runners desired by the scale set.",
    IDLE_RUNNERS: "Number of registered runners not running a job.",
    AVAILABLE_JOBS: "Number of jobs available for this scale set to acquire (gharc).",
    ACQUIRED_JOBS: "Number of jobs acquired by this scale set and not yet assigned (gharc).",
}
_COUNTER_HELP = {
    STARTED_JOBS_TOTAL: "Total number of jobs started.",
    COMPLETED_JOBS_TOTAL: "Total number of jobs completed.",
}
_HISTOGRAM_HELP = {
    JOB_STARTUP_DURATION: (
        "Time spent waiting for workflow job to get started on the runner owned by the "
        "scale set (in seconds)."
    ),
    JOB_EXECUTION_DURATION: "Time spent executing workflow jobs by the scale set (in seconds).",
    JOB_QUEUE_DURATION: (
        "Time from a workflow job being queued to a runner of the scale set being assigned "
        "to it (in seconds, gharc)."
    ),
}

DEFAULT_BUCKETS: tuple[float, ...] = (
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30, 40, 50, 60,
    70, 80, 90, 100, 110, 120, 150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200,
    1800, 2400, 3000, 3600,
)  # fmt: skip

_SCALE_SET_LABELS = [ENTERPRISE, ORGANIZATION, REPOSITORY, NAME, NAMESPACE]
_JOB_LABELS = [ENTERPRISE, ORGANIZATION, REPOSITORY, JOB_NAME, EVENT_NAME]


def default_metrics_config() -> MetricsConfig:
    """ARC's defaults (``defaultMetrics`` in metrics.go) plus gharc's three metrics."""
    return MetricsConfig.model_validate(
        {
            "gauges": {name: {"labels": _SCALE_SET_LABELS} for name in _GAUGE_HELP},
            "counters": {
                STARTED_JOBS_TOTAL: {"labels": _JOB_LABELS},
                COMPLETED_JOBS_TOTAL: {"labels": [*_JOB_LABELS, JOB_RESULT]},
            },
            "histograms": {
                JOB_STARTUP_DURATION: {"labels": _JOB_LABELS, "buckets": DEFAULT_BUCKETS},
                JOB_EXECUTION_DURATION: {
                    "labels": [*_JOB_LABELS, JOB_RESULT],
                    "buckets": DEFAULT_BUCKETS,
                },
                JOB_QUEUE_DURATION: {"labels": _JOB_LABELS, "buckets": DEFAULT_BUCKETS},
            },
        }
    )


@dataclass(frozen=True)
class WorkflowRef:
    name: str = ""
    target: str = ""


def parse_workflow_ref(ref: str) -> WorkflowRef:
    """``owner/repo/.github/workflows/ci.yml@refs/heads/main`` -> (``ci``, ``heads/main``).

    Same rules as ARC's ``ParseWorkflowRef``: branch ``heads/x``, tag ``tags/x``, pull
    request ``pull/<n>``; anything unparseable gives empty strings.
    """
    parts = ref.split("@")
    if len(parts) != 2:
        return WorkflowRef()
    path, git_ref = parts
    base = path.rsplit("/", 1)[-1]
    name = base.removesuffix(".yml").removesuffix(".yaml")
    target = ""
    if git_ref.startswith("refs/heads/"):
        target = "heads/" + git_ref.removeprefix("refs/heads/")
    elif git_ref.startswith("refs/tags/"):
        target = "tags/" + git_ref.removeprefix("refs/tags/")
    elif git_ref.startswith("refs/pull/"):
        number, sep, _ = git_ref.removeprefix("refs/pull/").partition("/")
        if sep and number:
            target = "pull/" + number
    return WorkflowRef(name=name, target=target)


def _seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return max(0.0, (later - earlier).total_seconds())


@dataclass
class _Metric:
    metric: Any
    budget: SeriesBudget | None
    """None for gauges: their labels are always the scale set's, one child each."""
    cost: int
    """Samples one labelled child adds to a scrape."""
    labels: list[str] = field(default_factory=list)
    children: dict[tuple[str, ...], Any] = field(default_factory=dict)
    """Labelled children by label values: ``labels()`` validates and sorts its arguments on
    every call, and a listener sets the same scale set's gauges on every message. Bounded
    by the budget (each child was admitted, or is the one overflow child)."""

    def child(self, values: Mapping[str, str]) -> Any:
        if not self.labels:
            return self.metric
        key = tuple([values.get(k, "") for k in self.labels])
        found = self.children.get(key)
        if found is not None:
            return found
        if self.budget is None:
            found = self.children[key] = self.metric.labels(*key)
            return found
        key = self.budget.fold(self.labels, key)
        found = self.children.get(key)
        if found is None:
            if not self.budget.admit(self.cost):
                key = overflow_key(self.labels, values)
                found = self.children.get(key)
            if found is None:
                found = self.metric.labels(*key)
                self.children[key] = found
        return found


class ListenerMetrics:
    """Records what the listener sees; every ``record_*`` is cheap and never raises."""

    @classmethod
    def for_listener(
        cls, cfg: ListenerConfig, scope: GitHubConfig, *, enabled: bool | None = None
    ) -> ListenerMetrics:
        """The metrics of the listener ``cfg`` describes, labelled with its scale set and the
        scope of its config URL, so a listener pod and an in-process one label them alike.

        ``enabled`` defaults to ``cfg.metrics_enabled``; an in-process listener's config has
        no address (the controller serves its metrics), so its host says."""
        return cls(
            name=cfg.ephemeral_runner_set_name,
            namespace=cfg.ephemeral_runner_set_namespace,
            enterprise=scope.enterprise or "",
            organization=scope.organization or "",
            repository=scope.repository or "",
            config=cfg.metrics,
            limits=MetricLimits(
                buckets=cfg.metrics_max_buckets,
                label_values=cfg.metrics_max_label_values,
                series=cfg.metrics_max_series,
            ),
            enabled=cfg.metrics_enabled if enabled is None else enabled,
        )

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        enterprise: str = "",
        organization: str = "",
        repository: str = "",
        config: MetricsConfig | None = None,
        registry: CollectorRegistry | None = None,
        limits: MetricLimits | None = None,
        enabled: bool = True,
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.limits = limits or MetricLimits()
        self.limit_notices: list[str] = []
        """Each bound reached so far, said once (a few at most: one per label and bound)."""
        self.on_limit: Callable[[str], None] | None = None
        """Told each new notice (the in-process host turns them into events)."""
        self._reported: set[str] = set()
        self._budget = SeriesBudget(self.limits, self._notice)
        self.scale_set_labels = {
            NAME: name,
            NAMESPACE: namespace,
            ENTERPRISE: enterprise,
            ORGANIZATION: organization,
            REPOSITORY: repository,
        }
        cfg = config if config is not None else default_metrics_config()
        if not enabled:
            cfg = MetricsConfig()  # nobody scrapes them: keep nothing per job
        self._gauges: dict[str, _Metric] = {}
        self._counters: dict[str, _Metric] = {}
        self._histograms: dict[str, _Metric] = {}
        for metric_name, gauge_cfg in cfg.gauges.items():
            if metric_name not in _GAUGE_HELP:
                log.error("unknown gauge %r in metrics config; skipped", metric_name)
                continue
            gauge = Gauge(
                metric_name, _GAUGE_HELP[metric_name], gauge_cfg.labels, registry=self.registry
            )
            self._gauges[metric_name] = _Metric(gauge, None, 1, list(gauge_cfg.labels))
        for metric_name, counter_cfg in cfg.counters.items():
            if metric_name not in _COUNTER_HELP:
                log.error("unknown counter %r in metrics config; skipped", metric_name)
                continue
            # prometheus_client appends "_total" itself; give it the base name.
            counter = Counter(
                metric_name.removesuffix("_total"),
                _COUNTER_HELP[metric_name],
                counter_cfg.labels,
                registry=self.registry,
            )
            # _total and _created
            self._counters[metric_name] = self._metric(counter, counter_cfg.labels, 2)
        for metric_name, hist_cfg in cfg.histograms.items():
            if metric_name not in _HISTOGRAM_HELP:
                log.error("unknown histogram %r in metrics config; skipped", metric_name)
                continue
            buckets = self._buckets(metric_name, hist_cfg.buckets or DEFAULT_BUCKETS)
            histogram = Histogram(
                metric_name,
                _HISTOGRAM_HELP[metric_name],
                hist_cfg.labels,
                buckets=buckets,
                registry=self.registry,
            )
            # each bucket, +Inf, _count, _sum and _created
            cost = len(buckets) + 4
            self._histograms[metric_name] = self._metric(histogram, hist_cfg.labels, cost)
        # Always on, whatever the metrics config chooses: a dropped message is an alert.
        self._dropped = Counter(
            DROPPED.removesuffix("_total"),
            _DROPPED_HELP,
            [NAME, NAMESPACE, "reason"],
            registry=self.registry,
        )

    # -- helpers --------------------------------------------------------------------------

    def _metric(self, metric: Any, labels: list[str], cost: int) -> _Metric:
        return _Metric(metric, self._budget, cost, list(labels))

    def _buckets(self, name: str, buckets: list[float] | tuple[float, ...]) -> list[float]:
        kept = capped_buckets(buckets, self.limits.buckets)
        if len(kept) < len(buckets):
            self._notice(
                f"buckets:{name}",
                f"histogram {name} has {len(buckets)} buckets; the first "
                f"{len(kept)} are kept (at most {self.limits.buckets})",
            )
        return kept

    def _notice(self, kind: str, message: str) -> None:
        """Say a bound reached, once per ``kind`` for this listener's life."""
        if kind in self._reported:
            return
        self._reported.add(kind)
        text = (
            f"listenerMetrics of {self.scale_set_labels[NAMESPACE]}/"
            f"{self.scale_set_labels[NAME]}: {message}"
        )
        self.limit_notices.append(text)
        log.warning("%s", text)
        if self.on_limit is not None:
            self.on_limit(text)

    def _set(self, name: str, value: float) -> None:
        metric = self._gauges.get(name)
        if metric is not None:
            metric.child(self.scale_set_labels).set(value)

    def _inc(self, name: str, labels: Mapping[str, str]) -> None:
        metric = self._counters.get(name)
        if metric is not None:
            metric.child(labels).inc()

    def _observe(self, name: str, labels: Mapping[str, str], value: float | None) -> None:
        metric = self._histograms.get(name)
        if metric is not None and value is not None:
            metric.child(labels).observe(value)

    def _job_labels(self, job: JobStarted | JobCompleted) -> dict[str, str]:
        ref = parse_workflow_ref(job.job_workflow_ref)
        return {
            ENTERPRISE: self.scale_set_labels[ENTERPRISE],
            ORGANIZATION: job.owner_name,
            REPOSITORY: job.repository_name,
            JOB_NAME: job.job_display_name,
            JOB_WORKFLOW_REF: job.job_workflow_ref,
            JOB_WORKFLOW_NAME: ref.name,
            JOB_WORKFLOW_TARGET: ref.target,
            EVENT_NAME: job.event_name,
        }

    # -- what the listener reports ----------------------------------------------------------

    def record_static(self, min_runners: int, max_runners: int) -> None:
        self._set(MIN_RUNNERS, min_runners)
        self._set(MAX_RUNNERS, max_runners)

    def record_statistics(self, stats: RunnerScaleSetStatistic) -> None:
        self._set(ASSIGNED_JOBS, stats.total_assigned_jobs)
        self._set(RUNNING_JOBS, stats.total_running_jobs)
        self._set(REGISTERED_RUNNERS, stats.total_registered_runners)
        self._set(BUSY_RUNNERS, stats.total_busy_runners)
        self._set(IDLE_RUNNERS, stats.total_idle_runners)
        self._set(AVAILABLE_JOBS, stats.total_available_jobs)
        self._set(ACQUIRED_JOBS, stats.total_acquired_jobs)

    def record_job_started(self, job: JobStarted) -> None:
        labels = self._job_labels(job)
        self._inc(STARTED_JOBS_TOTAL, labels)
        self._observe(
            JOB_STARTUP_DURATION,
            labels,
            _seconds(job.runner_assign_time, job.scale_set_assign_time),
        )
        self._observe(JOB_QUEUE_DURATION, labels, _seconds(job.runner_assign_time, job.queue_time))

    def record_job_completed(self, job: JobCompleted) -> None:
        # As ARC: a job cancelled before any runner took it has no runner assign time and
        # is not counted as a completion of this scale set's runners.
        if job.runner_assign_time is None:
            return
        labels = self._job_labels(job)
        labels[JOB_RESULT] = job.result
        self._inc(COMPLETED_JOBS_TOTAL, labels)
        self._observe(
            JOB_EXECUTION_DURATION, labels, _seconds(job.finish_time, job.runner_assign_time)
        )

    def record_desired_runners(self, count: int) -> None:
        self._set(DESIRED_RUNNERS, count)

    def record_dropped(self, reason: str, count: int = 1) -> None:
        """A message (or a job message in one) the listener gave up on (see ``DROPPED``)."""
        self._dropped.labels(
            name=self.scale_set_labels[NAME],
            namespace=self.scale_set_labels[NAMESPACE],
            reason=reason,
        ).inc(count)

    def exposition(self) -> bytes:
        """The text format, as a scrape would get it."""
        return generate_latest(self.registry)


class MetricsServer:
    """Serves one registry on ``host:port`` with prometheus_client's own server (a thread).

    Not aiohttp: a listener pod would load aiohttp for this alone (about 14 MiB of its
    40 MiB budget). prometheus_client answers every path, so ``endpoint`` is where scrapes
    are told to look, as in ARC's config, not a filter."""

    def __init__(self, metrics: ListenerMetrics, host: str, port: int, endpoint: str) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self.endpoint = endpoint if endpoint.startswith("/") else "/" + endpoint
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.bound_port: int | None = None

    async def start(self) -> None:
        self._server, self._thread = start_wsgi_server(
            self.port, addr=self.host, registry=self.metrics.registry
        )
        self.bound_port = int(self._server.server_port)
        log.info("metrics served on http://%s:%s%s", self.host, self.bound_port, self.endpoint)

    async def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            await asyncio.to_thread(server.shutdown)
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)
