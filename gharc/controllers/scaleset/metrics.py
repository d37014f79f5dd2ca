"""Controller-side gauges with ARC's names (``gha_controller_*``), per scale set.

Dashboards built for ARC keep working: same names, same labels (``name``, ``namespace``,
``repository``, ``organization``, ``enterprise``). Series are created lazily on first set.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from gharc.github.config import InvalidConfigUrl, parse_config_url

LABELS = ("name", "namespace", "repository", "organization", "enterprise")


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = registry if registry is not None else REGISTRY

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, subsystem="gha_controller", registry=reg)

        self.pending_ephemeral_runners = gauge(
            "pending_ephemeral_runners", "Number of ephemeral runners in a pending state."
        )
        self.running_ephemeral_runners = gauge(
            "running_ephemeral_runners", "Number of ephemeral runners in a running state."
        )
        self.failed_ephemeral_runners = gauge(
            "failed_ephemeral_runners", "Number of ephemeral runners in a failed state."
        )
        self.running_listeners = gauge(
            "running_listeners", "Number of listeners in a running state."
        )

    @staticmethod
    def labels_for(name: str, namespace: str, config_url: str) -> Mapping[str, str]:
        """Label values for one scale set; URL parts are empty when the URL does not parse."""
        try:
            cfg = parse_config_url(config_url)
            enterprise = cfg.enterprise or ""
            organization = cfg.organization or ""
            repository = cfg.repository or ""
        except InvalidConfigUrl:
            enterprise = organization = repository = ""
        return {
            "name": name,
            "namespace": namespace,
            "repository": repository,
            "organization": organization,
            "enterprise": enterprise,
        }
