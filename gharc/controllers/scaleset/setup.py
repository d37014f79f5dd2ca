"""Wire the four scale set controllers into a manager (ARC ``main.go`` §13.3).

Order as in ARC: AutoscalingRunnerSet, EphemeralRunner, EphemeralRunnerSet,
AutoscalingListener. All share the manager's cache (one informer per kind), the client,
one ClientResolver (so one GitHub client per scope and credential) and one recorder.

Watches:

- AutoscalingRunnerSet: ``For(ARS)``, ``Owns(EphemeralRunnerSet)``, ``Watches(AutoscalingListener)``
  mapped to ``spec.autoscalingRunnerSetNamespace/Name`` (listeners live in another
  namespace, so owner references cannot link them).
- AutoscalingListener: ``For(listener)``, ``Owns(Pod)``, ``Owns(ServiceAccount)``,
  ``Watches(Role)`` and ``Watches(RoleBinding)`` mapped by the
  ``auto-scaling-listener-namespace``/``-name`` labels; the Role/RoleBinding informers
  select only objects carrying that label, so the controller does not cache every Role in
  the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gharc.api.resources import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
)
from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import AutoscalingListenerView
from gharc.controllers.scaleset import ephemeralrunner, ephemeralrunnerset, nodeloss, orphans
from gharc.controllers.scaleset.autoscalinglistener import AutoscalingListenerReconciler
from gharc.controllers.scaleset.autoscalingrunnerset import AutoscalingRunnerSetReconciler
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.kube.builder import Builder
from gharc.kube.controller import Controller
from gharc.kube.informer import EventHandlerFuncs
from gharc.kube.manager import ManagerLike
from gharc.kube.objects import meta
from gharc.kube.predicate import InNamespace, Predicate, ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request
from gharc.kube.resources import PODS, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS

__all__ = [
    "listener_to_runner_set",
    "rbac_to_listener",
    "setup_autoscaling_listener",
    "setup_autoscaling_runner_set",
    "setup_scaleset_controllers",
]


def listener_to_runner_set(obj: Mapping[str, Any]) -> Iterable[Request]:
    """An AutoscalingListener event wakes the ARS it belongs to."""
    view = AutoscalingListenerView(obj)
    ns, name = view.ars_namespace, view.ars_name
    return [Request(ns, name)] if ns and name else []


def rbac_to_listener(obj: Mapping[str, Any]) -> Iterable[Request]:
    """A listener Role/RoleBinding event wakes its listener (both labels must be present)."""
    labels = meta(obj).get("labels") or {}
    ns, name = labels.get(c.LABEL_LISTENER_NAMESPACE), labels.get(c.LABEL_LISTENER_NAME)
    return [Request(str(ns), str(name))] if ns and name else []


def setup_autoscaling_runner_set(manager: ManagerLike, deps: ScaleSetDeps) -> Controller:
    """The AutoscalingRunnerSet controller. With ``deps.watch_namespace``, events of sets
    (and of their runner sets) in other namespaces are filtered out before they are queued:
    the cache also holds the controller's namespace, where listeners live."""
    reconciler = AutoscalingRunnerSetReconciler(
        deps.client(manager), manager.cache, deps.resolver, deps.options, deps.recorder
    )
    scope: tuple[Predicate, ...] = ()
    to_runner_set: Callable[[Mapping[str, Any]], Iterable[Request]] = listener_to_runner_set
    if deps.watch_namespace:
        scope = (InNamespace(deps.watch_namespace),)
        to_runner_set = _in_namespace(listener_to_runner_set, deps.watch_namespace)
    return (
        Builder(manager)
        .named("autoscalingrunnerset")
        .for_(AUTOSCALING_RUNNER_SETS, ResourceVersionChangedPredicate(), *scope)
        .owns(EPHEMERAL_RUNNER_SETS, ResourceVersionChangedPredicate(), *scope)
        .watches(AUTOSCALING_LISTENERS, to_runner_set, ResourceVersionChangedPredicate())
        .complete(reconciler)
    )


def _in_namespace(
    map_fn: Callable[[Mapping[str, Any]], Iterable[Request]], namespace: str
) -> Callable[[Mapping[str, Any]], Iterable[Request]]:
    """``map_fn``'s requests for ``namespace`` only (a listener lives in the controller's
    namespace but names a set that may live elsewhere)."""

    def mapped(obj: Mapping[str, Any]) -> Iterable[Request]:
        return [r for r in map_fn(obj) if r.namespace == namespace]

    return mapped


def setup_autoscaling_listener(manager: ManagerLike, deps: ScaleSetDeps) -> Controller:
    """The AutoscalingListener controller; with ``deps.host``, listeners run in this process.

    In-process mode wires three more things: the host runs on the manager (leader only,
    so only the elected replica holds message sessions), a hosted listener's state change
    enqueues its AutoscalingListener (status is written by the reconciler, level-triggered),
    and EphemeralRunnerSet events from the shared informer carry cleanup markers to the
    listeners (one watch for all scale sets, not one per listener).
    """
    host = deps.host
    reconciler = AutoscalingListenerReconciler(
        deps.client(manager),
        manager.cache,
        deps.resolver,
        deps.options,
        deps.metrics,
        deps.recorder,
        host=host,
    )
    controller = (
        Builder(manager)
        .named("autoscalinglistener")
        .for_(AUTOSCALING_LISTENERS, ResourceVersionChangedPredicate())
        .owns(PODS, ResourceVersionChangedPredicate())
        .owns(SERVICE_ACCOUNTS, ResourceVersionChangedPredicate())
        .watches(ROLES, rbac_to_listener, label_selector=c.LABEL_LISTENER_NAME)
        .watches(ROLE_BINDINGS, rbac_to_listener, label_selector=c.LABEL_LISTENER_NAME)
        .complete(reconciler)
    )
    if host is not None:
        host.on_change = lambda key: controller.queue.add(Request(*key))
        manager.cache.informer(EPHEMERAL_RUNNER_SETS).add_event_handler(
            EventHandlerFuncs(
                add=host.offer_runner_set, update=lambda _old, new: host.offer_runner_set(new)
            )
        )
        manager.add(host)
        registry = getattr(manager, "registry", None)  # the Manager's; test doubles have none
        if registry is not None:
            registry.register(host.registry_collector)
    return controller


def setup_scaleset_controllers(manager: ManagerLike, deps: ScaleSetDeps) -> list[Controller]:
    """Register all four scale set controllers on ``manager``; returns them in ARC's order.

    Also adds the leader-only registration reconcile (:mod:`orphans`), which is no
    controller: no event reports a registration GitHub dropped, so it runs on a timer; and
    the node loss controller (:mod:`nodeloss`), not returned either: it reconciles Nodes,
    not scale set objects."""
    orphans.setup(manager, deps)
    nodeloss.setup(manager, deps)
    return [
        setup_autoscaling_runner_set(manager, deps),
        ephemeralrunner.setup(manager, deps),
        ephemeralrunnerset.setup(manager, deps),
        setup_autoscaling_listener(manager, deps),
    ]
