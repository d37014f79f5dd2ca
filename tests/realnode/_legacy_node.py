"""The legacy controllers on the real node: the world of the legacy real-node tests.

The legacy controllers run in the test process against the real cluster, with the fake
GitHub on the node address; runner pods are real containers of the simulated
``summerwind/actions-runner`` image (``testworld.realnode_runner``: it registers with
the pod's ``RUNNER_TOKEN`` and takes jobs for its labels). The node's
kube-controller-manager is what the envtest legacy tests lack: its garbage collector
deletes what a deleted Runner or StatefulSet owned, and its StatefulSet controller makes
RunnerSet pods and PVCs. Each test gets a fresh namespace on the session's one cluster.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from gharc.api.legacy import constants as lc
from gharc.api.resources import RUNNER_DEPLOYMENTS, RUNNER_REPLICA_SETS, RUNNER_SETS, RUNNERS
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.runnerset import STATEFUL_SETS
from gharc.controllers.legacy.setup import setup_legacy_controllers
from gharc.github.auth import PersonalAccessToken
from gharc.github.pool import ClientPool
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.resources import NAMESPACES, PODS, SECRETS
from testworld.realnode import NODE_IP, RealCluster
from testworld.setupmanager import SetupManager
from testworld.sim.github import DEFAULT_TOKEN, FakeGitHubServer
from testworld.wait import eventually

JSON = dict[str, Any]


@dataclass
class LegacyNode:
    kube: KubeClient
    gh: FakeGitHubServer
    namespace: str
    rc: RealCluster

    async def wait_for(
        self, what: str, check: Callable[[], Awaitable[Any]], timeout: float = 90.0
    ) -> Any:
        """``check``'s first truthy answer; on timeout the test fails showing the namespace."""
        try:
            return await eventually(check, timeout=timeout, interval=0.5, message=what)
        except AssertionError as err:
            pytest.fail(f"{err}\n{await self.describe()}")

    async def live(self, resource: Any) -> list[JSON]:
        items = await self.kube.list(resource, namespace=self.namespace)
        return sorted(
            (i for i in items if not i["metadata"].get("deletionTimestamp")),
            key=lambda i: (i["metadata"]["creationTimestamp"], i["metadata"]["name"]),
        )

    async def names(self, resource: Any) -> set[str]:
        """Every object of ``resource`` in the namespace, being deleted or not."""
        return {
            i["metadata"]["name"] for i in await self.kube.list(resource, namespace=self.namespace)
        }

    async def registered_pods(self, n: int, deployment: str | None = None) -> list[JSON] | None:
        """``n`` live pods (of the RunnerDeployment ``deployment``, if given), each a started
        container annotated with its GitHub runner ID."""
        pods = [
            p
            for p in await self.live(PODS)
            if lc.ANNOTATION_RUNNER_ID in (p["metadata"].get("annotations") or {})
            and deployment
            in (None, (p["metadata"].get("labels") or {}).get(lc.LABEL_RUNNER_DEPLOYMENT_NAME))
            and any(
                s.get("containerID", "").startswith("containerd://")
                for s in (p.get("status") or {}).get("containerStatuses") or []
            )
        ]
        return pods if len(pods) == n else None

    def remove_calls(self, status: int | None = None) -> int:
        return self.gh.calls("*/actions/runners/{runner_id}", method="DELETE", status=status)

    async def describe(self) -> str:
        """The namespace's legacy objects and pods (with the runner's log), for failures."""
        lines = []
        for resource in (
            RUNNER_DEPLOYMENTS,
            RUNNER_REPLICA_SETS,
            RUNNERS,
            RUNNER_SETS,
            STATEFUL_SETS,
            SECRETS,
        ):
            for obj in await self.kube.list(resource, namespace=self.namespace):
                meta = obj["metadata"]
                lines.append(
                    f"{resource.kind} {meta['name']} deleting={meta.get('deletionTimestamp')} "
                    f"annotations={meta.get('annotations')} status={obj.get('status')}"
                )
        for pod in await self.kube.list(PODS, namespace=self.namespace):
            st = pod.get("status") or {}
            name = pod["metadata"]["name"]
            lines.append(
                f"Pod {name} {st.get('phase')} deleting={pod['metadata'].get('deletionTimestamp')} "
                f"annotations={pod['metadata'].get('annotations')} "
                f"containers={st.get('containerStatuses')}"
            )
            logs = self.rc.get_text(
                f"/api/v1/namespaces/{self.namespace}/pods/{name}/log?container=runner&tailLines=20"
            )
            lines.append(f"  runner log:\n{logs}")
        lines.append(f"GitHub runners: {[r.name for r in self.gh.state.runners.values()]}")
        return "\n".join(lines)


async def legacy_node(
    real_cluster: RealCluster, kube: KubeClient, prefix: str
) -> AsyncIterator[LegacyNode]:
    """A fresh namespace, the fake GitHub and the legacy controllers (production options but
    for shortened retry delays); everything is stopped and the namespace deleted after."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    async with FakeGitHubServer(host=NODE_IP, poll_timeout=5.0, rest_max_age=1) as gh:
        options = LegacyOptions(
            github_url=gh.url,
            credentials=PersonalAccessToken(DEFAULT_TOKEN),
            runner_id_retry_delay=dt.timedelta(seconds=0.5),
            unregistration_retry_delay=dt.timedelta(seconds=0.5),
            short_requeue=dt.timedelta(seconds=0.3),
        )
        pool = ClientPool()
        cache = Cache(kube, namespace=namespace)
        manager = SetupManager(kube, cache)
        setup_legacy_controllers(manager, LegacyDeps.of(options, pool, kube))
        await cache.start()
        tasks = [asyncio.create_task(ctl.start()) for ctl in manager.runnables]
        try:
            yield LegacyNode(kube, gh, namespace, real_cluster)
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
