"""The RunnerDeployment controller (legacy.md 4.1): one RunnerReplicaSet per template hash.

A template change creates a new replica set; the old ones are scaled to 0 only once the new
one has as many ready runners as desired, and deleted once empty. Scaling an old set to 0
goes through the replica sync's graceful drain (``podowner.py``), so a rollout never kills
a busy runner.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from gharc.api.legacy import constants as c
from gharc.api.legacy.views import ReplicatedView
from gharc.api.resources import RUNNER_DEPLOYMENTS, RUNNER_REPLICA_SETS
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.metrics import LegacyMetrics
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.resources import owner_ref, template_hash
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import NORMAL, EventRecorder
from gharc.kube.expectations import Expectations
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result

JSON = dict[str, Any]


def controller_name(obj: JSON, kind: str) -> str | None:
    """Name of the ``actions.summerwind.dev/v1alpha1`` controller owner of ``kind``."""
    for ref in objects.meta(obj).get("ownerReferences") or ():
        if (
            ref.get("controller")
            and ref.get("kind") == kind
            and ref.get("apiVersion") == c.API_VERSION
        ):
            return str(ref.get("name"))
    return None


def split_new_and_old(owned: Sequence[JSON], template_hash: str) -> tuple[JSON | None, list[JSON]]:
    """The replica set of the current template (the latest made, if several) and the others.

    By its template hash, as Kubernetes' Deployment controller finds its new ReplicaSet, not
    by age: creationTimestamp has whole seconds, and an old set made in the same second as
    the new one, with a name that sorts after it, counted as the newest, so every reconcile
    made another set of the new template until a second had passed (a rollout left three).
    ``owned`` is newest first."""
    current = [
        rs
        for rs in owned
        if objects.labels_of(rs).get(c.LABEL_RUNNER_TEMPLATE_HASH) == template_hash
    ]
    if not current:
        return None, list(owned)
    newest = current[0]
    return newest, [rs for rs in owned if rs is not newest]


def desired_replica_set(rd: JSON, common_labels: Sequence[str]) -> JSON:
    """ARC ``newRunnerReplicaSet``: template + common labels, hashed and labelled."""
    name = rd["metadata"]["name"]
    spec = objects.spec_of(rd)
    template = copy.deepcopy(spec.get("template") or {})
    tspec = template.setdefault("spec", {})
    if common_labels:
        tspec["labels"] = list(tspec.get("labels") or []) + list(common_labels)
    thash = template_hash(template)
    meta = template.setdefault("metadata", {})
    labels = dict(meta.get("labels") or {})
    labels[c.LABEL_RUNNER_TEMPLATE_HASH] = thash
    labels[c.LABEL_RUNNER_DEPLOYMENT_NAME] = name
    meta["labels"] = labels
    selector = copy.deepcopy(
        spec.get("selector") or {"matchLabels": {c.LABEL_RUNNER_DEPLOYMENT_NAME: name}}
    )
    selector.setdefault("matchLabels", {})[c.LABEL_RUNNER_TEMPLATE_HASH] = thash
    return {
        "apiVersion": RUNNER_REPLICA_SETS.api_version,
        "kind": RUNNER_REPLICA_SETS.kind,
        "metadata": {
            "generateName": f"{name}-",
            "namespace": rd["metadata"]["namespace"],
            "labels": dict(labels),
            "ownerReferences": [owner_ref(rd)],
        },
        "spec": {
            "replicas": ReplicatedView(rd).replicas,
            "effectiveTime": spec.get("effectiveTime"),
            "selector": selector,
            "template": template,
        },
    }


class RunnerDeploymentReconciler:
    def __init__(
        self,
        kube: KubeClient,
        cache: Any,
        options: LegacyOptions,
        metrics: LegacyMetrics | None,
        recorder: EventRecorder | None,
    ) -> None:
        self.kube, self.cache, self.options = kube, cache, options
        self.metrics, self.recorder = metrics, recorder
        self.expectations = Expectations()
        """RunnerDeployment uid -> the replica set it created that the cache may not show yet:
        without it, a spec change right after a create made a second set of one template."""

    def _requeue(self) -> Result:
        return Result(requeue_after=self.options.short_requeue.total_seconds())

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(
            self.cache.get, RUNNER_DEPLOYMENTS, request, self.reconcile_deployment
        )

    async def reconcile_deployment(self, rd: JSON) -> Result | None:
        request = request_of(rd)
        if objects.is_deleting(rd):
            self.expectations.forget(rd["metadata"]["uid"])
            return None
        if self.metrics is not None:
            self.metrics.runnerdeployment_spec_replicas.labels(request.name, request.namespace).set(
                ReplicatedView(rd).replicas
            )
        owned = [
            rs
            for rs in await self.cache.list(RUNNER_REPLICA_SETS, namespace=request.namespace)
            if controller_name(rs, c.KIND_RUNNER_DEPLOYMENT) == request.name
        ]
        owned.sort(
            key=lambda rs: (rs["metadata"].get("creationTimestamp") or "", rs["metadata"]["name"]),
            reverse=True,
        )
        uid = rd["metadata"]["uid"]
        self.expectations.observe(
            uid, {rs["metadata"]["name"]: rs["metadata"]["uid"] for rs in owned}
        )
        wait = self.expectations.lapses_in(uid)
        if wait is not None:
            return Result(requeue_after=max(wait, 0.05))  # the set's add event comes first
        desired = desired_replica_set(rd, self.options.common_runner_labels)
        dhash = desired["metadata"]["labels"][c.LABEL_RUNNER_TEMPLATE_HASH]
        newest, old = split_new_and_old(owned, dhash)
        if newest is None:
            made = await self.kube.create(RUNNER_REPLICA_SETS, desired)
            self.expectations.expect_create(uid, made["metadata"]["name"], made["metadata"]["uid"])
            return self._requeue() if owned else None
        nspec = objects.spec_of(newest)
        if nspec.get("selector") != desired["spec"]["selector"]:
            await self.kube.merge_patch(RUNNER_REPLICA_SETS, newest, {"spec": desired["spec"]})
            return self._requeue()
        want_replicas, want_eff = desired["spec"]["replicas"], desired["spec"]["effectiveTime"]
        newest_view = ReplicatedView(newest)
        if newest_view.replicas != want_replicas or nspec.get("effectiveTime") != want_eff:
            await self.kube.merge_patch(
                RUNNER_REPLICA_SETS,
                newest,
                {"spec": {"replicas": want_replicas, "effectiveTime": want_eff}},
            )
            return None
        if newest_view.count("readyReplicas") >= want_replicas:
            for rs in old:
                if ReplicatedView(rs).count("replicas") > 0:
                    if ReplicatedView(rs).replicas != 0:
                        await self.kube.merge_patch(
                            RUNNER_REPLICA_SETS, rs, {"spec": {"replicas": 0}}
                        )
                    continue
                await self.kube.delete(RUNNER_REPLICA_SETS, rs, missing_ok=True)
                if self.recorder is not None:
                    self.recorder.record(
                        rd,
                        NORMAL,
                        "RunnerReplicaSetDeleted",
                        f"Deleted runnerreplicaset {rs['metadata']['name']}",
                    )
        return await self._status(rd, newest, owned, want_replicas)

    async def _status(
        self, rd: JSON, newest: JSON, owned: list[JSON], desired: int
    ) -> Result | None:
        def total(key: str) -> int:
            return sum(ReplicatedView(rs).count(key) for rs in owned)

        available = total("availableReplicas")
        want = {
            "availableReplicas": available,
            "readyReplicas": available,
            "updatedReplicas": ReplicatedView(newest).count("replicas"),
            "desiredReplicas": desired,
            "replicas": total("replicas"),
        }
        status = objects.status_of(rd)
        if any(status.get(k) != v for k, v in want.items()):
            try:
                await self.kube.patch_status(RUNNER_DEPLOYMENTS, rd, {"status": want})
            except kerrors.ApiError:
                return Result(requeue=True)
        return None


def setup(manager: ManagerLike, deps: LegacyDeps) -> Controller:
    """The RunnerDeployment controller: ``For(RunnerDeployment)``, ``Owns(RunnerReplicaSet)``."""
    changed = ResourceVersionChangedPredicate()
    reconciler = RunnerDeploymentReconciler(
        deps.client(manager), manager.cache, deps.options, deps.metrics, deps.recorder
    )
    return (
        Builder(manager)
        .named("runnerdeployment")
        .for_(RUNNER_DEPLOYMENTS, changed)
        .owns(RUNNER_REPLICA_SETS, changed)
        .complete(reconciler)
    )
