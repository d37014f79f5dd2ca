"""Wire the legacy controllers into a manager (ARC ``main.go``, legacy.md 7).

Controllers, in ARC's order: runner, runnerreplicaset, runnerdeployment, runnerset,
runnerpod (the HorizontalRunnerAutoscaler controller is wired by its own module). All share
the manager's cache; pods are watched through one informer that selects only pods labelled
``actions-runner``, so the controller never caches the cluster's other pods.

Watches (beyond ``for_``/``owns``): runner pods wake the RunnerReplicaSet of their Runner
(pod annotations drive the scale-down handshake but do not change the Runner) and the
RunnerSet named by their ``runnerset-name`` label.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNER_DEPLOYMENTS, RUNNER_REPLICA_SETS, RUNNER_SETS, RUNNERS
from gharc.controllers.legacy.githubclients import LegacyGitHub
from gharc.controllers.legacy.metrics import LegacyMetrics
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.pods import RunnerPods
from gharc.controllers.legacy.runner import RunnerReconciler
from gharc.controllers.legacy.runnerdeployment import RunnerDeploymentReconciler, controller_name
from gharc.controllers.legacy.runnerpod import RunnerPodReconciler
from gharc.controllers.legacy.runnerreplicaset import RunnerReplicaSetReconciler
from gharc.controllers.legacy.runnerset import STATEFUL_SETS, RunnerSetReconciler
from gharc.github.pool import ClientPool
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import EventRecorder
from gharc.kube.objects import meta as meta_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request
from gharc.kube.resources import PODS

__all__ = ["LegacyControllers", "setup_legacy_controllers"]

JSON = dict[str, Any]


class LegacyControllers(list[Controller]):
    """The controllers, plus the shared pieces tests and the HRA wiring may want."""

    github: LegacyGitHub
    pods: RunnerPods


def setup_legacy_controllers(
    manager: Any,
    options: LegacyOptions,
    pool: ClientPool,
    *,
    kube: KubeClient | None = None,
    recorder: EventRecorder | None = None,
    metrics: LegacyMetrics | None = None,
) -> LegacyControllers:
    """Register the Runner, RunnerReplicaSet, RunnerDeployment, RunnerSet and runner-pod
    controllers on ``manager``; returns them in ARC's order."""
    client: KubeClient = kube if kube is not None else manager.client
    cache = manager.cache
    pods = RunnerPods(cache)
    github = LegacyGitHub(client, pool, options.github_url, options.credentials)
    changed = ResourceVersionChangedPredicate()
    sel = RunnerPods.SELECTOR
    runner_informer = cache.informer(RUNNERS)

    def pod_to_replica_set(pod: JSON) -> Iterable[Request]:
        meta = meta_of(pod)
        runner = runner_informer.store.get(meta.get("namespace"), meta.get("name"))
        owner = controller_name(runner, c.KIND_RUNNER_REPLICA_SET) if runner else None
        return [Request(str(meta.get("namespace")), owner)] if owner else []

    def pod_to_runner_set(pod: JSON) -> Iterable[Request]:
        meta = meta_of(pod)
        name = (meta.get("labels") or {}).get(c.LABEL_RUNNER_SET_NAME)
        return [Request(str(meta.get("namespace")), str(name))] if name else []

    out = LegacyControllers()
    out.github, out.pods = github, pods
    out.append(
        Builder(manager)
        .named("runner")
        .for_(RUNNERS, changed)
        .owns(PODS, changed, label_selector=sel)
        .complete(RunnerReconciler(client, cache, pods, github, options, recorder))
    )
    out.append(
        Builder(manager)
        .named("runnerreplicaset")
        .for_(RUNNER_REPLICA_SETS, changed)
        .owns(RUNNERS, changed)
        .watches(PODS, pod_to_replica_set, changed, label_selector=sel)
        .complete(RunnerReplicaSetReconciler(client, cache, pods, options))
    )
    out.append(
        Builder(manager)
        .named("runnerdeployment")
        .for_(RUNNER_DEPLOYMENTS, changed)
        .owns(RUNNER_REPLICA_SETS, changed)
        .complete(RunnerDeploymentReconciler(client, cache, options, metrics, recorder))
    )
    out.append(
        Builder(manager)
        .named("runnerset")
        .for_(RUNNER_SETS, changed)
        .owns(STATEFUL_SETS, changed)
        .watches(PODS, pod_to_runner_set, changed, label_selector=sel)
        .complete(RunnerSetReconciler(client, cache, pods, github, options, metrics, recorder))
    )
    out.append(
        Builder(manager)
        .named("runnerpod")
        .for_(PODS, changed, label_selector=sel)
        .complete(RunnerPodReconciler(client, cache, pods, github, options, recorder))
    )
    return out
