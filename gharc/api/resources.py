"""gharc's own kinds as the REST API sees them, for both API groups.

The groups, versions and kinds are this package's (``constants``); the client core in
:mod:`gharc.kube.resources` knows only Kubernetes' own kinds. Each kind is registered with
the core here, at import, so :func:`gharc.kube.resources.resource_for` finds it as well.
"""

from __future__ import annotations

from gharc.api.legacy import constants as lc
from gharc.api.scaleset import constants as sc
from gharc.kube.resources import Resource, register

__all__ = [
    "AUTOSCALING_LISTENERS",
    "AUTOSCALING_RUNNER_SETS",
    "EPHEMERAL_RUNNERS",
    "EPHEMERAL_RUNNER_SETS",
    "HORIZONTAL_RUNNER_AUTOSCALERS",
    "RUNNERS",
    "RUNNER_DEPLOYMENTS",
    "RUNNER_REPLICA_SETS",
    "RUNNER_SETS",
]

_SCALESET = (sc.GROUP, sc.VERSION)
AUTOSCALING_RUNNER_SETS = Resource.custom(*_SCALESET, sc.KIND_AUTOSCALING_RUNNER_SET)
EPHEMERAL_RUNNER_SETS = Resource.custom(*_SCALESET, sc.KIND_EPHEMERAL_RUNNER_SET)
EPHEMERAL_RUNNERS = Resource.custom(*_SCALESET, sc.KIND_EPHEMERAL_RUNNER)
AUTOSCALING_LISTENERS = Resource.custom(*_SCALESET, sc.KIND_AUTOSCALING_LISTENER)

_LEGACY = (lc.GROUP, lc.VERSION)
RUNNERS = Resource.custom(*_LEGACY, lc.KIND_RUNNER)
RUNNER_REPLICA_SETS = Resource.custom(*_LEGACY, lc.KIND_RUNNER_REPLICA_SET)
RUNNER_DEPLOYMENTS = Resource.custom(*_LEGACY, lc.KIND_RUNNER_DEPLOYMENT)
RUNNER_SETS = Resource.custom(*_LEGACY, lc.KIND_RUNNER_SET)
HORIZONTAL_RUNNER_AUTOSCALERS = Resource.custom(*_LEGACY, lc.KIND_HORIZONTAL_RUNNER_AUTOSCALER)

register(
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
    EPHEMERAL_RUNNERS,
    AUTOSCALING_LISTENERS,
    RUNNERS,
    RUNNER_REPLICA_SETS,
    RUNNER_DEPLOYMENTS,
    RUNNER_SETS,
    HORIZONTAL_RUNNER_AUTOSCALERS,
)
