"""The RunnerReplicaSet controller (legacy.md 4.2): N Runners of one template."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Iterable
from typing import Any

from gharc.api.legacy import constants as c
from gharc.api.legacy.views import ReplicatedView, RunnerConfigView
from gharc.api.resources import RUNNER_REPLICA_SETS, RUNNERS
from gharc.controllers.legacy import pods as p
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.podowner import (
    CreationExpectations,
    SyncParams,
    sync_runner_pods_owners,
)
from gharc.controllers.legacy.resources import owner_ref, template_hash
from gharc.controllers.legacy.runnerdeployment import controller_name
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.labels import Selector
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import PODS

JSON = dict[str, Any]


class RunnerOwners:
    """Runners as owners for the shared sync: one pod each, named like the Runner."""

    resource = RUNNERS

    def __init__(self, kube: KubeClient, pods: p.RunnerPods) -> None:
        self.kube, self.pods = kube, pods

    async def pods_of(self, owner: JSON) -> list[JSON]:
        pod = await self.pods.get(owner["metadata"]["namespace"], owner["metadata"]["name"])
        return [pod] if pod is not None else []

    def synced(self, owner: JSON) -> bool:
        return bool(objects.status_of(owner).get("phase"))

    async def delete(self, owner: JSON) -> None:
        await self.kube.delete(RUNNERS, owner, missing_ok=True)


class RunnerReplicaSetReconciler:
    def __init__(
        self, kube: KubeClient, cache: Any, pods: p.RunnerPods, options: LegacyOptions
    ) -> None:
        self.kube, self.cache, self.options = kube, cache, options
        self.last_created: dict[str, dt.datetime] = {}
        """Owner-set uid -> when we last created an owner for it (see SyncParams)."""
        self.expectations = CreationExpectations()
        self.owners = RunnerOwners(kube, pods)

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(
            self.cache.get, RUNNER_REPLICA_SETS, request, self.reconcile_replica_set
        )

    async def reconcile_replica_set(self, rs: JSON) -> Result | None:
        request = request_of(rs)
        if objects.is_deleting(rs):
            return None
        spec = objects.spec_of(rs)
        labels = objects.labels_of(rs)
        thash = labels.get(c.LABEL_RUNNER_TEMPLATE_HASH)
        if not thash:
            bare = {k: v for k, v in spec.items() if k not in ("replicas", "effectiveTime")}
            thash = template_hash(bare)
        selector = Selector.from_label_selector(spec.get("selector") or {})
        runners = [
            r
            for r in await self.cache.list(RUNNERS, namespace=request.namespace)
            if selector.matches_object(r)
        ]
        template = spec.get("template") or {}
        tmeta = copy.deepcopy(template.get("metadata") or {})
        tlabels = dict(tmeta.get("labels") or {})
        tlabels.setdefault(c.LABEL_RUNNER_TEMPLATE_HASH, thash)
        now = self.options.clock()

        async def create() -> None:
            runner = {
                "apiVersion": RUNNERS.api_version,
                "kind": RUNNERS.kind,
                "metadata": {
                    "generateName": f"{request.name}-",
                    "namespace": request.namespace,
                    "labels": dict(tlabels),
                    "annotations": {
                        **(tmeta.get("annotations") or {}),
                        c.ANNOTATION_SYNC_TIME: objects.format_time(self.options.clock()),
                    },
                    "ownerReferences": [owner_ref(rs)],
                },
                "spec": copy.deepcopy(objects.spec_of(template)),
            }
            made = await self.kube.create(RUNNERS, runner)
            self.expectations.created(
                rs["metadata"]["uid"], made["metadata"]["name"], self.options.clock()
            )
            self.last_created[rs["metadata"]["uid"]] = self.options.clock()

        params = SyncParams(
            desired=ReplicatedView(rs).replicas,
            ephemeral=RunnerConfigView(objects.spec_of(template)).ephemeral,
            effective_time=objects.parse_time(spec.get("effectiveTime")),
            template_hash=thash,
            registration_timeout=self.options.registration_timeout,
            recreation_delay=self.options.recreation_delay,
            now=now,
            last_created=self.last_created.get(rs["metadata"]["uid"]),
            outstanding=self.expectations.outstanding(
                rs["metadata"]["uid"], {o["metadata"]["name"] for o in runners}, now
            ),
        )
        synced = await sync_runner_pods_owners(self.kube, self.owners, runners, params, create)
        current = synced.current
        if current is None:
            return synced.requeue()
        total = sum(s.total for s in current)
        running = sum(s.running for s in current)
        want = {"replicas": total, "readyReplicas": running, "availableReplicas": running}
        status = objects.status_of(rs)
        if any(status.get(k) != v for k, v in want.items()):
            await self.kube.patch_status(RUNNER_REPLICA_SETS, rs, {"status": want})
        # Level-triggered by Runner and pod events, plus the timers no event announces.
        return synced.requeue()


def setup(manager: ManagerLike, deps: LegacyDeps) -> Controller:
    """The RunnerReplicaSet controller: ``For(RunnerReplicaSet)``, ``Owns(Runner)``, and
    runner pods mapped to the replica set of their Runner (pod annotations drive the
    scale-down handshake but do not change the Runner)."""
    changed = ResourceVersionChangedPredicate()
    pods = deps.runner_pods(manager)
    runners = manager.cache.informer(RUNNERS)

    def pod_to_replica_set(pod: JSON) -> Iterable[Request]:
        meta = objects.meta(pod)
        runner = runners.store.get(meta.get("namespace"), str(meta.get("name") or ""))
        owner = controller_name(runner, c.KIND_RUNNER_REPLICA_SET) if runner else None
        return [Request(str(meta.get("namespace")), owner)] if owner else []

    reconciler = RunnerReplicaSetReconciler(deps.client(manager), manager.cache, pods, deps.options)
    return (
        Builder(manager)
        .named("runnerreplicaset")
        .for_(RUNNER_REPLICA_SETS, changed)
        .owns(RUNNERS, changed)
        .watches(PODS, pod_to_replica_set, changed, label_selector=pods.SELECTOR)
        .complete(reconciler)
    )
