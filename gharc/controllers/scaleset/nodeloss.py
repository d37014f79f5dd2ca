"""Node loss (G18, ARC #4469, #4197): pods on a node that is gone are declared dead.

When a node dies, nothing is left to write its pods' status: they stay Running, or
Terminating once deleted, for as long as the Node object lives (often forever on a cluster
without an autoscaler). The runner and listener reconcilers judge a pod by its status, so
they would count a dead runner as alive and wait for a dead listener indefinitely.

This controller watches Nodes. Once a node's Ready condition has been other than True for
``timeout`` seconds (from the condition's ``lastTransitionTime``), or the Node is gone, it
writes what the node's kubelet no longer can to every runner and listener pod bound to it,
as Kubernetes' pod garbage collector does for pods of deleted nodes: phase Failed, reason
``NodeLost``, a ``DisruptionTarget`` condition, and its running containers terminated with
exit code 137. From there the usual paths apply (behaviours B2, B1): an idle runner gets a
new pod with its registration, a busy runner's EphemeralRunner is deleted (its job is lost
at GitHub) and the set replaces it, a listener pod is recreated. A pod already being
deleted is also force-deleted (grace 0): no kubelet will ever finish that deletion.

Only runner and listener pods are touched (the manager's pod cache holds no others), and
Nodes are cached without spec, labels or most of their status (:func:`slim_node`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.informer import compact
from gharc.kube.manager import ManagerLike
from gharc.kube.predicate import Funcs
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import NODES, PODS

log = logging.getLogger(__name__)

JSON = dict[str, Any]
Clock = Callable[[], float]

REASON_NODE_LOST = "NodeLost"
_TERMINAL = ("Succeeded", "Failed")


def slim_node(obj: dict[str, Any]) -> dict[str, Any]:
    """A cached Node: its name and its Ready condition, nothing else (a Node's images,
    addresses and labels are most of its size, and this controller reads none of them)."""
    md = objects.meta(obj)
    ready = [
        cond
        for cond in objects.status_of(obj).get("conditions") or ()
        if cond.get("type") == "Ready"
    ]
    return compact(
        {
            "apiVersion": obj.get("apiVersion", "v1"),
            "kind": obj.get("kind", "Node"),
            "metadata": {k: md[k] for k in ("name", "uid", "resourceVersion") if k in md},
            "status": {"conditions": ready},
        }
    )


def _parse(value: Any) -> float | None:
    t = objects.parse_time(value)
    return None if t is None else t.timestamp()


def lost_since(node: Mapping[str, Any] | None) -> float | None:
    """When the node stopped being Ready (epoch seconds), or None while it is Ready.

    A Node without a Ready condition has not reported yet: not lost. A deleted Node is
    lost since forever (``0.0``): its pods have nowhere to come back to.
    """
    if node is None:
        return 0.0
    for cond in objects.status_of(node).get("conditions") or ():
        if cond.get("type") == "Ready" and str(cond.get("status")) != "True":
            return _parse(cond.get("lastTransitionTime")) or 0.0
    return None


def pod_to_node(obj: Mapping[str, Any]) -> Iterable[Request]:
    """A runner or listener pod's events wake its node, so a pod that reaches a lost
    node's list after the node's own event is still seen (level-triggered)."""
    node = _node_name(obj)
    return [Request("", str(node))] if node else []


def _node_name(obj: Mapping[str, Any]) -> Any:
    return objects.spec_of(obj).get("nodeName")


#: The pod events that can matter to a node's loss: a pod bound to a node (a create with
#: ``nodeName``, or the binding) and a deletion begun, which a lost node's kubelet would
#: never finish. Status writes, most of a runner pod's events, cannot: its node's own events
#: and resyncs bring the rest.
POD_PLACEMENT = Funcs(
    on_create=lambda obj: bool(_node_name(obj)),
    on_update=lambda old, new: (
        _node_name(old) != _node_name(new) or objects.is_deleting(old) != objects.is_deleting(new)
    ),
    on_delete=lambda _obj: False,
)


def _rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def lost_pod_status(pod: Mapping[str, Any], node: str, now: float) -> JSON:
    """The status a dead node's pod gets: what its kubelet would have written had it seen
    the containers die, plus the disruption condition the pod garbage collector adds."""
    ts = _rfc3339(now)
    message = f"node {node} was lost (not Ready or deleted); its containers are gone"
    status = objects.status_of(pod)
    containers = []
    for cs in status.get("containerStatuses") or ():
        cs = dict(cs)
        state = cs.get("state") or {}
        if "terminated" not in state:
            started = (state.get("running") or {}).get("startedAt")
            term = {"exitCode": 137, "reason": REASON_NODE_LOST, "finishedAt": ts}
            if started:
                term["startedAt"] = started
            cs["state"] = {"terminated": term}
            cs["ready"] = False
        containers.append(cs)
    conditions = [
        cond
        for cond in status.get("conditions") or ()
        if cond.get("type") not in ("Ready", "DisruptionTarget")
    ]
    conditions += [
        {"type": "Ready", "status": "False", "reason": REASON_NODE_LOST, "lastTransitionTime": ts},
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": REASON_NODE_LOST,
            "message": message,
            "lastTransitionTime": ts,
        },
    ]
    patch: JSON = {
        "phase": "Failed",
        "reason": REASON_NODE_LOST,
        "message": message,
        "conditions": conditions,
    }
    if containers:
        patch["containerStatuses"] = containers
    return patch


class NodeLossReconciler:
    """Reconciles one Node (by name); see the module docstring."""

    def __init__(
        self, kube: KubeClient, cache: Cache, timeout: float, clock: Clock | None = None
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.timeout = timeout
        self.clock = clock or time.time

    async def reconcile(self, request: Request) -> Result | None:
        node = await self._node(request.name)
        since = lost_since(node)
        if since is None:
            return None
        now = self.clock()
        if now < since + self.timeout:
            return Result(requeue_after=since + self.timeout - now)
        pods = [
            p
            for p in await self.cache.list(PODS)
            if objects.spec_of(p).get("nodeName") == request.name
        ]
        for pod in pods:
            await self._declare_dead(pod, request.name, now)
        return None

    async def _node(self, name: str) -> JSON | None:
        """The Node, or None once the API server says it is gone. A cache miss alone proves
        nothing: a pod bound to a node that registered a moment ago wakes this reconcile
        before the node informer has delivered the node, and failing that pod would kill a
        healthy runner."""
        try:
            node: JSON = await self.cache.get(NODES, name)
            return node
        except kerrors.NotFound:
            pass
        try:
            return await self.kube.get(NODES, name)
        except kerrors.NotFound:
            return None

    async def _declare_dead(self, pod: JSON, node: str, now: float) -> None:
        md = objects.meta(pod)
        where = f"{md.get('namespace')}/{md.get('name')}"
        try:
            if objects.status_of(pod).get("phase") not in _TERMINAL:
                log.warning("%s: node %s is lost; marking the pod Failed", where, node)
                await self.kube.patch_status(PODS, pod, {"status": lost_pod_status(pod, node, now)})
            if objects.is_deleting(pod):
                # NB: nothing on a lost node will ever finish a graceful deletion.
                await self.kube.delete(
                    PODS, pod, uid=md.get("uid"), grace_period_seconds=0, missing_ok=True
                )
        except kerrors.NotFound:
            return


def setup(manager: ManagerLike, deps: ScaleSetDeps) -> Controller | None:
    """The node loss controller on ``manager``; None (not started) when
    ``deps.options.node_loss_timeout`` is 0."""
    timeout = deps.options.node_loss_timeout
    if timeout <= 0:
        return None
    return (
        Builder(manager)
        .named("nodeloss")
        .for_(NODES)
        .watches(PODS, pod_to_node, POD_PLACEMENT)
        .complete(NodeLossReconciler(deps.client(manager), manager.cache, timeout))
    )
