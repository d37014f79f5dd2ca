"""Worlds for end-to-end and chaos runs: a factory of confined Worlds and what the runs
read from them (jobs, the report, leftovers, listener pods).

Shared by ``tests/e2e``, ``tests/chaos`` and ``bench/chaos.py``, so a scenario written once
runs in the test suite at small sizes and in the benchmark at big ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from testworld.sim.github import FakeGitHubServer
from testworld.sim.github.state import Job
from testworld.sim.programs import RunnerProgram
from testworld.sim.report import Report, job_times
from testworld.wait import eventually
from testworld.world import World

log = logging.getLogger("testworld.worlds")

REPO = "octo-org/octo-repo"


async def wait_until(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool],
    timeout: float,
    what: str,
    *,
    world: World | None = None,
    interval: float = 0.25,
) -> None:
    """Poll ``check`` until it is true; fail with ``what`` after ``timeout`` seconds, or at
    once when ``world``'s controller has died (waiting on would only hide why)."""
    await eventually(
        check,
        timeout=timeout,
        interval=interval,
        message=what,
        before_each=world.check_controller if world is not None else None,
    )


class WorldFactory:
    """Builds confined Worlds (and the fakes behind them) and tears them down afterwards."""

    def __init__(self, kubeconfig: str, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self._worlds: list[tuple[FakeGitHubServer, World, list[str]]] = []

    async def create(
        self,
        namespace: str,
        *,
        single_namespace: bool = True,
        kubelet_namespaces: list[str] | None = None,
        runner: RunnerProgram | None = None,
        poll_timeout: float = 20.0,
        controller_args: list[str] | None = None,
        controller_env: dict[str, str] | None = None,
    ) -> World:
        gh = FakeGitHubServer(poll_timeout=poll_timeout)
        await gh.start()
        world = World(
            self.kubeconfig,
            gh,
            log_dir=self.log_dir / namespace,
            runner=runner or RunnerProgram(poll_seconds=20),
            controller_namespace=namespace,
            single_namespace=single_namespace,
            kubelet_namespaces=kubelet_namespaces,
            controller_args=controller_args,
            controller_env=controller_env,
        )
        await world.__aenter__()
        self._worlds.append((gh, world, [namespace, *(kubelet_namespaces or [])]))
        log.info("world in %s: controller log %s", namespace, world.controller_log_path)
        return world

    async def close(self) -> None:
        for gh, world, namespaces in reversed(self._worlds):
            try:
                await world.stop_controller()
                await world.purge(sorted(set(namespaces)))
            except Exception:
                log.exception("purging %s failed", namespaces)
            finally:
                await world.__aexit__(None, None, None)
                # aiohttp waits up to 60 s for open handlers (a dead runner's long poll)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gh.stop(), 5)
        self._worlds.clear()


def enqueue_jobs(
    world: World,
    labels: list[str],
    count: int,
    *,
    durations: tuple[float, float] = (0.2, 1.0),
    seed: int = 7,
) -> list[Job]:
    rng = random.Random(seed)
    return [
        world.github.enqueue_job(REPO, labels, duration=round(rng.uniform(*durations), 3))
        for _ in range(count)
    ]


def all_completed(jobs: list[Job]) -> bool:
    return all(j.status == "completed" for j in jobs)


def job_state(jobs: list[Job]) -> str:
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j.status] = counts.get(j.status, 0) + 1
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))


def report(world: World, jobs: list[Job] | None = None) -> Report:
    """The demo's report numbers for this World's fake GitHub (``jobs``: a subset)."""
    state_jobs = world.github.state.jobs
    chosen = {j.request_id: j for j in jobs} if jobs is not None else dict(state_jobs)
    rep = Report(jobs=job_times(chosen), runners_created=world.runners_created())
    return rep


async def runner_leftovers(world: World, namespace: str) -> dict[str, list[str]]:
    """Runner pods, runner Secrets and EphemeralRunners still in ``namespace``.

    The listener's own pod and Secrets (and the credentials Secret) are not runners': in a
    confined World they share the namespace, so runner objects are told apart by their owner
    (EphemeralRunner) or by being an EphemeralRunner."""
    ers = [er["metadata"]["name"] for er in await world.ephemeral_runners(namespace)]
    er_names = set(ers)

    def runner_owned(obj: dict[str, Any]) -> bool:
        refs = obj["metadata"].get("ownerReferences") or []
        if any(r.get("kind") == "EphemeralRunner" for r in refs):
            return True
        return obj["metadata"]["name"] in er_names

    pods = [p["metadata"]["name"] for p in await world.pods(namespace) if runner_owned(p)]
    secrets = [s["metadata"]["name"] for s in await world.secrets(namespace) if runner_owned(s)]
    return {"ephemeralrunners": ers, "pods": pods, "secrets": secrets}


async def listener_pods(world: World, namespace: str) -> list[dict[str, Any]]:
    return [
        p
        for p in await world.pods(namespace)
        if any(c.get("name") == "listener" for c in p["spec"].get("containers", []))
    ]


def scale_set_id(world: World, name: str) -> int:
    for ss in world.github.state.scale_sets.values():
        if ss.name == name:
            return ss.id
    raise AssertionError(f"no scale set {name} at the fake GitHub")
