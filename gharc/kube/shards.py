"""Shard ownership: controller replicas split a fixed number of shard Leases between them.

One leader acting for every scale set caps a controller at one replica's CPU and event loop.
With ``--shards N`` (N > 1) there are N Leases, ``<name>-shard-0`` .. ``<name>-shard-<N-1>``,
and a scale set belongs to shard :func:`shard_of` (a stable hash of ``namespace/name``, the same
in every process, unlike Python's ``hash()``). Each replica holds some of the shard Leases and
acts only for the scale sets of those.

How a replica (a :class:`ShardOwner`) decides, every ``retry_period``:

- It lists the group's Leases (one LIST by label) and renews its own *member* Lease, so peers
  that hold no shard yet are counted too. Its live peers are the holders of member Leases
  whose record changed within ``leaseDurationSeconds`` *on this replica's monotonic clock*
  (as in :mod:`gharc.kube.leaderelection`: no two nodes' clocks are ever compared).
- Its fair share is ``ceil(N / live members)``. It renews the shards it holds; over its share
  it releases the extras (highest shard numbers first), under it it takes shards that are
  free (no Lease, or no holder) or expired (unchanged for ``leaseDurationSeconds``), each by a
  PUT carrying the listed resourceVersion, so two replicas racing for one cannot both win.
- A shard's :class:`~gharc.kube.fence.WriteFence` (:mod:`gharc.kube.shardfence`) is opened up
  to ``renew_deadline`` past the start of each successful write of its Lease, and closed
  before the shard is released. Peers wait ``lease_duration`` (longer) from when they saw the
  last change, so a replica that stops renewing (hung, partitioned) has stopped writing about
  that shard before anyone else may take it.
- On stop it releases every shard (fence closed first) and deletes its member Lease, so peers
  take over within one ``retry_period`` rather than a lease duration.

The owner runs on a thread of its own with its own connections (:class:`ShardKeeper`), as the
leader Lease does (:mod:`gharc.kube.leasekeeper`): a held event loop must not cost the shards.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.leaderelection import default_identity, micro_time
from gharc.kube.resources import LEASES
from gharc.kube.shardfence import ShardFences

__all__ = [
    "LABEL_GROUP",
    "LABEL_ROLE",
    "ShardConfig",
    "ShardKeeper",
    "ShardOwner",
    "shard_of",
]

log = logging.getLogger(__name__)

JSON = dict[str, Any]
ShardCallback = Callable[[int], None]
ReleaseHook = Callable[[int], Coroutine[Any, Any, None]]

LABEL_GROUP = "gharc.dev/shard-group"
"""On every Lease of a shard group (its shards and its members): what one LIST selects."""
LABEL_ROLE = "gharc.dev/shard-role"
"""``shard`` or ``member``."""


def shard_of(namespace: str, name: str, count: int) -> int:
    """The shard of the scale set ``namespace/name`` among ``count``: the same in every
    process and every Python version (a SHA-256, not the per-process salted ``hash()``)."""
    if count <= 1:
        return 0
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


@dataclass(frozen=True, slots=True)
class ShardConfig:
    name: str
    """The group's name; its Leases are ``<name>-shard-<k>`` and ``<name>-member-<digest>``."""
    namespace: str
    count: int
    identity: str = ""
    """This replica's holder identity; default :func:`default_identity`."""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("need at least one shard")
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2 > 0:
            raise ValueError("need lease_duration > renew_deadline > 1.2 * retry_period > 0")

    def shard_lease(self, shard: int) -> str:
        return f"{self.name}-shard-{shard}"

    def member_lease(self, identity: str) -> str:
        return f"{self.name}-member-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


