"""A controller: sources feed a work queue, N workers run the reconciler on its keys.

controller-runtime's ``pkg/internal/controller`` semantics, kept exactly because the
scale set reconcilers were designed against them:

- A key is never reconciled by two workers at once (the work queue's processing set),
  however many workers run; different keys run concurrently up to
  ``max_concurrent_reconciles``.
- Workers start only after every source informer has synced, so the first reconcile
  never sees a half-filled cache (a half-filled cache looks like "children missing" and
  would make a reconciler create duplicates).
- Result handling: an exception requeues with the rate limiter (per-key backoff, overall
  bucket); TerminalError is not requeued; ``requeue_after`` forgets the backoff and
  schedules the key; success forgets the backoff.
- Stopping: the queue is shut down (no new keys are taken), in-flight reconciles are left
  to finish; the manager bounds that wait and then cancels.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from gharc.kube import errors as kerrors
from gharc.kube import metrics
from gharc.kube.fence import NotLeading
from gharc.kube.handler import Handler
from gharc.kube.informer import Informer
from gharc.kube.logging import log_context
from gharc.kube.predicate import Predicate
from gharc.kube.ratelimit import RateLimiter
from gharc.kube.reconcile import Reconciler, Request, Result, TerminalError
from gharc.kube.shardfence import acting_for
from gharc.kube.workqueue import ShutDown, WorkQueue

__all__ = ["CacheSyncTimeout", "Controller", "Router"]

log = logging.getLogger(__name__)

JSON = dict[str, Any]


class CacheSyncTimeout(RuntimeError):
    """A source did not list within ``cache_sync_timeout``; the controller will not run blind."""


class Router(Protocol):
    """Which replica acts on a key, with ``--shards`` > 1 (:mod:`gharc.kube.shards`)."""

    def route(self, request: Request) -> int | None:
        """The shard ``request`` belongs to when this replica holds it, else None."""
        ...


class _Source:
    """Routes one informer's events through predicates and a handler into the queue."""

    def __init__(
        self, queue: WorkQueue[Request], handler: Handler, predicates: Sequence[Predicate]
    ) -> None:
        self.queue = queue
        self.handler = handler
        self.predicates = tuple(predicates)

    def _enqueue(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self.queue.add(request)

    def on_add(self, obj: JSON) -> None:
        if all(p.create(obj) for p in self.predicates):
            self._enqueue(self.handler.requests(obj))

    def on_update(self, old: JSON, new: JSON) -> None:
        if all(p.update(old, new) for p in self.predicates):
            self._enqueue(self.handler.requests(old))
            self._enqueue(self.handler.requests(new))

    def on_delete(self, obj: JSON) -> None:
        if all(p.delete(obj) for p in self.predicates):
            self._enqueue(self.handler.requests(obj))


class Controller:
    """Build with :class:`gharc.kube.builder.Builder`; run as a manager runnable.

    **Parameters:**

    * ``max_concurrent_reconciles`` - workers; keys are still one-at-a-time each.
    * ``rate_limiter`` - failure backoff (default: client-go's controller limiter).
    * ``reconcile_timeout`` - cancel a reconcile that runs longer (counts as an error).
    * ``need_leader_election`` - start only on the leader (default true).
    * ``cache_sync_timeout`` - how long to wait for source informers before failing.
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter[Request] | None = None,
        reconcile_timeout: float | None = None,
        need_leader_election: bool = True,
        cache_sync_timeout: float = 120.0,
    ) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        self.name = name
        self.reconciler = reconciler
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.reconcile_timeout = reconcile_timeout
        self.need_leader_election = need_leader_election
        self.cache_sync_timeout = cache_sync_timeout
        self.queue: WorkQueue[Request] = WorkQueue(
            name=name,
            controller=name,
            rate_limiter=rate_limiter,
            fair_key=_tenant,
            workers=max_concurrent_reconciles,
        )
        self._sources: list[Informer] = []
        self.router: Router | None = None
        """Set with ``--shards`` > 1: a key is reconciled only when its shard is held here,
        and as acting for that shard (its writes pass that shard's fence); other keys are
        dropped (their shard's holder reconciles them; :meth:`enqueue_existing` brings them
        back when this replica gains the shard)."""
        self._workers: list[asyncio.Task[None]] = []
        self._started = asyncio.Event()
        self._m_total = {
            r: metrics.RECONCILE_TOTAL.labels(controller=name, result=r)
            for r in ("success", "error", "requeue", "requeue_after")
        }
        self._m_errors = metrics.RECONCILE_ERRORS.labels(controller=name)
        self._m_terminal = metrics.TERMINAL_RECONCILE_ERRORS.labels(controller=name)
        self._m_time = metrics.RECONCILE_TIME.labels(controller=name)
        self._m_active = metrics.ACTIVE_WORKERS.labels(controller=name)
        metrics.MAX_CONCURRENT_RECONCILES.labels(controller=name).set(max_concurrent_reconciles)

    def __repr__(self) -> str:
        return f"<Controller {self.name}>"

    def watch(self, informer: Informer, handler: Handler, *predicates: Predicate) -> None:
        """Enqueue ``handler``'s requests for each event of ``informer`` passing all predicates."""
        informer.add_event_handler(_Source(self.queue, handler, predicates))
        self._sources.append(informer)

    @property
    def started(self) -> bool:
        """True once the sources have synced and the workers run."""
        return self._started.is_set()

    async def wait_started(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self._started.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- Runnable ----------------------------------------------------------------------
    async def start(self) -> None:
        """Wait for the sources, run the workers; returns once they all stopped."""
        for informer in self._sources:
            informer.start()  # idempotent; a cache normally started them already
        try:
            async with asyncio.timeout(self.cache_sync_timeout):
                for informer in self._sources:
                    await informer.wait_for_sync()
        except TimeoutError:
            raise CacheSyncTimeout(
                f"{self.name}: sources not synced in {self.cache_sync_timeout} s"
            ) from None
        if self.queue.shutting_down:
            return
        loop = asyncio.get_running_loop()
        self._workers = [
            loop.create_task(self._worker(), name=f"controller:{self.name}:{i}")
            for i in range(self.max_concurrent_reconciles)
        ]
        self._started.set()
        log.info("controller %s started with %d workers", self.name, len(self._workers))
        try:
            await asyncio.gather(*self._workers)
        finally:
            for task in self._workers:
                task.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
            log.info("controller %s stopped", self.name)

    async def stop(self) -> None:
        """Take no more keys; in-flight reconciles finish and then ``start()`` returns."""
        self.queue.shutdown()

    # -- workers -----------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            try:
                request = await self.queue.get()
            except ShutDown:
                return
            self._m_active.inc()
            task = asyncio.current_task()
            if task is not None:  # names the work if it holds the loop (gharc.kube.looplag)
                task.set_name(f"reconcile:{self.name}:{request.namespace}/{request.name}")
            try:
                if self.router is None:
                    await self.reconcile_handler(request)
                else:
                    shard = self.router.route(request)
                    if shard is None:
                        self.queue.forget(request)
                    else:
                        with acting_for(shard):
                            await self.reconcile_handler(request)
            finally:
                self._m_active.dec()
                self.queue.done(request)

    def enqueue_existing(self, select: Callable[[Request], bool]) -> int:
        """Queue every object of the reconciled kind (in the cache) whose key ``select``
        accepts; returns how many. A replica that gained a shard wakes its objects so."""
        if not self._sources:
            return 0
        added = 0
        for obj in self._sources[0].store:
            meta = obj.get("metadata") or {}
            request = Request(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            if select(request):
                self.queue.add(request)
                added += 1
        return added

    async def reconcile_handler(self, request: Request) -> str:
        """Reconcile one key and requeue it as its outcome says; returns the result label."""
        began = time.monotonic()
        outcome = "success"
        with log_context(
            controller=self.name,
            namespace=request.namespace,
            name=request.name,
            reconcile_id=uuid.uuid4().hex[:12],
        ):
            try:
                if self.reconcile_timeout:
                    async with asyncio.timeout(self.reconcile_timeout):
                        result = await self.reconciler.reconcile(request)
                else:
                    result = await self.reconciler.reconcile(request)
            except asyncio.CancelledError:
                raise
            except TerminalError as err:
                outcome = "error"
                self.queue.forget(request)
                self._m_errors.inc()
                self._m_terminal.inc()
                log.error("reconcile of %s failed terminally: %s", request, err)
            except kerrors.Conflict as err:
                # NB: the normal outcome of optimistic locking; retry soon, no stack trace.
                outcome = "error"
                self._m_errors.inc()
                self.queue.add_rate_limited(request)
                log.info("reconcile of %s hit a conflict (%s); requeued", request, err.message)
            except NotLeading as err:
                # NB: not a fault of this object or of the code: this replica may no longer
                # write it (the leader Lease or its shard moved on); no stack trace.
                outcome = "error"
                self._m_errors.inc()
                self.queue.add_rate_limited(request)
                log.info("reconcile of %s stopped before a write: %s; requeued", request, err)
            except Exception:
                outcome = "error"
                self._m_errors.inc()
                self.queue.add_rate_limited(request)
                log.exception("reconcile of %s failed; requeued with backoff", request)
            else:
                result = result or Result()
                if result.requeue_after and result.requeue_after > 0:
                    outcome = "requeue_after"
                    self.queue.forget(request)
                    self.queue.add_after(request, result.requeue_after)
                elif result.requeue:
                    outcome = "requeue"
                    self.queue.add_rate_limited(request)
                else:
                    self.queue.forget(request)
            finally:
                self._m_time.observe(time.monotonic() - began)
        self._m_total[outcome].inc()
        return outcome


def _tenant(request: Request) -> str:
    """The work queue's fair key: a namespace is one tenant's."""
    return request.namespace
