"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it, minus its traps.

Why hand-written (kubernetes_asyncio's elector, python-ecosystem.md 2.2): deadlines there
use the wall clock, MicroTime is local time with a ``Z`` glued on, the lease is never
released (a rolling update waits out a whole lease) and ``leaseTransitions`` is not kept.

How it works:

- A candidate reads the Lease. If nobody holds it, or the holder's record has not changed
  for ``leaseDurationSeconds`` *as measured on our own monotonic clock since we first saw
  that record*, it writes itself in as holder with a PUT carrying the read resourceVersion.
  Two candidates racing for it cannot both win: the second PUT gets 409.
  (We never compare the holder's ``renewTime`` with our clock: clocks of two nodes differ.)
- The leader renews every ``retry_period``. If it cannot renew for ``renew_deadline`` it
  stops leading (``renew_deadline < lease_duration``, so it stops before anyone else may
  take over: no two leaders at once as long as clock *rates* agree).
- On shutdown a leader releases the lease (holder cleared) so a successor need not wait.

MicroTime fields are RFC 3339 in UTC with microseconds, e.g. ``2026-01-02T03:04:05.000006Z``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gharc.kube import errors as kerrors
from gharc.kube import metrics, objects
from gharc.kube.client import KubeClient
from gharc.kube.clock import Clock, LoopClock
from gharc.kube.fence import WriteFence
from gharc.kube.resources import LEASES

__all__ = ["LeaderElectionConfig", "LeaderElector", "default_identity", "micro_time"]

log = logging.getLogger(__name__)

JSON = dict[str, Any]
Callback = Callable[[], Awaitable[None] | None]


def micro_time(now: datetime.datetime | None = None) -> str:
    """A Kubernetes MicroTime: RFC 3339, UTC, microseconds."""
    now = now or datetime.datetime.now(datetime.UTC)
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """``hostname_uuid``: unique per process even when pods share a hostname."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    name: str
    """Lease name, the same for every replica of one controller manager."""
    namespace: str
    identity: str = ""
    """This candidate's holder identity; default :func:`default_identity`."""
    lease_duration: float = 15.0
    """How long followers wait after the last observed change before taking over."""
    renew_deadline: float = 10.0
    """How long the leader keeps trying to renew before it gives up leading."""
    retry_period: float = 2.0
    """Pause between attempts to acquire or renew."""
    release_on_cancel: bool = True
    """Clear the holder on shutdown, so a successor takes over at once."""

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2 > 0:
            raise ValueError("need lease_duration > renew_deadline > 1.2 * retry_period > 0")


class LeaderElector:
    """Usage::

    elector = LeaderElector(kube, LeaderElectionConfig("gharc", "gharc-system"),
                            on_started_leading=start, on_stopped_leading=stop)
    await elector.run()   # returns when leadership is lost (or raises CancelledError)
    """

    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Clock | None = None,
        fence: WriteFence | None = None,
    ) -> None:
        self.client = client
        self.fence = fence
        """Opened up to ``renew_deadline`` past each Lease write; closed when leading ends."""
        self.config = config
        self.identity = config.identity or default_identity()
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._clock = clock or LoopClock()
        self._observed: JSON | None = None  # the last lease spec we saw
        self._observed_rv = ""
        self._observed_at = 0.0
        self._leading = False
        self._last_renew = 0.0
        self.leader: str = ""
        self._gauge = metrics.LEADER_ELECTION_MASTER_STATUS.labels(name=config.name)

    @property
    def is_leader(self) -> bool:
        return self._leading

    async def run(self) -> None:
        """Acquire, lead until renewal fails, then return. Cancel to stop (releases)."""
        try:
            await self._acquire()
            self._set_leading(True)
            await _call(self.on_started_leading)
            await self._renew_loop()
            log.warning("leader election %s: lost the lease as %s", self.config.name, self.identity)
        finally:
            was_leading = self._leading
            self._set_leading(False)
            if self.fence is not None:
                self.fence.close()  # before the release: a successor may start at once
            if was_leading:
                if self.config.release_on_cancel:
                    await asyncio.shield(self.release())
                await _call(self.on_stopped_leading)

    async def release(self) -> bool:
        """Clear the holder if we hold the lease; True when released."""
        try:
            lease = await self.client.get(LEASES, self.config.name, namespace=self.config.namespace)
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.warning(
                "leader election %s: could not read lease to release: %r", self.config.name, err
            )
            return False
        spec = objects.spec_of(lease)
        if spec.get("holderIdentity") != self.identity:
            return False
        now = micro_time()
        lease["spec"] = {
            **spec,
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "renewTime": now,
            "acquireTime": now,
        }
        try:
            await self.client.update(LEASES, lease)
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.warning("leader election %s: release failed: %r", self.config.name, err)
            return False
        log.info("leader election %s: released by %s", self.config.name, self.identity)
        return True

    # -- internals ---------------------------------------------------------------------
    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        self._gauge.set(1 if leading else 0)

    async def _acquire(self) -> None:
        while True:
            if await self._try_acquire_or_renew():
                log.info("leader election %s: %s is the leader", self.config.name, self.identity)
                return
            await asyncio.sleep(self.config.retry_period * (1 + random.random() * 0.2))

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.retry_period)
            deadline = self._last_renew + self.config.renew_deadline
            while True:
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    return
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._try_acquire_or_renew()
                except TimeoutError:
                    return
                if renewed:
                    break
                if not self._leading or self.leader not in ("", self.identity):
                    return  # somebody else holds it now
                await asyncio.sleep(
                    min(self.config.retry_period, max(0.0, deadline - self._clock.now()))
                )

    async def _try_acquire_or_renew(self) -> bool:
        now_mono = self._clock.now()
        now = micro_time()
        cfg = self.config
        try:
            lease = await self.client.get(LEASES, cfg.name, namespace=cfg.namespace)
        except kerrors.NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._record(now, acquire_time=now, transitions=0),
            }
            return await self._write(
                "create",
                lambda: self.client.create(LEASES, body),
                now_mono,
                lost=(kerrors.AlreadyExists, kerrors.Conflict),
            )
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.warning("leader election %s: get failed: %r", cfg.name, err)
            return False

        spec = objects.spec_of(lease)
        rv = lease["metadata"].get("resourceVersion", "")
        if self._observed is None or spec != self._observed:
            self._observe(lease, now_mono)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
        if holder and holder != self.identity and self._observed_at + duration > now_mono:
            return False  # held by someone else and not expired on our clock

        if holder == self.identity:
            record = self._record(
                now,
                acquire_time=spec.get("acquireTime") or now,
                transitions=int(spec.get("leaseTransitions") or 0),
            )
        else:
            record = self._record(
                now, acquire_time=now, transitions=int(spec.get("leaseTransitions") or 0) + 1
            )
        lease["spec"] = record
        lease["metadata"] = {**lease["metadata"], "resourceVersion": rv}
        return await self._write(
            "update", lambda: self.client.update(LEASES, lease), now_mono, lost=(kerrors.Conflict,)
        )

    async def _write(
        self,
        verb: str,
        write: Callable[[], Awaitable[JSON]],
        now_mono: float,
        *,
        lost: tuple[type[kerrors.ApiError], ...],
    ) -> bool:
        """Create or update the Lease (``write``): True when it was written (this replica holds
        the Lease from ``now_mono``), False when another replica's write won (``lost``) or
        the API failed (logged). Acquiring and renewing end the same way."""
        try:
            written = await write()
        except lost:
            return False
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.warning("leader election %s: %s failed: %r", self.config.name, verb, err)
            return False
        self._observe(written, now_mono)
        self._last_renew = now_mono
        if self.fence is not None:
            self.fence.extend_to(now_mono + self.config.renew_deadline)
        return True

    def _record(self, now: str, *, acquire_time: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: JSON, now_mono: float) -> None:
        spec = lease.get("spec") or {}  # kept as the observed record: a dict, not a view
        self._observed = spec
        self._observed_rv = lease["metadata"].get("resourceVersion", "")
        self._observed_at = now_mono
        holder = spec.get("holderIdentity") or ""
        if holder != self.leader:
            self.leader = holder
            if holder and self.on_new_leader:
                try:
                    self.on_new_leader(holder)
                except Exception:
                    log.exception("on_new_leader callback failed")


async def _call(callback: Callback | None) -> None:
    if callback is None:
        return
    try:
        result = callback()
        if result is not None:
            await result
    except Exception:
        log.exception("leader election callback %r failed", callback)
