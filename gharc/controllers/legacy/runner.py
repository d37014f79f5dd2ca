"""The Runner controller (legacy.md 4.4): registration token, then exactly one pod.

The Runner never recreates a completed pod: the parent RunnerReplicaSet deletes completed
Runners and creates fresh ones (4.6), which keeps "one Runner = one GitHub registration".
Unregistration is not done here but by the runner-pod finalizer (``runnerpod.py``), so it
also happens when someone deletes the pod directly.

The registration token lives in the Runner's own Secret (``<runner>-registration``, owned
by the Runner and deleted with it), which the pod reads through ``secretKeyRef``; the
Runner's status keeps only the token's scope and expiry. ARC put the token itself in
``status.registration.token`` and in the pod spec, readable by anyone who may read Runners
or pods, who could then register a runner of their own for an hour.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNERS
from gharc.controllers.legacy import pods as p
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.githubclients import LegacyGitHub, RunnerScope, ScopeError
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.resources import (
    PodBuildError,
    new_runner_pod,
    registration_secret,
    registration_secret_name,
)
from gharc.github import errors as gherrors
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import NORMAL, WARNING, EventRecorder
from gharc.kube.finalizers import add_finalizer, remove_finalizer
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import PODS, SECRETS

log = logging.getLogger(__name__)
JSON = dict[str, Any]


def is_registerable(runner: Mapping[str, Any], now: Any) -> bool:
    """ARC ``IsRegisterable``: a token for this repository that has not expired (the token
    itself is in the registration Secret, whose presence the reconciler checks)."""
    spec = objects.spec_of(runner)
    reg = objects.status_of(runner).get("registration") or {}
    expires = objects.parse_time(reg.get("expiresAt"))
    return (
        (reg.get("repository") or "") == (spec.get("repository") or "")
        and expires is not None
        and expires >= now
    )


def credentials_secret(spec: Mapping[str, Any]) -> str:
    return str(
        ((spec.get("githubAPICredentialsFrom") or {}).get("secretRef") or {}).get("name") or ""
    )


def pod_status_patch(runner: Mapping[str, Any], pod: Mapping[str, Any]) -> JSON | None:
    """The Runner status fields mirrored from its pod, or None when nothing changed."""
    status = objects.status_of(runner)
    pst = objects.status_of(pod)
    want = {
        "phase": pst.get("phase") or "Created",
        "ready": p.is_ready(pod),
        "reason": pst.get("reason") or "",
        "message": pst.get("message") or "",
    }
    if all((status.get(k) if k != "ready" else bool(status.get(k))) == v for k, v in want.items()):
        return None
    return want


class RunnerReconciler:
    def __init__(
        self,
        kube: KubeClient,
        cache: Any,
        pods: p.RunnerPods,
        github: LegacyGitHub,
        options: LegacyOptions,
        recorder: EventRecorder | None,
    ) -> None:
        self.kube, self.cache, self.pods = kube, cache, pods
        self.github, self.options, self.recorder = github, options, recorder

    def _event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.record(obj, kind, reason, message)

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(self.cache.get, RUNNERS, request, self.reconcile_runner)

    async def reconcile_runner(self, runner: JSON) -> Result | None:
        request = request_of(runner)
        pod = await self.pods.get(request.namespace, request.name)
        if objects.is_deleting(runner):
            # Let the Runner go at once, as ARC does: its pod and registration Secret are
            # owned by it, so the garbage collector deletes them, and the pod's finalizer
            # (runnerpod.py) does the graceful stop whoever deletes the pod.
            try:
                await remove_finalizer(self.kube, RUNNERS, runner, c.FINALIZER_RUNNER)
            except kerrors.NotFound:
                pass  # a reconcile from a stale cache: an earlier one removed it already
            return None
        if not objects.has_finalizer(runner, c.FINALIZER_RUNNER):
            await add_finalizer(self.kube, RUNNERS, runner, c.FINALIZER_RUNNER)
            return None
        if pod is None:
            return await self._create_pod(runner)
        patch = pod_status_patch(runner, pod)
        if patch is not None:
            await self.kube.patch_status(RUNNERS, runner, {"status": patch})
        return None

    async def _create_pod(self, runner: JSON) -> Result | None:
        now = self.options.clock()
        if not is_registerable(runner, now) or not await self._has_token_secret(runner):
            return await self._update_registration_token(runner)
        try:
            pod = new_runner_pod(runner, self.options)
        except PodBuildError as err:
            self._event(runner, WARNING, "FailedCreatePod", str(err))
            return None
        try:
            await self.kube.create(PODS, pod)
        except kerrors.AlreadyExists:
            return None  # informer lag
        self._event(runner, NORMAL, "PodCreated", f"Created pod '{pod['metadata']['name']}'")
        return None

    async def _has_token_secret(self, runner: JSON) -> bool:
        meta = runner["metadata"]
        try:
            await self.kube.get(
                SECRETS, registration_secret_name(meta["name"]), namespace=meta["namespace"]
            )
        except kerrors.NotFound:
            return False
        return True

    async def _store_token(self, runner: JSON, token: str) -> None:
        """Create or replace the registration Secret with ``token``."""
        secret = registration_secret(runner, token)
        try:
            await self.kube.create(SECRETS, secret)
        except kerrors.AlreadyExists:
            meta = secret["metadata"]
            await self.kube.merge_patch(
                SECRETS,
                meta["name"],
                {"stringData": secret["stringData"]},
                namespace=meta["namespace"],
            )

    async def _update_registration_token(self, runner: JSON) -> Result | None:
        spec = objects.spec_of(runner)
        meta = runner["metadata"]
        try:
            client = await self.github.client(
                meta["namespace"], RunnerScope.from_spec(spec), credentials_secret(spec)
            )
            token = await client.create_registration_token()
        except (gherrors.GitHubError, ScopeError) as err:
            self._event(
                runner,
                WARNING,
                "FailedUpdateRegistrationToken",
                f"Updating registration token failed: {err}",
            )
            log.warning(
                "runner %s/%s: registration token: %s", meta["namespace"], meta["name"], err
            )
            return Result(requeue_after=self.options.token_error_retry_delay.total_seconds())
        await self._store_token(runner, token.token)
        registration = {
            "organization": spec.get("organization") or "",
            "repository": spec.get("repository") or "",
            "labels": list(spec.get("labels") or []),
            "token": None,  # never here (see the module docstring); drops an ARC-era value
            "expiresAt": objects.format_time(token.expires_at),
        }
        await self.kube.patch_status(RUNNERS, runner, {"status": {"registration": registration}})
        self._event(
            runner, NORMAL, "RegistrationTokenUpdated", "Successfully update registration token"
        )
        return None  # the status change wakes us again


def setup(manager: ManagerLike, deps: LegacyDeps) -> Controller:
    """The Runner controller: ``For(Runner)``, ``Owns(Pod)`` (runner pods only)."""
    changed = ResourceVersionChangedPredicate()
    pods = deps.runner_pods(manager)
    reconciler = RunnerReconciler(
        deps.client(manager), manager.cache, pods, deps.github, deps.options, deps.recorder
    )
    return (
        Builder(manager)
        .named("runner")
        .for_(RUNNERS, changed)
        .owns(PODS, changed, label_selector=pods.SELECTOR)
        .complete(reconciler)
    )
