"""The RunnerSet controller (legacy.md 4.3): runners as one-replica StatefulSets.

Scaling creates or deletes whole StatefulSets through the shared replica sync (4.6), which
gives RunnerSet the same graceful drain as RunnerDeployment. ``volumeClaimTemplates`` are
honoured per StatefulSet (one PVC set per runner).

The pods, their PVCs and the StatefulSet status are Kubernetes' StatefulSet controller's
work, and a deleted StatefulSet's pod goes with the garbage collector (its finalizer still
unregisters it first): this controller writes only StatefulSets and the RunnerSet status,
so it behaves the same on every cluster (tests/realnode checks it against the real
controllers). The pods' registration token comes from a Secret their template references
(``runnersettoken.py``), not from an admission webhook as in ARC.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from gharc.api.legacy import constants as c
from gharc.api.legacy.views import ReplicatedView, RunnerConfigView
from gharc.api.resources import RUNNER_SETS
from gharc.controllers.legacy import pods as p
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.githubclients import LegacyGitHub, ScopeError
from gharc.controllers.legacy.metrics import LegacyMetrics
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.podowner import (
    CreationExpectations,
    SyncParams,
    sync_runner_pods_owners,
)
from gharc.controllers.legacy.resources import (
    PodBuildError,
    owner_ref,
    runner_pod_template,
    template_hash,
)
from gharc.controllers.legacy.runnerdeployment import controller_name
from gharc.controllers.legacy.runnersettoken import RunnerSetTokens, reference_token_secret
from gharc.github import errors as gherrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import WARNING, EventRecorder
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import PODS, Resource

log = logging.getLogger(__name__)
JSON = dict[str, Any]

_STATUS = frozenset({"status"})
STATEFUL_SETS = Resource("apps", "v1", "StatefulSet", "statefulsets", True, _STATUS)
PERSISTENT_VOLUME_CLAIMS = Resource(
    "", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, _STATUS
)

_RUNNER_CONFIG_KEYS = (
    "enterprise", "organization", "repository", "labels", "group", "ephemeral", "image",
    "workDir", "dockerdWithinRunnerContainer", "dockerEnabled", "dockerMTU",
    "dockerRegistryMirror", "dockerVarRunVolumeSizeLimit", "volumeSizeLimit",
    "volumeStorageMedium", "containerMode", "githubAPICredentialsFrom", "workVolumeClaimTemplate",
)  # fmt: skip
_STS_KEYS = (
    "serviceName", "volumeClaimTemplates", "podManagementPolicy", "updateStrategy",
    "revisionHistoryLimit", "minReadySeconds", "persistentVolumeClaimRetentionPolicy", "ordinals",
)  # fmt: skip


def desired_stateful_set(rs: JSON, options: LegacyOptions, now: str) -> JSON:
    """ARC ``newStatefulSet``: the RunnerSet's pod template turned into a runner pod, in a
    one-replica StatefulSet labelled with the hash of that pod spec."""
    name, ns = rs["metadata"]["name"], rs["metadata"]["namespace"]
    spec = objects.spec_of(rs)
    config = {k: copy.deepcopy(spec[k]) for k in _RUNNER_CONFIG_KEYS if k in spec}
    if options.common_runner_labels:
        config["labels"] = list(config.get("labels") or []) + list(options.common_runner_labels)
    template = copy.deepcopy(spec.get("template") or {})
    tmeta = template.setdefault("metadata", {})
    tmeta.setdefault("labels", {})[c.LABEL_RUNNER_SET_NAME] = name
    if spec.get("serviceAccountName"):
        template.setdefault("spec", {})["serviceAccountName"] = spec["serviceAccountName"]
    pod = runner_pod_template(template, config, options)
    pod["spec"]["restartPolicy"] = "Always"
    reference_token_secret(pod, name)
    thash = template_hash(pod["spec"])
    pod["metadata"]["labels"][c.LABEL_RUNNER_TEMPLATE_HASH] = thash
    selector = copy.deepcopy(
        spec.get("selector") or {"matchLabels": {c.LABEL_RUNNER_SET_NAME: name}}
    )
    selector.setdefault("matchLabels", {}).update(
        {
            c.LABEL_RUNNER_TEMPLATE_HASH: thash,
            c.LABEL_RUNNER_SET_NAME: name,
            c.LABEL_INJECT_REGISTRATION_TOKEN: "true",
        }
    )
    sts_spec = {k: copy.deepcopy(spec[k]) for k in _STS_KEYS if k in spec}
    sts_spec.update({"replicas": 1, "selector": selector, "template": pod})
    return {
        "apiVersion": STATEFUL_SETS.api_version,
        "kind": STATEFUL_SETS.kind,
        "metadata": {
            "generateName": f"{name}-",
            "namespace": ns,
            "labels": {**objects.labels_of(rs), c.LABEL_RUNNER_TEMPLATE_HASH: thash},
            "annotations": {c.ANNOTATION_SYNC_TIME: now},
            "ownerReferences": [owner_ref(rs)],
        },
        "spec": sts_spec,
    }


def pod_name(sts: JSON) -> str:
    return f"{sts['metadata']['name']}-0"


def _soonest(result: Result | None, refresh_in: float) -> Result:
    """The sync's own wake-up or the token refresh, whichever comes first."""
    if result is not None and (result.requeue or 0 < (result.requeue_after or 0) <= refresh_in):
        return result
    return Result(requeue_after=refresh_in)


