"""Many listeners in one process: the controller's in-process listener mode.

A listener pod per scale set costs a process (about 110 MiB), a pod that a node loss takes
away with no standby, and a pod template that a tenant can bend. :class:`ListenerHost` runs
the same :class:`~gharc.listener.app.Listener` loop for every scale set as an asyncio task
inside the controller, so the listeners share the interpreter, the imports and the
controller's Kubernetes client, and they live and die with the elected leader: a standby
replica that takes over the lease starts every listener again and resumes each one's message
session (recorded on its EphemeralRunnerSet) without a 409.

A host told to *release* on stop (``release_on_stop``: the controller is going away for
good, e.g. a rollback to ARC) deletes every session and its record instead. ARC's listener
cannot resume a session it does not know: it creates its own and gets 409 until the
service drops the one left behind (about two minutes, every scale set stalled). Keeping
sessions stays the default, because a rolling upgrade's successor is another gharc that
resumes them.

Each hosted listener is isolated from the others: it has its own supervisor task, its own
failure count and B1 backoff ladder, its own metrics, and an exception in it is contained,
counted and reported through :meth:`ListenerHost.status` (which the AutoscalingListener
reconciler writes to the object's status and events). One scale set's bad credentials,
409s or bugs never stall another's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from gharc.github import errors as gherrors
from gharc.kube import objects
from gharc.kube.shardfence import current_shard
from gharc.listener.app import Listener
from gharc.listener.config import ListenerConfig
from gharc.listener.fenced import fenced
from gharc.listener.metrics import ListenerMetrics
from gharc.listener.restart_ladder import LISTENER_RESTART_LADDER, restart_delay
from gharc.listener.runnerset_writes import KubePatcher, marker_of
from gharc.listener.session import ActionsAPI, FatalError

__all__ = [
    "PHASE_BACKOFF",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "HostedListenerStatus",
    "ListenerHost",
    "Resolve",
]

log = logging.getLogger("gharc.listener.host")

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_BACKOFF = "BackOff"

Key = tuple[str, str]
Resolve = Callable[[bool], Awaitable[tuple[ListenerConfig, ActionsAPI, ListenerMetrics]]]
"""Builds a listener's config, Actions client and metrics; ``True`` after a failure, when
cached credentials must be read again (a rotated or restored token)."""


@dataclass(frozen=True)
class HostedListenerStatus:
    """What the AutoscalingListener's status shows for an in-process listener."""

    phase: str
    session_id: str = ""
    failures: int = 0
    last_failure_time: datetime | None = None
    message: str = ""
    restart_at: datetime | None = None
    last_message_time: datetime | None = None


class _HostedPatcher(KubePatcher):
    """The shared client's patcher; cleanup markers come from the controller's informer."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.markers: asyncio.Queue[int] = asyncio.Queue()
        self.last_marker: int | None = None
        self.landed: tuple[int, int] | None = None
        """(replicas, patchID) of the last count this listener wrote."""

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        await super().patch_replicas(replicas, patch_id)
        self.landed = (replicas, patch_id)

    async def patch_replicas_after(self, replicas: int, patch_id: int, marker: int) -> None:
        await super().patch_replicas_after(replicas, patch_id, marker)
        self.landed = (replicas, patch_id)

    def offer(self, marker: int) -> None:
        if marker != self.last_marker:
            self.last_marker = marker
            self.markers.put_nowait(marker)

    async def cleanup_markers(self) -> Any:
        while True:
            yield await self.markers.get()

    async def aclose(self) -> None:
        return None  # the client is the controller's


@dataclass
class _Hosted:
    key: Key
    fingerprint: str
    resolve: Resolve
    patcher: Any
    """A :class:`_HostedPatcher` (or a test double with ``offer`` and the same writes)."""
    task: asyncio.Task[None] | None = None
    shard: int | None = None
    """The shard the listener was started for (``--shards`` > 1); its task acts for it."""
    listener: Listener | None = None
    metrics: ListenerMetrics | None = None
    stop_requested: bool = False
    session_closed: bool = False
    """The listener deleted its session when it stopped (a release)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    phase: str = PHASE_PENDING
    session_id: str = ""
    failures: int = 0
    last_failure_time: datetime | None = None
    message: str = ""
    restart_at: datetime | None = None
    running_since: float | None = None
    last_message_reported: float = float("-inf")
    message_report: asyncio.TimerHandle | None = None
    """The pending report of the last-message time (see ``ListenerHost._on_message``)."""
    notices_said: set[str] = field(default_factory=set)
    """Metric limit notices already handed out: each is an event once, not per restart."""
    notices: list[str] = field(default_factory=list)
    """Metric limit notices not yet taken by the reconciler (a few at most)."""

    def status(self, wall: Callable[[], datetime], loop_now: float) -> HostedListenerStatus:
        last_message: datetime | None = None
        if self.listener is not None and self.listener.last_message_at is not None:
            age = max(0.0, loop_now - self.listener.last_message_at)
            last_message = (wall() - timedelta(seconds=age)).replace(microsecond=0)
        return HostedListenerStatus(
            phase=self.phase,
            session_id=self.session_id,
            failures=self.failures,
            last_failure_time=self.last_failure_time,
            message=self.message,
            restart_at=self.restart_at,
            last_message_time=last_message,
        )


