"""ARC's legacy gauges for what these controllers own (legacy.md 7.1)."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Gauge


class LegacyMetrics:
    """``runnerdeployment_spec_replicas`` and ``runnerset_spec_replicas`` (name, namespace)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = registry if registry is not None else REGISTRY
        self.runnerdeployment_spec_replicas = Gauge(
            "runnerdeployment_spec_replicas",
            "replicas of RunnerDeployment",
            ("name", "namespace"),
            registry=reg,
        )
        self.runnerset_spec_replicas = Gauge(
            "runnerset_spec_replicas",
            "replicas of RunnerSet",
            ("name", "namespace"),
            registry=reg,
        )
