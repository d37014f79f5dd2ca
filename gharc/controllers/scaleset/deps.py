"""What the scale set controllers are wired with, in one bundle.

Every ``setup(manager, deps)`` of the scale set controllers takes the same bundle, so the
process's main, the tests and the benchmarks wire them the same way and a new shared piece
(a client, a policy) is added in one place instead of to five signatures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.controllers.scaleset.events import EventRecorder
from gharc.controllers.scaleset.metrics import ControllerMetrics
from gharc.controllers.scaleset.newborn import Newborn
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube.client import KubeClient
from gharc.kube.manager import ManagerLike
from gharc.listener.host import ListenerHost


@dataclass
class ScaleSetDeps:
    """The shared pieces of the scale set controllers of one process."""

    options: ScaleSetOptions
    resolver: ClientResolver
    """One GitHub client per scope and credential, shared by every controller."""
    metrics: ControllerMetrics = field(
        default_factory=lambda: ControllerMetrics(CollectorRegistry())
    )
    """The controller's gauges; by default on a registry of their own (not exported)."""
    recorder: EventRecorder | None = None
    kube: KubeClient | None = None
    """The client reconcilers write with; None: the manager's."""
    host: ListenerHost | None = None
    """In-process listeners (None: listener pods)."""
    registry: CollectorRegistry | None = None
    """Where the in-process listeners' metrics are exported (the manager's); None: not."""
    watch_namespace: str | None = None
    """``--watch-single-namespace``: AutoscalingRunnerSets elsewhere (the controller's own
    namespace, which the cache also holds for the listeners) are not reconciled."""
    newborn: Newborn = field(default_factory=Newborn)
    """Runners created by this process and not registered yet: the EphemeralRunnerSet
    reconciler adds, the EphemeralRunner reconciler takes (one GitHub read less each)."""

    def client(self, manager: ManagerLike) -> KubeClient:
        return self.kube if self.kube is not None else manager.client
