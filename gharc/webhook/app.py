"""The webhook server process: a manager whose cache keeps HRAs and their targets warm,
the HTTP endpoint, and the batch scaler behind it (legacy.md 5.1).

:class:`WebhookServer` is a manager runnable (no leader election: every replica serves
deliveries, and the optimistic lock in the batch scaler keeps concurrent replicas from
losing each other's reservations).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Sequence

from aiohttp import web

from gharc.github.auth import Credentials
from gharc.github.pool import ClientPool
from gharc.kube.client import KubeClient, Reader
from gharc.webhook.batch import BatchScaler
from gharc.webhook.lookup import (
    CUSTOM,
    DEFAULT,
    ENTERPRISE,
    ORGANIZATION,
    RunnerGroup,
    TargetLookup,
    VisibleGroups,
)
from gharc.webhook.server import WebhookHandler, WebhookMetrics, make_app

log = logging.getLogger("gharc.webhook")


def github_visibility(pool: ClientPool, server_url: str, credentials: Credentials) -> VisibleGroups:
    """Runner groups visible to a repository, from ``GET /orgs/{o}/actions/runner-groups
    ?visible_to_repository=<repo>`` (cached per Cache-Control/ETag by the REST client)."""

    async def visible(owner: str, repo: str) -> Sequence[RunnerGroup]:
        client = pool.get_rest(f"{server_url.rstrip('/')}/{owner}/{repo}", credentials)
        groups = await client.list_runner_groups()
        return [
            RunnerGroup(
                DEFAULT if g.default else CUSTOM,
                ENTERPRISE if g.inherited else ORGANIZATION,
                "" if g.default else g.name,
            )
            for g in groups
        ]

    return visible


def bind(address: str) -> socket.socket:
    """A listening socket for ``host:port`` (``:8000`` means all interfaces; port 0 picks)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port or 0)))
    sock.listen(128)
    sock.setblocking(False)
    return sock


class WebhookServer:
    """Serves deliveries on ``address`` until :meth:`stop`; ``port`` is set once bound."""

    need_leader_election = False

    def __init__(
        self,
        client: KubeClient,
        reader: Reader,
        *,
        address: str = ":8000",
        secret: str = "",
        namespace: str | None = None,
        queue_limit: int = 100,
        batch_window: float = 3.0,
        visible_groups: VisibleGroups | None = None,
        metrics: WebhookMetrics | None = None,
    ) -> None:
        self.address = address
        self.scaler = BatchScaler(client, queue_limit=queue_limit, window=batch_window)
        self.lookup = TargetLookup(reader, namespace=namespace, visible_groups=visible_groups)
        self.handler = WebhookHandler(self.lookup, self.scaler, secret=secret, metrics=metrics)
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self.started = asyncio.Event()

    async def start(self) -> None:
        self._runner = web.AppRunner(make_app(self.handler), access_log=None)
        await self._runner.setup()
        sock = bind(self.address)
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        self._task = asyncio.get_running_loop().create_task(self.scaler.run(), name="batch")
        log.info("webhook server listening on %s (port %d)", self.address, self.port)
        self.started.set()
        await self._stopped.wait()

    async def stop(self) -> None:
        self._stopped.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def __repr__(self) -> str:
        return f"WebhookServer({self.address!r})"
