"""``FakeGitHubServer``: the aiohttp app plus a Python harness for async tests.

    async with FakeGitHubServer(port=0, poll_timeout=1.0) as gh:
        client = ActionsClient(parse_config_url(gh.config_url()), PersonalAccessToken(gh.token))
        job = gh.enqueue_job("octo-org/app", ["my-set"])
        assert gh.calls("*/runnerscalesets/{scale_set_id}/sessions", method="POST") == 1

The default world: enterprise ``octo-enterprise`` holding org ``octo-org`` with repo
``octo-org/octo-repo``, and a PAT (:attr:`token`) that can reach all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import socket
import warnings
from collections import Counter
from typing import Any

from aiohttp import web

from testworld.sim.github import routes_actions, routes_control, routes_rest, routes_runner
from testworld.sim.github.faults import Fault, FaultTable
from testworld.sim.github.http import (
    CALLS_KEY,
    FAULTS_KEY,
    STATE_KEY,
    SlashTolerantRouter,
    error_middleware,
    headers_middleware,
)
from testworld.sim.github.state import FakeGitHubState, Job

log = logging.getLogger("testworld.sim.github")

DEFAULT_ENTERPRISE = "octo-enterprise"
DEFAULT_ORG = "octo-org"
DEFAULT_REPO = "octo-org/octo-repo"
DEFAULT_TOKEN = "ghp_gharcFakeDefaultToken0000000000000000"


def make_app(state: FakeGitHubState, faults: FaultTable | None = None) -> web.Application:
    with warnings.catch_warnings():
        # NB: aiohttp 3 deprecates passing a router (pinned <4); a middleware runs only
        # after routing, and redirecting instead would not be what the service does.
        warnings.simplefilter("ignore", DeprecationWarning)
        app = web.Application(
            router=SlashTolerantRouter(), middlewares=[headers_middleware, error_middleware]
        )
    app[STATE_KEY] = state
    app[FAULTS_KEY] = faults or FaultTable()
    app[CALLS_KEY] = Counter()
    routes_rest.add_routes(app)
    routes_actions.add_routes(app)
    routes_runner.add_routes(app)
    routes_control.add_routes(app)
    return app


class FakeGitHubServer:
    """Runs the fake on 127.0.0.1; ``port=0`` picks a free port."""

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        poll_timeout: float = 50.0,
        runner_poll_timeout: float | None = None,
        rest_max_age: int = 60,
        state: FakeGitHubState | None = None,
        default_world: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.state = state or FakeGitHubState()
        self.state.poll_timeout = poll_timeout
        self.state.runner_poll_timeout = (
            runner_poll_timeout if runner_poll_timeout is not None else poll_timeout
        )
        self.state.rest_max_age = rest_max_age
        self.faults = FaultTable()
        self.app = make_app(self.state, self.faults)
        self._runner: web.AppRunner | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.sweep_interval = 1.0
        """How often the service's timers run (``FakeGitHubState.sweep``), seconds."""
        self.token = DEFAULT_TOKEN
        if default_world:
            self.state.create_org(DEFAULT_ORG, DEFAULT_ENTERPRISE)
            self.state.create_repo(DEFAULT_REPO)
            self.state.create_pat(DEFAULT_TOKEN)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def config_url(self, org: str = DEFAULT_ORG, repo: str | None = None) -> str:
        return f"{self.url}/{org}/{repo}" if repo else f"{self.url}/{org}"

    def enterprise_config_url(self, enterprise: str = DEFAULT_ENTERPRISE) -> str:
        return f"{self.url}/enterprises/{enterprise}"

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock)
        await site.start()
        self.state.base_url = self.url
        self._sweeper = asyncio.create_task(self._sweep(), name="fake-github-sweeper")

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                self.state.sweep()
            except Exception:
                log.exception("fake GitHub timers failed")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeGitHubServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- Python API -----------------------------------------------------------------------

    def enqueue_job(self, repo: str, labels: list[str], **kwargs: Any) -> Job:
        return self.state.enqueue_job(repo, labels, **kwargs)

    def cancel_job(self, request_id: int) -> Job:
        return self.state.cancel_job(request_id)

    def add_fault(self, kind: str = "status", **kwargs: Any) -> Fault:
        """See :class:`FaultTable.add`; ``seconds=`` makes it time-limited."""
        seconds = kwargs.pop("seconds", None)
        if seconds is not None:
            kwargs["until"] = self.state.now() + seconds
        return self.faults.add(kind, **kwargs)

    def clear_faults(self) -> None:
        self.faults.clear()

    def calls(
        self, route: str = "*", *, method: str | None = None, status: int | None = None
    ) -> int:
        """How many requests matched (route is an fnmatch pattern on the route template)."""
        return sum(
            n
            for (m, r, s), n in self.app[CALLS_KEY].items()
            if fnmatch.fnmatchcase(r, route)
            and (method is None or m == method.upper())
            and (status is None or s == status)
        )

    def call_table(self) -> dict[tuple[str, str, int], int]:
        counts: Counter[tuple[str, str, int]] = self.app[CALLS_KEY]
        return dict(counts.items())

    def reset_calls(self) -> None:
        self.app[CALLS_KEY].clear()
