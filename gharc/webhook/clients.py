"""GitHub REST clients of the webhook server: one per repository owner, a bounded number.

Owners come from payloads (an enterprise hook delivers for every organization in it), so
clients are kept in least-recently-used order and the oldest is closed beyond ``capacity``.
Before, one client per ``owner/repo`` seen was kept for the life of the process. One client
per owner serves every repository of it: the calls take the repository as an argument, and
an organization-scoped client shares one installation token and connection pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from gharc.github.auth import Credentials
from gharc.github.cache import MemoryStorage
from gharc.github.config import parse_config_url
from gharc.github.models import RestRunnerGroup, WorkflowJob, WorkflowRun
from gharc.github.rest import RestClient

log = logging.getLogger(__name__)

CAPACITY = 16

Factory = Callable[[str], RestClient]


class OwnerClients:
    """At most ``capacity`` :class:`RestClient` instances, keyed by owner login."""

    def __init__(
        self,
        server_url: str,
        credentials: Credentials,
        *,
        capacity: int = CAPACITY,
        factory: Factory | None = None,
    ) -> None:
        self.server_url = server_url.rstrip("/")
        self.credentials = credentials
        self.capacity = capacity
        self._cache = MemoryStorage()
        self._factory = factory or self._new
        self._clients: OrderedDict[str, RestClient] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._clients)

    def _new(self, owner: str) -> RestClient:
        config = parse_config_url(f"{self.server_url}/{owner}")
        return RestClient(config, self.credentials, cache=self._cache)

    def get(self, owner: str) -> RestClient:
        client = self._clients.get(owner)
        if client is None:
            client = self._clients[owner] = self._factory(owner)
        self._clients.move_to_end(owner)
        while len(self._clients) > self.capacity:
            _, old = self._clients.popitem(last=False)
            task = asyncio.get_running_loop().create_task(old.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            with contextlib.suppress(Exception):
                await client.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    # ---- the calls the webhook server makes -------------------------------------------

    async def runner_groups(self, owner: str, repo: str) -> list[RestRunnerGroup]:
        """``GET /orgs/{owner}/actions/runner-groups?visible_to_repository=<repo>``."""
        client = self.get(owner)
        path, endpoint = f"/orgs/{owner}/actions/runner-groups", "/orgs/{org}/actions/runner-groups"
        groups: list[RestRunnerGroup] = []
        page = 1
        while True:
            params: dict[str, Any] = {"visible_to_repository": repo, "per_page": 100, "page": page}
            response = await client.request("GET", path, endpoint=endpoint, params=params)
            chunk: Sequence[Any] = response.json().get("runner_groups") or []
            groups.extend(RestRunnerGroup.model_validate(g) for g in chunk)
            more = "next" in response.links if "link" in response.headers else len(chunk) == 100
            if not chunk or not more:
                return groups
            page += 1

    async def workflow_runs(self, owner: str, repo: str, status: str) -> list[WorkflowRun]:
        return await self.get(owner).list_workflow_runs(owner, repo, status, fresh=True)

    async def workflow_jobs(self, owner: str, repo: str, run_id: int) -> list[WorkflowJob]:
        return await self.get(owner).list_workflow_jobs(owner, repo, run_id, fresh=True)
