"""A legacy RunnerSet on a real node, with the real StatefulSet controller and garbage
collector (``emulate_statefulset_controller`` off, as in production).

The legacy controllers run in this process against the real cluster; the runner pods the
StatefulSet controller creates are real containers running the simulated
``summerwind/actions-runner`` (it registers with the pod's ``RUNNER_TOKEN`` at the fake
GitHub on the node address and takes one job). Deleting the RunnerSet must take the
StatefulSets and pods with it through ownerReferences alone, and unregister the runners.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gharc.api.legacy import constants as lc
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.runnerset import STATEFUL_SETS
from gharc.controllers.legacy.setup import setup_legacy_controllers
from gharc.github.auth import PersonalAccessToken
from gharc.github.pool import ClientPool
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.resources import NAMESPACES, PODS, RUNNER_SETS
from gharc.sim.github import DEFAULT_REPO, DEFAULT_TOKEN, FakeGitHubServer
from gharc.testing.realnode import NODE_IP, RealCluster
from gharc.testing.realnode_image import RUNNER_IMAGE
from gharc.testing.setupmanager import SetupManager

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

LABEL = "realnode"


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_config(kubeconfig=real_cluster.kubeconfig_path)
    try:
        yield client
    finally:
        await client.close()


async def wait_for(what: str, check: Any, timeout: float, describe: Any = None) -> Any:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        got = await check()
        if got:
            return got
        await asyncio.sleep(0.5)
    pytest.fail(f"{what} not within {timeout:.0f} s\n{await describe() if describe else ''}")


async def describe(kube: KubeClient, namespace: str, rc: RealCluster) -> str:
    """The RunnerSet, its StatefulSets and pods (with container states), for failures."""
    lines = []
    for rs in await kube.list(RUNNER_SETS, namespace=namespace):
        lines.append(f"RunnerSet {rs['metadata']['name']} status={rs.get('status')}")
    for sts in await kube.list(STATEFUL_SETS, namespace=namespace):
        lines.append(f"StatefulSet {sts['metadata']['name']} status={sts.get('status')}")
    for pod in await kube.list(PODS, namespace=namespace):
        st = pod.get("status") or {}
        lines.append(
            f"Pod {pod['metadata']['name']} {st.get('phase')} "
            f"annotations={pod['metadata'].get('annotations')} "
            f"containers={st.get('containerStatuses')}"
        )
        name = pod["metadata"]["name"]
        for previous in ("false", "true"):
            logs = rc.get_text(
                f"/api/v1/namespaces/{namespace}/pods/{name}/log"
                f"?container=runner&tailLines=20&previous={previous}"
            )
            lines.append(f"  runner log (previous={previous}):\n{logs}")
    return "\n".join(lines)


def runner_set(namespace: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": lc.API_VERSION,
        "kind": lc.KIND_RUNNER_SET,
        "metadata": {"name": "rs", "namespace": namespace},
        "spec": {
            "repository": DEFAULT_REPO,
            "labels": [LABEL],
            "ephemeral": True,
            "dockerEnabled": False,
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "rs"}},
            "serviceName": "rs",
            "template": {
                "metadata": {"labels": {"app": "rs"}},
                "spec": {
                    "containers": [
                        {"name": "runner", "image": RUNNER_IMAGE, "imagePullPolicy": "Never"}
                    ]
                },
            },
        },
    }


async def test_runner_set_on_the_real_statefulset_controller(
    kube: KubeClient, real_cluster: RealCluster
) -> None:
    namespace = f"legacy-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    async with FakeGitHubServer(host=NODE_IP, poll_timeout=5.0, rest_max_age=1) as gh:
        options = LegacyOptions(
            github_url=gh.url,
            credentials=PersonalAccessToken(DEFAULT_TOKEN),
            runner_id_retry_delay=dt.timedelta(seconds=0.5),
            unregistration_retry_delay=dt.timedelta(seconds=0.5),
            short_requeue=dt.timedelta(seconds=0.3),
            emulate_statefulset_controller=False,
        )
        pool = ClientPool()
        cache = Cache(kube, namespace=namespace)
        manager = SetupManager(kube, cache)
        setup_legacy_controllers(manager, options, pool, kube=kube)
        await cache.start()
        tasks = [asyncio.create_task(ctl.start()) for ctl in manager.runnables]
        try:
            await kube.create(RUNNER_SETS, runner_set(namespace, 2))

            async def registered() -> list[dict[str, Any]] | None:
                pods = await kube.list(PODS, namespace=namespace)
                ok = [
                    p
                    for p in pods
                    if lc.ANNOTATION_RUNNER_ID in (p["metadata"].get("annotations") or {})
                    and any(
                        s.get("containerID", "").startswith("containerd://")
                        for s in (p.get("status") or {}).get("containerStatuses") or []
                    )
                ]
                return ok if len(ok) == 2 else None

            pods = await wait_for(
                "2 registered runner pods",
                registered,
                60,
                lambda: describe(kube, namespace, real_cluster),
            )
            for pod in pods:
                owners = {o["kind"] for o in pod["metadata"].get("ownerReferences") or []}
                assert owners == {"StatefulSet"}, owners  # made by the real controller

            jobs = [gh.state.enqueue_job(DEFAULT_REPO, [LABEL], duration=1.0) for _ in range(2)]

            async def done() -> bool:
                return all(j.status == "completed" for j in jobs)

            await wait_for("2 jobs completed by the legacy runners", done, 180)
            assert {j.runner_name for j in jobs} <= {p["metadata"]["name"] for p in pods} | {
                p["metadata"]["name"] for p in await kube.list(PODS, namespace=namespace)
            }

            await kube.delete(RUNNER_SETS, "rs", namespace=namespace)

            async def all_gone() -> bool:
                left = [
                    *await kube.list(RUNNER_SETS, namespace=namespace),
                    *await kube.list(STATEFUL_SETS, namespace=namespace),
                    *await kube.list(PODS, namespace=namespace),
                ]
                return not left

            await wait_for("the RunnerSet, its StatefulSets and pods gone", all_gone, 180)
            await wait_for(
                "the runners unregistered in GitHub",
                lambda: asyncio.sleep(0, result=not gh.state.runners),
                60,
            )
        finally:
            for ctl in manager.runnables:
                await ctl.stop()
            for task in tasks:
                try:
                    await asyncio.wait_for(task, 10)
                except (TimeoutError, asyncio.CancelledError):
                    task.cancel()
            await cache.stop()
            await pool.aclose()
            await kube.delete(NAMESPACES, namespace, missing_ok=True)
