"""The replica sync shared by RunnerReplicaSet and RunnerSet (ARC ``syncRunnerPodsOwners``,
legacy.md 4.6).

An *owner* is a Runner (RunnerReplicaSet) or a one-replica StatefulSet (RunnerSet). Scaling
means creating or deleting whole owners, and scale-down is a 4-step handshake so that no
busy runner is killed:

1. mark the owner and its pods with ``unregistration-request-timestamp``;
2. the runner-pod controller unregisters each pod (waiting while the runner is busy) and
   marks it ``unregistration-complete-timestamp``; the owner is then marked complete too;
3. the owner is deleted;
4. its pods go, their finalizers already satisfied.

Scale-down keeps the newest running runners and drains the oldest. After a webhook-driven
scale up (``effectiveTime``), completed ephemeral runners are not replaced until the
autoscaler could lower the desired count, with a safety timeout (B5).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gharc.api.legacy import constants as c
from gharc.controllers.legacy import pods as p
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.reconcile import Result
from gharc.kube.resources import PODS, Resource

log = logging.getLogger(__name__)
JSON = dict[str, Any]


class OwnerKind(Protocol):
    """How the sync sees one kind of owner."""

    resource: Resource

    async def pods_of(self, owner: JSON) -> list[JSON]: ...

    def synced(self, owner: JSON) -> bool: ...

    async def delete(self, owner: JSON) -> None: ...


@dataclass
class OwnerState:
    owner: JSON
    pods: list[JSON] = field(default_factory=list)
    completed: int = 0
    running: int = 0
    reg_timeout: int = 0
    pending: int = 0
    terminating: int = 0

    @property
    def total(self) -> int:
        return len(self.pods)

    @property
    def name(self) -> str:
        return str(self.owner["metadata"]["name"])

    @property
    def created(self) -> str:
        return str(self.owner["metadata"].get("creationTimestamp") or "")

    @property
    def template_hash(self) -> str:
        return objects.labels_of(self.owner).get(c.LABEL_RUNNER_TEMPLATE_HASH, "")


def classify(state: OwnerState, now: dt.datetime, registration_timeout: dt.timedelta) -> None:
    for pod in state.pods:
        if p.is_stopped(pod):
            state.completed += 1
        elif objects.is_deleting(pod):
            state.terminating += 1
        elif p.phase(pod) == "Running":
            if c.ANNOTATION_RUNNER_ID not in objects.annotations_of(
                pod
            ) and p.registration_timed_out(pod, now, registration_timeout):
                state.reg_timeout += 1
            else:
                state.running += 1
        else:
            state.pending += 1


def skip_create(
    *,
    ephemeral: bool,
    effective_time: dt.datetime | None,
    last_sync_time: dt.datetime | None,
    now: dt.datetime,
    delay: dt.timedelta,
) -> bool:
    """B5's EffectiveTime rule: do not refill right after runners were created for a webhook
    scale up, because the runners that just completed are the ones the autoscaler is about
    to remove from the desired count; converge anyway ``delay`` after the last creation."""
    return (
        ephemeral
        and effective_time is not None
        and last_sync_time is not None
        and last_sync_time > effective_time
        and now < last_sync_time + delay
    )


async def _annotate(kube: KubeClient, resource: Resource, obj: JSON, key: str, value: str) -> None:
    if key in objects.annotations_of(obj):
        return
    await kube.merge_patch(resource, obj, {"metadata": {"annotations": {key: value}}})


class CreationExpectations:
    """Owners we created that the informer cache may not show yet.

    Reconciles are triggered by events, often before the cache has seen the owner the last
    reconcile created; counting only cached owners would create it again, and the surplus
    would then be scaled down with a RemoveRunner call and a wasted pod (the kind of storm
    users pay for). Each created name is counted as pending until the cache lists it or
    ``ttl`` passes (a create the cache never shows, e.g. deleted at once, must not block
    scale up forever).
    """

    def __init__(self, ttl: dt.timedelta = dt.timedelta(seconds=30)) -> None:
        self.ttl = ttl
        self._created: dict[str, dict[str, dt.datetime]] = {}

    def created(self, set_uid: str, name: str, now: dt.datetime) -> None:
        self._created.setdefault(set_uid, {})[name] = now

    def outstanding(self, set_uid: str, cached_names: set[str], now: dt.datetime) -> int:
        """How many of our creations the cache does not show yet (forgets the rest)."""
        names = self._created.get(set_uid)
        if not names:
            return 0
        for name, at in list(names.items()):
            if name in cached_names or now - at > self.ttl:
                del names[name]
        if not names:
            del self._created[set_uid]
        return len(names)

    def forget(self, set_uid: str) -> None:
        self._created.pop(set_uid, None)


@dataclass
class SyncParams:
    desired: int
    ephemeral: bool
    effective_time: dt.datetime | None
    template_hash: str
    registration_timeout: dt.timedelta
    recreation_delay: dt.timedelta
    now: dt.datetime
    last_created: dt.datetime | None = None
    """When this controller last created an owner for the set. ARC only looks at live
    owners' ``sync-time``, so when the last runner of a set completes nothing holds the
    refill; remembering our own creations closes that gap (B5)."""
    outstanding: int = 0
    """Owners created but not yet in the cache (:class:`CreationExpectations`): pending."""


@dataclass
class SyncResult:
    """``current``: the current-hash owners when nothing needed doing, None when the sync
    acted (the caller then stops this reconcile). ``wake_after``: seconds until a timer
    (registration timeout, EffectiveTime hold) changes the answer without any event."""

    current: list[OwnerState] | None
    wake_after: float | None = None

    def requeue(self) -> Result | None:
        return Result(requeue_after=max(self.wake_after, 0.05)) if self.wake_after else None


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def registration_wake_after(
    pods: list[JSON], now: dt.datetime, timeout: dt.timedelta
) -> float | None:
    """Seconds until the first Running, Ready, unregistered pod hits the registration timeout."""
    best: float | None = None
    for pod in pods:
        if p.phase(pod) != "Running" or c.ANNOTATION_RUNNER_ID in objects.annotations_of(pod):
            continue
        since = p.ready_since(pod)
        if since is not None and now - since <= timeout:
            best = _earliest(best, (since + timeout - now).total_seconds() + 0.1)
    return best


async def sync_runner_pods_owners(
    kube: KubeClient,
    kind: OwnerKind,
    owners: list[JSON],
    params: SyncParams,
    create: Callable[[], Awaitable[None]],
) -> SyncResult:
    """One step towards ``params.desired`` owners (see :class:`SyncResult`)."""
    current, wake = await _sync(kube, kind, owners, params, create)
    all_pods = [pod for o in owners for pod in await kind.pods_of(o)]
    wake = _earliest(
        wake, registration_wake_after(all_pods, params.now, params.registration_timeout)
    )
    return SyncResult(current, wake)


async def _sync(
    kube: KubeClient,
    kind: OwnerKind,
    owners: list[JSON],
    params: SyncParams,
    create: Callable[[], Awaitable[None]],
) -> tuple[list[OwnerState] | None, float | None]:
    now = params.now
    stamp = objects.format_time(now)
    by_hash: dict[str, list[OwnerState]] = {}
    last_sync: dt.datetime | None = params.last_created
    for owner in owners:
        state = OwnerState(owner, await kind.pods_of(owner))
        classify(state, now, params.registration_timeout)
        ann = objects.annotations_of(owner)
        if not state.template_hash:
            log.info("%s %s has no template hash; waiting", kind.resource.kind, state.name)
            return None, None
        if objects.is_deleting(owner):
            continue
        if c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP in ann:
            await kind.delete(owner)  # step 3 of 4
            continue
        if c.ANNOTATION_UNREGISTRATION_REQUEST_TIMESTAMP in ann and all(
            c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP in objects.annotations_of(pod)
            or objects.is_deleting(pod)
            for pod in state.pods
        ):
            await _annotate(
                kube, kind.resource, owner, c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP, stamp
            )
            continue  # step 2 of 4
        synced_at = objects.parse_time(ann.get(c.ANNOTATION_SYNC_TIME))
        if synced_at is not None and (last_sync is None or synced_at > last_sync):
            last_sync = synced_at
        if state.total > 0 and state.total == state.completed:
            # An ephemeral runner finished: it de-registered itself, so no RemoveRunner.
            await kind.delete(owner)
            return None, None
        if not kind.synced(owner):
            return None, None
        by_hash.setdefault(state.template_hash, []).append(state)

    current = sorted(by_hash.get(params.template_hash, []), key=lambda s: (s.created, s.name))
    pending = sum(s.pending for s in current) + params.outstanding
    running = sum(s.running for s in current)
    maybe_running = pending + running
    want_more = params.desired > maybe_running
    hold_until: float | None = None
    if want_more and skip_create(
        ephemeral=params.ephemeral,
        effective_time=params.effective_time,
        last_sync_time=last_sync,
        now=now,
        delay=params.recreation_delay,
    ):
        log.debug("not recreating runners before the autoscaler had its chance (EffectiveTime)")
        assert last_sync is not None
        hold_until = (last_sync + params.recreation_delay - now).total_seconds()
    elif want_more:
        for _ in range(params.desired - maybe_running):
            await create()
        return None, None
    elif params.desired <= running:
        await _scale_down(kube, kind, current, params.desired, stamp)

    for h, states in by_hash.items():
        if h == params.template_hash:
            continue
        for state in states:
            if not objects.is_deleting(state.owner):
                await kind.delete(state.owner)
                return None, None
    return current, hold_until


async def _scale_down(
    kube: KubeClient, kind: OwnerKind, current: list[OwnerState], desired: int, stamp: str
) -> None:
    retained = 0
    to_delete: list[OwnerState] = []
    for state in reversed(current):  # newest first: keep the newest running runners
        if state.running == 0 or retained >= desired:
            to_delete.append(state)
        else:
            retained += state.running
    if retained == desired:
        for state in to_delete:
            if c.ANNOTATION_UNREGISTRATION_REQUEST_TIMESTAMP in objects.annotations_of(state.owner):
                continue
            for pod in state.pods:  # step 1 of 4
                await _annotate(
                    kube, PODS, pod, c.ANNOTATION_UNREGISTRATION_REQUEST_TIMESTAMP, stamp
                )
            await _annotate(
                kube,
                kind.resource,
                state.owner,
                c.ANNOTATION_UNREGISTRATION_REQUEST_TIMESTAMP,
                stamp,
            )
    elif retained < desired:
        log.error("invalid scale-down state: retained %d < desired %d", retained, desired)
