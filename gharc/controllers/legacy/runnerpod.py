"""The runner-pod controller (ARC ``runner_pod_controller.go``, legacy.md 4.5).

Its finalizer ``actions.summerwind.dev/runner-pod`` is what keeps busy runners alive: no
runner pod disappears before graceful stop has marked it complete, whoever deletes it.
It also records the GitHub runner ID (``actions-runner/id``) once the runner shows up in
List Runners; that answer is cached per scope (B6), so 50 pods of one organization cost
one List Runners call per cache period, not 50.

Deliberate difference: a pod that was asked to unregister but has no runner ID yet goes
straight to graceful stop (which waits for registration up to the timeout) instead of
ARC's endless 10 s registration poll, which could block a scale-down forever.
"""

from __future__ import annotations

import logging
from typing import Any

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNERS
from gharc.controllers.legacy import pods as p
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.githubclients import LegacyGitHub, RunnerScope, ScopeError
from gharc.controllers.legacy.gracefulstop import GracefulStop, annotate_once, find_runner_id
from gharc.controllers.legacy.options import LegacyOptions
from gharc.github import errors as gherrors
from gharc.github.rest import RestClient
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import NORMAL, EventRecorder
from gharc.kube.finalizers import remove_finalizer
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result, TerminalError
from gharc.kube.resources import PODS

log = logging.getLogger(__name__)
JSON = dict[str, Any]


class RunnerPodReconciler:
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
        self.stop = GracefulStop(kube, options, pods.exited_before_deletion)

    async def _client(self, pod: JSON, env: dict[str, str]) -> RestClient:
        secret = objects.annotations_of(pod).get(c.ANNOTATION_GITHUB_API_CREDS_SECRET, "")
        try:
            return await self.github.client(
                pod["metadata"]["namespace"], RunnerScope.from_env(env), secret
            )
        except ScopeError as err:
            raise TerminalError(str(err)) from None

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(self.pods.get_object, PODS, request, self.reconcile_pod)

    async def reconcile_pod(self, pod: JSON) -> Result | None:
        request = request_of(pod)
        lbls = objects.labels_of(pod)
        if not any(
            k in lbls
            for k in (c.LABEL_RUNNER, c.LABEL_RUNNER_SET_NAME, c.LABEL_RUNNER_DEPLOYMENT_NAME)
        ):
            return None
        env = p.runner_env(pod)
        if env is None:
            raise TerminalError("could not determine env vars for runner Pod")
        kube_mode = c.ENV_CONTAINER_HOOKS in env
        if objects.is_deleting(pod):
            return await self._deleting(pod, env, kube_mode)
        wanted = [c.FINALIZER_RUNNER_POD] + ([c.FINALIZER_LINKED_RESOURCES] if kube_mode else [])
        if not all(objects.has_finalizer(pod, f) for f in wanted):
            finalizers = objects.finalizers_with(pod, *wanted)
            await self.kube.merge_patch(
                PODS, pod, {"metadata": {"finalizers": finalizers}}, optimistic_lock=True
            )
            return None
        client = await self._client(pod, env)
        requested = c.ANNOTATION_UNREGISTRATION_REQUEST_TIMESTAMP in objects.annotations_of(pod)
        if not p.is_stopped(pod) and c.ANNOTATION_RUNNER_ID not in objects.annotations_of(pod):
            try:
                runner_id = await find_runner_id(client, request.name)
            except gherrors.GitHubError as err:
                log.info("pod %s: list runners failed: %s", request, err)
                runner_id = None
            if runner_id is not None:
                pod = await annotate_once(self.kube, pod, c.ANNOTATION_RUNNER_ID, str(runner_id))
            elif not requested:
                return Result(requeue_after=self.options.runner_id_retry_delay.total_seconds())
        if requested:
            outcome = await self.stop.tick(pod, client)
            if outcome.retry is not None:
                return outcome.retry
        return None

    async def _deleting(self, pod: JSON, env: dict[str, str], kube_mode: bool) -> Result | None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        try:
            runner = await self.cache.get(RUNNERS, name, namespace=ns)
            if not objects.is_deleting(runner):
                # Deleted directly: stop the Runner from recreating the pod.
                await self.kube.delete(RUNNERS, runner, missing_ok=True)
        except kerrors.NotFound:
            pass
        if objects.has_finalizer(pod, c.FINALIZER_LINKED_RESOURCES):
            try:
                await self._cleanup_linked(ns, name)
            except kerrors.ApiError as err:
                log.info("pod %s/%s: linked resources cleanup failed: %s", ns, name, err)
                return Result(requeue_after=c.LINKED_RESOURCES_RETRY_DELAY.total_seconds())
            pod = dict(await remove_finalizer(self.kube, PODS, pod, c.FINALIZER_LINKED_RESOURCES))
        if objects.has_finalizer(pod, c.FINALIZER_RUNNER_POD):
            client = await self._client(pod, env)
            outcome = await self.stop.tick(pod, client)
            if outcome.retry is not None:
                return outcome.retry
            retry = await self.stop.after_deletion(outcome.pod, client)
            if retry is not None:
                return retry
            try:
                await remove_finalizer(self.kube, PODS, outcome.pod, c.FINALIZER_RUNNER_POD)
            except kerrors.NotFound:
                pass  # a reconcile from a stale cache: an earlier one removed it, the pod is gone
            return None
        since = objects.deleting_since(pod)
        now = self.options.clock()
        if since is not None and now - since > self.options.force_delete_after:
            await self.kube.delete(PODS, pod, grace_period_seconds=0, missing_ok=True)
            if self.recorder is not None:
                self.recorder.record(pod, NORMAL, "PodDeleted", f"Forcefully deleted pod '{name}'")
            return Result(requeue_after=3.0)
        return None

    async def _cleanup_linked(self, namespace: str, pod_name: str) -> None:
        from gharc.kube.resources import SECRETS

        selector = f"{c.LABEL_RUNNER_POD}={pod_name}"
        for resource in (PODS, SECRETS):
            for obj in await self.kube.list(resource, namespace=namespace, label_selector=selector):
                await self.kube.delete(resource, obj, missing_ok=True)


def setup(manager: ManagerLike, deps: LegacyDeps) -> Controller:
    """The runner-pod controller: ``For(Pod)``, runner pods only."""
    pods = deps.runner_pods(manager)
    reconciler = RunnerPodReconciler(
        deps.client(manager), manager.cache, pods, deps.github, deps.options, deps.recorder
    )
    return (
        Builder(manager)
        .named("runnerpod")
        .for_(PODS, ResourceVersionChangedPredicate(), label_selector=pods.SELECTOR)
        .complete(reconciler)
    )
