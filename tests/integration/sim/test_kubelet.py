"""The kubelet simulator moves pods through the phases a real kubelet reports."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from testworld.sim.kubelet import ContainerContext, KubeletSimulator
from testworld.wait import eventually


class ExitAfter:
    def __init__(self, seconds: float, code: int) -> None:
        self.seconds, self.code = seconds, code

    async def run(self, ctx: ContainerContext) -> int:
        try:
            await asyncio.wait_for(ctx.stop.wait(), timeout=self.seconds)
        except TimeoutError:
            return self.code
        return 0


def pod(
    name: str, *, image: str = "busybox", env: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": image, "env": env or []}],
        },
    }


def by_image(image: str, program: Any) -> Any:
    return lambda p, c: program if c.get("image") == image else None


async def read(core: client.CoreV1Api, ns: str, name: str) -> Any:
    try:
        return await core.read_namespaced_pod(name, ns)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


async def test_pod_runs_and_succeeds_with_exit_code_zero(api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    programs = [by_image("quick", ExitAfter(0.3, 0))]
    async with KubeletSimulator(api_client, programs=programs, namespaces=[namespace]):
        await core.create_namespaced_pod(namespace, pod("ok", image="quick"))
        running = await eventually(
            lambda: _phase_is(core, namespace, "ok", "Running"), message="pod Running"
        )
        assert running.spec.node_name == "gharc-sim-node"
        done = await eventually(lambda: _phase_is(core, namespace, "ok", "Succeeded"))
        term = done.status.container_statuses[0].state.terminated
        assert term.exit_code == 0
        assert term.reason == "Completed"
        assert term.finished_at is not None


async def test_failing_container_reports_exit_code_and_failed_phase(
    api_client: Any, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    async with KubeletSimulator(
        api_client, programs=[by_image("bad", ExitAfter(0.1, 3))], namespaces=[namespace]
    ):
        await core.create_namespaced_pod(namespace, pod("bad", image="bad"))
        done = await eventually(lambda: _phase_is(core, namespace, "bad", "Failed"))
        assert done.status.container_statuses[0].state.terminated.exit_code == 3


async def test_deletion_is_graceful_and_the_kubelet_removes_the_pod(
    api_client: Any, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    async with KubeletSimulator(api_client, namespaces=[namespace]):
        await core.create_namespaced_pod(namespace, pod("sleeper"))
        await eventually(lambda: _phase_is(core, namespace, "sleeper", "Running"))
        await core.delete_namespaced_pod("sleeper", namespace)
        # bound to a node, so the API server keeps it until the kubelet confirms
        terminating = await read(core, namespace, "sleeper")
        assert terminating is not None and terminating.metadata.deletion_timestamp is not None
        await eventually(lambda: _gone(core, namespace, "sleeper"), message="pod removed")


async def test_eviction_fails_the_pod_with_reason_evicted(api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    async with KubeletSimulator(api_client, namespaces=[namespace]) as kubelet:
        await core.create_namespaced_pod(namespace, pod("victim"))
        await eventually(lambda: _phase_is(core, namespace, "victim", "Running"))
        kubelet.evict(namespace, "victim")
        failed = await eventually(lambda: _phase_is(core, namespace, "victim", "Failed"))
        assert failed.status.reason == "Evicted"
        assert failed.status.container_statuses[0].state.terminated.exit_code == 137


async def test_env_from_secrets_and_mounted_files_reach_the_program(
    api_client: Any, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_secret(
        namespace, {"metadata": {"name": "s"}, "stringData": {"token": "abc", "config.json": "{}"}}
    )
    seen: dict[str, Any] = {}

    class Capture:
        async def run(self, ctx: ContainerContext) -> int:
            seen.update(env=ctx.env, files=ctx.files)
            return 0

    spec = pod(
        "env",
        image="cap",
        env=[
            {"name": "PLAIN", "value": "x"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    )
    spec["spec"]["volumes"] = [{"name": "cfg", "secret": {"secretName": "s"}}]
    spec["spec"]["containers"][0]["volumeMounts"] = [{"name": "cfg", "mountPath": "/etc/cfg"}]
    async with KubeletSimulator(
        api_client, programs=[by_image("cap", Capture())], namespaces=[namespace]
    ):
        await core.create_namespaced_pod(namespace, spec)
        await eventually(lambda: _phase_is(core, namespace, "env", "Succeeded"))
    assert seen["env"] == {"PLAIN": "x", "TOKEN": "abc", "POD": "env"}
    assert seen["files"]["/etc/cfg/config.json"] == b"{}"


class FlakyStatusWrites:
    """The kubelet's API, except that the first pod status writes fail as ``failures`` say."""

    def __init__(self, core: client.CoreV1Api, failures: list[Exception]) -> None:
        self._core = core
        self.failures = failures
        self.attempts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)

    async def patch_namespaced_pod_status(self, *args: Any, **kwargs: Any) -> Any:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return await self._core.patch_namespaced_pod_status(*args, **kwargs)


