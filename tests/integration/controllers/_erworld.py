"""The test world of the EphemeralRunnerSet / EphemeralRunner integration tests.

A real API server (the session control plane), the fake GitHub on 127.0.0.1, and the two
reconcilers running under real gharc.kube controllers and a shared cache. There is no
kubelet: the tests play it by patching pod status, and play the listener by patching the
EphemeralRunnerSet's ``replicas``/``patchID`` and the runners' job fields.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset import ephemeralrunner, ephemeralrunnerset, orphans
from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.metrics import ControllerMetrics
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.github.breaker import BreakerRegistry
from gharc.github.pool import ClientPool
from gharc.github.transport import CONTROLLER_RETRY
from gharc.kube import objects
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.resources import PODS, SECRETS
from testworld.setupmanager import SetupManager
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer, Job, ScaleSet
from testworld.wait import eventually

JSON = dict[str, Any]

#: Short ladder: the same shape as production (index = failures so far), in tenths.
FAST_BACKOFF = (0.0, 0.3, 0.3, 0.3, 0.3, 0.3)
SECRET_NAME = "github-config"


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def runner_template(env: list[JSON] | None = None, image: str = "runner:1") -> JSON:
    container: JSON = {"name": "runner", "image": image, "command": ["/home/runner/run.sh"]}
    if env is not None:
        container["env"] = env
    return {
        "metadata": {"labels": {"app": "runner"}},
        "spec": {"containers": [container], "restartPolicy": "Never"},
    }


class MemoryRecorder:
    """Events kept in memory (the tests assert on reasons)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        self.events.append((str((obj.get("metadata") or {}).get("name")), type, reason, message))

    def reasons(self, name: str | None = None) -> list[str]:
        return [r for n, _, r, _ in self.events if name is None or n == name]

    async def seen(self, reason: str, name: str | None = None, timeout: float = 10) -> None:
        """Wait for an event: controllers send it after the change a test waits on."""
        await eventually(
            lambda: reason in self.reasons(name),
            timeout=timeout,
            message=f"a {reason} event" + (f" on {name}" if name else ""),
        )


