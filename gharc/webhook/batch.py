"""ARC's batch scaler (legacy.md 5.5): webhook operations become capacity reservations.

Operations are collected for ``window`` seconds (ARC: 3 s) and grouped per HRA, so a burst
of 50 queued jobs costs one read and one patch per HRA instead of 50 of each. Each patch
carries the resourceVersion it was planned from (optimistic lock): if the HRA changed in
between (the controller or another replica wrote it), the server answers 409 and the plan
is redone on a fresh read, so no reservation is lost or doubled. Other failures keep the
operations and retry with ARC's backoff (1, 2, 4, 8, 16 s, then 16 s); new events wait
behind the retries, as in ARC.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gharc.kube.client import KubeClient
from gharc.kube.errors import Conflict, NotFound
from gharc.kube.resources import HORIZONTAL_RUNNER_AUTOSCALERS

log = logging.getLogger(__name__)

BATCH_WINDOW = 3.0
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0)
CONFLICT_RETRIES = 5

JSON = dict[str, Any]


@dataclass(frozen=True)
class ScaleOp:
    namespace: str
    name: str
    amount: int
    duration: dt.timedelta


def _fmt(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: Any) -> dt.datetime | None:
    if not value:
        return None
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    t = dt.datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def plan_batch_scale(
    reservations: Sequence[Mapping[str, Any]],
    max_replicas: int | None,
    ops: Sequence[ScaleOp],
    now: dt.datetime,
) -> list[JSON]:
    """The new ``spec.capacityReservations`` (ARC ``planBatchScale``, v0.27.5+).

    Reservations beyond ``maxReplicas`` are restarted at ``now`` with their length kept, so
    queued work waiting for capacity does not expire while it waits (ARC issue #2254).
    Expired ones are dropped, +N appends N one-replica reservations, -N removes the N
    oldest (never below zero).
    """
    planned: list[JSON] = []
    for i, r in enumerate(reservations):
        item = dict(r)
        if max_replicas is not None and len(reservations) > max_replicas and i >= max_replicas:
            eff, exp = _parse(item.get("effectiveTime")), _parse(item.get("expirationTime"))
            if eff is not None and exp is not None:
                item["effectiveTime"] = _fmt(now)
                item["expirationTime"] = _fmt(now + (exp - eff))
        planned.append(item)
    planned = [r for r in planned if (_parse(r.get("expirationTime")) or now) > now]
    for op in ops:
        if op.amount > 0:
            for _ in range(op.amount):
                planned.append(
                    {
                        "effectiveTime": _fmt(now),
                        "expirationTime": _fmt(now + op.duration),
                        "replicas": 1,
                    }
                )
        elif op.amount < 0:
            planned = planned[-op.amount :]  # FIFO: the oldest go first; [] when too few
    return planned


Sleep = Callable[[float], Awaitable[None]]


class BatchScaler:
    """Applies :class:`ScaleOp` batches to HRAs; run :meth:`run` as a task."""

    def __init__(
        self,
        client: KubeClient,
        *,
        queue_limit: int = 100,
        window: float = BATCH_WINDOW,
        backoff: Sequence[float] = BACKOFF,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        on_patched: Callable[[ScaleOp, int], None] | None = None,
    ) -> None:
        self.client = client
        self.queue: asyncio.Queue[ScaleOp] = asyncio.Queue(maxsize=queue_limit)
        self.window = window
        self.backoff = tuple(backoff)
        self.clock = clock
        self.sleep = sleep
        self.on_patched = on_patched
        self.patches = 0
        self.conflicts = 0

    def offer(self, op: ScaleOp) -> bool:
        """Enqueue without waiting; False when the queue is full (the caller answers 500)."""
        try:
            self.queue.put_nowait(op)
        except asyncio.QueueFull:
            return False
        return True

    def _drain(self, into: dict[tuple[str, str], list[ScaleOp]]) -> None:
        while True:
            try:
                op = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            into.setdefault((op.namespace, op.name), []).append(op)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            pending: dict[tuple[str, str], list[ScaleOp]] = {(first.namespace, first.name): [first]}
            deadline = loop.time() + self.window
            while (left := deadline - loop.time()) > 0:
                try:
                    op = await asyncio.wait_for(self.queue.get(), left)
                except TimeoutError:
                    break
                pending.setdefault((op.namespace, op.name), []).append(op)
            attempt = 0
            while pending:
                pending = await self.flush(pending)
                if pending:
                    delay = self.backoff[min(attempt, len(self.backoff) - 1)]
                    attempt += 1
                    await self.sleep(delay)
                    self._drain(pending)

    async def flush(
        self, pending: Mapping[tuple[str, str], list[ScaleOp]]
    ) -> dict[tuple[str, str], list[ScaleOp]]:
        """Apply every HRA's operations; returns those that failed (to retry)."""
        failed: dict[tuple[str, str], list[ScaleOp]] = {}
        for (ns, name), ops in pending.items():
            try:
                await self._apply(ns, name, ops)
            except NotFound:
                log.info("HRA %s/%s is gone; dropping %d scale operation(s)", ns, name, len(ops))
            except Exception as err:
                log.warning("scaling HRA %s/%s failed (will retry): %s", ns, name, err)
                failed[(ns, name)] = list(ops)
        return failed

    async def _apply(self, ns: str, name: str, ops: list[ScaleOp]) -> None:
        for attempt in range(CONFLICT_RETRIES + 1):
            hra = await self.client.get(HORIZONTAL_RUNNER_AUTOSCALERS, name, namespace=ns)
            spec = hra.get("spec") or {}
            now = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
            max_replicas = spec.get("maxReplicas")
            before = list(spec.get("capacityReservations") or [])
            planned = plan_batch_scale(
                before, int(max_replicas) if max_replicas is not None else None, ops, now
            )
            try:
                await self.client.merge_patch(
                    HORIZONTAL_RUNNER_AUTOSCALERS,
                    hra,
                    {"spec": {"capacityReservations": planned}},
                    optimistic_lock=True,
                )
            except Conflict:
                self.conflicts += 1
                if attempt == CONFLICT_RETRIES:
                    raise
                continue
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
            return
