"""EphemeralRunnerReconciler: one runner = a GitHub JIT registration, its Secret and a Pod.

The order of the reconcile (spec §10.1, with behaviours B2 and B5 applied):

1. Deletion: remove the GitHub registration first (never while the runner runs a job:
   ``JobStillRunning`` requeues in 30 s and the pod is left alone), then the pod and the
   JIT secret, then the finalizers.
2. A done runner (Succeeded/Failed/Outdated) only has its pod and secret cleaned up; the
   EphemeralRunnerSet deletes the object (it must see Succeeded runners to do behaviours
   B3's finished-runner cleanup, which is why a succeeded runner is not deleted here).
3. Finalizers, JIT config + Secret, runner id in status. A registration is only made
   after an uncached read shows the runner neither done nor deleting, and never next
   to another: a lost secret's registration is removed first (issue 19 §3).
4. The pod: created from the template after the failure backoff; a failed pod (evicted,
   OOM-killed, node lost, container or init container error) is failed fast (B2): the
   failure is recorded by pod UID, the pod deleted and re-created after the ladder, the
   runner marked Failed after ``runner_max_failures``; a runner that already took a job is
   deleted instead, so the set replaces it.
5. Exit 0: Succeeded, and no RemoveRunner call: an ephemeral runner that completed has
   de-registered itself (B5). Exit 7: Outdated.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gharc.api.resources import EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import EphemeralRunnerView
from gharc.controllers.scaleset import runnerresources as rr
from gharc.controllers.scaleset.credentials import ClientResolver, ConfigurationError, GitHubTarget
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.error_reporting import reconcile_or_wait_for_github
from gharc.controllers.scaleset.events import EventRecorder, emit
from gharc.controllers.scaleset.newborn import Newborn
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.controllers.scaleset.pod_verdicts import (
    PodVerdict,
    judge_pod,
    pod_ready,
    pod_was_running,
    runner_started,
)
from gharc.github import errors as gherrors
from gharc.github.actions import ActionsClient
from gharc.github.models import RunnerScaleSetJitRunnerConfig
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import WARNING
from gharc.kube.expectations import Expectations
from gharc.kube.finalizers import set_finalizers
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import PODS, SECRETS

log = logging.getLogger(__name__)

JSON = dict[str, Any]

#: Retry while GitHub says the runner still runs a job (ARC's value).
JOB_STILL_RUNNING_REQUEUE = 30.0
#: A quota-Forbidden pod creation is retried this often, and the runner is replaced when
#: quota has been short for longer than QUOTA_REPLACE_AFTER (ARC's values).
QUOTA_REQUEUE = 30.0
QUOTA_REPLACE_AFTER = 600.0
#: A pod that exists although our create said it did not (cache lag) is looked at again.
ALREADY_EXISTS_REQUEUE = 5.0
#: How often a runner whose GitHub configuration is broken looks again (Secrets are not
#: watched, so a fixed Secret would otherwise never be noticed).
CONFIGURATION_REQUEUE = 60.0

#: AgentExists attempts a runner gets before it is deleted and replaced under a fresh name
#: (G7), and the requeue step between them (times the attempt number).
NAME_CONFLICT_BUDGET = 3
NAME_CONFLICT_REQUEUE = 2.0


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


#: EphemeralRunners whose last pod is remembered (see ``_pod_of``); far above a live fleet.
_POD_MEMORY = 50_000


def _remember(seen: dict[str, float], uid: str) -> dict[str, float]:
    """``seen`` with ``uid`` added now; bounded: past 10,000 entries the oldest hour goes."""
    now = time.monotonic()
    if len(seen) > 10_000:
        seen = {k: t for k, t in seen.items() if now - t < 3600}
    seen[uid] = now
    return seen


# --- the reconciler ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _JitSecret:
    """What ``_ensure_jit_secret`` found: the runner as last read, its secret (``None``
    with ``result`` to return when there is none to go on with), and whether ``er`` came
    from the API server rather than the cache."""

    er: JSON
    secret: JSON | None
    result: Result | None = None
    fresh: bool = False


class EphemeralRunnerReconciler:
    """See the module docstring. ``cache`` serves EphemeralRunners and Pods; Secrets are
    read uncached through ``kube`` (the controller does not watch Secrets)."""

    def __init__(
        self,
        kube: KubeClient,
        cache: Cache,
        options: ScaleSetOptions,
        resolver: ClientResolver,
        recorder: EventRecorder | None = None,
        *,
        newborn: Newborn | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.options = options
        self.resolver = resolver
        self.recorder = recorder
        self.newborn = newborn or Newborn()
        """Shared with the EphemeralRunnerSet reconciler, which adds the runners it creates."""
        self._cleaned: dict[str, float] = {}
        """EphemeralRunner UIDs whose pod and secret deletes were already sent."""
        self._released: dict[str, float] = {}
        """EphemeralRunner UIDs whose finalizers this process removed: the object is gone,
        however long the cache still shows it (the set's delete arrives as an update)."""
        self._pods = Expectations()
        """Pods we created (by EphemeralRunner uid) that the cache does not show yet."""
        self._status_sent: dict[str, float] = {}
        """EphemeralRunner uids whose runnerId this process wrote (until cleanup)."""
        self._name_conflicts: dict[str, int] = {}
        """AgentExists attempts per EphemeralRunner uid that did not free the name (G7)."""
        self._asked_online: dict[str, float] = {}
        """EphemeralRunner uids whose registration GitHub was asked about (once a process)."""
        self._pod_of: dict[str, tuple[str, int]] = {}
        """EphemeralRunner uid -> (uid of the last pod this process made or saw for it, the
        registration that pod ran with): a pod that is gone without our delete may have
        redeemed that registration's JIT config, even before its Running status reached us."""

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_or_wait_for_github(request, self._reconcile)

    async def _reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(
            self.cache.get, EPHEMERAL_RUNNERS, request, self.reconcile_runner, copy=True
        )

    async def reconcile_runner(self, er: JSON) -> Result | None:
        request = request_of(er)
        if objects.is_deleting(er):
            return await self._finalize(er)
        if EphemeralRunnerView(er).is_done:
            await self._cleanup_resources(er)
            if EphemeralRunnerView(er).phase == c.PHASE_SUCCEEDED:
                await self._release(er)  # a crash in _succeeded left them
            return None
        if not (
            objects.has_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER)
            and objects.has_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION)
        ):
            await self._ensure_finalizers(er)
            return None

        pod_name = c.runner_pod_name(request.name)
        try:
            pod: JSON | None = await self.cache.get(PODS, pod_name, namespace=request.namespace)
        except kerrors.NotFound:
            pod = None
        uid = str(objects.meta(er).get("uid") or "")
        if pod is not None:
            pod_uid = str(objects.meta(pod).get("uid") or "")
            self._pods.observe(uid, {pod_name: pod_uid})
            if uid not in self._pod_of and EphemeralRunnerView(er).runner_id:
                # A pod this process did not create (made before a restart or a failover).
                self._note_pod(uid, pod_uid, EphemeralRunnerView(er).runner_id)
        else:
            wait = self._pods.pending_create(uid, pod_name)
            if wait is not None:
                # Our own create is on its way to the cache (the runnerId status write
                # usually wakes us first); the pod's add event brings us back.
                return Result(requeue_after=wait) if wait > 0 else Result(requeue=True)
        if pod is not None and EphemeralRunnerView(er).runner_id:
            # NB: the common case (a pod status change) needs no Secret read at all.
            return await self._follow_pod(er, pod)
        if pod is None and EphemeralRunnerView(er).runner_id:
            if pod_was_running(er) or self._pod_vanished(er):
                return await self._pod_lost(er)
            if uid not in self._pod_of:
                online = await self._online_without_pod(er)
                if online:
                    return await self._pod_lost(er, online=online)
        if pod is not None and uid in self._status_sent:
            # The pod (created together with the runnerId write) reached the cache before
            # that write did: its event brings us back; re-reading the secret and writing
            # runnerId again would only repeat it.
            return None

        jit = await self._ensure_jit_secret(er)
        if jit.secret is None:
            return jit.result
        er, secret, fresh = jit.er, jit.secret, jit.fresh
        data = rr.decode_data(secret)
        rid = objects.int_or(data.get(rr.SECRET_KEY_RUNNER_ID))
        if rid <= 0:
            log.warning("JIT secret of %s has no runner id; re-creating it", request)
            await self.kube.delete(SECRETS, secret, missing_ok=True)
            return Result(requeue=True)
        if EphemeralRunnerView(er).runner_id != rid:
            # Status names the registration the secret holds: the one RemoveRunner removes.
            # A runner without a phase becomes Pending in the same write, so its pod's
            # Pending phase costs no second status patch.
            status: JSON = {"runnerId": rid, "runnerName": data.get(rr.SECRET_KEY_RUNNER_NAME, "")}
            if pod is None and not EphemeralRunnerView(er).phase:
                status.update(phase=c.PHASE_PENDING, ready=False)
            written = er

            async def write(after_pod: bool = False) -> None:
                nonlocal written
                if after_pod:
                    # NB: one turn of the loop lets the pod create start first: where the
                    # namespace may have one request in flight (tenants sharing the API
                    # server), the pod, which the job waits for, goes before the status.
                    await asyncio.sleep(0)
                written = await self.kube.patch_status(EPHEMERAL_RUNNERS, er, {"status": status})
                self._remember_status(uid)

            if pod is None and fresh:
                # The pod needs neither the write nor its answer (``er`` was just read or
                # made): one round trip less on the way from EphemeralRunner to pod. If
                # either fails, the next reconcile finds the other done and finishes.
                status_written = asyncio.ensure_future(write(after_pod=True))
                _, result = await asyncio.gather(
                    status_written,
                    self._create_pod(er, secret, rid, fresh=True, status_written=status_written),
                )
                return result
            await write()
            er, fresh = written, True

        if pod is None:
            return await self._create_pod(er, secret, rid, fresh=fresh)
        return await self._follow_pod(er, pod)

    def _note_pod(self, er_uid: str, pod_uid: str, runner_id: int) -> None:
        if not er_uid or not pod_uid:
            return
        self._pod_of.pop(er_uid, None)
        if len(self._pod_of) >= _POD_MEMORY:  # runners that went without our cleanup
            for stale in list(self._pod_of)[: _POD_MEMORY // 10]:
                del self._pod_of[stale]
        self._pod_of[er_uid] = (pod_uid, runner_id)

    def _pod_vanished(self, er: JSON) -> bool:
        """The runner's pod existed under its current registration and is gone, and no
        decision of ours removed it: a pod this controller deleted as failed is in
        ``failures`` (its config already kept or spent by :meth:`_pod_failed`).

        The runner in it may have redeemed the single-use JIT config in the moments
        between its container starting and its Running status reaching this controller
        (chaos used-jit-config lost one that way). A pod lost before its runner connected costs
        one registration more; a pod re-created from a redeemed config costs the job."""
        runner = EphemeralRunnerView(er)
        seen = self._pod_of.get(str(objects.meta(er).get("uid") or ""))
        return (
            seen is not None
            and runner.runner_id > 0
            and seen[1] == runner.runner_id
            and seen[0] not in runner.failures
        )

    async def _online_without_pod(self, er: JSON) -> int:
        """The registration's id when GitHub says a runner holds it while no pod of this
        process ran it (asked once per runner and process; 0 otherwise).

        What this process saw of the runner's pods is lost with a restart or a failover: a
        pod that vanished before then, before its Running status was written, left no trace
        here. A registration online at GitHub with no pod in the cluster was redeemed by a
        runner that is gone, and a pod made from its config would be refused. A failed read
        decides nothing (the config is kept, as before the question)."""
        uid = str(objects.meta(er).get("uid") or "")
        if not uid or uid in self._asked_online:
            return 0
        self._asked_online = _remember(self._asked_online, uid)
        rid = EphemeralRunnerView(er).runner_id
        try:
            client = await self._client(er)
            found = await client.get_runner(rid)
        except (gherrors.GitHubError, ConfigurationError) as err:
            log.info("could not ask GitHub whether runner %d is online: %s", rid, err)
            return 0
        return rid if found is not None and found.status.lower() == "online" else 0

    def _remember_status(self, uid: str) -> None:
        if uid:
            self._status_sent = _remember(self._status_sent, uid)

    # -- finalizers and deletion ---------------------------------------------------------

    async def _ensure_finalizers(self, er: JSON) -> None:
        finalizers = objects.finalizers_with(
            er, c.FINALIZER_EPHEMERAL_RUNNER, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION
        )
        await set_finalizers(self.kube, EPHEMERAL_RUNNERS, er, finalizers)

    async def _drop_finalizer(self, er: JSON, *names: str) -> JSON:
        finalizers = objects.finalizers_without(er, *names)
        try:
            return await set_finalizers(self.kube, EPHEMERAL_RUNNERS, er, finalizers)
        except kerrors.NotFound:
            return er

    async def _registered_id(self, er: JSON) -> int:
        """The runner id from status, or from the JIT secret when status was never written
        (a crash between the two): a registration must not leak because of that window."""
        rid = EphemeralRunnerView(er).runner_id
        if rid:
            return rid
        try:
            secret = await self.kube.get(
                SECRETS,
                c.runner_jit_secret_name(objects.meta(er)["name"]),
                namespace=objects.meta(er)["namespace"],
            )
        except kerrors.NotFound:
            return 0
        return objects.int_or(rr.decode_data(secret).get(rr.SECRET_KEY_RUNNER_ID))

    async def _finalize(self, er: JSON) -> Result | None:
        if not objects.has_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER):
            return None
        if EphemeralRunnerView(er).phase == c.PHASE_SUCCEEDED:
            # Exit 0: the runner de-registered itself; only its objects may be left.
            await self._cleanup_resources(er)
            await self._release(er)
            return None
        if objects.has_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION):
            rid = await self._registered_id(er)
            if rid:
                try:
                    client = await self._client(er)
                    await client.remove_runner(rid)
                except gherrors.JobStillRunning:
                    await emit(
                        self.recorder,
                        er,
                        WARNING,
                        "RunnerBusy",
                        f"runner {rid} still runs a job; its pod is kept, retrying in "
                        f"{JOB_STILL_RUNNING_REQUEUE:.0f}s",
                    )
                    return Result(requeue_after=JOB_STILL_RUNNING_REQUEUE)
                except gherrors.AgentNotFound:
                    pass  # already gone: an ephemeral runner de-registers after its job
                except ConfigurationError as err:
                    # NB: credentials gone (e.g. the ARS was uninstalled first): the runner
                    # cannot be removed from here, and keeping the object forever helps nobody.
                    await emit(self.recorder, er, WARNING, err.reason, err.message)
            er = await self._drop_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION)
        await self._cleanup_resources(er)
        await self._drop_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER)
        return None

    async def _cleanup_resources(self, er: JSON) -> None:
        """Delete the pod and the JIT secret (and container-hook job pods/secrets).

        Every caller is terminal (the runner is done or going away), so a runner whose
        deletes were sent once needs no more: a done runner is reconciled again for every
        status change until the set deletes it, and the repeated DELETEs were two of the
        controller's ~25 API calls per job. After a restart the deletes are simply re-sent.
        """
        m = objects.meta(er)
        ns, name, uid = str(m["namespace"]), str(m["name"]), str(m.get("uid") or "")
        if uid and uid in self._cleaned:
            return
        self._pods.forget(uid)
        self._pod_of.pop(uid, None)
        self._asked_online.pop(uid, None)
        self._status_sent.pop(uid, None)
        await self.kube.delete(PODS, c.runner_pod_name(name), namespace=ns, missing_ok=True)
        await self.kube.delete(
            SECRETS, c.runner_jit_secret_name(name), namespace=ns, missing_ok=True
        )
        if rr.has_container_hooks(er):
            selector = {c.LABEL_RUNNER_POD: name}
            for resource in (PODS, SECRETS):
                for obj in await self.kube.list(resource, namespace=ns, label_selector=selector):
                    if not objects.is_deleting(obj):
                        await self.kube.delete(resource, obj, missing_ok=True)
        if uid:
            self._cleaned = _remember(self._cleaned, uid)

    # -- GitHub ------------------------------------------------------------------------------

    @staticmethod
    def _target(er: Mapping[str, Any]) -> GitHubTarget:
        return GitHubTarget.from_spec(str(objects.meta(er)["namespace"]), objects.spec_of(er))

    async def _client(self, er: Mapping[str, Any]) -> ActionsClient:
        return await self.resolver.client_for(self._target(er))

    async def _ensure_jit_secret(self, er: JSON) -> _JitSecret:
        """The JIT secret, created (with a fresh registration) when missing.

        A missing secret is the one place a registration is made, so whether to make one is
        decided on the EphemeralRunner as the API server has it, read after the secret was
        found missing, never on the cache: the done phase (or the deletion timestamp) is
        written before the secret is deleted, so a runner that finished is never registered
        again however stale the cache (issue 19 §3). A live runner whose status already
        names a registration lost its secret; that registration is removed first, so a
        runner never has two. The read replaces the one ``_create_pod`` would make, so the
        first registration costs no extra call.

        A runner this process created and has not tried to register yet (:attr:`newborn`)
        needs neither read: no registration, secret or done phase can exist for it.
        """
        m = objects.meta(er)
        name, ns = str(m["name"]), str(m["namespace"])
        if self.newborn.take(str(m.get("uid") or "")) and not EphemeralRunnerView(er).runner_id:
            return await self._register(er)
        try:
            secret = await self.kube.get(SECRETS, c.runner_jit_secret_name(name), namespace=ns)
            return _JitSecret(er, secret)
        except kerrors.NotFound:
            pass
        try:
            er = await self.kube.get(EPHEMERAL_RUNNERS, name, namespace=ns)
        except kerrors.NotFound:
            return _JitSecret(er, None)
        if objects.is_deleting(er):
            return _JitSecret(er, None, await self._finalize(er))
        if EphemeralRunnerView(er).is_done:
            await self._cleanup_resources(er)
            return _JitSecret(er, None)
        try:
            client = await self._client(er)
        except ConfigurationError as err:
            await emit(self.recorder, er, WARNING, err.reason, err.message)
            return _JitSecret(er, None, Result(requeue_after=CONFIGURATION_REQUEUE))
        if EphemeralRunnerView(er).runner_id:
            retired = await self._retire_registration(er, client)
            if retired is not None:
                return _JitSecret(er, None, retired)
        return await self._register(er, client)

    async def _register(self, er: JSON, client: ActionsClient | None = None) -> _JitSecret:
        """A JIT registration and its secret, for a runner known to have neither."""
        name = str(objects.meta(er)["name"])
        if client is None:
            try:
                client = await self._client(er)
            except ConfigurationError as err:
                await emit(self.recorder, er, WARNING, err.reason, err.message)
                return _JitSecret(er, None, Result(requeue_after=CONFIGURATION_REQUEUE))
        scale_set_id = EphemeralRunnerView(er).scale_set_id
        try:
            jit = await client.generate_jit_runner_config(scale_set_id, name, rr.work_folder(er))
        except gherrors.AgentExists:
            return await self._resolve_name_conflict(er, client, scale_set_id)
        except (gherrors.Unauthorized, gherrors.Forbidden):
            # The retry reads the credentials afresh: they may have been rotated.
            self.resolver.forget_credentials(self._target(er))
            raise
        return await self._store_jit_secret(er, jit, scale_set_id)

    async def _store_jit_secret(
        self, er: JSON, jit: RunnerScaleSetJitRunnerConfig, scale_set_id: int
    ) -> _JitSecret:
        """The JIT secret of a registration just made."""
        m = objects.meta(er)
        name, ns = str(m["name"]), str(m["namespace"])
        secret = rr.new_jit_secret(
            er,
            encoded_jit_config=jit.encoded_jit_config,
            runner_name=jit.runner.name,
            runner_id=jit.runner.id,
            scale_set_id=jit.runner.runner_scale_set_id or scale_set_id,
            exclude_label_prefixes=self.options.exclude_label_propagation_prefixes,
        )
        try:
            created = await self.kube.create(SECRETS, secret)
        except kerrors.AlreadyExists:
            return _JitSecret(er, None, Result(requeue=True))
        # NB: routine steps are logged, not recorded as Events: three Event writes per
        # runner were a tenth of the controller's calls, and nobody reads them.
        log.info("%s/%s: registered runner %d", ns, name, jit.runner.id)
        return _JitSecret(er, created, fresh=True)

    async def _retire_registration(self, er: JSON, client: ActionsClient) -> Result | None:
        """Remove the registration a live runner's status names, whose JIT secret is gone
        (deleted by hand, or corrupted): its config cannot be read back, so it is removed
        rather than left offline at GitHub next to a new one. ``None`` when it is gone."""
        rid = EphemeralRunnerView(er).runner_id
        try:
            await client.remove_runner(rid)
        except gherrors.AgentNotFound:
            pass
        except gherrors.JobStillRunning:
            return Result(requeue_after=JOB_STILL_RUNNING_REQUEUE)
        await emit(
            self.recorder,
            er,
            WARNING,
            "RegistrationLost",
            f"the JIT secret of runner {rid} is gone; removed the registration to make a new one",
        )
        return None

    async def _resolve_name_conflict(
        self, er: JSON, client: ActionsClient, scale_set_id: int
    ) -> _JitSecret:
        """AgentExists: our runner name is taken at GitHub (G7, spec §10.2).

        Usually by our own registration whose ``generatejitconfig`` answer was lost (a 502
        or a dropped connection after GitHub stored it): its JIT config cannot be read
        back, so it cannot be reused; it is removed and the registration retried at once,
        in this reconcile, so the job waiting for this runner is not held up by a requeue.
        When the name cannot be freed (the lookup does not show the registration, or the
        retry conflicts again) the attempts are counted per runner; after
        :data:`NAME_CONFLICT_BUDGET` of them the EphemeralRunner is deleted and the set
        makes a new one under a fresh name, so a stuck name never leaves a job queued.
        Another scale set's runner with our name is fatal for this object at once (ARC).
        """
        name = str(objects.meta(er)["name"])
        uid = str(objects.meta(er).get("uid") or name)
        try:
            existing = await client.get_runner_by_name(name)
        except gherrors.NotFound:
            existing = None
        if existing is not None and existing.runner_scale_set_id != scale_set_id:
            return await self._give_up(
                er,
                "RunnerNameConflict",
                f"a runner named {name} exists in scale set {existing.runner_scale_set_id}; "
                "deleting this EphemeralRunner",
            )
        if existing is not None:
            try:
                await client.remove_runner(existing.id)
            except gherrors.AgentNotFound:
                pass
            await emit(
                self.recorder,
                er,
                WARNING,
                "RegistrationReplaced",
                f"runner name {name} was already registered (id {existing.id}), most likely "
                "by a registration whose answer was lost; removed it and registering again",
            )
            try:
                jit = await client.generate_jit_runner_config(
                    scale_set_id, name, rr.work_folder(er)
                )
            except gherrors.AgentExists:
                pass
            else:
                self._name_conflicts.pop(uid, None)
                return await self._store_jit_secret(er, jit, scale_set_id)
        tries = self._name_conflicts.get(uid, 0) + 1
        if tries >= NAME_CONFLICT_BUDGET:
            self._name_conflicts.pop(uid, None)
            return await self._give_up(
                er,
                "RegistrationConflict",
                f"runner name {name} stayed taken at GitHub after {tries} attempts; "
                "deleting this EphemeralRunner so the set makes one with a new name",
            )
        if len(self._name_conflicts) > 10_000:
            self._name_conflicts.clear()
        self._name_conflicts[uid] = tries
        return _JitSecret(er, None, Result(requeue_after=NAME_CONFLICT_REQUEUE * tries))

    async def _give_up(self, er: JSON, reason: str, message: str) -> _JitSecret:
        """Delete a runner whose name cannot be registered, saying why; its set makes a new
        one under a fresh name."""
        await emit(self.recorder, er, WARNING, reason, message)
        await self.kube.delete(EPHEMERAL_RUNNERS, er, missing_ok=True)
        return _JitSecret(er, None)

    async def _remove_registration(self, er: JSON) -> None:
        # NB: from the secret when status has no runnerId yet: a pod that cannot be made
        # fails the runner before the runnerId write has reached ``er``.
        rid = await self._registered_id(er)
        if not rid:
            return
        try:
            client = await self._client(er)
            await client.remove_runner(rid)
        except gherrors.AgentNotFound:
            pass

    # -- the pod -------------------------------------------------------------------------

    def _backoff(self, failures: int) -> float:
        ladder = self.options.runner_failure_backoff
        return float(ladder[min(failures, len(ladder) - 1)]) if ladder else 0.0

    async def _create_pod(
        self,
        er: JSON,
        secret: JSON,
        runner_id: int,
        *,
        fresh: bool = False,
        status_written: asyncio.Future[None] | None = None,
    ) -> Result | None:
        """Create the runner's pod, or say why it cannot be made.

        ``status_written`` is the runnerId write sent alongside the first create: a failure
        is written only after it has landed, or its ``phase: Pending`` could land second,
        undo ``Failed`` and have a runner whose secret was cleaned up registered again.
        """
        # NB: uncached (unless ``er`` was just read or written): the failure that deleted the
        # previous pod was written moments ago, and its pod-deleted event often arrives
        # before the cache has the new failures; a stale read would skip the backoff (B2).
        if not fresh:
            try:
                er = await self.kube.get(
                    EPHEMERAL_RUNNERS,
                    objects.meta(er)["name"],
                    namespace=objects.meta(er)["namespace"],
                )
            except kerrors.NotFound:
                return None
        if objects.is_deleting(er) or EphemeralRunnerView(er).is_done:
            return Result(requeue=True)
        failures = EphemeralRunnerView(er).failures
        if failures:
            times = [t for t in (objects.parse_time(v) for v in failures.values()) if t is not None]
            if times:
                wait = self._backoff(len(failures)) - (now() - max(times)).total_seconds()
                if wait > 0:
                    return Result(requeue_after=wait)
        pod = rr.new_runner_pod(er, secret, self.options.user_agent)
        try:
            made = await self.kube.create(PODS, pod)
        except kerrors.AlreadyExists:
            return Result(requeue_after=ALREADY_EXISTS_REQUEUE)
        except kerrors.Invalid as err:
            if status_written is not None:
                await asyncio.wait([status_written])
            await self._mark_failed(
                er, c.REASON_INVALID_POD, f"Failed to create the pod: {err.message}"
            )
            return None
        except kerrors.Forbidden as err:
            if status_written is not None:
                await asyncio.wait([status_written])
            if "exceeded quota:" in err.message:
                created = objects.parse_time(objects.meta(er).get("creationTimestamp"))
                age = (now() - created).total_seconds() if created else 0.0
                if age > QUOTA_REPLACE_AFTER:
                    await emit(
                        self.recorder,
                        er,
                        WARNING,
                        "QuotaExceeded",
                        f"{err.message}; replacing the runner",
                    )
                    await self.kube.delete(EPHEMERAL_RUNNERS, er, missing_ok=True)
                    return None
                await emit(self.recorder, er, WARNING, "QuotaExceeded", err.message)
                return Result(requeue_after=QUOTA_REQUEUE)
            await self._mark_failed(
                er, c.REASON_INVALID_POD, f"Failed to create the pod: {err.message}"
            )
            return None
        er_uid, made_uid = (
            str(objects.meta(er).get("uid") or ""),
            str(objects.meta(made).get("uid") or ""),
        )
        self._pods.expect_create(er_uid, str(pod["metadata"]["name"]), made_uid)
        self._note_pod(er_uid, made_uid, runner_id)
        log.debug("created runner pod %s/%s", pod["metadata"]["namespace"], pod["metadata"]["name"])
        return None

    async def _follow_pod(self, er: JSON, pod: JSON) -> Result | None:
        if objects.is_deleting(pod):
            return None  # its delete event wakes us
        verdict = judge_pod(pod)
        if verdict.kind == "success":
            return await self._succeeded(er)
        if verdict.kind == "outdated":
            await self.kube.patch_status(
                EPHEMERAL_RUNNERS,
                er,
                rr.phase_status(c.PHASE_OUTDATED, "Outdated", "Runner is deprecated"),
            )
            await emit(
                self.recorder,
                er,
                WARNING,
                "RunnerOutdated",
                "the runner version is deprecated (exit code 7)",
            )
            await self._remove_registration(er)
            await self._cleanup_resources(er)
            return None
        if verdict.kind == "failed":
            return await self._pod_failed(er, pod, verdict)
        if verdict.kind == "wait":
            return None
        status = objects.status_of(er)
        phase = str(objects.status_of(pod).get("phase") or "")
        ready = pod_ready(pod)
        if status.get("phase") != phase or bool(status.get("ready")) != ready:
            await self.kube.patch_status(
                EPHEMERAL_RUNNERS,
                er,
                rr.phase_status(
                    phase, verdict.reason or None, verdict.message or None, ready=ready
                ),
            )
        return None

    async def _succeeded(self, er: JSON) -> Result | None:
        """Exit 0: the runner finished its job and de-registered itself (B5: no RemoveRunner).

        The Succeeded phase goes first, while the pod still exists, so a crash after it
        resumes on the done path and never registers the runner again. Then the pod and
        secret are deleted, and only then both finalizers go, in one write: the set deletes
        a finished runner at once, and a runner without finalizers would vanish with its
        JIT secret still there if this process died between the deletes (chaos
        leader-kill). The registration finalizer goes too: whoever deletes the object next
        must not call RemoveRunner for a registration that no longer exists.
        """
        await self.kube.patch_status(EPHEMERAL_RUNNERS, er, rr.phase_status(c.PHASE_SUCCEEDED))
        log.info(
            "%s/%s: the runner completed",
            objects.meta(er).get("namespace"),
            objects.meta(er).get("name"),
        )
        await self._cleanup_resources(er)
        await self._release(er)
        return None

    async def _release(self, er: JSON) -> None:
        """Drop both finalizers of a runner whose objects are gone and whose registration
        is (or needs no removal)."""
        uid = str(objects.meta(er).get("uid") or "")
        if uid in self._released:
            return
        if objects.has_finalizer(
            er, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION
        ) or objects.has_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER):
            await self._drop_finalizer(
                er, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION, c.FINALIZER_EPHEMERAL_RUNNER
            )
        if uid:
            self._released = _remember(self._released, uid)

    async def _pod_failed(self, er: JSON, pod: JSON, verdict: PodVerdict) -> Result | None:
        """Behaviours B2: fail fast, never count a dead pod as a viable runner."""
        pod_name = str(objects.meta(pod).get("name"))
        if EphemeralRunnerView(er).has_job:
            return await self._busy_runner_lost(
                er, f"pod {pod_name} failed while running job", verdict.message
            )

        started = runner_started(er, pod)  # read before the patch below moves the phase
        failures = dict(EphemeralRunnerView(er).failures)
        uid = str(objects.meta(pod).get("uid") or pod_name)
        new = uid not in failures
        if new:
            failures[uid] = objects.format_time(now())
            er = await self._record_failures(er, failures, verdict.reason, verdict.message)
        if await self._failed_too_often(er, failures, verdict.message):
            return None
        # The pod's runner may have redeemed the JIT config, which is single-use: the next
        # pod gets a fresh registration (the missing secret makes ``_ensure_jit_secret``
        # remove this one and register again). Secret first, pod last: a crash in between
        # finds the failed pod again and repeats both deletes.
        if started:
            await self._spend_jit_config(er)
        await self.kube.delete(PODS, pod, uid=objects.meta(pod).get("uid"), missing_ok=True)
        wait = self._backoff(len(failures))
        if new:
            await emit(
                self.recorder,
                er,
                WARNING,
                "PodFailed",
                f"pod {pod_name} failed ({verdict.message}); failure {len(failures)} of "
                f"{self.options.runner_max_failures}, re-creating it with a fresh registration in "
                f"{wait:.0f}s",
            )
        return Result(requeue_after=wait) if wait > 0 else Result(requeue=True)

    async def _busy_runner_lost(self, er: JSON, what: str, why: str) -> Result | None:
        """The job the runner took is lost with its pod; the runner will not come back.
        Delete the object at once (the registration cannot be removed while GitHub still
        thinks the job runs, so do not wait for that) and let the set replace it."""
        try:
            await self._remove_registration(er)
        except gherrors.GitHubError as err:
            log.info("best-effort RemoveRunner of a lost busy runner: %s", err)
        except ConfigurationError:
            pass
        await emit(
            self.recorder,
            er,
            WARNING,
            "RunnerFailed",
            f"{what} {EphemeralRunnerView(er).job_id}: {why}; deleting the runner so the set "
            "replaces it",
        )
        er = await self._drop_finalizer(er, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION)
        await self.kube.delete(EPHEMERAL_RUNNERS, er, missing_ok=True)
        return None

    async def _spend_jit_config(self, er: JSON) -> None:
        """Delete the JIT secret of a runner whose pod is gone after it ran (see
        :func:`pod_was_running`); the next reconcile registers the runner afresh."""
        m = objects.meta(er)
        await self.kube.delete(
            SECRETS,
            c.runner_jit_secret_name(str(m["name"])),
            namespace=str(m["namespace"]),
            missing_ok=True,
        )

    async def _pod_lost(self, er: JSON, *, online: int = 0) -> Result | None:
        """The pod of a runner that was Running (or that this process made or saw under the
        current registration, see :meth:`_pod_vanished`; or whose registration GitHub shows
        ``online`` = ``online``, see :meth:`_online_without_pod`) vanished without being seen
        failed (its node was deleted, e.g. a spot VM; or a pod delete the controller never
        made).

        ARC re-creates such a pod from the same Secret, whose JIT config the lost runner
        already redeemed: the new runner is refused with Conflict and sits idle for as long
        as nobody looks (ARC #4588: 64 minutes). Here the loss counts as a pod failure
        (behaviours B2 backoff and limit), the config is spent, and the runner registers
        afresh before its next pod. Decided on an uncached read: a stale cache must not
        spend the config of a registration just made.
        """
        m = objects.meta(er)
        name, ns = str(m["name"]), str(m["namespace"])
        try:
            er = await self.kube.get(EPHEMERAL_RUNNERS, name, namespace=ns)
        except kerrors.NotFound:
            return None
        runner = EphemeralRunnerView(er)
        if objects.is_deleting(er) or runner.is_done:
            return Result(requeue=True)
        rid = runner.runner_id
        seen_online = online > 0 and rid == online
        if not (pod_was_running(er) or self._pod_vanished(er) or seen_online):
            return Result(requeue=True)
        if runner.has_job:
            return await self._busy_runner_lost(
                er, f"pod {c.runner_pod_name(name)} was lost while running job", "pod gone"
            )
        await self._spend_jit_config(er)
        uid = str(objects.meta(er).get("uid") or "")
        self._pod_of.pop(uid, None)
        if uid:  # decided: the next pod comes with a fresh registration, nothing to ask
            self._asked_online = _remember(self._asked_online, uid)
        failures = dict(runner.failures)
        failures.setdefault(f"lost-runner-{rid}", objects.format_time(now()))
        message = f"pod {c.runner_pod_name(name)} of runner {rid} is gone"
        er = await self._record_failures(er, failures, "PodLost", message)
        if await self._failed_too_often(er, failures, message):
            return None
        wait = self._backoff(len(failures))
        await emit(
            self.recorder,
            er,
            WARNING,
            "PodLost",
            f"{message}; its runner may have used the JIT config, so the runner registers "
            f"again and gets a new pod in {wait:.0f}s (failure {len(failures)} of "
            f"{self.options.runner_max_failures})",
        )
        return Result(requeue=True)

    async def _record_failures(
        self, er: JSON, failures: dict[str, str], reason: str, message: str
    ) -> JSON:
        """Behaviours B2: store the pod failures counted so far and why the runner is back to
        Pending (optimistic lock: a concurrent count must not be overwritten)."""
        updated: JSON = await self.kube.patch_status(
            EPHEMERAL_RUNNERS,
            er,
            rr.phase_status(c.PHASE_PENDING, reason, message, failures=failures),
            optimistic_lock=True,
        )
        return updated

    async def _failed_too_often(self, er: JSON, failures: dict[str, str], last: str) -> bool:
        """Past ``runner_max_failures`` the runner is Failed for good (B2's limit)."""
        if len(failures) <= self.options.runner_max_failures:
            return False
        await self._mark_failed(
            er,
            c.REASON_TOO_MANY_POD_FAILURES,
            f"the runner pod failed {len(failures)} times; last: {last}",
        )
        return True

    async def _mark_failed(self, er: JSON, reason: str, message: str) -> None:
        """Phase Failed for good: the runner will not come back, so its registration goes."""
        await self.kube.patch_status(
            EPHEMERAL_RUNNERS, er, rr.phase_status(c.PHASE_FAILED, reason, message)
        )
        await emit(self.recorder, er, WARNING, reason, message)
        try:
            await self._remove_registration(er)
        except ConfigurationError:
            pass
        await self._cleanup_resources(er)


def setup(manager: ManagerLike, deps: ScaleSetDeps) -> Controller:
    """Register the EphemeralRunner controller: ``For(EphemeralRunner)``, ``Owns(Pod)``."""
    reconciler = EphemeralRunnerReconciler(
        deps.client(manager),
        manager.cache,
        deps.options,
        deps.resolver,
        deps.recorder,
        newborn=deps.newborn,
    )
    return (
        Builder(manager)
        .named("ephemeralrunner")
        .for_(EPHEMERAL_RUNNERS, ResourceVersionChangedPredicate())
        .owns(PODS, ResourceVersionChangedPredicate())
        .with_options(max_concurrent_reconciles=deps.options.runner_max_concurrent_reconciles)
        .complete(reconciler)
    )