class ShardOwner:
    """Holds this replica's fair share of a group's shard Leases (see the module docstring).

    Usage (on any loop)::

        owner = ShardOwner(kube, ShardConfig("gharc", "arc-systems", 8), ShardFences(8),
                           on_gained=gained, on_lost=lost)
        await owner.run()      # until cancelled; then releases what it holds

    ``on_gained``/``on_lost`` are called on the owner's loop with a shard number. A shard is
    lost by expiry (its fence closed already) or released to a peer; before a release the
    owner awaits ``before_release`` (bounded by half the renew deadline), so the replica can
    stop what it runs for that shard while nobody else holds it yet.
    """

    def __init__(
        self,
        client: KubeClient,
        config: ShardConfig,
        fences: ShardFences,
        *,
        on_gained: ShardCallback | None = None,
        on_lost: ShardCallback | None = None,
        before_release: ReleaseHook | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if fences.count != config.count:
            raise ValueError("one fence per shard")
        self.client = client
        self.config = config
        self.fences = fences
        self.identity = config.identity or default_identity()
        self.on_gained = on_gained
        self.on_lost = on_lost
        self.before_release = before_release
        self._now = clock
        self._held: set[int] = set()
        self._renewed: dict[int, float] = {}
        self._observed: dict[str, tuple[JSON, float]] = {}
        self.members: frozenset[str] = frozenset()
        """The live members seen at the last pass (this replica included)."""
        self.paused = False
        self._next_expiry: float | None = None
        """While True the owner does nothing at all, as a frozen process (tests)."""

    @property
    def held(self) -> frozenset[int]:
        return frozenset(self._held)

    def owns(self, shard: int) -> bool:
        """Held by this replica (its fence may still have lapsed: writes are checked there)."""
        return shard in self._held

    async def run(self) -> None:
        """Take and keep a fair share until cancelled; then release everything held."""
        try:
            while True:
                if not self.paused:
                    try:
                        await self.tick()
                    except (kerrors.ApiError, OSError, TimeoutError) as err:
                        log.warning("shards %s: pass failed: %r", self.config.name, err)
                        self._expire(self._now())
                await asyncio.sleep(self._pause())
        finally:
            if not self.paused:
                await asyncio.shield(self.release_all())

    async def tick(self) -> None:
        """One pass: observe the group, renew, then give away or take to reach the share."""
        cfg = self.config
        leases = await self.client.list(
            LEASES, namespace=cfg.namespace, label_selector=f"{LABEL_GROUP}={cfg.name}"
        )
        now = self._now()
        by_name = {str(lease["metadata"]["name"]): lease for lease in leases}
        for name, lease in by_name.items():
            self._observe(name, lease, now)
        self._observed = {k: v for k, v in self._observed.items() if k in by_name}
        await self._renew_member(by_name)
        members = {self.identity}
        for name, lease in by_name.items():
            labels = lease["metadata"].get("labels") or {}
            holder = objects.spec_of(lease).get("holderIdentity") or ""
            if labels.get(LABEL_ROLE) != "member" or not holder or holder == self.identity:
                continue
            if not self._expired(name, now):
                members.add(holder)
            elif self._expired(name, now, factor=4):
                with contextlib.suppress(kerrors.ApiError, OSError, TimeoutError):
                    await self.client.delete(LEASES, name, namespace=cfg.namespace)
        self.members = frozenset(members)
        for shard in sorted(self._held):
            name = cfg.shard_lease(shard)
            written = await self._renew(shard, by_name.get(name))
            if written is not None:
                by_name[name] = written  # its new resourceVersion, for a release below
        self._expire(self._now())
        share = math.ceil(cfg.count / len(members))
        self._next_expiry = min(
            (
                self._expires_at(name)
                for name, lease in by_name.items()
                if objects.spec_of(lease).get("holderIdentity") not in (None, "", self.identity)
            ),
            default=None,
        )
        extra = len(self._held) - share
        if extra > 0:
            for shard in sorted(self._held, reverse=True)[:extra]:
                await self._release(shard, by_name.get(cfg.shard_lease(shard)))
            return
        start = int(hashlib.sha256(self.identity.encode()).hexdigest()[:8], 16) % cfg.count
        for i in range(cfg.count):
            if len(self._held) >= share:
                break
            shard = (start + i) % cfg.count
            name = cfg.shard_lease(shard)
            if shard not in self._held and self._free(name, by_name.get(name), now):
                await self._acquire(shard, by_name.get(name))

    async def release_all(self) -> None:
        """Release every shard held (fences closed first) and leave the group."""
        for shard in sorted(self._held):
            try:
                lease = await self.client.get(
                    LEASES, self.config.shard_lease(shard), namespace=self.config.namespace
                )
            except (kerrors.ApiError, OSError, TimeoutError):
                lease = None
            await self._release(shard, lease)
        with contextlib.suppress(kerrors.ApiError, OSError, TimeoutError):
            await self.client.delete(
                LEASES, self.config.member_lease(self.identity), namespace=self.config.namespace
            )

    # -- internals ---------------------------------------------------------------------
    def _pause(self) -> float:
        """Until the next pass: ``retry_period`` (jittered), or less when a peer's Lease
        (shard or member) expires sooner: a dead peer's shards are taken right at expiry
        rather than up to a retry period later. A live peer's Leases change every renewal,
        so their expiry stays a lease duration away and costs no extra pass."""
        pause = self.config.retry_period * (0.9 + random.random() * 0.2)
        left = None if self._next_expiry is None else self._next_expiry - self._now()
        if left is not None and left > 0:
            pause = min(pause, left + 0.05)
        return pause

    def _observe(self, name: str, lease: JSON, now: float) -> None:
        spec = objects.spec_of(lease)
        seen = self._observed.get(name)
        if seen is None or seen[0] != spec:
            self._observed[name] = (dict(spec), now)

    def _expires_at(self, name: str) -> float:
        spec, at = self._observed[name]
        return at + float(spec.get("leaseDurationSeconds") or self.config.lease_duration)

    def _expired(self, name: str, now: float, *, factor: float = 1.0) -> bool:
        seen = self._observed.get(name)
        if seen is None:
            return False
        spec, at = seen
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        return at + duration * factor <= now

    def _free(self, name: str, lease: JSON | None, now: float) -> bool:
        if lease is None:
            return True
        holder = objects.spec_of(lease).get("holderIdentity") or ""
        return not holder or (holder != self.identity and self._expired(name, now))

    def _record(self, now: str, *, acquire_time: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _new_lease(self, name: str, role: str, spec: JSON) -> JSON:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": self.config.namespace,
                "labels": {LABEL_GROUP: self.config.name, LABEL_ROLE: role},
            },
            "spec": spec,
        }

    async def _renew_member(self, by_name: dict[str, JSON]) -> None:
        name = self.config.member_lease(self.identity)
        now = micro_time()
        lease = by_name.get(name)
        if lease is None:
            body = self._new_lease(
                name, "member", self._record(now, acquire_time=now, transitions=0)
            )
            with contextlib.suppress(kerrors.AlreadyExists):
                await self.client.create(LEASES, body)
            return
        spec = objects.spec_of(lease)
        lease["spec"] = self._record(
            now,
            acquire_time=spec.get("acquireTime") or now,
            transitions=int(spec.get("leaseTransitions") or 0),
        )
        with contextlib.suppress(kerrors.Conflict):
            await self.client.update(LEASES, lease)

    async def _renew(self, shard: int, lease: JSON | None) -> JSON | None:
        """The Lease as written, or None when it was not (lost, or the API failed)."""
        if lease is None or objects.spec_of(lease).get("holderIdentity") != self.identity:
            self._lose(shard, "taken by another replica")
            return None
        spec = objects.spec_of(lease)
        began = self._now()
        now = micro_time()
        lease["spec"] = self._record(
            now,
            acquire_time=spec.get("acquireTime") or now,
            transitions=int(spec.get("leaseTransitions") or 0),
        )
        try:
            written = await self.client.update(LEASES, lease)
        except kerrors.Conflict:
            self._lose(shard, "its Lease changed under us")
            return None
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.warning("shards %s: renewing shard %d failed: %r", self.config.name, shard, err)
            return None
        self._written(shard, written, began)
        return written

    async def _acquire(self, shard: int, lease: JSON | None) -> None:
        name = self.config.shard_lease(shard)
        began = self._now()
        now = micro_time()
        try:
            if lease is None:
                body = self._new_lease(
                    name, "shard", self._record(now, acquire_time=now, transitions=0)
                )
                written = await self.client.create(LEASES, body)
            else:
                transitions = int(objects.spec_of(lease).get("leaseTransitions") or 0) + 1
                lease["spec"] = self._record(now, acquire_time=now, transitions=transitions)
                written = await self.client.update(LEASES, lease)
        except (kerrors.AlreadyExists, kerrors.Conflict):
            return  # a peer was faster
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.warning("shards %s: taking shard %d failed: %r", self.config.name, shard, err)
            return
        self._held.add(shard)
        self._written(shard, written, began)
        log.info("shards %s: %s holds shard %d", self.config.name, self.identity, shard)
        _call(self.on_gained, shard)

    def _written(self, shard: int, written: JSON, began: float) -> None:
        self._observe(self.config.shard_lease(shard), written, began)
        self._renewed[shard] = began
        self.fences[shard].extend_to(began + self.config.renew_deadline)

    def _expire(self, now: float) -> None:
        """Shards whose renewals failed for ``renew_deadline`` are lost (fence closed by now)."""
        for shard in sorted(self._held):
            if now - self._renewed.get(shard, now) >= self.config.renew_deadline:
                self._lose(shard, "not renewed in time")

    def _lose(self, shard: int, why: str) -> None:
        self.fences[shard].close()
        if shard not in self._held:
            return
        self._held.discard(shard)
        self._renewed.pop(shard, None)
        log.warning("shards %s: %s lost shard %d: %s", self.config.name, self.identity, shard, why)
        _call(self.on_lost, shard)

    async def _release(self, shard: int, lease: JSON | None) -> None:
        """Give ``shard`` away: stop acting for it (fence closed, ``on_lost``, then
        ``before_release`` awaited), then clear the holder so a peer takes it at once."""
        self.fences[shard].close()
        self._held.discard(shard)
        self._renewed.pop(shard, None)
        _call(self.on_lost, shard)
        if self.before_release is not None:
            try:
                async with asyncio.timeout(self.config.renew_deadline / 2):
                    await self.before_release(shard)
            except Exception as err:
                log.warning("shards %s: before releasing %d: %r", self.config.name, shard, err)
        if lease is None or objects.spec_of(lease).get("holderIdentity") != self.identity:
            return
        now = micro_time()
        lease["spec"] = {
            **objects.spec_of(lease),
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "renewTime": now,
        }
        try:
            await self.client.update(LEASES, lease)
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.warning("shards %s: releasing shard %d failed: %r", self.config.name, shard, err)
            return
        log.info("shards %s: %s released shard %d", self.config.name, self.identity, shard)