class StatefulSetOwners:
    """One-replica StatefulSets as owners for the shared sync."""

    resource = STATEFUL_SETS

    def __init__(self, kube: KubeClient, pods: p.RunnerPods) -> None:
        self.kube, self.pods = kube, pods

    async def pods_of(self, owner: JSON) -> list[JSON]:
        pod = await self.pods.get(owner["metadata"]["namespace"], pod_name(owner))
        return [pod] if pod is not None else []

    def synced(self, owner: JSON) -> bool:
        view = ReplicatedView(owner)
        return view.count("replicas") == view.replicas

    async def delete(self, owner: JSON) -> None:
        """Only the StatefulSet: the garbage collector deletes its pod, whose finalizer
        has already seen the runner unregistered (or finished) by the time we get here."""
        await self.kube.delete(STATEFUL_SETS, owner, missing_ok=True)


class RunnerSetReconciler:
    def __init__(
        self,
        kube: KubeClient,
        cache: Any,
        pods: p.RunnerPods,
        github: LegacyGitHub,
        options: LegacyOptions,
        metrics: LegacyMetrics | None,
        recorder: EventRecorder | None,
    ) -> None:
        self.kube, self.cache, self.pods, self.github = kube, cache, pods, github
        self.options, self.metrics, self.recorder = options, metrics, recorder
        self.last_created: dict[str, dt.datetime] = {}
        """Owner-set uid -> when we last created an owner for it (see SyncParams)."""
        self.expectations = CreationExpectations()
        self.owners = StatefulSetOwners(kube, pods)
        self.tokens = RunnerSetTokens(kube, github)

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(
            self.cache.get, RUNNER_SETS, request, self.reconcile_runner_set
        )

    async def reconcile_runner_set(self, rs: JSON) -> Result | None:
        request = request_of(rs)
        if objects.is_deleting(rs):
            self.tokens.forget(rs["metadata"]["uid"])
            return None
        spec = objects.spec_of(rs)
        if self.metrics is not None:
            self.metrics.runnerset_spec_replicas.labels(request.name, request.namespace).set(
                ReplicatedView(rs).replicas
            )
        owned = [
            s
            for s in await self.cache.list(STATEFUL_SETS, namespace=request.namespace)
            if controller_name(s, c.KIND_RUNNER_SET) == request.name
        ]
        if len(owned) > c.MAX_STATEFULSETS_PER_RUNNER_SET:
            log.error("runnerset %s owns %d statefulsets; doing nothing", request, len(owned))
            return None
        now = self.options.clock()
        try:
            desired = desired_stateful_set(rs, self.options, objects.format_time(now))
        except PodBuildError as err:
            if self.recorder is not None:
                self.recorder.record(rs, WARNING, "InvalidSpec", str(err))
            return None
        try:
            token_refresh_in = await self.tokens.ensure(rs, now)
        except (gherrors.GitHubError, ScopeError) as err:
            if self.recorder is not None:
                self.recorder.record(
                    rs, WARNING, "FailedUpdateRegistrationToken", f"registration token: {err}"
                )
            return Result(requeue_after=self.options.token_error_retry_delay.total_seconds())

        async def create() -> None:
            fresh = desired_stateful_set(
                rs, self.options, objects.format_time(self.options.clock())
            )
            made = await self.kube.create(STATEFUL_SETS, fresh)
            self.expectations.created(
                rs["metadata"]["uid"], made["metadata"]["name"], self.options.clock()
            )
            self.last_created[rs["metadata"]["uid"]] = self.options.clock()

        params = SyncParams(
            desired=ReplicatedView(rs).replicas,
            ephemeral=RunnerConfigView(spec).ephemeral,
            effective_time=objects.parse_time(spec.get("effectiveTime")),
            template_hash=desired["metadata"]["labels"][c.LABEL_RUNNER_TEMPLATE_HASH],
            registration_timeout=self.options.registration_timeout,
            recreation_delay=self.options.recreation_delay,
            now=now,
            last_created=self.last_created.get(rs["metadata"]["uid"]),
            outstanding=self.expectations.outstanding(
                rs["metadata"]["uid"], {o["metadata"]["name"] for o in owned}, now
            ),
        )
        synced = await sync_runner_pods_owners(self.kube, self.owners, owned, params, create)
        current = synced.current
        if current is None:
            return _soonest(synced.requeue(), token_refresh_in)

        def total(key: str) -> int:
            return sum(ReplicatedView(s.owner).count(key) for s in current)

        want = {
            "availableReplicas": total("currentReplicas"),
            "readyReplicas": total("readyReplicas"),
            "updatedReplicas": total("updatedReplicas"),
            "desiredReplicas": params.desired,
            "replicas": total("replicas"),
        }
        status = objects.status_of(rs)
        if any(status.get(k) != v for k, v in want.items()):
            await self.kube.patch_status(RUNNER_SETS, rs, {"status": want})
        return _soonest(synced.requeue(), token_refresh_in)


def pod_to_runner_set(pod: JSON) -> Iterable[Request]:
    """A runner pod wakes the RunnerSet its ``runnerset-name`` label names."""
    meta = objects.meta(pod)
    name = (meta.get("labels") or {}).get(c.LABEL_RUNNER_SET_NAME)
    return [Request(str(meta.get("namespace")), str(name))] if name else []


def setup(manager: ManagerLike, deps: LegacyDeps) -> Controller:
    """The RunnerSet controller: ``For(RunnerSet)``, ``Owns(StatefulSet)``, and runner pods
    mapped to their RunnerSet."""
    changed = ResourceVersionChangedPredicate()
    pods = deps.runner_pods(manager)
    reconciler = RunnerSetReconciler(
        deps.client(manager),
        manager.cache,
        pods,
        deps.github,
        deps.options,
        deps.metrics,
        deps.recorder,
    )
    return (
        Builder(manager)
        .named("runnerset")
        .for_(RUNNER_SETS, changed)
        .owns(STATEFUL_SETS, changed)
        .watches(PODS, pod_to_runner_set, changed, label_selector=pods.SELECTOR)
        .complete(reconciler)
    )