@dataclass
class World:
    kube: KubeClient
    gh: FakeGitHubServer
    namespace: str
    scale_set: ScaleSet
    options: ScaleSetOptions
    recorder: MemoryRecorder = field(default_factory=MemoryRecorder)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    metrics: ControllerMetrics | None = None
    pool: ClientPool = field(
        # As the controller builds it: requeue on long rate limits, one breaker per host.
        default_factory=lambda: ClientPool(retry=CONTROLLER_RETRY, breakers=BreakerRegistry())
    )
    cache: Cache | None = None
    controllers: list[Controller] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    # -- controllers -----------------------------------------------------------------------
    async def start(self) -> None:
        self.cache = Cache(self.kube, namespace=self.namespace)
        manager = SetupManager(self.kube, self.cache)
        resolver = ClientResolver(self.kube, self.pool)
        if self.metrics is None:
            self.metrics = ControllerMetrics(self.registry)
        deps = ScaleSetDeps(self.options, resolver, metrics=self.metrics, recorder=self.recorder)
        ephemeralrunnerset.setup(manager, deps)
        ephemeralrunner.setup(manager, deps)
        await self.cache.start()
        self.controllers = manager.runnables
        self.tasks = [asyncio.create_task(ctl.start()) for ctl in self.controllers]
        for ctl in self.controllers:
            assert await ctl.wait_started(30), ctl

    async def stop(self, *, crash: bool = False) -> None:
        """Stop the controllers; ``crash`` cancels in-flight reconciles where they are,
        as a killed process would leave them."""
        for ctl in self.controllers:
            await ctl.stop()
        for task in self.tasks:
            if crash:
                task.cancel()
            try:
                await asyncio.wait_for(task, 10)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
        if self.cache is not None:
            await self.cache.stop()
        self.controllers, self.tasks, self.cache = [], [], None

    # -- the EphemeralRunnerSet --------------------------------------------------------------
    def runner_spec(self, template: JSON | None = None) -> JSON:
        spec = dict(template or runner_template())
        spec.update(
            {
                "githubConfigUrl": self.gh.config_url(),
                "githubConfigSecret": SECRET_NAME,
                "runnerScaleSetId": self.scale_set.id,
            }
        )
        return spec

    async def create_ers(
        self,
        name: str = "set",
        *,
        replicas: int = 0,
        patch_id: int = 0,
        template: JSON | None = None,
        revision: int = 0,
    ) -> JSON:
        body = {
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    c.LABEL_SCALE_SET_NAME: name,
                    c.LABEL_SCALE_SET_NAMESPACE: self.namespace,
                },
            },
            "spec": {
                "replicas": replicas,
                "patchID": patch_id,
                "actionableRevision": revision,
                "ephemeralRunnerSpec": self.runner_spec(template),
            },
        }
        ers = await self.kube.create(EPHEMERAL_RUNNER_SETS, body)
        if revision:
            await self.kube.patch_status(
                EPHEMERAL_RUNNER_SETS, ers, {"status": {"appliedActionableRevision": revision}}
            )
        return ers

    async def scale(self, replicas: int, patch_id: int, name: str = "set") -> None:
        """What the listener does: one merge patch of replicas + patchID."""
        await self.kube.merge_patch(
            EPHEMERAL_RUNNER_SETS,
            name,
            {"spec": {"replicas": replicas, "patchID": patch_id}},
            namespace=self.namespace,
        )

    async def ers(self, name: str = "set") -> JSON:
        return await self.kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=self.namespace)

    # -- runners -----------------------------------------------------------------------------
    async def runners(self, *, include_deleting: bool = False) -> list[JSON]:
        items = await self.kube.list(EPHEMERAL_RUNNERS, namespace=self.namespace)
        if include_deleting:
            return items
        return [r for r in items if not r["metadata"].get("deletionTimestamp")]

    async def runner(self, name: str) -> JSON:
        return await self.kube.get(EPHEMERAL_RUNNERS, name, namespace=self.namespace)

    async def pods(self) -> list[JSON]:
        return await self.kube.list(PODS, namespace=self.namespace)

    async def secrets(self) -> list[JSON]:
        items = await self.kube.list(SECRETS, namespace=self.namespace)
        return [s for s in items if s["metadata"]["name"] != SECRET_NAME]

    async def wait_runners(
        self, count: int, *, registered: bool = True, timeout: float = 30
    ) -> list[JSON]:
        """``count`` live runners, each with a pod (and a runner id when ``registered``)."""

        async def probe() -> list[JSON] | None:
            runners = await self.runners(include_deleting=True)
            if len(runners) != count or any(
                r["metadata"].get("deletionTimestamp") for r in runners
            ):
                return None
            if registered and any(not (r.get("status") or {}).get("runnerId") for r in runners):
                return None
            pods = {p["metadata"]["name"] for p in await self.pods()}
            if registered and any(r["metadata"]["name"] not in pods for r in runners):
                return None
            return runners or [{}]

        result = await eventually(probe, timeout=timeout, message=f"{count} runners")
        return [r for r in result or [] if r]

    async def pod_status(self, name: str, status: JSON) -> JSON:
        """Play the kubelet: write a pod's status."""
        return await self.kube.patch_status(
            PODS, name, {"status": status}, namespace=self.namespace
        )

    async def run_pod(self, name: str) -> JSON:
        return await self.pod_status(
            name,
            {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()}],
                "containerStatuses": [
                    {
                        "name": "runner",
                        "ready": True,
                        "restartCount": 0,
                        "image": "runner:1",
                        "imageID": "",
                        "state": {"running": {"startedAt": now()}},
                    }
                ],
            },
        )

    async def exit_pod(self, name: str, code: int) -> JSON:
        return await self.pod_status(
            name,
            {
                "phase": "Succeeded" if code == 0 else "Failed",
                "containerStatuses": [
                    {
                        "name": "runner",
                        "ready": False,
                        "restartCount": 0,
                        "image": "runner:1",
                        "imageID": "",
                        "state": {
                            "terminated": {
                                "exitCode": code,
                                "reason": "Completed" if code == 0 else "Error",
                                "startedAt": now(),
                                "finishedAt": now(),
                            }
                        },
                    }
                ],
            },
        )

    async def evict_pod(self, name: str) -> JSON:
        return await self.pod_status(
            name,
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
            },
        )

    # -- GitHub ------------------------------------------------------------------------------
    def registered(self) -> set[int]:
        return {r.id for r in self.gh.state.runners.values() if r.scale_set_id == self.scale_set.id}

    async def take_job(self, er: JSON, *, duration: float = 0.0) -> Job:
        """A job lands on ``er``'s runner, and the listener records it (JobStarted)."""
        st = self.gh.state
        job = st.enqueue_job(DEFAULT_REPO, list(self.scale_set.labels), duration=duration)
        st.acquire_jobs(self.scale_set, [job.request_id])
        runner = st.runners[int(er["status"]["runnerId"])]
        job.runner_id, job.runner_name = runner.id, runner.name
        runner.job = job.request_id
        st.job_started(runner, job.request_id)
        await self.kube.patch_status(
            EPHEMERAL_RUNNERS,
            er["metadata"]["name"],
            {"status": {"jobId": job.job_id, "jobRequestId": job.request_id}},
            namespace=self.namespace,
        )
        return job

    def complete_job(self, job: Job) -> None:
        """The runner finishes its job; GitHub de-registers the ephemeral runner."""
        st = self.gh.state
        runner = st.runners[int(job.runner_id or 0)]
        st.job_completed(runner, job.request_id, "succeeded")

    def gauge(self, name: str, scale_set: str = "set") -> float | None:
        return self.registry.get_sample_value(
            f"gha_controller_{name}",
            {
                "name": scale_set,
                "namespace": self.namespace,
                "repository": "",
                "organization": "octo-org",
                "enterprise": "",
            },
        )

    def remove_calls(self) -> int:
        return self.gh.calls("*agents/{*", method="DELETE")


