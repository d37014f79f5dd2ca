"""AutoscalingListener reconciler: the listener's RBAC, config, and pod (spec §8, behaviours B1).

The listener pod runs with ``restartPolicy: Never``, so the kubelet's CrashLoopBackOff never
applies and pod watch events are not rate limited: this reconciler is the only thing that
paces listener restarts. ARC deleted a terminated listener pod at once and recreated it
within a second, forever; a revoked token then burns the API quota of every scale set on
it in lock-step. Here a listener container that exited non-zero stays in place (a visible
Error pod, with its logs) until its backoff has elapsed, measured from the container's
``finishedAt``, and the wait is a ``Result(requeue_after=...)``, never a busy loop.

Failures are counted per failed pod UID in ``status.failures`` (a pod is counted once however
often it is reconciled), with ``status.lastFailureTime`` / ``status.lastFailedPodUID``. A
listener whose container has been running for ``stable_after`` seconds resets the count.
(Resetting the instant the container starts would defeat the ladder: a listener that
fails deterministically at start-up is "Running" for a second before every crash.)
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gharc.api.resources import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
)
from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import AutoscalingListenerView
from gharc.controllers.scaleset import inprocesslisteners as ih
from gharc.controllers.scaleset import listenerresources as lr
from gharc.controllers.scaleset.credentials import ClientResolver, ConfigurationError, GitHubTarget
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.events import EventRecorder, emit
from gharc.controllers.scaleset.metrics import ControllerMetrics
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.controllers.scaleset.reconcileutil import remove_finalizer
from gharc.github.pool import ClientPool
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient, Reader
from gharc.kube.controller import Controller
from gharc.kube.events import NORMAL, WARNING
from gharc.kube.finalizers import add_finalizer
from gharc.kube.informer import EventHandlerFuncs
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS
from gharc.listener.host import HostedListenerStatus, Key, ListenerHost
from gharc.listener.restart_ladder import restart_delay

log = logging.getLogger(__name__)

_spread = random.Random()
"""Spreads resyncs in time; not a secret."""

JSON = dict[str, Any]

PHASE_PENDING = c.PHASE_PENDING
PHASE_RUNNING = c.PHASE_RUNNING
#: The listener container exited non-zero and is waiting out its backoff.
PHASE_BACKOFF = "BackOff"
#: The listener cannot be configured (e.g. its GitHub secret is missing).
PHASE_FAILED = c.PHASE_FAILED

#: Seconds a listener container must run before its failure count resets.
DEFAULT_STABLE_AFTER = 10.0
#: How long to wait before retrying a configuration problem nothing watches (a Secret).
CONFIG_RETRY_AFTER = 60.0
#: Poll interval while owned objects are being deleted.
CLEANUP_POLL = 1.0


def listener_container_status(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``listener`` container's status, or None before the kubelet reports one."""
    for status in objects.status_of(pod).get("containerStatuses") or ():
        if status.get("name") == c.LISTENER_CONTAINER_NAME:
            return dict(status)
    return None


