"""Wire the legacy controllers into a manager (ARC ``main.go``, legacy.md 7).

Controllers, in ARC's order: runner, runnerreplicaset, runnerdeployment, runnerset,
runnerpod, horizontalrunnerautoscaler. Each module's ``setup(manager, deps)`` wires its
own controller from the one :class:`~gharc.controllers.legacy.deps.LegacyDeps`, as in scale
set mode. All share the manager's cache; pods are watched through one informer that
selects only pods labelled ``actions-runner`` (``deps.runner_pods``), so the controller
never caches the cluster's other pods.

Watches (beyond ``for_``/``owns``): runner pods wake the RunnerReplicaSet of their Runner
(pod annotations drive the scale-down handshake but do not change the Runner) and the
RunnerSet named by their ``runnerset-name`` label; RunnerDeployments and RunnerSets wake
the HRAs that scale them.
"""

from __future__ import annotations

from gharc.controllers.legacy import (
    hra,
    runner,
    runnerdeployment,
    runnerpod,
    runnerreplicaset,
    runnerset,
)
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.kube.controller import Controller
from gharc.kube.manager import ManagerLike

__all__ = ["setup_legacy_controllers"]


def setup_legacy_controllers(manager: ManagerLike, deps: LegacyDeps) -> list[Controller]:
    """Register the Runner, RunnerReplicaSet, RunnerDeployment, RunnerSet, runner-pod and
    HorizontalRunnerAutoscaler controllers on ``manager``; returns them in ARC's order."""
    return [
        runner.setup(manager, deps),
        runnerreplicaset.setup(manager, deps),
        runnerdeployment.setup(manager, deps),
        runnerset.setup(manager, deps),
        runnerpod.setup(manager, deps),
        hra.setup(manager, deps),
    ]
