"""What the legacy controllers are wired with, in one bundle.

Every ``setup(manager, deps)`` of the legacy controllers takes the same bundle, as the scale
set controllers take :class:`~gharc.controllers.scaleset.deps.ScaleSetDeps`: the process's
main, the tests and the demo wire them the same way, and a piece the controllers share (the
GitHub resolver, the runner-pod view) exists once per process instead of once per
controller that happened to be built with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gharc.controllers.legacy.githubclients import LegacyGitHub
from gharc.controllers.legacy.hra_prometheus import HRAMetrics
from gharc.controllers.legacy.metrics import LegacyMetrics
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.pods import RunnerPods
from gharc.github.pool import ClientPool
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.events import EventRecorder
from gharc.kube.manager import ManagerLike

__all__ = ["LegacyDeps"]


@dataclass
class LegacyDeps:
    """The shared pieces of the legacy controllers of one process."""

    options: LegacyOptions
    github: LegacyGitHub
    """The one GitHub resolver: runners, runner pods, RunnerSets and HRAs of one scope share
    its clients, hence one registration-token cache and one List Runners HTTP cache (B6)."""
    kube: KubeClient | None = None
    """The client reconcilers write with; None: the manager's."""
    recorder: EventRecorder | None = None
    metrics: LegacyMetrics | None = None
    """The RunnerDeployment and RunnerSet spec gauges; None: not exported."""
    hra_metrics: HRAMetrics | None = None
    """The HorizontalRunnerAutoscaler's gauges; None: not exported."""
    _pods: tuple[Cache, RunnerPods] | None = field(default=None, init=False, repr=False)

    @classmethod
    def of(
        cls,
        options: LegacyOptions,
        pool: ClientPool,
        kube: KubeClient,
        *,
        recorder: EventRecorder | None = None,
        metrics: LegacyMetrics | None = None,
        hra_metrics: HRAMetrics | None = None,
    ) -> LegacyDeps:
        """The bundle writing with ``kube``, whose GitHub resolver reads credential Secrets
        with ``kube`` and keeps its clients in ``pool``, for the server and credentials
        ``options`` name."""
        github = LegacyGitHub(kube, pool, options.github_url, options.credentials)
        return cls(
            options,
            github,
            kube=kube,
            recorder=recorder,
            metrics=metrics,
            hra_metrics=hra_metrics,
        )

    def client(self, manager: ManagerLike) -> KubeClient:
        return self.kube if self.kube is not None else manager.client

    def runner_pods(self, manager: ManagerLike) -> RunnerPods:
        """The one view of runner pods on ``manager``'s cache: one informer (pods labelled
        ``actions-runner`` only) and one record of runners seen exiting, whichever
        controller asks first."""
        if self._pods is None or self._pods[0] is not manager.cache:
            self._pods = (manager.cache, RunnerPods(manager.cache))
        return self._pods[1]