class AutoscalingListenerReconciler:
    """Reconciles one AutoscalingListener (controller namespace) into its pod and RBAC."""

    def __init__(
        self,
        kube: KubeClient,
        cache: Reader,
        resolver: ClientResolver,
        options: ScaleSetOptions,
        metrics: ControllerMetrics,
        recorder: EventRecorder | None = None,
        *,
        stable_after: float = DEFAULT_STABLE_AFTER,
        now: Callable[[], datetime] | None = None,
        host: ListenerHost | None = None,
        listener_clients: ClientPool | None = None,
    ) -> None:
        self.host = host
        """Set in ``InProcess`` listener mode: listeners run as tasks of this process."""
        self.listener_clients = listener_clients or ih.listener_pool(
            user_agent=options.user_agent, transport=None, write_gate=kube.write_time_left
        )
        self.kube = kube
        self.cache = cache
        self.resolver = resolver
        self.options = options
        self.metrics = metrics
        self.recorder = recorder
        self.stable_after = stable_after
        self._now = now or (lambda: datetime.now(UTC))
        self._config_due: dict[Key, tuple[tuple[str, int], float]] = {}
        """Hosted listener -> ((uid, generation) its settings were last read for, monotonic
        time they are read again): a reconcile before that only mirrors its state."""

    # -- entry point -------------------------------------------------------------------
    async def reconcile(self, request: Request) -> Result | None:
        # A copy: cache objects are shared, and this reconcile edits the listener it holds.
        return await reconcile_fetched(
            self.cache.get, AUTOSCALING_LISTENERS, request, self.reconcile_listener, copy=True
        )

    async def reconcile_listener(self, listener: JSON) -> Result | None:
        if objects.is_deleting(listener):
            return await self._finalize(listener)
        if not objects.has_finalizer(listener, c.FINALIZER_AUTOSCALING_LISTENER):
            listener = dict(
                await add_finalizer(
                    self.kube, AUTOSCALING_LISTENERS, listener, c.FINALIZER_AUTOSCALING_LISTENER
                )
            )
        view = AutoscalingListenerView(listener)
        ars_ns, ars_name = view.ars_namespace, view.ars_name
        try:
            await self.cache.get(AUTOSCALING_RUNNER_SETS, ars_name, namespace=ars_ns)
        except kerrors.NotFound:
            log.info("AutoscalingRunnerSet %s/%s is gone; deleting its listener", ars_ns, ars_name)
            await self.kube.delete(AUTOSCALING_LISTENERS, listener, missing_ok=True)
            return None
        if self.host is not None:
            return await self._reconcile_in_process(listener, self.host)

        forbidden = lr.listener_template_violations(listener, self.options)
        if forbidden:  # written directly, not by the ARS reconciler: create nothing
            message = "; ".join(str(v) for v in forbidden)
            err = ConfigurationError("ListenerTemplateForbidden", message)
            await self._report_config_error(listener, err)
            return None
        await self._ensure_service_account(listener)
        await self._ensure_role(listener)
        await self._ensure_role_binding(listener)
        try:
            if view.spec.get("proxy"):
                await self._ensure_proxy_secret(listener)
            config_changed = await self._ensure_config_secret(listener)
        except ConfigurationError as err:
            await self._report_config_error(listener, err)
            return Result(requeue_after=CONFIG_RETRY_AFTER)
        return await self._ensure_pod(listener, restart=config_changed)

    # -- deletion ----------------------------------------------------------------------
    async def _finalize(self, listener: JSON) -> Result | None:
        """Delete pod, secrets, RoleBinding, Role, ServiceAccount; then drop the finalizer."""
        if not objects.has_finalizer(listener, c.FINALIZER_AUTOSCALING_LISTENER):
            return None
        meta = listener["metadata"]
        name, ns = meta["name"], meta["namespace"]
        if self.host is not None:
            await self.host.remove((ns, name))  # stops it and deletes its session
            self._config_due.pop((ns, name), None)
        remaining = await self._delete_pod_mode_objects(listener)
        self._set_gauge(listener, 0)
        if remaining:
            return Result(requeue_after=CLEANUP_POLL)
        await remove_finalizer(
            self.kube, AUTOSCALING_LISTENERS, listener, c.FINALIZER_AUTOSCALING_LISTENER
        )
        log.info("listener %s/%s cleaned up", ns, name)
        return None

    async def _delete_pod_mode_objects(self, listener: JSON) -> int:
        """Delete the listener pod, its secrets and RBAC; how many still existed."""
        meta = listener["metadata"]
        name, ns = meta["name"], meta["namespace"]
        ars_ns = AutoscalingListenerView(listener).ars_namespace or ns
        targets = [
            (PODS, c.listener_pod_name(name), ns),
            (SECRETS, c.listener_config_secret_name(name), ns),
            (SECRETS, c.listener_proxy_secret_name(name), ns),
            (ROLE_BINDINGS, c.listener_role_binding_name(name), ars_ns),
            (ROLES, c.listener_role_name(name), ars_ns),
            (SERVICE_ACCOUNTS, c.listener_service_account_name(name), ns),
        ]
        remaining = 0
        for resource, obj_name, obj_ns in targets:
            answer = await self.kube.delete(resource, obj_name, namespace=obj_ns, missing_ok=True)
            if answer is not None:
                remaining += 1  # it existed on this pass; look again until all are gone
        return remaining

    # -- in-process mode ---------------------------------------------------------------
    async def _reconcile_in_process(self, listener: JSON, host: ListenerHost) -> Result | None:
        """Run the listener as a task of this process and mirror its state into status.

        A listener pod left from ``Pod`` mode is deleted first, and the in-process listener
        starts only once it is gone: two listeners would take the session from each other
        (the pod deletes its session when it stops; the successor then creates a new one).
        """
        view = AutoscalingListenerView(listener)
        key = (view.namespace, view.name)
        if await self._has_pod_mode_objects(listener):
            log.info("listener %s/%s: in-process mode; removing its pod first", *key)
            await emit(
                self.recorder,
                listener,
                NORMAL,
                "ListenerPodRemoved",
                "the listener runs in the controller (--listener-mode InProcess): deleting "
                "its pod, Secrets, Role, RoleBinding and ServiceAccount first (a listener pod "
                "deletes its session when it stops)",
            )
            if await self._delete_pod_mode_objects(listener):
                return Result(requeue_after=CLEANUP_POLL)
        state = host.status(key)
        meta = objects.meta(listener)
        version = (str(meta.get("uid") or ""), int(meta.get("generation") or 0))
        memo = self._config_due.get(key)
        left = memo[1] - time.monotonic() if memo is not None and memo[0] == version else 0.0
        if state is not None and left > 1.0:
            # The hosted listener's own state changed (a session, a failure, a message):
            # its settings were read this resync period and its spec has not changed since,
            # so the GitHub Secret is not read again (a quiet set's job would cost one read).
            await self._mirror_hosted_status(listener, state)
            await self._emit_notices(listener, host, key)
            return Result(requeue_after=left)
        runner_set = (view.ars_namespace, view.ers_name)
        try:
            config = await self._listener_config(listener)
        except ConfigurationError as err:
            await self._report_config_error(listener, err)
            return Result(requeue_after=CONFIG_RETRY_AFTER)
        resolve = ih.resolver_for(
            listener, config, self.resolver, self._listener_config, self.listener_clients
        )
        if host.ensure(key, runner_set, ih.fingerprint(config), resolve):
            log.info("listener %s/%s started in process", *key)
        state = host.status(key)
        if state is not None:
            await self._mirror_hosted_status(listener, state)
        await self._emit_notices(listener, host, key)
        # Secrets are not watched (a cache of every Secret would cost memory and RBAC):
        # looking again every resync period bounds how long a rotated token waits. Spread
        # over a quarter of the period, so sets created together do not resync together.
        resync = self.options.listener_resync_seconds * (1.0 + 0.25 * _spread.random())
        self._config_due[key] = (version, time.monotonic() + resync)
        return Result(requeue_after=resync)

    async def _emit_notices(self, listener: JSON, host: ListenerHost, key: Key) -> None:
        for notice in host.take_notices(key):
            # A tenant's listenerMetrics was bounded (gharc/listener/metric_limits.py).
            await emit(self.recorder, listener, WARNING, "ListenerMetricsLimited", notice)

    async def _has_pod_mode_objects(self, listener: JSON) -> bool:
        meta = listener["metadata"]
        for resource, name in (
            (PODS, c.listener_pod_name(meta["name"])),
            (SERVICE_ACCOUNTS, c.listener_service_account_name(meta["name"])),
        ):
            try:
                await self.cache.get(resource, name, namespace=meta["namespace"])
                return True
            except kerrors.NotFound:
                continue
        return False

    async def _listener_config(self, listener: JSON) -> JSON:
        """The listener's ``config.json`` content, from the spec and the GitHub secret."""
        view = AutoscalingListenerView(listener)
        spec, ars_ns = view.spec, view.ars_namespace
        target = GitHubTarget.from_spec(ars_ns, spec)
        secret_data: dict[str, str] = {}
        vault_proxy = None
        if target.vault is None:
            secret_data = await self.resolver.github_config_data(target)
        else:
            # The listener reads the vault itself; only the vault's proxy is resolved here.
            vault_proxy = await self.resolver.vault_proxy(target)
        ca = await self.resolver.ca_bundle(target)
        return lr.listener_config(
            listener, secret_data, self.options, server_root_ca=ca, vault_proxy=vault_proxy
        )

    async def _mirror_hosted_status(self, listener: JSON, state: HostedListenerStatus) -> None:
        self._set_gauge(listener, 1 if state.phase == PHASE_RUNNING else 0)
        patch: JSON = {
            "phase": state.phase,
            "message": state.message or None,
            "failures": state.failures,
            "sessionId": state.session_id or None,
        }
        if state.last_failure_time is not None:
            patch["lastFailureTime"] = objects.format_time(state.last_failure_time)
        if state.last_message_time is not None:
            patch["lastMessageTime"] = objects.format_time(state.last_message_time)
        if (
            state.failures > AutoscalingListenerView(listener).failures
            and state.phase == PHASE_BACKOFF
        ):
            await emit(self.recorder, listener, WARNING, "ListenerBackOff", state.message)
        await self._patch_status(listener, patch)

    # -- owned objects -----------------------------------------------------------------
    async def _ensure_service_account(self, listener: JSON) -> None:
        desired = lr.listener_service_account(listener, self.options)
        live = await self._live_or_create(SERVICE_ACCOUNTS, desired, self.cache)
        if live is not None:
            await self._sync_metadata(SERVICE_ACCOUNTS, live, desired)

    async def _ensure_role(self, listener: JSON) -> None:
        desired = lr.listener_role(listener, self.options)
        live = await self._live_or_create(ROLES, desired, self.kube)
        if live is None:
            return
        if not objects.semantically_equal(live.get("rules"), desired["rules"]):
            await self.kube.merge_patch(
                ROLES, live, {"rules": desired["rules"]}, optimistic_lock=True
            )
        await self._sync_metadata(ROLES, live, desired)

    async def _ensure_role_binding(self, listener: JSON) -> None:
        desired = lr.listener_role_binding(listener, self.options)
        live = await self._live_or_create(ROLE_BINDINGS, desired, self.kube)
        if live is not None:
            # roleRef is immutable and the subject is derived from the name: labels only.
            await self._sync_metadata(ROLE_BINDINGS, live, desired)

    async def _ensure_proxy_secret(self, listener: JSON) -> None:
        from gharc.api.scaleset.models import ProxyConfig

        view = AutoscalingListenerView(listener)
        ars_ns = view.ars_namespace
        proxy = ProxyConfig.model_validate(view.spec.get("proxy") or {})
        auth: dict[str, tuple[str, str] | None] = {"http": None, "https": None}
        for kind in ("http", "https"):
            server = getattr(proxy, kind)
            if server and server.credential_secret_ref:
                try:
                    data = await self.resolver.secret_data(ars_ns, server.credential_secret_ref)
                except kerrors.NotFound:
                    raise ConfigurationError(
                        "MissingProxyCredentials",
                        f"proxy credential secret {ars_ns}/{server.credential_secret_ref} "
                        "does not exist",
                    ) from None
                auth[kind] = (
                    data.get(c.SECRET_KEY_PROXY_USERNAME, ""),
                    data.get(c.SECRET_KEY_PROXY_PASSWORD, ""),
                )
        desired = lr.listener_proxy_secret(
            listener, proxy.to_secret_data(auth["http"], auth["https"])
        )
        await self._ensure_secret_data(desired)

    async def _ensure_config_secret(self, listener: JSON) -> bool:
        """Create or refresh ``config.json``; True when a live secret's data changed.

        Unlike ARC (§17.6), the data is rewritten when it differs, and the caller restarts
        the pod so the listener never runs on a stale configuration.
        """
        config = await self._listener_config(listener)
        desired = lr.listener_config_secret(listener, config, self.options)
        return await self._ensure_secret_data(desired)

    async def _ensure_secret_data(self, desired: JSON) -> bool:
        live = await self._live_or_create(SECRETS, desired, self.kube)
        if live is None:
            return False
        changed = lr.decoded_secret_data(live) != lr.decoded_secret_data(desired)
        if changed:
            await self.kube.merge_patch(
                SECRETS, live, {"data": desired["data"]}, optimistic_lock=True
            )
        await self._sync_metadata(SECRETS, live, desired)
        return changed

    async def _sync_metadata(self, resource: Any, live: JSON, desired: JSON) -> None:
        """Add missing/changed labels and annotations (never removes foreign keys)."""
        patch: JSON = {}
        lm, dm = objects.meta(live), objects.meta(desired)
        for key in ("labels", "annotations"):
            if not lr.contains_all(lm.get(key), dm.get(key)):
                patch[key] = dict(dm.get(key) or {})
        if patch:
            await self.kube.merge_patch(resource, live, {"metadata": patch}, optimistic_lock=True)

    async def _live_or_create(self, resource: Any, desired: JSON, reader: Reader) -> JSON | None:
        """The live object ``desired`` names, read through ``reader`` (the cache for kinds
        the controller watches, else the API server); None after creating it, when there is
        nothing to compare yet. Every owned object but the pod starts this way."""
        meta = desired["metadata"]
        try:
            return await reader.get(resource, meta["name"], namespace=meta["namespace"])
        except kerrors.NotFound:
            await self._create(resource, desired)
            return None

    async def _create(self, resource: Any, obj: JSON) -> None:
        try:
            await self.kube.create(resource, obj)
            log.info(
                "created %s %s/%s", resource, obj["metadata"]["namespace"], obj["metadata"]["name"]
            )
        except kerrors.AlreadyExists:
            pass  # our cache had not seen it yet; the next reconcile compares it

    # -- the pod and B1 ----------------------------------------------------------------
    async def _ensure_pod(self, listener: JSON, *, restart: bool) -> Result | None:
        meta = listener["metadata"]
        name = c.listener_pod_name(meta["name"])
        try:
            pod = await self.cache.get(PODS, name, namespace=meta["namespace"])
        except kerrors.NotFound:
            self._set_gauge(listener, 0)
            await self._create(PODS, lr.listener_pod(listener, self.options))
            await self._patch_status(listener, {"phase": PHASE_PENDING})
            return None
        if objects.is_deleting(pod):
            return None  # its delete event brings us back to create the next one
        if restart:
            log.info("listener %s: configuration changed; restarting its pod", meta["name"])
            await self._delete_pod(listener, pod)
            return None
        if objects.status_of(pod).get("reason") == "Evicted":
            await emit(
                self.recorder,
                listener,
                WARNING,
                "ListenerEvicted",
                f"listener pod {name} was evicted; recreating it",
            )
            await self._delete_pod(listener, pod)
            return None
        status = listener_container_status(pod)
        if status is None:
            if objects.status_of(pod).get("phase") == "Failed":
                return await self._on_failure(listener, pod, exit_code=None, finished_at=None)
            return None
        state = status.get("state") or {}
        if "running" in state:
            return await self._on_running(listener, pod, state["running"])
        if "terminated" in state:
            term = state["terminated"]
            exit_code = int(term.get("exitCode", 0))
            if exit_code == 0:
                await emit(
                    self.recorder,
                    listener,
                    NORMAL,
                    "ListenerExited",
                    f"listener pod {name} exited with code 0; recreating it",
                )
                await self._delete_pod(listener, pod)
                return None
            return await self._on_failure(
                listener,
                pod,
                exit_code=exit_code,
                finished_at=objects.parse_time(term.get("finishedAt")),
            )
        return None

    async def _on_running(
        self, listener: JSON, pod: JSON, running: Mapping[str, Any]
    ) -> Result | None:
        self._set_gauge(listener, 1)
        status = objects.status_of(listener)
        patch: JSON = {}
        if status.get("phase") != PHASE_RUNNING:
            patch["phase"] = PHASE_RUNNING
        if status.get("message"):
            patch["message"] = None
        requeue: Result | None = None
        if AutoscalingListenerView(listener).failures > 0:
            started = objects.parse_time(running.get("startedAt")) or self._now()
            stable_at = started + timedelta(seconds=self.stable_after)
            now = self._now()
            if now >= stable_at:
                patch["failures"] = 0
                log.info(
                    "listener %s has been running since %s; failure count reset",
                    listener["metadata"]["name"],
                    objects.format_time(started),
                )
            else:
                requeue = Result(requeue_after=(stable_at - now).total_seconds() + 0.1)
        if patch:
            await self._patch_status(listener, patch)
        return requeue

    async def _on_failure(
        self,
        listener: JSON,
        pod: JSON,
        *,
        exit_code: int | None,
        finished_at: datetime | None,
    ) -> Result | None:
        """Count the failed pod once, then wait out its backoff before recreating it."""
        self._set_gauge(listener, 0)
        name = listener["metadata"]["name"]
        status = objects.status_of(listener)
        pod_uid = str(pod["metadata"].get("uid") or "")
        failures = AutoscalingListenerView(listener).failures
        first_sight = status.get("lastFailedPodUID") != pod_uid
        # No finishedAt (a pod failed without container status): this failure's time is
        # when we first saw it, which is what lastFailureTime records from then on.
        recorded = None if first_sight else objects.parse_time(status.get("lastFailureTime"))
        finished = finished_at or recorded or self._now()
        if first_sight:
            failures += 1
        delay = restart_delay(failures, self.options.listener_failure_backoff)
        until = finished + timedelta(seconds=delay)
        why = f"exit code {exit_code}" if exit_code is not None else "pod failed"
        if first_sight:
            message = (
                f"listener container failed ({why}), failure {failures}; backing off "
                f"{delay:g}s, restarting at {objects.format_time(until)}"
            )
            log.warning("listener %s: %s", name, message)
            await emit(self.recorder, listener, WARNING, "ListenerBackOff", message)
            await self._patch_status(
                listener,
                {
                    "failures": failures,
                    "lastFailureTime": objects.format_time(finished),
                    "lastFailedPodUID": pod_uid,
                    "phase": PHASE_BACKOFF,
                    "message": message,
                },
            )
        now = self._now()
        if now < until:
            return Result(requeue_after=(until - now).total_seconds() + 0.05)
        log.info("listener %s: backoff over; recreating its pod (failure %d)", name, failures)
        await self._delete_pod(listener, pod)
        return None

    async def _delete_pod(self, listener: JSON, pod: JSON) -> None:
        self._set_gauge(listener, 0)
        meta = pod["metadata"]
        try:
            await self.kube.delete(
                PODS,
                meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
                missing_ok=True,
            )
        except kerrors.Conflict:
            pass  # already replaced by a newer pod

    # -- status and metrics ------------------------------------------------------------
    async def _report_config_error(self, listener: JSON, err: ConfigurationError) -> None:
        status = objects.status_of(listener)
        log.warning("listener %s: %s", listener["metadata"]["name"], err.message)
        message = f"{err.reason}: {err.message}"
        if status.get("phase") != PHASE_FAILED or status.get("message") != message:
            await emit(self.recorder, listener, WARNING, err.reason, err.message)
            await self._patch_status(listener, {"phase": PHASE_FAILED, "message": message})

    async def _patch_status(self, listener: JSON, patch: JSON) -> None:
        current = objects.status_of(listener)
        if all(current.get(k) == v for k, v in patch.items()):
            return
        updated = await self.kube.patch_status(
            AUTOSCALING_LISTENERS, listener, {"status": patch}, optimistic_lock=True
        )
        # Later steps of this reconcile see what we wrote.
        listener["metadata"] = updated.get("metadata", listener["metadata"])
        listener["status"] = objects.status_of(updated)

    def _set_gauge(self, listener: Mapping[str, Any], value: int) -> None:
        view = AutoscalingListenerView(listener)
        labels = self.metrics.labels_for(view.name, view.namespace, view.github_config_url)
        self.metrics.running_listeners.labels(**labels).set(value)


def rbac_to_listener(obj: Mapping[str, Any]) -> Iterable[Request]:
    """A listener Role/RoleBinding event wakes its listener (both labels must be present)."""
    labels = objects.meta(obj).get("labels") or {}
    ns, name = labels.get(c.LABEL_LISTENER_NAMESPACE), labels.get(c.LABEL_LISTENER_NAME)
    return [Request(str(ns), str(name))] if ns and name else []


def setup(manager: ManagerLike, deps: ScaleSetDeps) -> Controller:
    """The AutoscalingListener controller: ``For(listener)``, ``Owns(Pod)``,
    ``Owns(ServiceAccount)``, ``Watches(Role)`` and ``Watches(RoleBinding)`` mapped by the
    ``auto-scaling-listener-namespace``/``-name`` labels; the Role/RoleBinding informers
    select only objects carrying that label, so the controller does not cache every Role in
    the cluster. With ``deps.host``, listeners run in this process.

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
        if deps.registry is not None:
            deps.registry.register(host.registry_collector)
    return controller