async def test_a_failed_status_write_is_retried_not_the_pod_abandoned(
    api_client: Any, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    kubelet = KubeletSimulator(
        api_client, programs=[by_image("quick", ExitAfter(0.2, 0))], namespaces=[namespace]
    )
    failures: list[Exception] = [
        client.ApiException(status=500, reason="Internal Server Error"),
        client.ApiException(status=409, reason="Conflict"),
        aiohttp.ClientConnectionError("connection reset by peer"),
    ]
    flaky = FlakyStatusWrites(kubelet._core, failures)
    kubelet._core = flaky  # type: ignore[assignment]
    async with kubelet:
        await core.create_namespaced_pod(namespace, pod("flaky", image="quick"))
        done = await eventually(
            lambda: _phase_is(core, namespace, "flaky", "Succeeded"), message="pod Succeeded"
        )
    assert done.status.container_statuses[0].state.terminated.exit_code == 0
    assert failures == [] and flaky.attempts == 6  # 3 refused, Pending, Running, Succeeded


async def test_a_refused_status_write_is_not_retried(api_client: Any, namespace: str) -> None:
    """422 is a refusal on the merits: repeating it cannot help."""
    kubelet = KubeletSimulator(api_client, namespaces=[namespace])
    flaky = FlakyStatusWrites(
        kubelet._core, [client.ApiException(status=422, reason="Unprocessable Entity")]
    )
    kubelet._core = flaky  # type: ignore[assignment]
    core = client.CoreV1Api(api_client)
    async with kubelet:
        await core.create_namespaced_pod(namespace, pod("refused"))
        await eventually(lambda: _attempted(flaky), message="status write attempted")
        await asyncio.sleep(0.5)
    assert flaky.attempts == 1


async def _attempted(flaky: FlakyStatusWrites) -> bool:
    return flaky.attempts > 0


async def _phase_is(core: client.CoreV1Api, ns: str, name: str, phase: str) -> Any:
    p = await read(core, ns, name)
    return p if p is not None and p.status.phase == phase else None


async def _gone(core: client.CoreV1Api, ns: str, name: str) -> bool:
    return await read(core, ns, name) is None


pytestmark = pytest.mark.cluster


class HeldBindings:
    """The kubelet's API, except that pod bindings wait until ``release`` is set."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self._core = core
        self.release = asyncio.Event()
        self.waiting = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)

    async def create_namespaced_pod_binding(self, *args: Any, **kwargs: Any) -> Any:
        self.waiting += 1
        await self.release.wait()
        return await self._core.create_namespaced_pod_binding(*args, **kwargs)


async def test_a_pod_not_yet_bound_when_the_node_dies_is_scheduled_on_the_next(
    api_client: Any, namespace: str
) -> None:
    """The lost node had not bound the pod yet: as a real scheduler would, the simulator
    places it on the node that takes over instead of leaving it unscheduled forever."""
    core = client.CoreV1Api(api_client)
    kubelet = KubeletSimulator(api_client, namespaces=[namespace])
    held = HeldBindings(kubelet._core)
    kubelet._core = held  # type: ignore[assignment]
    async with kubelet:
        await core.create_namespaced_pod(namespace, pod("late"))
        await eventually(lambda: asyncio.sleep(0, result=held.waiting == 1), message="binding")
        assert await kubelet.lose_node() == [f"{namespace}/late"]
        held.release.set()
        running = await eventually(
            lambda: _phase_is(core, namespace, "late", "Running"), message="pod Running"
        )
    assert running.spec.node_name == "gharc-sim-node-1"


class RefusedTerminalWrite(FlakyStatusWrites):
    """Status writes land, except the one that would say the container ended (a 422)."""

    async def patch_namespaced_pod_status(self, *args: Any, **kwargs: Any) -> Any:
        body = kwargs.get("body") if "body" in kwargs else args[2]
        if (body.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self.attempts += 1
            raise client.ApiException(status=422, reason="Unprocessable Entity")
        return await self._core.patch_namespaced_pod_status(*args, **kwargs)


async def test_a_pod_whose_container_ended_is_removed_when_deleted(
    api_client: Any, namespace: str
) -> None:
    """The container is gone but its end never reached the API server (the write was
    refused): the pod still says Running, so its deletion is graceful and waits for this
    node. A kubelet with no container left to stop confirms it at once."""
    core = client.CoreV1Api(api_client)
    kubelet = KubeletSimulator(
        api_client, programs=[by_image("quick", ExitAfter(0.2, 0))], namespaces=[namespace]
    )
    refusing = RefusedTerminalWrite(kubelet._core, [])
    kubelet._core = refusing  # type: ignore[assignment]
    async with kubelet:
        await core.create_namespaced_pod(namespace, pod("ended", image="quick"))
        await eventually(lambda: _attempted(refusing), message="the end's write refused")
        assert (await read(core, namespace, "ended")).status.phase == "Running"
        await core.delete_namespaced_pod("ended", namespace)
        await eventually(lambda: _gone(core, namespace, "ended"), timeout=10, message="removed")


class HeldRunningWrites:
    """The kubelet's API, except that a Running status waits until ``release`` is set."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self._core = core
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)

    async def patch_namespaced_pod_status(self, *args: Any, **kwargs: Any) -> Any:
        if args[2]["status"].get("phase") == "Running":
            await self.release.wait()
        return await self._core.patch_namespaced_pod_status(*args, **kwargs)


class Started:
    """A program that says when it started, then exits 0."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, ctx: ContainerContext) -> int:
        self.started.set()
        return 0


async def test_the_container_runs_before_the_api_server_hears_it_is_running(
    api_client: Any, namespace: str
) -> None:
    """A node's runtime starts the container and its status manager reports Running later:
    a runner must not wait for that write (a slow API server would delay every job by
    it), and the end is written after the Running it follows."""
    kubelet = KubeletSimulator(api_client, namespaces=[namespace])
    program = Started()
    kubelet._programs = [by_image("quick", program)]
    held = HeldRunningWrites(kubelet._core)
    kubelet._core = held  # type: ignore[assignment]
    core = client.CoreV1Api(api_client)
    async with kubelet:
        await core.create_namespaced_pod(namespace, pod("early", image="quick"))
        await asyncio.wait_for(program.started.wait(), timeout=10)
        assert (await read(core, namespace, "early")).status.phase == "Pending"
        held.release.set()
        done = await eventually(
            lambda: _phase_is(core, namespace, "early", "Succeeded"), message="pod Succeeded"
        )
    assert done.status.container_statuses[0].state.terminated.exit_code == 0
