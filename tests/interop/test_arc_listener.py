"""ARC's own listener drives gharc's controller through gharc's fake GitHub.

gharc's controller runs with ``--listener-mode=Pod``, as ARC does, and the kubelet
simulator runs ARC's listener binary in the listener pod it creates (through
``arc_listener_shim.py``), with the pod's config and its service account. Jobs queued on
the fake must each get a runner: ARC's listener reads the fake's messages and scales the
EphemeralRunnerSet, gharc's controller makes the runners, the simulated runners take the
jobs. This pins the fake to what ARC's client accepts, and gharc's controller to what
ARC's listener writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config

from testworld.sim.github import FakeGitHubServer
from testworld.sim.kubelet import KubeletSimulator
from testworld.sim.programs import ListenerProcessProgram, RunnerProgram, is_listener, is_runner
from testworld.world import World
from testworld.worlds import all_completed, enqueue_jobs, job_state, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.interop]

SHIM = Path(__file__).with_name("arc_listener_shim.py")
JOBS = 20


class ArcListenerWorld(World):
    """A World whose listener pods run ARC's listener instead of ``gharc listener``."""

    def __init__(self, *args: object, listener_command: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.listener_command = listener_command

    async def __aenter__(self) -> ArcListenerWorld:
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        self.api = client.ApiClient(cfg)
        await self.ensure_namespace(self.controller_namespace)
        await self.start_controller()
        runner = self.runner_program
        listener = ListenerProcessProgram(self.api, command=self.listener_command)

        def programs(pod: dict[str, Any], container: dict[str, Any]) -> Any:
            if is_runner(pod, container):
                return runner
            return listener if is_listener(pod, container) else None

        self.kubelet = KubeletSimulator(
            self.api, programs=[programs], namespaces=self.kubelet_namespaces
        )
        await self.kubelet.start()
        return self


@pytest_asyncio.fixture
async def world(
    kubeconfig: str, arc_listener: tuple[str, str], tmp_path: Path
) -> AsyncIterator[ArcListenerWorld]:
    kind, binary = arc_listener
    gh = FakeGitHubServer(poll_timeout=3.0)
    await gh.start()
    ns = f"interop-{tmp_path.name[-12:].lower().replace('_', '-').strip('-')}"
    w = ArcListenerWorld(
        kubeconfig,
        gh,
        log_dir=tmp_path / "logs",
        runner=RunnerProgram(poll_seconds=5),
        controller_args=["--listener-mode=Pod"],
        controller_namespace=ns,
        single_namespace=True,
        listener_command=[sys.executable, str(SHIM), kind, binary],
    )
    await w.__aenter__()
    try:
        yield w
    finally:
        try:
            await w.stop_controller()
            await w.purge([ns])
        finally:
            await w.__aexit__(None, None, None)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gh.stop(), 5)


async def test_twenty_jobs_through_arcs_listener_and_gharcs_controller(
    world: ArcListenerWorld,
) -> None:
    ns = world.controller_namespace
    await world.apply_scale_set(ns, "interop", max_runners=5)
    await world.wait_for_listener("interop", timeout=120)
    jobs = enqueue_jobs(world, ["interop"], JOBS, durations=(0.2, 0.6))
    await wait_until(lambda: all_completed(jobs), 240, "every job to complete", world=world)
    assert all(j.conclusion == "succeeded" and j.runner_id for j in jobs), job_state(jobs)
    assert world.runners_created() >= JOBS
    assert world.github.state.unhandled_errors == 0
    # ARC's listener acknowledged every message it was given and acquired every job.
    assert world.github.calls("*/acquirejobs", status=200) >= 1
    assert world.github.calls("*/messages/{message_id}", method="DELETE", status=204) >= 1
