"""The HRA test world: the real API server, the fake GitHub, and the HRA controller running
under a real gharc.kube controller and cache. No runner controllers run: the tests create
Runner objects and GitHub runners themselves, and read the RunnerDeployment's replicas
as the HRA wrote them."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gharc.api.legacy import constants as lc
from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNERS
from gharc.controllers.legacy import hra
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.options import LegacyOptions
from gharc.github.auth import PersonalAccessToken
from gharc.github.pool import ClientPool
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from testworld.setupmanager import SetupManager
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer
from testworld.wait import eventually

JSON = dict[str, Any]


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class MemoryRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record(self, obj: Any, type: str, reason: str, message: str) -> None:
        self.events.append((str(obj["metadata"]["name"]), type, reason, message))


@dataclass
class HRAWorld:
    kube: KubeClient
    gh: FakeGitHubServer
    namespace: str
    clock: Callable[[], dt.datetime] | None = None
    pool: ClientPool = field(default_factory=ClientPool)
    recorder: MemoryRecorder = field(default_factory=MemoryRecorder)
    cache: Cache | None = None
    controller: Controller | None = None
    task: asyncio.Task[None] | None = None

    async def start(self, *, sync_period: float = 30.0) -> None:
        self.cache = Cache(self.kube, namespace=self.namespace)
        manager = SetupManager(self.kube, self.cache)
        kw: dict[str, Any] = {"clock": self.clock} if self.clock else {}
        options = LegacyOptions(
            github_url=self.gh.url,
            credentials=PersonalAccessToken(self.gh.token),
            sync_period=sync_period,
            **kw,
        )
        deps = LegacyDeps.of(options, self.pool, self.kube, recorder=self.recorder)
        self.controller = hra.setup(manager, deps)
        await self.cache.start()
        self.task = asyncio.create_task(self.controller.start())
        assert await self.controller.wait_started(30)

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        if self.task is not None:
            try:
                await asyncio.wait_for(self.task, 10)
            except (TimeoutError, asyncio.CancelledError):
                self.task.cancel()
        if self.cache is not None:
            await self.cache.stop()
        await self.pool.aclose()

    # ---- objects ------------------------------------------------------------------------

    async def create_rd(
        self,
        name: str = "rd",
        *,
        replicas: int | None = None,
        labels: list[str] | None = None,
        repository: str = DEFAULT_REPO,
        ephemeral: bool | None = None,
    ) -> JSON:
        runner: JSON = {"repository": repository, "labels": labels or ["linux"]}
        if ephemeral is not None:
            runner["ephemeral"] = ephemeral
        spec: JSON = {"template": {"spec": runner}}
        if replicas is not None:
            spec["replicas"] = replicas
        return await self.kube.create(
            RUNNER_DEPLOYMENTS,
            {
                "apiVersion": lc.API_VERSION,
                "kind": lc.KIND_RUNNER_DEPLOYMENT,
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": spec,
            },
        )

    async def create_hra(self, name: str = "hra", target: str = "rd", **spec: Any) -> JSON:
        body = {"scaleTargetRef": {"kind": "RunnerDeployment", "name": target}, **spec}
        return await self.kube.create(
            HORIZONTAL_RUNNER_AUTOSCALERS,
            {
                "apiVersion": lc.API_VERSION,
                "kind": lc.KIND_HORIZONTAL_RUNNER_AUTOSCALER,
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": body,
            },
        )

    async def create_runner(self, name: str, rd: str = "rd") -> JSON:
        return await self.kube.create(
            RUNNERS,
            {
                "apiVersion": lc.API_VERSION,
                "kind": lc.KIND_RUNNER,
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": {lc.LABEL_RUNNER_DEPLOYMENT_NAME: rd},
                },
                "spec": {"repository": DEFAULT_REPO, "labels": ["linux"]},
            },
        )

    async def rd(self, name: str = "rd") -> JSON:
        return await self.kube.get(RUNNER_DEPLOYMENTS, name, namespace=self.namespace)

    async def hra(self, name: str = "hra") -> JSON:
        return await self.kube.get(HORIZONTAL_RUNNER_AUTOSCALERS, name, namespace=self.namespace)

    async def wait_replicas(self, want: int, name: str = "rd", timeout: float = 20.0) -> JSON:
        async def probe() -> JSON | None:
            obj = await self.rd(name)
            return obj if (obj.get("spec") or {}).get("replicas") == want else None

        return await eventually(probe, timeout=timeout, message=f"{name}.spec.replicas == {want}")
