"""The manager: runs the cache, the controllers and the HTTP endpoints, and stops them cleanly.

Start order (controller-runtime's): HTTP endpoints, then the cache, then the runnables
that do not need leadership, then (once elected, if leader election is on) the ones
that do. Controllers wait for their own informers to sync before reconciling; ``/readyz``
turns green once the cache has synced.

Stop order, on SIGTERM/SIGINT or :meth:`Manager.stop`: runnables are asked to stop
(controllers take no new keys), in-flight work gets ``graceful_shutdown_timeout`` seconds
and is then cancelled, the lease is released (so a successor takes over at once instead
of waiting out the lease), then the cache and the HTTP servers stop.

With leader election on, the Lease is held from a thread of its own (a held event loop
cannot cost it) and every write of the manager's client passes a fence that closes when
leadership can no longer be proven (:mod:`gharc.kube.fence`). A monitor measures how late
the loop runs its timers (``gharc_event_loop_lag_seconds``) and names the work that held
it (:mod:`gharc.kube.looplag`).

Losing the lease stops the manager and makes :meth:`run` raise :class:`LeaderElectionLost`:
a process that is no longer leader must not keep reconciling on stale assumptions, and the
Deployment restarts it as a follower.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.heapfreeze import keep_heap_frozen
from gharc.kube.informer import Transform
from gharc.kube.leaderelection import LeaderElectionConfig, LeaderElector
from gharc.kube.leasekeeper import LeaseKeeper
from gharc.kube.looplag import LoopLagMonitor
from gharc.kube.reflector import WatchSettings
from gharc.kube.resources import Resource
from gharc.kube.serving import host_port

__all__ = ["LeaderElectionLost", "Manager", "ManagerLike", "Runnable"]

log = logging.getLogger(__name__)

Check = Callable[[], bool | Awaitable[bool]]


@runtime_checkable
class Runnable(Protocol):
    """Something the manager runs: ``start()`` runs until it has stopped; ``stop()`` asks it to."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class ManagerLike(Protocol):
    """What controllers' ``setup`` functions need from a manager: the shared cache, the
    client, ``add``. :class:`Manager` is one; tests may wire controllers onto a smaller
    stand-in with these three."""

    @property
    def cache(self) -> Cache: ...

    @property
    def client(self) -> KubeClient: ...

    def add(self, runnable: Any) -> None: ...


class LeaderElectionLost(RuntimeError):
    """This process was leader and no longer is."""


