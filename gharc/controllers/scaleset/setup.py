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

from collections.abc import Iterable, Mapping
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
from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.controllers.scaleset.ephemeralrunner import ManagerLike
from gharc.controllers.scaleset.events import EventRecorder
from gharc.controllers.scaleset.metrics import ControllerMetrics
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.informer import EventHandlerFuncs
from gharc.kube.objects import meta
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request
from gharc.kube.resources import PODS, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS
from gharc.listener.host import ListenerHost

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


def _client(manager: ManagerLike, kube: KubeClient | None) -> KubeClient:
    client: KubeClient = kube if kube is not None else manager.client  # type: ignore[attr-defined]
    return client


def setup_autoscaling_runner_set(
    manager: ManagerLike,
    options: ScaleSetOptions,
    resolver: ClientResolver,
    recorder: EventRecorder | None,
    *,
    kube: KubeClient | None = None,
) -> Controller:
    reconciler = AutoscalingRunnerSetReconciler(
        _client(manager, kube), manager.cache, resolver, options, recorder
    )
    return (
        Builder(manager)
        .named("autoscalingrunnerset")
        .for_(AUTOSCALING_RUNNER_SETS, ResourceVersionChangedPredicate())
        .owns(EPHEMERAL_RUNNER_SETS, ResourceVersionChangedPredicate())
        .watches(AUTOSCALING_LISTENERS, listener_to_runner_set, ResourceVersionChangedPredicate())
        .complete(reconciler)
    )


def setup_autoscaling_listener(
    manager: ManagerLike,
    options: ScaleSetOptions,
    resolver: ClientResolver,
    metrics: ControllerMetrics,
    recorder: EventRecorder | None,
    *,
    kube: KubeClient | None = None,
    host: ListenerHost | None = None,
) -> Controller:
    """The AutoscalingListener controller; with ``host``, listeners run in this process.

    In-process mode wires three more things: the host runs on the manager (leader only,
    so only the elected replica holds message sessions), a hosted listener's state change
    enqueues its AutoscalingListener (status is written by the reconciler, level-triggered),
    and EphemeralRunnerSet events from the shared informer carry cleanup markers to the
    listeners (one watch for all scale sets, not one per listener).
    """
    reconciler = AutoscalingListenerReconciler(
        _client(manager, kube), manager.cache, resolver, options, metrics, recorder, host=host
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


def setup_scaleset_controllers(
    manager: ManagerLike,
    options: ScaleSetOptions,
    resolver: ClientResolver,
    metrics: ControllerMetrics,
    recorder: EventRecorder | None,
    *,
    kube: KubeClient | None = None,
    host: ListenerHost | None = None,
) -> list[Controller]:
    """Register all four scale set controllers on ``manager``; returns them in ARC's order.

    Also adds the leader-only registration reconcile (:mod:`orphans`), which is no
    controller: no event reports a registration GitHub dropped, so it runs on a timer; and
    the node loss controller (:mod:`nodeloss`), not returned either: it reconciles Nodes,
    not scale set objects."""
    orphans.setup(
        manager,
        resolver,
        recorder,
        interval=options.registration_sync_interval,
        grace=options.registration_sync_grace,
        hang_timeout=options.runner_hang_timeout,
        kube=kube,
    )
    nodeloss.setup(manager, options.node_loss_timeout, kube=kube)
    return [
        setup_autoscaling_runner_set(manager, options, resolver, recorder, kube=kube),
        ephemeralrunner.setup(manager, options, resolver, metrics, recorder, kube=kube),
        ephemeralrunnerset.setup(manager, options, resolver, metrics, recorder, kube=kube),
        setup_autoscaling_listener(
            manager, options, resolver, metrics, recorder, kube=kube, host=host
        ),
    ]