class ListenerHost:
    """Runs one supervised :class:`Listener` task per AutoscalingListener.

    **Parameters:**

    * ``kube`` - the controller's :class:`~gharc.kube.client.KubeClient` (listeners patch
      through it, so their calls share its rate limit and its request counter).
    * ``identity`` - the session owner name (the controller pod's name).
    * ``ladder`` - B1's restart backoff per listener (seconds after the n-th failure).
    * ``stable_after`` - seconds a listener must run before its failure count resets.
    * ``on_change`` - called with a listener's key when its status changed (the
      AutoscalingListener controller enqueues it).
    * ``message_report_interval`` - the last-message time is reported at most this often.
    * ``message_report_delay`` - and never sooner than this after the message: the report
      is a status write, and a quiet set's first message is a job its runner waits for.
    """

    need_leader_election = True

    def __init__(
        self,
        kube: Any,
        *,
        identity: str,
        ladder: tuple[float, ...] = LISTENER_RESTART_LADDER,
        stable_after: float = 10.0,
        on_change: Callable[[Key], None] | None = None,
        message_report_interval: float = 60.0,
        message_report_delay: float = 10.0,
        stop_timeout: float = 10.0,
        wall_clock: Callable[[], datetime] | None = None,
        patcher_factory: Callable[[str, str], Any] | None = None,
        release_on_stop: bool = False,
        release_allowed: Callable[[], bool] | None = None,
    ) -> None:
        self.kube = kube
        self.release_on_stop = release_on_stop
        """:meth:`stop` deletes the sessions and their records (the successor is not gharc)."""
        self.release_allowed = release_allowed or (lambda: True)
        """Asked at stop: False when the stop is a lost lease, not a request (the new leader
        may have resumed the sessions already; deleting them would cost it a new one)."""
        self.on_released: Callable[[Key, str], Awaitable[None]] | None = None
        """Awaited with the EphemeralRunnerSet's key and the session id after a release
        (the controller records an event on the set)."""
        self._patcher_factory = patcher_factory or (
            lambda namespace, name: _HostedPatcher(self.kube, namespace, name)
        )
        self.identity = identity
        self.ladder = ladder or LISTENER_RESTART_LADDER
        self.stable_after = stable_after
        self.on_change = on_change
        self.message_report_interval = message_report_interval
        self.message_report_delay = message_report_delay
        self.stop_timeout = stop_timeout
        self._wall = wall_clock or (lambda: datetime.now(UTC))
        self._hosted: dict[Key, _Hosted] = {}
        self._by_runner_set: dict[Key, _Hosted] = {}
        self._stopped = asyncio.Event()
        self.registry_collector = _MergedCollector(self)

    # -- what the reconciler calls ------------------------------------------------------------

    def __contains__(self, key: Key) -> bool:
        return key in self._hosted

    def __len__(self) -> int:
        return len(self._hosted)

    def keys(self) -> list[Key]:
        return list(self._hosted)

    def ensure(self, key: Key, runner_set: Key, fingerprint: str, resolve: Resolve) -> bool:
        """Run the listener ``key`` with this configuration; True when (re)started now.

        A changed ``fingerprint`` (limits, credentials, URL) restarts the listener; the
        session is kept and resumed by the new one, so no message is lost on the way.
        """
        if self._stopped.is_set():
            return False
        hosted = self._hosted.get(key)
        if (
            hosted is not None
            and hosted.fingerprint == fingerprint
            and hosted.task is not None
            and not hosted.task.done()
        ):
            return False
        if hosted is not None:
            self._request_stop(hosted, keep_session=True)
        patcher = self._patcher_factory(*runner_set)
        fresh = _Hosted(
            key=key,
            fingerprint=fingerprint,
            resolve=resolve,
            patcher=patcher,
            shard=current_shard(),  # the task below inherits it: its writes are fenced by it
        )
        if hosted is not None:
            fresh.failures = hosted.failures
            fresh.last_failure_time = hosted.last_failure_time
            fresh.notices_said = hosted.notices_said
            fresh.notices = hosted.notices
        self._hosted[key] = fresh
        self._by_runner_set[runner_set] = fresh
        previous = hosted.task if hosted is not None else None
        fresh.task = asyncio.get_running_loop().create_task(
            self._supervise(fresh, after=previous), name=f"listener:{key[0]}/{key[1]}"
        )
        return True

    async def remove(self, key: Key) -> None:
        """Stop the listener ``key`` and delete its session (its scale set is going away)."""
        hosted = self._hosted.pop(key, None)
        if hosted is None:
            return
        self._forget_runner_set(hosted)
        self._request_stop(hosted, keep_session=False)
        await self._await_task(hosted)

    async def drop_shard(self, shard: int) -> int:
        """Stop the listeners started for ``shard`` and keep their sessions recorded: the
        replica that takes the shard over resumes each of them. Returns how many stopped."""
        dropped = [h for h in self._hosted.values() if h.shard == shard]
        for hosted in dropped:
            del self._hosted[hosted.key]
            self._forget_runner_set(hosted)
            self._request_stop(hosted, keep_session=True)
        await asyncio.gather(*(self._await_task(h) for h in dropped), return_exceptions=True)
        if dropped:
            log.info("shard %d given up: %d listeners stopped", shard, len(dropped))
        return len(dropped)

    def status(self, key: Key) -> HostedListenerStatus | None:
        hosted = self._hosted.get(key)
        if hosted is None:
            return None
        return hosted.status(self._wall, asyncio.get_running_loop().time())

    def take_notices(self, key: Key) -> list[str]:
        """Metric limits the listener ``key`` reached since the last call, each said once
        (the reconciler records them as events on the AutoscalingListener)."""
        hosted = self._hosted.get(key)
        if hosted is None or not hosted.notices:
            return []
        taken, hosted.notices = hosted.notices, []
        return taken

    def landed_patch(self, namespace: str, runner_set: str) -> tuple[int, int] | None:
        """(replicas, patchID) that the listener this process runs for the EphemeralRunnerSet
        wrote last, or None (no such listener, or it wrote none yet). A listener is started
        after this process began acting for its scale set, so whoever wrote the set before
        wrote before that patch (see the EphemeralRunnerSet reconciler's use)."""
        hosted = self._by_runner_set.get((namespace, runner_set))
        return None if hosted is None else getattr(hosted.patcher, "landed", None)

    def offer_runner_set(self, obj: dict[str, Any]) -> None:
        """Informer handler: pass an EphemeralRunnerSet's cleanup marker to its listener."""
        meta = objects.meta(obj)
        hosted = self._by_runner_set.get((str(meta.get("namespace")), str(meta.get("name"))))
        marker = marker_of(obj)
        if hosted is not None and marker is not None:
            hosted.patcher.offer(marker)

    def metrics(self) -> Iterator[ListenerMetrics]:
        for hosted in list(self._hosted.values()):
            if hosted.metrics is not None:
                yield hosted.metrics

    # -- Runnable -------------------------------------------------------------------------------

    async def start(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        """Stop every listener and leave its session open and recorded, or release it.

        By default the successor (a standby that takes over the lease, or this process
        restarted) resumes each session by its recorded id. The host stops while it still
        holds the lease (the manager releases it after its runnables stopped), so nothing
        else holds these sessions yet: with ``release_on_stop`` each listener deletes its
        session and record, and :meth:`_release` deletes what a listener in backoff (or one
        whose delete failed) left recorded.
        """
        self._stopped.set()
        release = self.release_on_stop and self.release_allowed()
        hosted = list(self._hosted.values())
        self._hosted.clear()
        self._by_runner_set.clear()
        for h in hosted:
            self._request_stop(h, keep_session=not release)
        await asyncio.gather(*(self._await_task(h) for h in hosted), return_exceptions=True)
        if release:
            await asyncio.gather(*(self._release(h) for h in hosted), return_exceptions=True)

    async def _release(self, hosted: _Hosted) -> None:
        """Delete the session still recorded on the listener's EphemeralRunnerSet, and the
        record, so that a listener that cannot resume it (ARC's) creates its own at once.

        Level-triggered: the record is read back rather than trusting what the listener
        did, so a delete that failed or a listener waiting in backoff is covered too.
        """
        patcher = hosted.patcher
        runner_set = (patcher.namespace, patcher.runner_set_name)
        try:
            recorded = await patcher.recorded_session()
        except Exception as err:
            # No read (RBAC already deleted by an uninstall, say): the session this process
            # knows is still deleted at GitHub, which needs no Kubernetes permission.
            log.warning("cannot read the session record of %s/%s: %s", *runner_set, err)
            recorded = None if hosted.session_closed else (hosted.session_id or None)
        try:
            session_id = recorded or hosted.session_id
            if recorded:
                cfg, api, _ = await hosted.resolve(False)
                await asyncio.wait_for(
                    _delete_session(api, cfg.runner_scale_set_id, recorded), self.stop_timeout
                )
        except Exception as err:
            log.warning("releasing the session of %s/%s failed: %s", *runner_set, err)
            return
        if recorded:
            try:
                await patcher.record_session(None)
            except Exception as err:
                log.warning("cannot clear the session record of %s/%s: %s", *runner_set, err)
        if not session_id:
            return
        log.info("message session %s of %s/%s released", session_id, *runner_set)
        if self.on_released is not None:
            try:
                await self.on_released(runner_set, session_id)
            except Exception:
                log.exception("reporting the released session of %s/%s failed", *runner_set)

    # -- the supervisor -------------------------------------------------------------------------

    async def _supervise(self, hosted: _Hosted, *, after: asyncio.Task[None] | None) -> None:
        """Run the listener; on failure back off along the ladder and start it again."""
        if after is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(after), self.stop_timeout)
        loop = asyncio.get_running_loop()
        while not hosted.stop_requested:
            why = ""
            try:
                cfg, api, metrics = await hosted.resolve(hosted.failures > 0)
                api = fenced(api, hosted.shard, getattr(self.kube, "shard_fences", None))
                hosted.metrics = metrics
                self._watch_limits(hosted, metrics)
                if hosted.stop_requested:
                    break
                listener = Listener(
                    cfg,
                    api,
                    hosted.patcher,
                    metrics=metrics,
                    owner=self.identity,
                    on_session=functools.partial(self._on_session, hosted),
                )
                listener.on_message = functools.partial(self._on_message, hosted)
                hosted.listener = listener
                await listener.run()
                hosted.session_closed = listener.session_deleted
                if hosted.stop_requested:
                    break
                why = "the listener loop ended without a stop request"
            except asyncio.CancelledError:
                raise
            except FatalError as err:
                why = str(err)
            except Exception as err:
                log.exception("listener %s/%s crashed", *hosted.key)
                why = f"{type(err).__name__}: {err}"
            if hosted.stop_requested:
                break
            self._on_failure(hosted, why, loop.time())
            delay = restart_delay(hosted.failures, self.ladder)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hosted.wake.wait(), timeout=delay)
            hosted.wake.clear()
        hosted.listener = None

    def _watch_limits(self, hosted: _Hosted, metrics: ListenerMetrics) -> None:
        """Pass the metric limits ``metrics`` reaches (now and later) to the reconciler."""
        notify = functools.partial(self._on_limit, hosted)
        metrics.on_limit = notify
        for notice in metrics.limit_notices:  # the bucket cuts are found when it is built
            notify(notice)

    def _on_limit(self, hosted: _Hosted, notice: str) -> None:
        if notice in hosted.notices_said:
            return
        hosted.notices_said.add(notice)
        hosted.notices.append(notice)
        self._notify(hosted)

    def _on_session(self, hosted: _Hosted, session_id: str) -> None:
        hosted.session_id = session_id
        hosted.phase = PHASE_RUNNING
        hosted.message = ""
        hosted.restart_at = None
        hosted.running_since = asyncio.get_running_loop().time()
        self._notify(hosted)

    def _on_message(self, hosted: _Hosted) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if hosted.message_report is None:
            # Trailing: the report (read live, so it carries the newest message's time) waits
            # out the job the message brought, whose runner's writes go to the same API server.
            due = max(hosted.last_message_reported + self.message_report_interval, now)
            hosted.message_report = loop.call_later(
                max(self.message_report_delay, due - now), self._report_message, hosted
            )
        if (
            hosted.failures
            and hosted.running_since is not None
            and now - hosted.running_since >= self.stable_after
        ):
            hosted.failures = 0
            self._notify(hosted)

    def _on_failure(self, hosted: _Hosted, why: str, now: float) -> None:
        if hosted.running_since is not None and now - hosted.running_since >= self.stable_after:
            hosted.failures = 0  # it ran long enough: this is a new failure, not a loop
        hosted.running_since = None
        hosted.failures += 1
        delay = restart_delay(hosted.failures, self.ladder)
        wall = self._wall()
        hosted.phase = PHASE_BACKOFF
        hosted.last_failure_time = wall.replace(microsecond=0)
        hosted.restart_at = (wall + timedelta(seconds=delay)).replace(microsecond=0)
        hosted.message = (
            f"listener failed ({why}), failure {hosted.failures}; backing off {delay:g}s"
        )
        log.warning("listener %s/%s: %s", *hosted.key, hosted.message)
        self._notify(hosted)

    def _report_message(self, hosted: _Hosted) -> None:
        hosted.message_report = None
        hosted.last_message_reported = asyncio.get_running_loop().time()
        self._notify(hosted)

    def _notify(self, hosted: _Hosted) -> None:
        if self.on_change is not None and self._hosted.get(hosted.key) is hosted:
            self.on_change(hosted.key)

    def _request_stop(self, hosted: _Hosted, *, keep_session: bool) -> None:
        hosted.stop_requested = True
        hosted.wake.set()
        if hosted.listener is not None:
            hosted.listener.keep_session_on_stop = keep_session
            hosted.listener.request_stop()

    async def _await_task(self, hosted: _Hosted) -> None:
        task = hosted.task
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), self.stop_timeout)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def _forget_runner_set(self, hosted: _Hosted) -> None:
        key = (hosted.patcher.namespace, hosted.patcher.runner_set_name)
        if self._by_runner_set.get(key) is hosted:
            del self._by_runner_set[key]


async def _delete_session(api: ActionsAPI, scale_set_id: int, session_id: str) -> None:
    """Delete a session; one the service no longer knows (404, 400 SessionExpired) is gone."""
    try:
        await api.delete_message_session(scale_set_id, session_id)
    except gherrors.GitHubError as err:
        if err.status not in (400, 404):
            raise


class _MergedCollector(Collector):
    """Exposes every hosted listener's metrics on the controller's registry.

    Each listener keeps its own small registry (its label set is per scale set); Prometheus
    needs one family per metric name, so families of the same name are merged here.
    """

    def __init__(self, host: ListenerHost) -> None:
        self._host = host

    def collect(self) -> Iterator[Any]:
        families: dict[str, Any] = {}
        for metrics in self._host.metrics():
            registry: CollectorRegistry = metrics.registry
            for family in registry.collect():
                merged = families.get(family.name)
                if merged is None:
                    families[family.name] = family
                else:
                    merged.samples.extend(family.samples)
        yield from families.values()

    def describe(self) -> list[Any]:
        return []  # families appear and vanish with scale sets: no fixed description
