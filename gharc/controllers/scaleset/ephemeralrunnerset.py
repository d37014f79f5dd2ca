"""EphemeralRunnerSetReconciler: keeps ``spec.replicas`` EphemeralRunners, safely.

The listener patches ``spec.replicas`` + ``spec.patchID``; this reconciler turns that into
EphemeralRunners. One step per reconcile, in this order (spec §9 with behaviours B2-B5):

1. Deletion: finished/failed runners deleted, idle ones unregistered then deleted, busy
   ones waited for; then the proxy Secret; then the finalizer.
2. Revision (B4): when ``spec.actionableRevision`` > ``status.appliedActionableRevision``,
   idle and pending runners built from an older, semantically different template are
   rebuilt (busy ones kept), then the applied revision advances (``>=`` guard, optimistic
   lock) and the finished-cleanup marker is cleared.
3. Outdated phase: only cleanup, no scaling.
4. Failed runners (B2, ARC #3729): deleted (the ER's finalizer removes what is left of the
   registration) with a Warning event on the set naming the runner and its reason, so the
   set replaces them; at a bounded rate (``failed_runner_replace_backoff``): while the
   set backs off, the Failed runners it keeps count as capacity, and an event and the
   ``FailedRunnerBackoff`` condition say so; the ladder's step is kept in the set's status,
   so a restart does not reset it (:mod:`failed_runner_pacing`).
   Runners failed for an invalid pod template are kept: a replacement would fail alike.
5. Finished-runner cleanup (B3): record ``status.finishedRunnerCleanupPatchID`` for the
   current patch (optimistic lock), delete the finished runners, return. The gap the
   cleanup opens is not demand: while ``spec.patchID`` equals that marker (and is > 0),
   read uncached, nothing is created.
6. Scaling: up to ``replicas`` counting pending + running + deleting runners (B3) and not
   Failed ones (B2); down only on patch ID 0, only idle runners, registration removed
   first (B5: ``JobStillRunning`` means busy, skip it); a runner not online yet only
   after ``runner_startup_timeout`` (ARC #3581).
7. Status counts, patched only when they change (the listener patches this object too).

Runners we created or deleted but the cache has not shown yet are remembered for a short
while (:mod:`gharc.kube.expectations`, as Kubernetes' ReplicaSet controller does), so a
reconcile served from a lagging cache does not create the same runners twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.api.scaleset import scaling_wire as wire
from gharc.api.scaleset.views import EphemeralRunnerSetView, EphemeralRunnerView
from gharc.controllers.scaleset import conditions as cond
from gharc.controllers.scaleset import failed_runner_pacing as fb
from gharc.controllers.scaleset import runnerresources as rr
from gharc.controllers.scaleset.credentials import ClientResolver, ConfigurationError, GitHubTarget
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.error_reporting import reconcile_or_wait_for_github
from gharc.controllers.scaleset.events import EventRecorder, emit
from gharc.controllers.scaleset.metrics import ControllerMetrics
from gharc.controllers.scaleset.newborn import Newborn
from gharc.controllers.scaleset.options import FAILED_RUNNER_WINDOW, ScaleSetOptions
from gharc.github import errors as gherrors
from gharc.github.actions import ActionsClient
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import NORMAL, WARNING
from gharc.kube.expectations import Expectations
from gharc.kube.finalizers import add_finalizer, remove_finalizer
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import SECRETS
from gharc.kube.store import BY_CONTROLLER_UID, index_by_controller_uid

log = logging.getLogger(__name__)

CREATES_IN_FLIGHT_PER_NAMESPACE = 16
"""EphemeralRunner creates one namespace (one tenant) may have in flight at once. The
controller's connection pool to the API server holds 100 connections shared by every
tenant; 16 keeps a burst fast (a create takes milliseconds) and leaves the pool to others."""

JSON = dict[str, Any]

#: While busy runners hold up a deletion or an Outdated cleanup, look again this often.
BUSY_REQUEUE = 30.0
#: Status counts are written at most this often per set (a phase change at once): each
#: runner moves through four or five buckets, and one write per move was the controller's
#: biggest call count. Nothing decides on these counts; they are for people and the ARS.
STATUS_INTERVAL = 2.0
#: A count change waits this long before it is written, so the runner states a job passes
#: through quickly (Pending for a few seconds; all of it, for a short job) are one write
#: or none: where each set sees a job now and then (a thousand quiet sets), the leading
#: Pending write and the cleanup marker were two writes of the set, and two of its
#: AutoscalingRunnerSet, per job, beside the job's own pickup in the API server.
STATUS_SETTLE = 2.0


# --- buckets -----------------------------------------------------------------------------


@dataclass
class Buckets:
    pending: list[JSON] = field(default_factory=list)
    running: list[JSON] = field(default_factory=list)
    finished: list[JSON] = field(default_factory=list)
    failed: list[JSON] = field(default_factory=list)
    outdated: list[JSON] = field(default_factory=list)
    deleting: list[JSON] = field(default_factory=list)
    in_flight: int = 0
    """Created by us, not yet in the cache."""

    @classmethod
    def of(cls, runners: list[JSON], expect: Expectations, owner: str = "") -> Buckets:
        """Sort ``runners`` (the cache's) into buckets, settling ``owner``'s expectations."""
        b = cls()
        present = {
            str(objects.meta(er).get("name")): str(objects.meta(er).get("uid") or "")
            for er in runners
        }
        expect.observe(
            owner,
            present,
            deleting=[
                str(objects.meta(er).get("name")) for er in runners if objects.is_deleting(er)
            ],
        )
        going = expect.pending_deletes(owner)
        for er in sorted(runners, key=rr.creation_key):
            name = str(objects.meta(er).get("name"))
            if objects.is_deleting(er) or name in going:
                b.deleting.append(er)
                continue
            phase = EphemeralRunnerView(er).phase
            if phase == c.PHASE_RUNNING:
                b.running.append(er)
            elif phase == c.PHASE_SUCCEEDED:
                b.finished.append(er)
            elif phase == c.PHASE_FAILED:
                b.failed.append(er)
            elif phase == c.PHASE_OUTDATED:
                b.outdated.append(er)
            else:
                b.pending.append(er)
        b.in_flight = expect.pending_creates(owner)
        return b

    @property
    def alive(self) -> list[JSON]:
        return self.pending + self.running

    @property
    def terminated(self) -> list[JSON]:
        return self.finished + self.failed + self.outdated

    held: list[JSON] = field(default_factory=list)
    """Failed runners the replace backoff keeps for now (a subset of ``failed``)."""

    @property
    def invalid(self) -> list[JSON]:
        """Failed because the template is unusable: a replacement would fail the same way."""
        return [er for er in self.failed if EphemeralRunnerView(er).reason == c.REASON_INVALID_POD]

    def scale_up_total(self) -> int:
        """Runners that count against ``replicas`` when deciding to create more.

        Deleting runners count (they still hold a registration and may still run); Failed
        ones do not (B2), except those failed for an invalid pod template, which would only
        be replaced by more of the same (and the set would create runners in a hot loop),
        and those the replace backoff holds back (a set whose runners keep failing must not
        create and fail runners as fast as it can).
        """
        return (
            len(self.pending)
            + len(self.running)
            + len(self.deleting)
            + len(self.invalid)
            + len(self.held)
            + self.in_flight
        )

    def scale_down_total(self) -> int:
        return len(self.pending) + len(self.running)


# --- the reconciler ----------------------------------------------------------------------


class EphemeralRunnerSetReconciler:
    def __init__(
        self,
        kube: KubeClient,
        cache: Cache,
        options: ScaleSetOptions,
        resolver: ClientResolver,
        metrics: ControllerMetrics | None = None,
        recorder: EventRecorder | None = None,
        *,
        newborn: Newborn | None = None,
        landed_patch: Callable[[str, str], tuple[int, int] | None] | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.options = options
        self.resolver = resolver
        self.metrics = metrics
        self.recorder = recorder
        self.newborn = newborn or Newborn()
        """Shared with the EphemeralRunner reconciler: the runners created here skip the
        reads that look for a half-made registration."""
        self.landed_patch = landed_patch or (lambda _namespace, _name: None)
        """(replicas, patchID) the in-process listener of a set last wrote (the host's
        :meth:`~gharc.listener.host.ListenerHost.landed_patch`); None without one."""
        self._expectations = Expectations()
        """EphemeralRunners created / deleted per set (by set uid), not yet in the cache."""
        self._create_slots: dict[str, asyncio.Semaphore] = {}
        """Namespace -> its share of runner creates in flight (CREATES_IN_FLIGHT_PER_NAMESPACE)."""
        self._uids: dict[Request, str] = {}
        self._status_written: dict[str, float] = {}
        """Set uid -> monotonic time of its last status count write."""
        self._status_stale: dict[str, float] = {}
        """Set uid -> monotonic time its counts first differed from its status, unwritten."""
        self._failed: dict[str, fb.Streak] = {}
        """Set uid -> the Failed-runner replace streak this process last wrote."""
        self._backoff_reported: dict[str, float] = {}
        """Set uid -> the streak step whose backoff event was emitted (once per step)."""
        self._markers: dict[str, int | None] = {}
        """Set uid -> the cleanup marker this process last wrote (B3). This reconciler is
        the marker's only writer, so once it wrote one it knows the value without the
        uncached read a lagging cache would otherwise need."""

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_or_wait_for_github(request, self._reconcile)

    async def _reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(
            self.cache.get,
            EPHEMERAL_RUNNER_SETS,
            request,
            self.reconcile_runner_set,
            copy=True,
            on_gone=self._forget,
        )

    def forget_markers(self) -> None:
        """Markers this process wrote may have been overwritten while another replica held
        the sets' shard: the next scale up of each set reads its marker again."""
        self._markers.clear()

    def _forget(self, request: Request) -> None:
        """The set is gone: drop what this process kept about it."""
        gone = self._uids.pop(request, "")
        self._expectations.forget(gone)
        self._status_written.pop(gone, None)
        self._status_stale.pop(gone, None)
        self._markers.pop(gone, None)
        self._failed.pop(gone, None)
        self._backoff_reported.pop(gone, None)

    async def reconcile_runner_set(self, ers: JSON) -> Result | None:
        request = request_of(ers)
        uid = str(objects.meta(ers).get("uid"))
        self._uids[request] = uid
        runners = await self.cache.list(
            EPHEMERAL_RUNNERS, namespace=request.namespace, index=(BY_CONTROLLER_UID, uid)
        )
        b = Buckets.of(runners, self._expectations, uid)

        if objects.is_deleting(ers):
            result = await self._finalize(ers, b)
            if result is None:
                self._expectations.forget(uid)
            return result
        if not objects.has_finalizer(ers, c.FINALIZER_EPHEMERAL_RUNNER_SET):
            await add_finalizer(
                self.kube, EPHEMERAL_RUNNER_SETS, ers, c.FINALIZER_EPHEMERAL_RUNNER_SET
            )
            return None

        self._publish_metrics(ers, b)
        view = EphemeralRunnerSetView(ers)
        if view.revision_pending:
            return await self._apply_revision(ers, b)
        if b.outdated or view.phase == c.PHASE_OUTDATED:
            await self._update_status(ers, b)
            done = await self._cleanup_runners(ers, b)
            return None if done else Result(requeue_after=BUSY_REQUEUE)

        result = await self._ensure_proxy_secret(ers)
        if result is not None:
            return result
        failed_wait = await self._replace_failed(ers, b)
        if b.finished:
            return _sooner(await self._clean_finished(ers, b), failed_wait)
        result = await self._scale(ers, b)
        return _sooner(result or await self._update_status(ers, b), failed_wait)

    # -- deletion ------------------------------------------------------------------------

    async def _finalize(self, ers: JSON, b: Buckets) -> Result | None:
        if not objects.has_finalizer(ers, c.FINALIZER_EPHEMERAL_RUNNER_SET):
            return None
        if not await self._cleanup_runners(ers, b):
            return Result(requeue_after=BUSY_REQUEUE)
        if EphemeralRunnerSetView(ers).runner_spec.get("proxy"):
            await self.kube.delete(
                SECRETS,
                rr.proxy_secret_name(ers),
                namespace=objects.meta(ers)["namespace"],
                missing_ok=True,
            )
        try:
            await remove_finalizer(
                self.kube, EPHEMERAL_RUNNER_SETS, ers, c.FINALIZER_EPHEMERAL_RUNNER_SET
            )
        except kerrors.NotFound:
            pass
        await emit(self.recorder, ers, NORMAL, "Deleted", "all runners are gone; finalizer removed")
        return None

    async def _cleanup_runners(self, ers: JSON, b: Buckets) -> bool:
        """Terminated runners deleted, idle ones retired, busy ones left alone.

        True when no runner is left at all (deleting ones included).
        """
        for er in b.terminated:
            await self._delete_runner(ers, er)
        client: ActionsClient | None = None
        for er in b.alive:
            if EphemeralRunnerView(er).has_job:
                continue
            try:
                client = client or await self._client(ers)
            except ConfigurationError as err:
                # NB: no credentials, no RemoveRunner: delete; the ER's finalizer reports it.
                await emit(self.recorder, ers, WARNING, err.reason, err.message)
                await self._delete_runner(ers, er)
                continue
            await self._retire(ers, er, client)
        return not (b.alive or b.terminated or b.deleting or b.in_flight)

    # -- B4: actionable revision -----------------------------------------------------------

    async def _apply_revision(self, ers: JSON, b: Buckets) -> Result | None:
        target = EphemeralRunnerSetView(ers).actionable_revision
        desired = rr.desired_runner_spec(ers)
        stale = [
            er
            for er in b.alive + b.terminated
            if EphemeralRunnerView(er).revision < target
            and not objects.semantically_equal(objects.spec_of(er), desired)
        ]
        client: ActionsClient | None = None
        rebuilt = kept = 0
        for er in stale:
            runner = EphemeralRunnerView(er)
            if runner.is_done:
                await self._delete_runner(ers, er)
            elif runner.has_job:
                kept += 1
            else:
                client = client or await self._client(ers)
                if await self._retire(ers, er, client):
                    rebuilt += 1
                else:
                    kept += 1
        # NB: uncached read + optimistic lock: the applied revision only moves forward, and
        # only from the state we just acted on; a concurrent write makes us redo the step.
        fresh = await self.kube.get(
            EPHEMERAL_RUNNER_SETS,
            objects.meta(ers)["name"],
            namespace=objects.meta(ers)["namespace"],
        )
        if EphemeralRunnerSetView(fresh).applied_revision >= target:
            return None
        await self.kube.patch_status(
            EPHEMERAL_RUNNER_SETS,
            fresh,
            {"status": {"appliedActionableRevision": target, wire.CLEANUP_MARKER_FIELD: None}},
            optimistic_lock=True,
        )
        self._markers[str(objects.meta(ers).get("uid"))] = None
        await emit(
            self.recorder,
            ers,
            NORMAL,
            "RevisionApplied",
            f"revision {target}: {rebuilt} idle runner(s) replaced, {kept} busy runner(s) kept",
        )
        return None

    # -- B2: failed runners ----------------------------------------------------------------

    async def _replace_failed(self, ers: JSON, b: Buckets) -> float | None:
        """Delete Failed runners so the set replaces them, at a bounded rate (ARC #3729).

        A Failed runner will not come back (the ER controller gave up on it and removed
        its registration), yet left in place it is an object users must reap by hand. Each
        one is named in a Warning event on the set, so the failure is not lost with it.
        The n-th replacement in a row waits ``failed_runner_replace_backoff[n]`` after the
        previous one; the runners held back meanwhile stay in ``b.failed`` and count as
        capacity (``b.held``). Returns the seconds until the next one may go (the requeue: nothing
        else would wake us when the backoff ends).
        """
        due = [er for er in b.failed if EphemeralRunnerView(er).reason != c.REASON_INVALID_POD]
        uid = str(objects.meta(ers).get("uid"))
        if not due:
            # A backoff that was reported ends with its last Failed runner: say so, once.
            held = cond.find(objects.status_of(ers).get("conditions"), fb.FAILED_RUNNER_BACKOFF)
            if held is not None and held.get("status") == cond.TRUE:
                streak = fb.read(ers).later(self._failed.get(uid))
                await self._record_backoff(ers, streak, None)
            return None
        # NB: persisted (status) and remembered (this process's last write, which a lagging
        # cache may not show yet): the later of the two is the streak.
        streak = fb.read(ers).later(self._failed.get(uid))
        ladder = self.options.failed_runner_replace_backoff or (0.0,)
        for er in due:
            now = time.time()
            if now - streak.last > FAILED_RUNNER_WINDOW:
                streak = fb.Streak(0, streak.last)
            wait = streak.last + float(ladder[min(streak.count, len(ladder) - 1)]) - now
            name = objects.meta(er).get("name")
            detail = objects.status_of(er).get("message") or "no message"
            why = f"{EphemeralRunnerView(er).reason or 'Failed'}: {detail}"
            if wait > 0:
                message = (
                    f"{streak.count} failed runner(s) replaced in a row; runner {name} "
                    f"({why}) is replaced in {wait:.0f}s"
                )
                if self._backoff_reported.get(uid) != streak.last:
                    self._backoff_reported[uid] = streak.last
                    await emit(self.recorder, ers, WARNING, "FailedRunnerBackoff", message)
                    await self._record_backoff(ers, streak, message)
                b.held = due[due.index(er) :]
                return wait
            await emit(
                self.recorder,
                ers,
                WARNING,
                "RunnerFailed",
                f"runner {name} failed ({why}); deleting it so the set replaces it",
            )
            # The step is recorded before the delete: a crash in between costs a longer
            # wait next time, never a shorter one.
            streak = fb.Streak(streak.count + 1, now)
            await self._record_backoff(ers, streak, None)
            await self._delete_runner(ers, er)
            b.failed.remove(er)
            b.deleting.append(er)
        return None

    async def _record_backoff(self, ers: JSON, streak: fb.Streak, held: str | None) -> None:
        """Write the streak and the FailedRunnerBackoff condition when they changed
        (``held``: the condition's message while a runner waits)."""
        self._failed[str(objects.meta(ers).get("uid"))] = streak
        patch = fb.status_patch(ers, streak, held)
        if patch is None:
            return
        try:
            await self.kube.patch_status(EPHEMERAL_RUNNER_SETS, ers, patch)
        except kerrors.NotFound:
            pass

    # -- B3: finished runners --------------------------------------------------------------

    async def _clean_finished(self, ers: JSON, b: Buckets) -> Result | None:
        """Record the marker for the patch the cleanup is done for, then delete.

        Marker first: if we crash in between, the next reconcile sees the finished runners
        again and redoes both; the other order could leave the gap without its marker.
        The optimistic lock ties the marker to the ``spec.patchID`` we read.
        """
        view = EphemeralRunnerSetView(ers)
        patch_id, uid = view.patch_id, view.uid
        known = self._markers.get(uid, view.cleanup_marker)
        if known != patch_id:
            await self._write_marker(ers, patch_id, self._counts(ers, b, cleaning=True))
            self._markers[uid] = patch_id
            self._status_written[uid] = time.monotonic()
        for er in b.finished:
            await self._delete_runner(ers, er)
        log.info("deleted %d finished runner(s) for patch %d", len(b.finished), patch_id)
        return None

    async def _write_marker(self, ers: JSON, patch_id: int, counts: JSON) -> None:
        """Record the cleanup marker, provided ``spec.patchID`` is still ``patch_id``.

        The marker only depends on the patch ID it was computed from, so that is what the
        write is conditioned on (a JSON patch ``test``), not the whole resourceVersion:
        the listener's spec patches and our own count writes change the resourceVersion
        several times a second, and each made the locked write fail with 409 and redo the
        reconcile. A changed patch ID still fails it (reported as Conflict: retried).
        The status counts as they will be once the finished runners are deleted ride
        along, which spares the count write that would follow.
        """
        spec, status = objects.spec_of(ers), ers.get("status")
        if wire.PATCH_ID_FIELD not in spec or not isinstance(status, dict):
            await self.kube.patch_status(
                EPHEMERAL_RUNNER_SETS,
                ers,
                wire.cleanup_marker_status(patch_id, counts),
                optimistic_lock=True,
            )
            return
        ops = wire.cleanup_marker_ops(spec[wire.PATCH_ID_FIELD], patch_id, counts)
        try:
            await self.kube.json_patch(EPHEMERAL_RUNNER_SETS, ers, ops, subresource="status")
        except kerrors.Invalid as err:
            raise kerrors.Conflict(err.message, reason="Conflict", body=err.body) from err

    # -- scaling -------------------------------------------------------------------------

    async def _scale(self, ers: JSON, b: Buckets) -> Result | None:
        view = EphemeralRunnerSetView(ers)
        replicas, patch_id = view.replicas, view.patch_id
        total = b.scale_up_total()
        if total < replicas:
            uid = view.uid
            name, namespace = objects.meta(ers)["name"], objects.meta(ers)["namespace"]
            if uid in self._markers:
                marker = self._markers[uid]
            elif patch_id > 0 and self.landed_patch(namespace, name) == (replicas, patch_id):
                # This process's own listener wrote this count, and it started after this
                # process began acting for the set: any other writer of the marker wrote
                # before it, so a cache that shows the count shows that marker too, and
                # the markers written since are this reconciler's. No read on the first job
                # of a quiet set (B3 holds: every marker there can be is in view).
                marker = view.cleanup_marker
                self._markers[uid] = marker
            else:
                # NB: uncached (B3): the cache may not show the marker a previous run of
                # this controller wrote moments ago. Read once per set; after that this
                # process knows every marker it writes.
                fresh = await self.kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=namespace)
                live = EphemeralRunnerSetView(fresh)
                if live.patch_id != patch_id or live.replicas != replicas:
                    return None  # the cache is behind; the newer spec's event is on its way
                marker = live.cleanup_marker
                self._markers[uid] = marker
            if patch_id > 0 and marker is not None and marker == patch_id:
                log.info(
                    "scale up to %d suppressed: patch %d is the one finished runners were "
                    "cleaned up for",
                    replicas,
                    patch_id,
                )
                return None
            await self._create_runners(ers, replicas - total)
        elif patch_id == 0 and b.scale_down_total() > replicas:
            wait = await self._scale_down(ers, b, b.scale_down_total() - replicas)
            if wait is not None:
                return Result(requeue_after=wait)
        return None

    async def _create_runners(self, ers: JSON, count: int) -> None:
        """Create ``count`` runners concurrently, at most CREATES_IN_FLIGHT_PER_NAMESPACE at a
        time per namespace: a burst of 400 does not wait for 400 round trips one after the
        other, nor fill the shared connection pool so that other tenants' requests queue
        behind it."""
        owner = str(objects.meta(ers)["uid"])
        namespace = str(objects.meta(ers).get("namespace") or "")
        slots = self._create_slots.get(namespace)
        if slots is None:
            slots = self._create_slots[namespace] = asyncio.Semaphore(
                CREATES_IN_FLIGHT_PER_NAMESPACE
            )

        async def one() -> Exception | None:
            try:
                async with slots:
                    created = await self.kube.create(
                        EPHEMERAL_RUNNERS, rr.new_ephemeral_runner(ers)
                    )
            except kerrors.ApiError as err:
                return err
            meta = objects.meta(created)
            self._expectations.expect_create(owner, str(meta["name"]), str(meta.get("uid") or ""))
            self.newborn.add(str(meta.get("uid") or ""))
            return None

        results = await asyncio.gather(*(one() for _ in range(count)))
        errors = [err for err in results if err is not None]
        log.info("created %d EphemeralRunner(s)", count - len(errors))
        if errors:
            raise errors[0]

    async def _scale_down(self, ers: JSON, b: Buckets, count: int) -> float | None:
        """Retire up to ``count`` idle runners; the seconds after which to look again.

        A runner that has not come online yet (its pod is not running: waiting for a node,
        pulling its image, starting) is not retired before ``runner_startup_timeout`` since
        its creation (ARC #3581, #3516, #3816): GitHub may already have handed it the job it
        was created for, and retiring it then cancels that job. Once online, the normal idle
        rule applies; a runner still not online after the timeout is stuck and goes first,
        then idle online ones, oldest first. A busy runner is never retired (B5).

        The wait returned is when GitHub asked to be left alone (rate limit, held back), or
        when the first protected runner's start-up timeout ends: coming online changes the
        runner's status, which wakes us, but the end of a timeout does not.
        """
        client: ActionsClient | None = None
        wait: float | None = None
        retired = 0
        now = time.time()
        timeout = self.options.runner_startup_timeout
        stuck: list[JSON] = []
        protected: list[float] = []
        for er in b.pending:
            age = _age(er, now)
            if age >= timeout:
                stuck.append(er)
            elif not EphemeralRunnerView(er).has_job:
                protected.append(timeout - age)
        for er in stuck + b.running:
            if retired >= count:
                break
            if EphemeralRunnerView(er).has_job:
                continue
            client = client or await self._client(ers)
            try:
                if await self._retire(ers, er, client):
                    retired += 1
            except gherrors.RETRY_LATER as err:
                # The rest would meet the same limit: stop here, come back when it lifts.
                log.info("scale down paused: %s", err)
                wait = gherrors.retry_delay(err, time.time())
                break
        if retired:
            log.info("scaled down %d idle runner(s)", retired)
        if retired < count and protected and wait is None:
            log.info(
                "scale down: %d runner(s) not online yet are kept for up to %.0fs",
                len(protected),
                max(protected),
            )
            wait = min(protected)
        return wait

    # -- runner removal ------------------------------------------------------------------

    async def _client(self, ers: JSON) -> ActionsClient:
        ns = str(objects.meta(ers)["namespace"])
        target = GitHubTarget.from_spec(ns, EphemeralRunnerSetView(ers).runner_spec)
        return await self.resolver.client_for(target)

    async def _retire(self, ers: JSON, er: JSON, client: ActionsClient) -> bool:
        """Unregister an idle runner, then delete it; False when GitHub says it is busy.

        Once the registration is gone the ER's registration finalizer is dropped here, so
        its own finalizer does not call GitHub a second time for the same runner.
        """
        rid = EphemeralRunnerView(er).runner_id
        if rid:
            try:
                await client.remove_runner(rid)
            except gherrors.JobStillRunning:
                return False
            except gherrors.AgentNotFound:
                pass
            try:
                er = dict(
                    await remove_finalizer(
                        self.kube, EPHEMERAL_RUNNERS, er, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION
                    )
                )
            except (kerrors.Conflict, kerrors.NotFound):
                pass  # the ER's own finalizer removes the registration (AgentNotFound is fine)
        await self._delete_runner(ers, er)
        return True

    async def _delete_runner(self, ers: JSON, er: JSON) -> None:
        name = str(objects.meta(er)["name"])
        await self.kube.delete(
            EPHEMERAL_RUNNERS, name, namespace=objects.meta(er)["namespace"], missing_ok=True
        )
        self._expectations.expect_delete(str(objects.meta(ers)["uid"]), name)

    # -- proxy secret ----------------------------------------------------------------------

    async def _ensure_proxy_secret(self, ers: JSON) -> Result | None:
        proxy = rr.proxy_config(EphemeralRunnerSetView(ers).runner_spec)
        if proxy is None:
            return None
        ns = str(objects.meta(ers)["namespace"])

        async def auth(server: Any) -> tuple[str, str] | None:
            if server is None or not server.credential_secret_ref:
                return None
            data = await self.resolver.secret_data(ns, server.credential_secret_ref)
            return (
                data.get(c.SECRET_KEY_PROXY_USERNAME, ""),
                data.get(c.SECRET_KEY_PROXY_PASSWORD, ""),
            )

        try:
            data = proxy.to_secret_data(await auth(proxy.http), await auth(proxy.https))
        except kerrors.NotFound as err:
            await emit(self.recorder, ers, WARNING, "MissingProxySecret", err.message)
            return Result(requeue_after=BUSY_REQUEUE)
        desired = rr.new_proxy_secret(ers, data)
        try:
            live = await self.kube.get(SECRETS, desired["metadata"]["name"], namespace=ns)
        except kerrors.NotFound:
            await self.kube.create(SECRETS, desired)
            return None
        if live.get("data") != desired["data"]:
            await self.kube.merge_patch(
                SECRETS, live, {"data": desired["data"]}, optimistic_lock=True
            )
        return None

    # -- status and metrics ----------------------------------------------------------------

    @staticmethod
    def _counts(ers: JSON, b: Buckets, *, cleaning: bool = False) -> JSON:
        """The status counts and phase for ``b``; ``cleaning``: as they will be once the
        finished runners, deleted next, are gone. The marker write carries them, and a set
        whose runners are gone by the next reconcile needs no other write: counting them as
        deleting cost a third status write of the set (and of its AutoscalingRunnerSet) per
        job where jobs are sparse, for a count that is stale a moment later."""
        phase = EphemeralRunnerSetView(ers).phase
        finished = 0 if cleaning else len(b.finished)
        deleting = len(b.deleting)
        return {
            "currentReplicas": len(b.pending) + len(b.running),
            "pendingEphemeralRunners": len(b.pending),
            "runningEphemeralRunners": len(b.running),
            "failedEphemeralRunners": len(b.failed),
            "finishedEphemeralRunners": finished,
            "deletingEphemeralRunners": deleting,
            "phase": c.PHASE_OUTDATED if b.outdated else (phase or c.PHASE_RUNNING),
        }

    async def _update_status(self, ers: JSON, b: Buckets) -> Result | None:
        """Write the counts once they have differed for STATUS_SETTLE, at most every
        STATUS_INTERVAL (the phase at once); a write held back is made by the requeue this
        returns, with the counts as they are then (the same as written: no write)."""
        status = objects.status_of(ers)
        desired = self._counts(ers, b)
        phase = desired["phase"]
        uid = str(objects.meta(ers).get("uid"))
        if all(status.get(k) == v for k, v in desired.items()):
            self._status_stale.pop(uid, None)
            return None
        now = time.monotonic()
        if status.get("phase") == phase:
            stale = self._status_stale.setdefault(uid, now)
            wait = max(
                STATUS_INTERVAL - (now - self._status_written.get(uid, float("-inf"))),
                STATUS_SETTLE - (now - stale),
            )
            if wait > 0:
                return Result(requeue_after=wait)
        try:
            await self.kube.patch_status(EPHEMERAL_RUNNER_SETS, ers, {"status": desired})
        except kerrors.NotFound:
            return None
        self._status_written[uid] = time.monotonic()
        self._status_stale.pop(uid, None)
        return None

    def _publish_metrics(self, ers: JSON, b: Buckets) -> None:
        if self.metrics is None:
            return
        view = EphemeralRunnerSetView(ers)
        values = self.metrics.labels_for(
            view.scale_set_name, view.scale_set_namespace, view.github_config_url
        )
        self.metrics.pending_ephemeral_runners.labels(**values).set(len(b.pending))
        self.metrics.running_ephemeral_runners.labels(**values).set(len(b.running))
        self.metrics.failed_ephemeral_runners.labels(**values).set(len(b.failed))


