"""The test world of the AutoscalingRunnerSet / AutoscalingListener integration tests.

The real API server (session control plane), the fake GitHub on 127.0.0.1, and the whole
``gharc controller`` (all four reconcilers under a real Manager) run in-process through
:func:`gharc.controllers.main.run_controller`, with the controller namespace equal to the
test namespace (as ARC's own tests do), so the caches see only this test's objects.
There is no kubelet: tests play it by patching pod status.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from gharc.api.resources import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
)
from gharc.api.scaleset import constants as c
from gharc.controllers.main import ControllerArgs, run_controller
from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient
from gharc.kube.resources import EVENTS, PODS, SECRETS, Resource
from testworld.sim.github import FakeGitHubServer
from testworld.wait import eventually

JSON = dict[str, Any]
SECRET_NAME = "github-config"


def utc(offset: float = 0.0) -> str:
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def runner_template(image: str = "runner:1", env: list[JSON] | None = None) -> JSON:
    container: JSON = {"name": "runner", "image": image, "command": ["/home/runner/run.sh"]}
    if env is not None:
        container["env"] = env
    return {"spec": {"containers": [container], "restartPolicy": "Never"}}


@dataclass
class World:
    kube: KubeClient
    gh: FakeGitHubServer
    namespace: str
    manager: Any

    # -- objects -----------------------------------------------------------------------
    def ars_manifest(self, name: str = "arc", **spec: Any) -> JSON:
        body: JSON = {
            "githubConfigUrl": self.gh.config_url(),
            "githubConfigSecret": SECRET_NAME,
            "minRunners": 0,
            "maxRunners": 3,
            "template": runner_template(),
        }
        body.update(spec)
        return {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_AUTOSCALING_RUNNER_SET,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": body,
        }

    async def create_ars(self, name: str = "arc", **spec: Any) -> JSON:
        return await self.kube.create(AUTOSCALING_RUNNER_SETS, self.ars_manifest(name, **spec))

    async def ars(self, name: str = "arc") -> JSON:
        return await self.kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=self.namespace)

    async def get_or_none(
        self, resource: Resource, name: str, namespace: str | None = None
    ) -> JSON | None:
        try:
            return await self.kube.get(resource, name, namespace=namespace or self.namespace)
        except kerrors.NotFound:
            return None

    def listener_name(self, ars: JSON) -> str:
        return c.listener_name_for(ars)

    async def listener(self, ars: JSON) -> JSON | None:
        return await self.get_or_none(AUTOSCALING_LISTENERS, self.listener_name(ars))

    async def wait_listener_pod(
        self, ars: JSON, *, other_than: str | None = None, timeout: float = 20.0
    ) -> JSON:
        name = self.listener_name(ars)

        async def probe() -> JSON | None:
            pod = await self.get_or_none(PODS, name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                return None
            return None if pod["metadata"]["uid"] == other_than else pod

        return await eventually(probe, timeout=timeout, message=f"listener pod {name}")

    async def set_listener_state(self, pod: JSON, state: JSON, *, phase: str) -> JSON:
        """Play the kubelet: report the ``listener`` container in ``state``."""
        status = {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": c.LISTENER_CONTAINER_NAME,
                    "image": pod["spec"]["containers"][0]["image"],
                    "imageID": "",
                    "ready": "running" in state,
                    "restartCount": 0,
                    "state": state,
                }
            ],
        }
        return await self.kube.patch_status(PODS, pod, {"status": status})

    async def run_listener(self, pod: JSON, started: float = -60.0) -> JSON:
        return await self.set_listener_state(
            pod, {"running": {"startedAt": utc(started)}}, phase="Running"
        )

    async def wait_ars(
        self,
        predicate: Callable[[JSON], bool],
        name: str = "arc",
        timeout: float = 20.0,
        message: str = "ARS state",
    ) -> JSON:
        async def probe() -> JSON | None:
            ars = await self.get_or_none(AUTOSCALING_RUNNER_SETS, name)
            return ars if ars is not None and predicate(ars) else None

        return await eventually(probe, timeout=timeout, message=message)

    async def ers(self, name: str = "arc") -> JSON | None:
        return await self.get_or_none(EPHEMERAL_RUNNER_SETS, name)

    async def events(self, reason: str | None = None) -> list[JSON]:
        items = await self.kube.list(EVENTS, namespace=self.namespace)
        return [e for e in items if reason is None or e.get("reason") == reason]

    async def wait_event(self, reason: str, timeout: float = 15.0) -> JSON:
        async def probe() -> JSON | None:
            found = await self.events(reason)
            return found[0] if found else None

        return await eventually(probe, timeout=timeout, message=f"event {reason}")

    async def config_json(self, ars: JSON) -> JSON:
        secret = await self.kube.get(
            SECRETS,
            c.listener_config_secret_name(self.listener_name(ars)),
            namespace=self.namespace,
        )
        return dict(json.loads(base64.b64decode(secret["data"][c.SECRET_KEY_LISTENER_CONFIG])))


async def create_github_secret(kube: KubeClient, namespace: str, token: str) -> None:
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": SECRET_NAME, "namespace": namespace},
            "stringData": {"github_token": token},
        },
    )


@contextlib.asynccontextmanager
async def running_world(
    kubeconfig: str,
    namespace: str,
    *,
    before_start: Callable[[], Awaitable[None]] | None = None,
    with_secret: bool = True,
    listener_mode: str = "Pod",
    listener_image: str = "gharc:test",
    gh: FakeGitHubServer | None = None,
    **overrides: Any,
) -> AsyncIterator[World]:
    """Fake GitHub + ``gharc controller`` for one namespace; stopped cleanly afterwards.

    ``gh``: a fake GitHub that outlives this controller (a second controller takes over
    the same scale sets); without it one is started and stopped with the controller."""
    async with contextlib.AsyncExitStack() as stack:
        if gh is None:
            gh = await stack.enter_async_context(FakeGitHubServer(port=0, poll_timeout=1.0))
        kube = await KubeClient.from_config(kubeconfig=kubeconfig)
        if with_secret:
            await create_github_secret(kube, namespace, gh.token)
        if before_start is not None:
            await before_start()
        args = ControllerArgs(
            auto_scaling_runner_set_only=True,
            controller_namespace=namespace,
            watch_namespace=namespace,
            metrics_addr="0",
            kubeconfig=kubeconfig,
            k8s_client_qps=0,
            listener_image=listener_image,
            # These tests read the listener's pod, RBAC and secrets: Pod mode unless asked.
            listener_mode=listener_mode,
            option_overrides=overrides,
        )
        holder: list[Any] = []
        task = asyncio.create_task(
            run_controller(
                args,
                on_manager=holder.append,
                handle_signals=False,
                registry=CollectorRegistry(),
            )
        )
        try:
            await eventually(lambda: _ready(holder, task), timeout=30, message="manager started")
            yield World(kube=kube, gh=gh, namespace=namespace, manager=holder[0])
        finally:
            if holder:
                holder[0].stop()
            try:
                await asyncio.wait_for(task, 30)
            finally:
                await kube.close()


async def _ready(holder: list[Any], task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()  # surface the start-up error
    return bool(holder) and await holder[0].wait_started(0.01)
