"""The listener against the fake GitHub and the real API server.

``world`` gives a fake GitHub (short long polls so tests move), one scale set in it, and an
EphemeralRunnerSet in the test namespace; the listener runs in-process (``Listener``) or as
a real subprocess (``python -m gharc.listener``), always talking to 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from gharc.api.scaleset.constants import (
    GROUP,
    PLURAL_EPHEMERAL_RUNNER_SETS,
    PLURAL_EPHEMERAL_RUNNERS,
    VERSION,
)
from gharc.kube.config import new_api_client
from gharc.listener.app import Listener, build_actions_client
from gharc.listener.config import ListenerConfig, load_config
from gharc.listener.metrics import ListenerMetrics, MetricsServer
from gharc.listener.runnerset_writes import KubePatcher
from testworld.sim.github import DEFAULT_ORG, DEFAULT_REPO, FakeGitHubServer
from testworld.sim.github.state import Runner, ScaleSet, Tenant

SET_NAME = "lst-set"
ERS_NAME = "lst-set-ers"


@dataclass
class World:
    gh: FakeGitHubServer
    tenant: Tenant
    scale_set: ScaleSet
    namespace: str
    kubeconfig: str
    api: Any
    tmp: Path
    runners: dict[int, Runner] = field(default_factory=dict)

    def config(self, **overrides: Any) -> dict[str, Any]:
        data: dict[str, Any] = {
            "configure_url": self.gh.config_url(DEFAULT_ORG),
            "github_token": self.gh.token,
            "ephemeral_runner_set_namespace": self.namespace,
            "ephemeral_runner_set_name": ERS_NAME,
            "runner_scale_set_id": self.scale_set.id,
            "runner_scale_set_name": SET_NAME,
            "min_runners": 0,
            "max_runners": 10,
            "log_level": "debug",
            "session_conflict_initial_backoff_seconds": 0.2,
            "session_conflict_max_backoff_seconds": 0.5,
            "transient_max_backoff_seconds": 1.0,
        }
        data.update(overrides)
        return data

    def write_config(self, **overrides: Any) -> str:
        path = self.tmp / "config.json"
        path.write_text(json.dumps(self.config(**overrides)))
        return str(path)

    def listener_config(self, **overrides: Any) -> ListenerConfig:
        return load_config(self.write_config(**overrides), env={})

    def enqueue(self, n: int, **kwargs: Any) -> list[int]:
        return [
            self.gh.enqueue_job(DEFAULT_REPO, [SET_NAME], **kwargs).request_id for _ in range(n)
        ]

    def start_runner(self, name: str) -> int | None:
        """A runner registers, takes the next assigned job and starts it (None: no job)."""
        state = self.gh.state
        runner, _ = state.generate_jit_config(self.tenant, self.scale_set.id, name, "_work")
        job = state.take_job(runner)
        if job is None:
            return None
        state.job_started(runner, job.request_id)
        self.runners[job.request_id] = runner
        return job.request_id

    def finish(self, request_id: int, result: str = "succeeded") -> None:
        self.gh.state.job_completed(self.runners.pop(request_id), request_id, result)

    async def ers(self) -> dict[str, Any]:
        obj: dict[str, Any] = await client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL_EPHEMERAL_RUNNER_SETS, ERS_NAME
        )
        return obj

    async def spec(self) -> tuple[int, int]:
        spec = (await self.ers())["spec"]
        return spec.get("replicas", 0), spec["patchID"]

    async def create_runner(self, name: str) -> None:
        await client.CustomObjectsApi(self.api).create_namespaced_custom_object(
            GROUP,
            VERSION,
            self.namespace,
            PLURAL_EPHEMERAL_RUNNERS,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "EphemeralRunner",
                "metadata": {"name": name},
                "spec": _runner_spec(self.gh.config_url(DEFAULT_ORG), self.scale_set.id),
            },
        )

    async def runner_status(self, name: str) -> dict[str, Any]:
        obj = await client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL_EPHEMERAL_RUNNERS, name
        )
        status: dict[str, Any] = obj.get("status") or {}
        return status

    def active_session(self) -> Any:
        return self.gh.state.active_session(self.scale_set)


def _runner_spec(config_url: str, scale_set_id: int) -> dict[str, Any]:
    return {
        "githubConfigUrl": config_url,
        "githubConfigSecret": "gh-secret",
        "runnerScaleSetId": scale_set_id,
        "spec": {"containers": [{"name": "runner", "image": "runner:latest"}]},
    }


@pytest.fixture
async def world(
    namespace: str, kubeconfig: str, api_client: Any, tmp_path: Path
) -> AsyncIterator[World]:
    async with FakeGitHubServer(port=0, poll_timeout=1.0) as gh:
        tenant = gh.state.tenant_for("org", DEFAULT_ORG)
        ss = gh.state.create_scale_set(tenant, {"name": SET_NAME, "runnerGroupId": 1})
        await client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL_EPHEMERAL_RUNNER_SETS,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "EphemeralRunnerSet",
                "metadata": {"name": ERS_NAME},
                "spec": {
                    "replicas": 0,
                    "patchID": 0,
                    "ephemeralRunnerSpec": _runner_spec(gh.config_url(DEFAULT_ORG), ss.id),
                },
            },
        )
        yield World(gh, tenant, ss, namespace, kubeconfig, api_client, tmp_path)


class RecordingPatcher(KubePatcher):
    """The real patcher, also remembering every EphemeralRunnerSet patch it sent."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sent: list[tuple[int, int]] = []

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        await super().patch_replicas(replicas, patch_id)
        self.sent.append((replicas, patch_id))

    async def patch_replicas_after(self, replicas: int, patch_id: int, marker: int) -> None:
        await super().patch_replicas_after(replicas, patch_id, marker)
        self.sent.append((replicas, patch_id))


@contextlib.asynccontextmanager
async def in_process(world: World, **overrides: Any) -> AsyncIterator[Listener]:
    """Run a :class:`Listener` in this event loop until the block ends (then stop it)."""
    cfg = world.listener_config(**overrides)
    patcher = RecordingPatcher(
        await new_api_client(kubeconfig=world.kubeconfig, pool_size=4),
        world.namespace,
        ERS_NAME,
    )
    metrics = ListenerMetrics(
        name=ERS_NAME, namespace=world.namespace, organization=DEFAULT_ORG, config=cfg.metrics
    )
    api = build_actions_client(cfg)
    listener = Listener(cfg, api, patcher, owner="test-listener", metrics=metrics)
    server = None
    if cfg.metrics_enabled:
        host, port = cfg.metrics_host_port
        server = MetricsServer(metrics, host, port, cfg.metrics_endpoint)
        await server.start()
    task = asyncio.create_task(listener.run())
    try:
        yield listener
    finally:
        listener.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=15)
        if server is not None:
            await server.stop()
        await api.aclose()
        await patcher.aclose()
    if task.done() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


async def spawn(world: World, config_path: str) -> asyncio.subprocess.Process:
    """``python -m gharc.listener`` with its own environment (no inherited proxies)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LISTENER_CONFIG_PATH": config_path,
        "KUBECONFIG": world.kubeconfig,
        "PYTHONUNBUFFERED": "1",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gharc.listener",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
