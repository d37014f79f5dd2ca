"""The test world of the legacy Runner / RunnerDeployment / RunnerSet integration tests.

The session's real API server, the fake GitHub on 127.0.0.1, the legacy controllers under
real gharc.kube controllers, and the kubelet simulator running a *simulated legacy runner*
in each runner container: it registers itself in the fake GitHub under its pod name, can
be given a job (busy), and, when ephemeral, de-registers itself and exits after the job.
Timings are shortened through LegacyOptions; nothing else differs from production.

This control plane has no garbage collector and no StatefulSet controller (production
relies on both): a deleted Runner's pod and registration Secret stay behind, owned by a
Runner that is gone, and a RunnerSet's StatefulSets get no pods. So the tests here check
the controllers' own writes (which owner was deleted, what is owned by what) and leave
the cascades and the StatefulSets' pods to ``tests/realnode``, whose node has both.
:meth:`World.pods` hides the orphans the collector would delete.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNER_DEPLOYMENTS, RUNNER_REPLICA_SETS, RUNNER_SETS, RUNNERS
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.runnerset import STATEFUL_SETS
from gharc.controllers.legacy.setup import setup_legacy_controllers
from gharc.github.auth import PersonalAccessToken
from gharc.github.pool import ClientPool
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.resources import PODS
from testworld.setupmanager import SetupManager
from testworld.sim.github import DEFAULT_ORG, DEFAULT_TOKEN, FakeGitHubServer
from testworld.sim.github.state import Runner as FakeRunner
from testworld.sim.kubelet import ContainerContext, KubeletSimulator
from testworld.wait import eventually

JSON = dict[str, Any]
T = TypeVar("T")


async def until(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float, message: str, interval: float = 0.2
) -> T:
    """``eventually`` for probes that answer None (not yet) or the value waited for."""
    result = await eventually(probe, timeout=timeout, interval=interval, message=message)
    assert result is not None
    return result


class SimLegacyRunner:
    """What ``summerwind/actions-runner`` does, as far as the controllers can tell."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.finished = asyncio.Event()
        self.fake: FakeRunner | None = None

    async def run(self, ctx: ContainerContext) -> int:
        env = ctx.env
        self.world.programs[ctx.name] = self
        state = self.world.gh.state
        if self.world.register_runners:
            if env.get("RUNNER_REPO"):
                tenant = state.tenant_for("repo", env["RUNNER_REPO"])
            elif env.get("RUNNER_ORG"):
                tenant = state.tenant_for("org", env["RUNNER_ORG"])
            else:
                tenant = state.tenant_for("enterprise", env["RUNNER_ENTERPRISE"])
            labels = [x for x in env.get("RUNNER_LABELS", "").split(",") if x]
            self.fake = state.register_static_runner(tenant, ctx.name, labels)
            self.fake.ephemeral = env.get(c.ENV_RUNNER_EPHEMERAL) == "true"
        stop = asyncio.create_task(ctx.stop.wait())
        done = asyncio.create_task(self.finished.wait())
        await asyncio.wait({stop, done}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        done.cancel()
        if self.finished.is_set() and self.fake is not None and self.fake.ephemeral:
            state.runners.pop(self.fake.id, None)  # an ephemeral runner de-registers itself
        return 0

    def start_job(self) -> None:
        assert self.fake is not None
        self.fake.job = 1

    def finish_job(self) -> None:
        if self.fake is not None:
            self.fake.job = None
            if self.fake.ephemeral:
                self.finished.set()


def fast_options(gh: FakeGitHubServer, **overrides: Any) -> LegacyOptions:
    base: dict[str, Any] = {
        "github_url": gh.url,
        "credentials": PersonalAccessToken(DEFAULT_TOKEN),
        "runner_id_retry_delay": dt.timedelta(seconds=0.5),
        "unregistration_retry_delay": dt.timedelta(seconds=0.5),
        "short_requeue": dt.timedelta(seconds=0.3),
    }
    base.update(overrides)
    return LegacyOptions(**base)


@dataclass
class World:
    kube: KubeClient
    gh: FakeGitHubServer
    api: Any
    namespace: str
    options: LegacyOptions
    pool: ClientPool = field(default_factory=ClientPool)
    programs: dict[str, SimLegacyRunner] = field(default_factory=dict)
    register_runners: bool = True
    cache: Cache | None = None
    kubelet: KubeletSimulator | None = None
    controllers: list[Controller] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        self.cache = Cache(self.kube, namespace=self.namespace)
        manager = SetupManager(self.kube, self.cache)
        setup_legacy_controllers(manager, LegacyDeps.of(self.options, self.pool, self.kube))
        await self.cache.start()
        self.controllers = manager.runnables
        self.tasks = [asyncio.create_task(ctl.start()) for ctl in self.controllers]
        for ctl in self.controllers:
            assert await ctl.wait_started(30), ctl

        def program(pod: JSON, container: JSON) -> SimLegacyRunner | None:
            return SimLegacyRunner(self) if container.get("name") == c.CONTAINER_RUNNER else None

        self.kubelet = KubeletSimulator(self.api, programs=[program], namespaces=[self.namespace])
        await self.kubelet.start()

    async def stop(self) -> None:
        if self.kubelet is not None:
            await self.kubelet.stop()
        for ctl in self.controllers:
            await ctl.stop()
        for task in self.tasks:
            try:
                await asyncio.wait_for(task, 10)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
        if self.cache is not None:
            await self.cache.stop()
        await self.pool.aclose()

    # -- objects -------------------------------------------------------------------------

    async def create_deployment(
        self, name: str = "rd", *, replicas: int = 2, **runner_spec: Any
    ) -> JSON:
        spec = {"organization": DEFAULT_ORG, "labels": ["linux"], **runner_spec}
        body = {
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"replicas": replicas, "template": {"spec": spec}},
        }
        return await self.kube.create(RUNNER_DEPLOYMENTS, body)

    async def scale_deployment(self, replicas: int, name: str = "rd") -> None:
        await self.kube.merge_patch(
            RUNNER_DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace=self.namespace
        )

    async def objects(self, resource: Any, *, live_only: bool = True) -> list[JSON]:
        items = await self.kube.list(resource, namespace=self.namespace)
        if live_only:
            items = [i for i in items if not i["metadata"].get("deletionTimestamp")]
        return sorted(
            items, key=lambda i: (i["metadata"]["creationTimestamp"], i["metadata"]["name"])
        )

    async def runners(self) -> list[JSON]:
        return await self.objects(RUNNERS)

    async def pods(self, *, live_only: bool = True) -> list[JSON]:
        """With ``live_only``: not being deleted and not orphaned, i.e. without the pods
        whose Runner is gone, which a real cluster's garbage collector would delete."""
        pods = await self.objects(PODS, live_only=live_only)
        if not live_only:
            return pods
        uids = {r["metadata"]["uid"] for r in await self.objects(RUNNERS, live_only=False)}
        return [x for x in pods if not self.runner_owner_gone(x, uids)]

    @staticmethod
    def runner_owner_gone(obj: JSON, runner_uids: set[str]) -> bool:
        """``obj`` is controlled by a Runner that no longer exists."""
        return any(
            o.get("kind") == c.KIND_RUNNER and o.get("uid") not in runner_uids
            for o in obj["metadata"].get("ownerReferences") or ()
        )

    async def orphaned(self, resource: Any, name: str, runner: JSON) -> bool:
        """``name`` still exists, owned by ``runner`` (deleted): the garbage collector's
        to delete, which tests/realnode checks on a real cluster."""
        objs = [x for x in await self.objects(resource) if x["metadata"]["name"] == name]
        if len(objs) != 1:
            return False
        owners = objs[0]["metadata"].get("ownerReferences") or []
        uids = {r["metadata"]["uid"] for r in await self.objects(RUNNERS, live_only=False)}
        return [o.get("uid") for o in owners] == [runner["metadata"]["uid"]] and (
            self.runner_owner_gone(objs[0], uids)
        )

    async def replica_sets(self) -> list[JSON]:
        return await self.objects(RUNNER_REPLICA_SETS, live_only=False)

    async def stateful_sets(self) -> list[JSON]:
        return await self.objects(STATEFUL_SETS)

    async def runner_sets(self) -> list[JSON]:
        return await self.objects(RUNNER_SETS)

    async def wait_registered(self, n: int, timeout: float = 60.0) -> list[JSON]:
        """``n`` live runner pods, each annotated with its GitHub runner ID."""

        async def probe() -> list[JSON] | None:
            pods = await self.pods()
            done = [
                x
                for x in pods
                if c.ANNOTATION_RUNNER_ID in (x["metadata"].get("annotations") or {})
            ]
            return pods if len(pods) == n and len(done) == n else None

        return await until(probe, timeout=timeout, message=f"{n} registered pods")

    def remove_calls(self, status: int | None = None) -> int:
        return self.gh.calls("*/actions/runners/{runner_id}", method="DELETE", status=status)

    def list_calls(self) -> int:
        return self.gh.calls("*/actions/runners", method="GET")


async def world_fixture(
    kubeconfig: str, namespace: str, api: Any, **options: Any
) -> AsyncIterator[World]:
    gh = FakeGitHubServer(rest_max_age=options.pop("rest_max_age", 1))
    await gh.start()
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    world = World(kube, gh, api, namespace, fast_options(gh, **options))
    await world.start()
    try:
        yield world
    finally:
        await world.stop()
        await kube.close()
        await gh.stop()