class Manager:
    """Usage::

        kube = await KubeClient.from_config()
        mgr = Manager(kube, namespace="arc-systems", metrics_address="0.0.0.0:8080",
                      health_address="0.0.0.0:8081",
                      leader_election=LeaderElectionConfig("gharc-controller", "arc-systems"))
        Builder(mgr).for_(EPHEMERAL_RUNNERS).owns(PODS).complete(reconciler)
        await mgr.run()          # until SIGTERM/SIGINT or mgr.stop()

    **Parameters:**

    * ``client`` - the writer and uncached reader (``mgr.api_reader``); ``mgr.cache`` is the
      cached reader built over it.
    * ``namespace``/``namespaces``/``label_selectors``/``watch_settings`` - passed to the Cache.
    * ``metrics_address``/``health_address`` - ``host:port`` for ``/metrics`` and for
      ``/healthz`` + ``/readyz``; port 0 picks a free port (see ``metrics_port``); ``None``
      disables the server. Both may be the same address (one server).
    * ``leader_election`` - a LeaderElectionConfig, or None to run everything at once.
    * ``graceful_shutdown_timeout`` - seconds in-flight work gets on stop (controller-runtime: 30).
    * ``handle_signals`` - install SIGTERM/SIGINT handlers while :meth:`run` runs.
    * ``freeze_heap`` - keep long-lived objects out of the cycle collector's full passes
      while :meth:`run` runs (:mod:`gharc.kube.heapfreeze`); for a process whose caches are
      large, such as the controller's.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str | None = None,
        namespaces: Sequence[str] = (),
        label_selectors: dict[Resource, str | tuple[str, ...]] | None = None,
        transforms: dict[Resource, Transform] | None = None,
        watch_settings: WatchSettings | None = None,
        metrics_address: str | None = None,
        health_address: str | None = None,
        leader_election: LeaderElectionConfig | None = None,
        graceful_shutdown_timeout: float = 30.0,
        cache_sync_timeout: float = 120.0,
        handle_signals: bool = True,
        registry: CollectorRegistry = REGISTRY,
        freeze_heap: bool = False,
    ) -> None:
        self.client = client
        self.cache = Cache(
            client,
            namespace=namespace,
            namespaces=namespaces,
            label_selectors=label_selectors,
            transforms=transforms,
            settings=watch_settings,
        )
        self.metrics_address = metrics_address
        self.health_address = health_address
        self.leader_election = leader_election
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.cache_sync_timeout = cache_sync_timeout
        self.handle_signals = handle_signals
        self.registry = registry
        self.keeper: LeaseKeeper | None = None
        """Holds the Lease from its own thread (:mod:`gharc.kube.leasekeeper`)."""
        self._lag = LoopLagMonitor()
        self._lag_task: asyncio.Task[None] | None = None
        self._freeze_heap = freeze_heap
        self._heap_task: asyncio.Task[None] | None = None
        self.metrics_port: int | None = None
        self.health_port: int | None = None
        self._runnables: list[Any] = []
        self._tasks: dict[Any, asyncio.Task[None]] = {}
        self._healthz: dict[str, Check] = {"ping": lambda: True}
        self._readyz: dict[str, Check] = {"cache-sync": lambda: self.cache.synced}
        self._stop = asyncio.Event()
        self._lost = False
        self._leading = asyncio.Event()
        self._ready = asyncio.Event()
        self._runners: list[web.AppRunner] = []

    @property
    def api_reader(self) -> KubeClient:
        """The uncached reader: for values that must not be read stale (B3's markers)."""
        return self.client

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def elector(self) -> LeaderElector | None:
        return self.keeper.elector if self.keeper is not None else None

    @property
    def runnables(self) -> tuple[Any, ...]:
        """Everything added so far, in order."""
        return tuple(self._runnables)

    @property
    def loop_lag(self) -> LoopLagMonitor:
        """The event loop's lag: its histogram and the work that held the loop longest."""
        return self._lag

    @property
    def leadership_lost(self) -> bool:
        """The manager is stopping because it lost its lease, not because it was told to:
        another replica may hold the lease already, so stop hooks must not give away what
        that replica now owns (``--release-sessions-on-stop``)."""
        return self._lost

    def add(self, runnable: Any) -> None:
        """Run ``runnable`` (``start``/``stop``; ``need_leader_election`` default True)."""
        if not isinstance(runnable, Runnable):
            raise TypeError(f"{runnable!r} has no async start()/stop()")
        self._runnables.append(runnable)
        if self._ready.is_set() and (
            not _needs_leader(runnable) or self.is_leader or not self.leader_election
        ):
            self._launch(runnable)

    async def wait_stopped(self, runnables: Any, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until each of ``runnables`` that runs has returned
        from ``start()``: a controller's ``stop()`` takes no more keys but lets in-flight
        reconciles finish, and a stop hook that undoes their writes must come after them."""
        tasks = [self._tasks[r] for r in runnables if r in self._tasks]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def add_healthz_check(self, name: str, check: Check) -> None:
        self._healthz[name] = check

    def add_readyz_check(self, name: str, check: Check) -> None:
        self._readyz[name] = check

    def stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._stop.set()

    async def wait_started(self, timeout: float | None = None) -> bool:
        """Wait until the cache synced and the non-leader runnables were launched."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def wait_leading(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self._leading.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- running -----------------------------------------------------------------------
    async def run(self) -> None:
        """Run until stopped; raises LeaderElectionLost if leadership was lost."""
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if self.handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self._on_signal, sig)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        lost = loop.create_future()
        keeper: LeaseKeeper | None = None
        try:
            await self._start_http()
            self._lag_task = loop.create_task(self._lag.run(), name="event-loop-lag")
            if self._freeze_heap:
                self._heap_task = loop.create_task(keep_heap_frozen(), name="heap-freeze")
            await self.cache.start()
            if not await self.cache.wait_for_sync(self.cache_sync_timeout):
                raise TimeoutError(f"cache not synced within {self.cache_sync_timeout} s")
            for runnable in self._runnables:
                if not _needs_leader(runnable) or not self.leader_election:
                    self._launch(runnable)
            if not self.leader_election:
                self._leading.set()
            self._ready.set()
            if self.leader_election:
                keeper = LeaseKeeper(
                    self.client,
                    self.leader_election,
                    self.client.fence,
                    on_started=self._on_started_leading,
                    on_lost=lambda: _settle(lost),
                )
                self.keeper = keeper
                keeper.start()
            stopper = loop.create_task(self._stop.wait())
            await asyncio.wait({stopper, lost}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if lost.done() and not self._stop.is_set():
                self._lost = True
                log.error("leader election lost; stopping the manager")
        finally:
            await self._shutdown(keeper)
            for sig in installed:
                loop.remove_signal_handler(sig)
        if self._lost:
            raise LeaderElectionLost(self.leader_election.name if self.leader_election else "")

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("received %s; shutting down", sig.name)
        self.stop()

    def _on_started_leading(self) -> None:
        self._leading.set()
        for runnable in self._runnables:
            if _needs_leader(runnable) and runnable not in self._tasks:
                self._launch(runnable)

    def _launch(self, runnable: Any) -> None:
        if runnable in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(
            self._run_one(runnable), name=f"runnable:{runnable!r}"
        )
        self._tasks[runnable] = task

    async def _run_one(self, runnable: Any) -> None:
        try:
            await runnable.start()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("runnable %r failed; stopping the manager", runnable)
            self.stop()

    async def _shutdown(self, keeper: LeaseKeeper | None) -> None:
        for runnable in self._tasks:
            with contextlib.suppress(Exception):
                await runnable.stop()
        tasks = list(self._tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.graceful_shutdown_timeout)
            if pending:
                log.warning(
                    "%d runnables did not stop in %.0f s; cancelling",
                    len(pending),
                    self.graceful_shutdown_timeout,
                )
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()
        if keeper is not None:
            # The keeper releases the lease after our runnables stopped (fence closed first).
            await keeper.stop()
        self._leading.clear()
        if self._lag_task is not None:
            self._lag_task.cancel()
            await asyncio.gather(self._lag_task, return_exceptions=True)
            self._lag_task = None
        if self._heap_task is not None:
            self._heap_task.cancel()
            await asyncio.gather(self._heap_task, return_exceptions=True)
            self._heap_task = None
        await self.cache.stop()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        self._ready.clear()

    # -- HTTP --------------------------------------------------------------------------
    async def _start_http(self) -> None:
        addresses: dict[str, list[str]] = {}
        if self.metrics_address:
            addresses.setdefault(self.metrics_address, []).append("metrics")
        if self.health_address:
            addresses.setdefault(self.health_address, []).append("health")
        for address, roles in addresses.items():
            app = web.Application()
            if "metrics" in roles:
                app.router.add_get("/metrics", self._metrics)
            if "health" in roles:
                app.router.add_get("/healthz", self._probe(self._healthz))
                app.router.add_get("/readyz", self._probe(self._readyz))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            sock = bind(address)
            await web.SockSite(runner, sock).start()
            self._runners.append(runner)
            port = int(sock.getsockname()[1])
            if "metrics" in roles:
                self.metrics_port = port
            if "health" in roles:
                self.health_port = port
            log.info("serving %s on %s:%d", "+".join(roles), sock.getsockname()[0], port)

    async def _metrics(self, request: web.Request) -> web.Response:
        # Rendered in a thread: at 1,000 scale sets the text is ~5,000 samples and ~0.1 s of
        # CPU, which on the loop held every tenant's reconciles and listeners for each scrape.
        # The metrics' own locks (and the collectors' copies) make that safe.
        body = await asyncio.to_thread(generate_latest, self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _probe(self, checks: dict[str, Check]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            failed = []
            for name, check in checks.items():
                try:
                    ok = check()
                    if not isinstance(ok, bool):
                        ok = await ok
                except Exception:
                    ok = False
                if not ok:
                    failed.append(name)
            if failed:
                return web.Response(status=503, text="failed: " + ",".join(failed) + "\n")
            return web.Response(text="ok\n")

        return handler


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _needs_leader(runnable: Any) -> bool:
    return bool(getattr(runnable, "need_leader_election", True))


def bind(address: str) -> socket.socket:
    """A listening socket for ``host:port`` (``:8080`` means all interfaces; port 0 picks a
    free one), bound before the server starts so a taken port fails the start-up, not later.
    Shared by the manager's metrics and probe servers and the webhook server."""
    host, port = host_port(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock
