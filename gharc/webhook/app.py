"""The webhook server process: a manager whose cache keeps HRAs and their targets warm,
the HTTP endpoint, the batch scaler behind it and the queued-job poll (legacy.md 5.1).

:class:`WebhookServer` is a manager runnable (no leader election: every replica serves
deliveries, and the optimistic lock in the batch scaler keeps concurrent replicas from
losing each other's reservations). Stopping drains: the listening socket closes, the batch
window is cut short, and every request in flight is answered once its reservation is
stored, before the process exits.

Connections are bounded in time: aiohttp's keep-alive timer (set to ``read_timeout``) also
closes a connection that has not sent a complete request head within that time, and the
body read has its own deadline (:mod:`gharc.webhook.body`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from aiohttp import web

from gharc.kube.client import KubeClient, Reader
from gharc.kube.manager import bind
from gharc.webhook.batch import BatchScaler
from gharc.webhook.body import READ_TIMEOUT, BodyLimits, BodyReader
from gharc.webhook.clients import OwnerClients
from gharc.webhook.dedup import DeliveryWindow
from gharc.webhook.jobmetrics import WorkflowJobMetrics
from gharc.webhook.lookup import (
    CUSTOM,
    DEFAULT,
    ENTERPRISE,
    ORGANIZATION,
    RunnerGroup,
    TargetLookup,
    VisibleGroups,
)
from gharc.webhook.poller import POLL_INTERVAL, QueuedJobPoller, SeenRepos
from gharc.webhook.server import ACK_TIMEOUT, WebhookHandler, WebhookMetrics, make_app
from gharc.webhook.settings import WebhookSettings

log = logging.getLogger("gharc.webhook")


def github_visibility(clients: OwnerClients) -> VisibleGroups:
    """Runner groups visible to a repository, from ``GET /orgs/{o}/actions/runner-groups
    ?visible_to_repository=<repo>`` (cached per Cache-Control/ETag by the REST client)."""

    async def visible(owner: str, repo: str) -> Sequence[RunnerGroup]:
        groups = await clients.runner_groups(owner, repo)
        return [
            RunnerGroup(
                DEFAULT if g.default else CUSTOM,
                ENTERPRISE if g.inherited else ORGANIZATION,
                "" if g.default else g.name,
            )
            for g in groups
        ]

    return visible


LINGER = 1.0


class WebhookServer:
    """Serves deliveries on ``address`` until :meth:`stop`; ``port`` is set once bound."""

    need_leader_election = False

    def __init__(
        self,
        client: KubeClient,
        reader: Reader,
        *,
        address: str = WebhookSettings.webhook_addr,
        secret: str = "",
        namespace: str | None = None,
        queue_limit: int = WebhookSettings.queue_limit,
        batch_window: float = WebhookSettings.batch_window,
        visible_groups: VisibleGroups | None = None,
        metrics: WebhookMetrics | None = None,
        body_limits: BodyLimits | None = None,
        ack_timeout: float = ACK_TIMEOUT,
        github: OwnerClients | None = None,
        poll_interval: float = POLL_INTERVAL,
        shutdown_timeout: float = 20.0,
        job_metrics: WorkflowJobMetrics | None = None,
        scaling: bool = True,
    ) -> None:
        self.address = address
        self.scaler = BatchScaler(client, queue_limit=queue_limit, window=batch_window)
        self.lookup = TargetLookup(reader, namespace=namespace, visible_groups=visible_groups)
        self.limits = body_limits or BodyLimits()
        self.seen = SeenRepos()
        self.handler = WebhookHandler(
            self.lookup,
            self.scaler,
            secret=secret,
            metrics=metrics,
            body=BodyReader(self.limits),
            deliveries=DeliveryWindow(),
            ack_timeout=ack_timeout,
            on_job=self.seen.record,
            job_metrics=job_metrics,
            scaling=scaling,
        )
        self.poller: QueuedJobPoller | None = None
        if scaling and github is not None and poll_interval > 0:
            self.poller = QueuedJobPoller(
                self.lookup,
                self.scaler,
                github,
                interval=poll_interval,
                seen=self.seen,
                on_reserved=metrics.poll_reservations.inc if metrics is not None else None,
            )
        self.shutdown_timeout = shutdown_timeout
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self.started = asyncio.Event()

    async def start(self) -> None:
        self._runner = web.AppRunner(
            make_app(self.handler),
            access_log=None,
            keepalive_timeout=self.limits.timeout or READ_TIMEOUT,
            # after an early answer (401, 408, 413) aiohttp reads and drops the rest of the
            # body for this long; a short time keeps a refused sender from holding on
            lingering_time=LINGER,
            shutdown_timeout=self.shutdown_timeout,
        )
        await self._runner.setup()
        sock = bind(self.address)
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.scaler.run(), name="batch"))
        if self.poller is not None:
            self._tasks.append(loop.create_task(self.poller.run(), name="queued-job-poll"))
        log.info("webhook server listening on %s (port %d)", self.address, self.port)
        self.started.set()
        await self._stopped.wait()

    async def stop(self) -> None:
        """Drain: stop accepting, store what in-flight requests submitted, answer them."""
        self._stopped.set()
        self.scaler.hurry()
        if self._runner is not None:
            await self._runner.cleanup()  # closes the socket, waits for in-flight handlers
            self._runner = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    def __repr__(self) -> str:
        return f"WebhookServer({self.address!r})"