def _call(callback: ShardCallback | None, shard: int) -> None:
    if callback is None:
        return
    try:
        callback(shard)
    except Exception:
        log.exception("shard callback %r failed", callback)


class ShardKeeper:
    """Runs a :class:`ShardOwner` on a thread and event loop of its own (a held main loop
    cannot cost the shards; its writes are bounded by the shard fences instead) and brings
    its callbacks back to the main loop.

    Usage (from the main loop)::

        keeper = ShardKeeper(kube, config, fences, on_gained=g, on_lost=l, before_release=r)
        keeper.start()
        ...
        await keeper.stop()     # releases every shard and joins the thread

    ``need_leader_election`` is False: every replica runs one (a manager runnable).
    """

    need_leader_election = False

    def __init__(
        self,
        client: KubeClient,
        config: ShardConfig,
        fences: ShardFences,
        *,
        on_gained: ShardCallback | None = None,
        on_lost: ShardCallback | None = None,
        before_release: ReleaseHook | None = None,
    ) -> None:
        self._client = client
        self.config = config
        self.fences = fences
        self.identity = config.identity or default_identity()
        self._on_gained = on_gained
        self._on_lost = on_lost
        self._before_release = before_release
        self._main: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping = False
        self._done = asyncio.Event()
        self.owner: ShardOwner | None = None

    def owns(self, shard: int) -> bool:
        return self.owner is not None and self.owner.owns(shard)

    @property
    def held(self) -> frozenset[int]:
        return self.owner.held if self.owner is not None else frozenset()

    def start_thread(self) -> None:
        """Start the owner's thread; returns at once."""
        self._main = asyncio.get_running_loop()
        self._thread = threading.Thread(
            target=self._run, name=f"shard-keeper-{self.config.name}", daemon=True
        )
        self._thread.start()

    # -- Runnable ----------------------------------------------------------------------------
    async def start(self) -> None:
        self.start_thread()
        await self._done.wait()

    async def stop(self) -> None:
        """Release every shard and wait for the thread."""
        self._stopping = True
        thread = self._thread
        if thread is not None:
            await asyncio.to_thread(self._ready.wait, 10)
            loop, task = self._loop, self._task
            if loop is not None and task is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(task.cancel)
            await asyncio.to_thread(thread.join, 30)
        for fence in self.fences.fences:
            fence.close()
        self._done.set()

    # -- the keeper's thread -------------------------------------------------------------------
    def _run(self) -> None:
        try:
            asyncio.run(self._own())
        except Exception:
            log.exception("shards %s: the shard keeper failed", self.config.name)
        finally:
            self._ready.set()
            for fence in self.fences.fences:
                fence.close()

    async def _own(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        client = self._client.fork()
        self.owner = ShardOwner(
            client,
            self.config,
            self.fences,
            on_gained=lambda shard: self._to_main(self._on_gained, shard),
            on_lost=lambda shard: self._to_main(self._on_lost, shard),
            before_release=self._release_on_main,
        )
        self.owner.identity = self.identity
        self._ready.set()
        try:
            if not self._stopping:
                await self.owner.run()
        except asyncio.CancelledError:
            pass
        finally:
            await client.close()

    async def _release_on_main(self, shard: int) -> None:
        main, hook = self._main, self._before_release
        if main is None or hook is None or main.is_closed():
            return
        future: Any = asyncio.run_coroutine_threadsafe(hook(shard), main)
        await asyncio.wrap_future(future)

    def _to_main(self, callback: ShardCallback | None, shard: int) -> None:
        main = self._main
        if callback is None or main is None or main.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            main.call_soon_threadsafe(callback, shard)
