"""Wire the four scale set controllers into a manager (ARC ``main.go`` §13.3).

Order as in ARC: AutoscalingRunnerSet, EphemeralRunner, EphemeralRunnerSet,
AutoscalingListener. Each module's ``setup(manager, deps)`` wires its own controller (its
watches are described there) from the one
:class:`~gharc.controllers.scaleset.deps.ScaleSetDeps`: all share the manager's cache (one
informer per kind), the client, one ClientResolver (so one GitHub client per scope and
credential) and one recorder.
"""

from __future__ import annotations

from gharc.controllers.scaleset import (
    autoscalinglistener,
    autoscalingrunnerset,
    ephemeralrunner,
    ephemeralrunnerset,
    nodeloss,
    orphans,
)
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.kube.controller import Controller
from gharc.kube.manager import ManagerLike

__all__ = ["setup_scaleset_controllers"]


def setup_scaleset_controllers(manager: ManagerLike, deps: ScaleSetDeps) -> list[Controller]:
    """Register all four scale set controllers on ``manager``; returns them in ARC's order.

    Also adds the leader-only registration reconcile (:mod:`orphans`), which is no
    controller: no event reports a registration GitHub dropped, so it runs on a timer; and
    the node loss controller (:mod:`nodeloss`), not returned either: it reconciles Nodes,
    not scale set objects."""
    orphans.setup(manager, deps)
    nodeloss.setup(manager, deps)
    return [
        autoscalingrunnerset.setup(manager, deps),
        ephemeralrunner.setup(manager, deps),
        ephemeralrunnerset.setup(manager, deps),
        autoscalinglistener.setup(manager, deps),
    ]
