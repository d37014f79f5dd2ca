"""ARC's batch scaler (legacy.md 5.5): webhook operations become capacity reservations, and
a delivery is acknowledged only once its reservation is stored.

Operations are collected for ``window`` seconds (ARC: 3 s) and grouped per HRA, so a burst
of 50 queued jobs costs one read and one patch per HRA instead of 50 of each. Each patch
carries the resourceVersion it was planned from (optimistic lock): if the HRA changed in
between (the controller or another replica wrote it), the server answers 409 and the plan
is redone on a fresh read, so no reservation is lost or doubled. Other failures keep the
operations and retry with ARC's backoff (1, 2, 4, 8, 16 s, then 16 s).

Unlike ARC, :meth:`BatchScaler.submit` returns a future that resolves only when the patch
holding the operation succeeded: the HTTP handler answers GitHub after that, so a process
killed at any moment has stored every reservation it acknowledged (ARC answers 200 when
the operation is queued and loses the queue on exit). :meth:`BatchScaler.hurry` ends the
window early, which is how a stopping server drains.

A reservation carries the name of its workflow job (``job-<id>``), ARC's otherwise unused
``name`` field. So a redelivered ``queued`` event finds its reservation and adds none, even
after a restart; the queued-job poll (:mod:`gharc.webhook.poller`) can tell which queued
jobs have none; and a ``completed`` event releases its own job's reservation. Unnamed
reservations (written by ARC or by hand) are still released oldest first, as in ARC. The
jobs released are recorded on the HRA in the same patch (:mod:`gharc.webhook.completed`),
so a ``queued`` event for a job that already completed reserves nothing, whichever
replica gets it and however often the server restarted in between.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableSet, Sequence
from dataclasses import dataclass, field
from typing import Any

from gharc.api.legacy.views import HorizontalRunnerAutoscalerView
from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.webhook import completed, repositories
from gharc.webhook.settings import WebhookSettings

log = logging.getLogger(__name__)

BATCH_WINDOW = WebhookSettings.batch_window
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0)
CONFLICT_RETRIES = 5
FINISHED_MEMORY = 10_000

JSON = dict[str, Any]

# What an operation did, as the batch that holds it was stored.
ADDED = "added"
RESERVED = "already reserved"
REMOVED = "removed"
NOTHING = "nothing to release"
FINISHED = "job already completed"
GONE = "horizontalrunnerautoscaler is gone"


def job_key(job_id: int) -> str:
    """The reservation name of a workflow job."""
    return f"job-{job_id}"


@dataclass(frozen=True)
class ScaleOp:
    namespace: str
    name: str
    amount: int
    duration: dt.timedelta
    key: str = ""  # the reservation's name (job_key); "" for ARC's unnamed reservations
    #: The job's repository (``owner/name``): a +1 records it on the HRA
    #: (:mod:`gharc.webhook.repositories`).
    repo: str = ""
    #: A -1 that releases the job's own reservation and never an unnamed one, and does not
    #: record the job as completed: the poll's release of a job it did not find queued or
    #: running (should the job show up queued after all, the next round reserves again).
    own_only: bool = False


def _parse(value: Any) -> dt.datetime | None:
    """A reservation's time; strict, as a user may have written it in the HRA's spec."""
    return objects.parse_time(value, strict=True)


def plan(
    reservations: Sequence[Mapping[str, Any]],
    max_replicas: int | None,
    ops: Sequence[ScaleOp],
    now: dt.datetime,
    finished: MutableSet[str] | None = None,
) -> tuple[list[JSON], list[str]]:
    """The new ``spec.capacityReservations`` and what each op did (ARC ``planBatchScale``,
    v0.27.5+, with named reservations).

    Reservations beyond ``maxReplicas`` are restarted at ``now`` with their length kept, so
    queued work waiting for capacity does not expire while it waits (ARC issue #2254).
    Expired ones are dropped. +1 appends a one-replica reservation unless one with the op's
    name exists, or the job is in ``finished`` (its ``completed`` came first); -1 removes
    the op's own reservation, else (the first time the job completes) the oldest unnamed
    one, and adds the name to ``finished``. Ops without a name behave as in ARC: -N
    removes the N oldest.
    """
    done = finished if finished is not None else set()
    planned: list[JSON] = []
    for i, r in enumerate(reservations):
        item = dict(r)
        if max_replicas is not None and len(reservations) > max_replicas and i >= max_replicas:
            eff, exp = _parse(item.get("effectiveTime")), _parse(item.get("expirationTime"))
            if eff is not None and exp is not None:
                item["effectiveTime"] = objects.format_time(now)
                item["expirationTime"] = objects.format_time(now + (exp - eff))
        planned.append(item)
    planned = [r for r in planned if (_parse(r.get("expirationTime")) or now) > now]
    outcomes: list[str] = []
    for op in ops:
        if op.amount > 0 and op.key:
            if op.key in done:
                outcomes.append(FINISHED)
            elif any(r.get("name") == op.key for r in planned):
                outcomes.append(RESERVED)
            else:
                planned.append(_reservation(now, op.duration, op.key))
                outcomes.append(ADDED)
        elif op.amount > 0:
            planned.extend(_reservation(now, op.duration) for _ in range(op.amount))
            outcomes.append(ADDED)
        elif op.amount < 0 and op.key:
            repeat = op.key in done
            if not op.own_only:  # the poll's release is no completion: the job may be back
                done.add(op.key)
            own = [i for i, r in enumerate(planned) if r.get("name") == op.key]
            unnamed = [i for i, r in enumerate(planned) if not r.get("name")]
            # a repeated completion released its reservation already: not another one's
            drop = own[:1] or ([] if repeat or op.own_only else unnamed[:1])
            planned = [r for i, r in enumerate(planned) if i not in drop]
            outcomes.append(REMOVED if drop else NOTHING)
        elif op.amount < 0:
            outcomes.append(REMOVED if planned else NOTHING)
            planned = planned[-op.amount :]  # FIFO: the oldest go first; [] when too few
        else:
            outcomes.append(NOTHING)
    return planned, outcomes


def _reservation(now: dt.datetime, duration: dt.timedelta, name: str = "") -> JSON:
    r: JSON = {
        "effectiveTime": objects.format_time(now),
        "expirationTime": objects.format_time(now + duration),
        "replicas": 1,
    }
    if name:
        r["name"] = name
    return r


def plan_batch_scale(
    reservations: Sequence[Mapping[str, Any]],
    max_replicas: int | None,
    ops: Sequence[ScaleOp],
    now: dt.datetime,
) -> list[JSON]:
    """ARC's ``planBatchScale``: the planned reservations of :func:`plan`."""
    return plan(reservations, max_replicas, ops, now)[0]


class BoundedSet(MutableSet[str]):
    """A set that forgets its oldest members beyond ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, value: str) -> None:
        self._items[value] = None
        self._items.move_to_end(value)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def discard(self, value: str) -> None:
        self._items.pop(value, None)


class QueueFull(Exception):
    """More operations wait than ``queue_limit``; the caller answers 503."""


@dataclass
class _Item:
    op: ScaleOp
    done: asyncio.Future[str] = field(repr=False)


Sleep = Callable[[float], Awaitable[None]]


class BatchScaler:
    """Applies :class:`ScaleOp` batches to HRAs; run :meth:`run` as a task."""

    def __init__(
        self,
        client: KubeClient,
        *,
        queue_limit: int = WebhookSettings.queue_limit,
        window: float = BATCH_WINDOW,
        backoff: Sequence[float] = BACKOFF,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        on_patched: Callable[[ScaleOp, int], None] | None = None,
    ) -> None:
        self.client = client
        self.queue_limit = queue_limit
        self.window = window
        self.backoff = tuple(backoff)
        self.clock = clock
        self.sleep = sleep
        self.on_patched = on_patched
        self.patches = 0
        self.conflicts = 0
        self._waiting: list[_Item] = []
        self._arrived = asyncio.Event()
        self._hurry = asyncio.Event()
        self._busy = 0  # operations taken from the queue and not yet stored
        self._idle = asyncio.Event()
        self._idle.set()
        # Released job reservations: a late +1 for them (a queued event delivered after its
        # completed one, or the poll racing the completion) must not reserve again.
        self.finished: dict[tuple[str, str], BoundedSet] = {}

    @property
    def backlog(self) -> int:
        """Operations waiting for a patch (queued or being written)."""
        return len(self._waiting) + self._busy

    def submit(self, op: ScaleOp) -> asyncio.Future[str]:
        """Queue ``op``; the future resolves to what it did (:data:`ADDED`, ...) once the
        patch holding it is stored. Raises :class:`QueueFull` when ``queue_limit`` wait."""
        if len(self._waiting) >= self.queue_limit:
            raise QueueFull(f"{len(self._waiting)} scale operations are already waiting")
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Item(op, fut))
        self._idle.clear()
        self._arrived.set()
        return fut

    def hurry(self) -> None:
        """Stop waiting for batch windows: write what is queued now and from now on."""
        self._hurry.set()

    async def drained(self) -> None:
        """Wait until every submitted operation is stored (or dropped with its HRA)."""
        await self._idle.wait()

    def _take(self) -> list[_Item]:
        items, self._waiting = self._waiting, []
        self._arrived.clear()
        self._busy += len(items)
        return items

    async def run(self) -> None:
        while True:
            await self._arrived.wait()
            if not self._hurry.is_set():
                try:
                    await asyncio.wait_for(self._hurry.wait(), self.window)
                except TimeoutError:
                    pass
            items = self._take()
            attempt = 0
            while items:
                left = await self.flush(items)
                self._busy -= len(items) - len(left)
                items = left
                if items:
                    delay = self.backoff[min(attempt, len(self.backoff) - 1)]
                    attempt += 1
                    await self.sleep(delay)
                    items += self._take()
            if not self._waiting:
                self._idle.set()

    async def flush(self, items: Sequence[_Item]) -> list[_Item]:
        """Apply every HRA's operations; returns those that failed (to retry)."""
        by_hra: dict[tuple[str, str], list[_Item]] = {}
        for item in items:
            by_hra.setdefault((item.op.namespace, item.op.name), []).append(item)
        failed: list[_Item] = []
        for (ns, name), group in by_hra.items():
            try:
                outcomes = await self._apply(ns, name, [i.op for i in group])
            except kerrors.NotFound:
                log.info("HRA %s/%s is gone; dropping %d scale operation(s)", ns, name, len(group))
                outcomes = [GONE] * len(group)
            except Exception as err:
                log.warning("scaling HRA %s/%s failed (will retry): %s", ns, name, err)
                failed.extend(group)
                continue
            for item, outcome in zip(group, outcomes, strict=True):
                if not item.done.done():
                    item.done.set_result(outcome)
        return failed

    async def _apply(self, ns: str, name: str, ops: list[ScaleOp]) -> list[str]:
        finished = self.finished.setdefault((ns, name), BoundedSet(FINISHED_MEMORY))
        for attempt in range(CONFLICT_RETRIES + 1):
            hra = await self.client.get(HORIZONTAL_RUNNER_AUTOSCALERS, name, namespace=ns)
            spec = objects.spec_of(hra)
            now = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
            before = list(spec.get("capacityReservations") or [])
            stored = completed.read(hra, now.timestamp())
            trial = BoundedSet(FINISHED_MEMORY)
            trial |= finished
            trial |= set(stored)
            planned, outcomes = plan(
                before, HorizontalRunnerAutoscalerView(hra).max_replicas, ops, now, trial
            )
            released = [
                op.key
                for op in ops
                if op.amount < 0 and op.key and not op.own_only and op.key not in stored
            ]
            known = repositories.read(hra)
            new_repos = [
                op.repo for op in ops if op.amount > 0 and op.repo and op.repo not in known
            ]
            if all(o in (RESERVED, FINISHED) for o in outcomes) and not released and not new_repos:
                return outcomes  # every op is a repeat: nothing to write
            patch: JSON = {"spec": {"capacityReservations": planned}}
            annotations: dict[str, str] = {}
            if released:
                annotations[completed.ANNOTATION] = completed.render(
                    stored, released, now.timestamp()
                )
            if new_repos:
                annotations[repositories.ANNOTATION] = repositories.render(known, new_repos)
            if annotations:
                patch["metadata"] = {"annotations": annotations}
            try:
                await self.client.merge_patch(
                    HORIZONTAL_RUNNER_AUTOSCALERS, hra, patch, optimistic_lock=True
                )
            except kerrors.Conflict:
                self.conflicts += 1
                if attempt == CONFLICT_RETRIES:
                    raise
                continue
            for op in ops:
                if op.amount < 0 and op.key and not op.own_only:
                    finished.add(op.key)
            self.patches += 1
            log.info(
                "HRA %s/%s: capacity reservations %d -> %d (%s)",
                ns,
                name,
                len(before),
                len(planned),
                ", ".join(f"{o.amount:+d}" for o in ops),
            )
            if self.on_patched is not None:
                for op in ops:
                    self.on_patched(op, len(planned))
            return outcomes
        raise AssertionError("unreachable")