def jit_data(secret: JSON) -> dict[str, str]:
    return objects.decode_secret_data(secret)


async def make_world(
    kubeconfig: str, namespace: str, *, pool: ClientPool | None = None, **options: Any
) -> tuple[World, Any]:
    """Start the fake GitHub, a credentials Secret, a scale set; returns (world, closer).
    ``pool`` replaces the controller's GitHub client pool (e.g. one without breakers)."""
    gh = FakeGitHubServer(poll_timeout=1.0)
    await gh.start()
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": SECRET_NAME, "namespace": namespace},
            "stringData": {"github_token": gh.token},
        },
    )
    tenant = gh.state.tenant_from_config_url(gh.config_url())
    scale_set = gh.state.create_scale_set(tenant, {"name": "set", "runnerGroupId": 1})
    opts = ScaleSetOptions(
        controller_namespace=namespace,
        runner_failure_backoff=FAST_BACKOFF,
        **options,
    )
    world = World(kube=kube, gh=gh, namespace=namespace, scale_set=scale_set, options=opts)
    if pool is not None:
        world.pool = pool
    await world.start()

    async def close() -> None:
        await world.stop()
        await world.pool.aclose()
        await kube.close()
        await gh.stop()

    return world, close


async def world_fixture(kubeconfig: str, namespace: str) -> Any:
    """Body of the ``world`` fixture the test modules declare."""
    world, close = await make_world(kubeconfig, namespace)
    try:
        yield world
    finally:
        await close()


def sweeper_fixture(**settings: Any) -> Any:
    """A ``sweeper`` fixture: the registration reconcile (:mod:`orphans`) over the module's
    ``world``, sweeping in the background for the test; ``settings`` are its ``interval``,
    ``grace`` and ``hang_timeout``."""

    @pytest.fixture
    async def sweeper(world: World) -> AsyncIterator[orphans.OrphanReconciler]:
        assert world.cache is not None
        resolver = ClientResolver(world.kube, world.pool)
        rec = orphans.OrphanReconciler(
            world.kube, world.cache, resolver, world.recorder, **settings
        )
        task = asyncio.create_task(rec.start())
        try:
            yield rec
        finally:
            await rec.stop()
            await asyncio.wait_for(task, 10)

    return sweeper
