"""HRA gauges with ARC's names and labels (legacy.md 7.1), so ARC dashboards keep working.

Labels: ``horizontalrunnerautoscaler`` and ``namespace`` on the spec/status gauges; the
per-metric gauges add the target's ``enterprise``, ``organization``, ``repository``,
``kind`` (``runnerdeployment``/``runnerset``) and ``name``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from gharc.api.legacy.views import HorizontalRunnerAutoscalerView
from gharc.controllers.legacy.hra_metrics import BusyCounts, ScaleTarget, WorkflowCounts
from gharc.kube import objects

HRA_LABELS = ("horizontalrunnerautoscaler", "namespace")
TARGET_LABELS = (*HRA_LABELS, "enterprise", "organization", "repository", "kind", "name")


class HRAMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = registry if registry is not None else REGISTRY

        def g(name: str, doc: str, labels: tuple[str, ...] = TARGET_LABELS) -> Gauge:
            return Gauge(f"horizontalrunnerautoscaler_{name}", doc, labels, registry=reg)

        self.spec_min = g("spec_min_replicas", "minReplicas of the HRA", HRA_LABELS)
        self.spec_max = g("spec_max_replicas", "maxReplicas of the HRA", HRA_LABELS)
        self.status_desired = g("status_desired_replicas", "desiredReplicas of the HRA", HRA_LABELS)
        self.replicas_desired = g("replicas_desired", "replicas_desired of PercentageRunnersBusy")
        self.runners = g("runners", "num_runners of PercentageRunnersBusy")
        self.runners_registered = g(
            "runners_registered", "num_runners_registered of PercentageRunnersBusy"
        )
        self.runners_busy = g("runners_busy", "num_runners_busy of PercentageRunnersBusy")
        self.terminating_busy = g(
            "terminating_busy", "num_terminating_busy of PercentageRunnersBusy"
        )
        self.necessary_replicas = g(
            "necessary_replicas", "necessary_replicas of QueuedAndInProgressWorkflowRuns"
        )
        self.runs_completed = g(
            "workflow_runs_completed", "workflow_runs_completed of QueuedAndInProgressWorkflowRuns"
        )
        self.runs_in_progress = g(
            "workflow_runs_in_progress",
            "workflow_runs_in_progress of QueuedAndInProgressWorkflowRuns",
        )
        self.runs_queued = g(
            "workflow_runs_queued", "workflow_runs_queued of QueuedAndInProgressWorkflowRuns"
        )
        self.runs_unknown = g(
            "workflow_runs_unknown", "workflow_runs_unknown of QueuedAndInProgressWorkflowRuns"
        )

    @staticmethod
    def _hra(hra: Mapping[str, Any]) -> dict[str, str]:
        meta = objects.meta(hra)
        return {
            "horizontalrunnerautoscaler": str(meta.get("name", "")),
            "namespace": str(meta.get("namespace", "")),
        }

    def _target(self, hra: Mapping[str, Any], t: ScaleTarget) -> dict[str, str]:
        return {
            **self._hra(hra),
            "enterprise": t.enterprise,
            "organization": t.organization,
            "repository": t.repository,
            "kind": t.metric_kind,
            "name": t.name,
        }

    def set_spec(self, hra: Mapping[str, Any]) -> None:
        view = HorizontalRunnerAutoscalerView(hra)
        labels = self._hra(hra)
        if view.min_replicas is not None:
            self.spec_min.labels(**labels).set(view.min_replicas)
        if view.max_replicas is not None:
            self.spec_max.labels(**labels).set(view.max_replicas)

    def set_status(self, hra: Mapping[str, Any], desired: int) -> None:
        self.status_desired.labels(**self._hra(hra)).set(desired)

    def set_workflow(self, hra: Mapping[str, Any], t: ScaleTarget, c: WorkflowCounts) -> None:
        labels = self._target(hra, t)
        self.necessary_replicas.labels(**labels).set(c.necessary_replicas)
        self.runs_completed.labels(**labels).set(c.completed)
        self.runs_in_progress.labels(**labels).set(c.in_progress)
        self.runs_queued.labels(**labels).set(c.queued)
        self.runs_unknown.labels(**labels).set(c.unknown)

    def set_busy(self, hra: Mapping[str, Any], t: ScaleTarget, c: BusyCounts, desired: int) -> None:
        labels = self._target(hra, t)
        self.replicas_desired.labels(**labels).set(desired)
        self.runners.labels(**labels).set(c.runners)
        self.runners_registered.labels(**labels).set(c.registered)
        self.runners_busy.labels(**labels).set(c.busy)
        self.terminating_busy.labels(**labels).set(c.terminating_busy)