def _sooner(result: Result | None, wait: float | None) -> Result | None:
    """``result``, or a requeue after ``wait`` seconds when that comes first."""
    if wait is None:
        return result
    if result is None or not (result.requeue or result.requeue_after):
        return Result(requeue_after=wait)
    if result.requeue_after and result.requeue_after > wait:
        return Result(requeue_after=wait)
    return result


def _age(obj: Mapping[str, Any], now: float) -> float:
    created = objects.parse_time(objects.meta(obj).get("creationTimestamp"))
    return now - created.timestamp() if created else 0.0


def setup(manager: ManagerLike, deps: ScaleSetDeps) -> Controller:
    """Register the EphemeralRunnerSet controller: ``For(ERS)``, ``Owns(EphemeralRunner)``,
    with the controller-uid index the reconciler lists its runners by."""
    manager.cache.add_indexer(EPHEMERAL_RUNNERS, BY_CONTROLLER_UID, index_by_controller_uid)
    reconciler = EphemeralRunnerSetReconciler(
        deps.client(manager),
        manager.cache,
        deps.options,
        deps.resolver,
        deps.metrics,
        deps.recorder,
        newborn=deps.newborn,
        landed_patch=deps.host.landed_patch if deps.host is not None else None,
    )
    return (
        Builder(manager)
        .named("ephemeralrunnerset")
        .for_(EPHEMERAL_RUNNER_SETS, ResourceVersionChangedPredicate())
        .owns(EPHEMERAL_RUNNERS, ResourceVersionChangedPredicate())
        .with_options(max_concurrent_reconciles=deps.options.runner_set_max_concurrent_reconciles)
        .complete(reconciler)
    )
