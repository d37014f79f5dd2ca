"""``gharc controller`` in legacy mode (no ``--auto-scaling-runner-set-only``), from its own
argv, against the real API server and the fake GitHub.

Nothing is wired by hand: the arguments go through ``parse_args`` and ``run_controller`` as
``gharc controller`` would run them, so this is the command-line path ARC users take. A
RunnerDeployment with a pull-based HRA (TotalNumberOfQueuedAndInProgressWorkflowRuns) must
follow the queued jobs at the fake: replicas go up, Runners and their pods appear, the
simulated ``summerwind/actions-runner`` in each pod registers with its registration token
and runs a job, and once the queue is empty the deployment scales back to zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gharc.api.legacy import constants as lc
from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNERS
from gharc.controllers.main import parse_args, run_controller
from gharc.kube.client import KubeClient
from gharc.kube.resources import PODS
from testworld.sim.github import DEFAULT_ORG, DEFAULT_REPO, FakeGitHubServer
from testworld.sim.kubelet import KubeletSimulator
from testworld.sim.programs import LegacyRunnerProgram, legacy_programs
from testworld.wait import eventually

pytestmark = pytest.mark.cluster
JSON = dict[str, Any]


class Running:
    def __init__(self, kube: KubeClient, gh: FakeGitHubServer, namespace: str) -> None:
        self.kube, self.gh, self.namespace = kube, gh, namespace
        self.managers: list[Any] = []

    async def rd(self) -> JSON:
        return await self.kube.get(RUNNER_DEPLOYMENTS, "rd", namespace=self.namespace)

    async def live(self, resource: Any) -> list[JSON]:
        items = await self.kube.list(resource, namespace=self.namespace)
        return [i for i in items if not i["metadata"].get("deletionTimestamp")]


@pytest.fixture
async def running(api_client: Any, namespace: str, kubeconfig: str) -> AsyncIterator[Running]:
    async with FakeGitHubServer(port=0, rest_max_age=0) as gh:
        args = parse_args(
            [
                f"--kubeconfig={kubeconfig}",
                f"--watch-namespace={namespace}",
                "--metrics-addr=0",
                f"--github-url={gh.url}",
                "--sync-period=1s",
                "--default-scale-down-delay=0s",
                "--log-level=info",
            ],
            {"GITHUB_TOKEN": gh.token},  # the token from the environment, as ARC's envconfig
        )
        assert args.legacy and not args.controller_namespace
        world = Running(KubeClient(api_client), gh, namespace)
        task = asyncio.create_task(
            run_controller(
                args,
                on_manager=world.managers.append,
                handle_signals=False,
                registry=CollectorRegistry(),
            )
        )
        kubelet = KubeletSimulator(
            api_client,
            programs=legacy_programs(LegacyRunnerProgram(poll_seconds=2)),
            namespaces=[namespace],
        )
        await kubelet.start()
        try:
            await eventually(
                lambda: _started(world, task), timeout=30, message="legacy manager started"
            )
            yield world
        finally:
            await kubelet.stop()
            if world.managers:
                world.managers[0].stop()
            try:
                await asyncio.wait_for(task, 20)
            except TimeoutError:
                task.cancel()


async def _started(world: Running, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()  # surface the controller's error instead of timing out
    return bool(world.managers)


async def test_queued_jobs_scale_a_runner_deployment_through_its_hra(running: Running) -> None:
    w = running
    await w.kube.create(
        RUNNER_DEPLOYMENTS,
        {
            "apiVersion": lc.API_VERSION,
            "kind": lc.KIND_RUNNER_DEPLOYMENT,
            "metadata": {"name": "rd", "namespace": w.namespace},
            "spec": {
                "replicas": 0,  # without it the RD starts at ARC's default of 1
                "template": {"spec": {"organization": DEFAULT_ORG, "labels": ["linux"]}},
            },
        },
    )
    await w.kube.create(
        HORIZONTAL_RUNNER_AUTOSCALERS,
        {
            "apiVersion": lc.API_VERSION,
            "kind": lc.KIND_HORIZONTAL_RUNNER_AUTOSCALER,
            "metadata": {"name": "hra", "namespace": w.namespace},
            "spec": {
                "scaleTargetRef": {"kind": "RunnerDeployment", "name": "rd"},
                "minReplicas": 0,
                "maxReplicas": 5,
                "metrics": [
                    {
                        "type": "TotalNumberOfQueuedAndInProgressWorkflowRuns",
                        "repositoryNames": [DEFAULT_REPO.split("/", 1)[1]],
                    }
                ],
            },
        },
    )

    async def replicas(want: int) -> JSON | None:
        rd = await w.rd()
        return rd if (rd.get("spec") or {}).get("replicas") == want else None

    await eventually(lambda: replicas(0), timeout=30, message="the HRA sets replicas 0")
    assert await w.live(RUNNERS) == []

    # Long enough that the jobs are still queued or in progress while we look.
    jobs = [w.gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"], duration=4) for _ in range(3)]
    await eventually(lambda: replicas(3), timeout=30, message="replicas follow the queue: 3")

    async def runners_and_pods() -> bool:
        return len(await w.live(RUNNERS)) == 3 and len(await w.live(PODS)) == 3

    await eventually(runners_and_pods, timeout=60, message="3 Runners and 3 runner pods")
    pods = await w.live(PODS)
    env = {e["name"]: e.get("value") for e in pods[0]["spec"]["containers"][0]["env"]}
    assert env["RUNNER_ORG"] == DEFAULT_ORG
    assert env["GITHUB_URL"] == w.gh.url + "/"  # the fake is the GHES of --github-url
    [token] = [e for e in pods[0]["spec"]["containers"][0]["env"] if e["name"] == "RUNNER_TOKEN"]
    # A registration token the controller fetched, in the runner's Secret (not the spec).
    assert token["valueFrom"]["secretKeyRef"]["name"].endswith("-registration")

    async def all_completed() -> bool:
        return all(w.gh.state.jobs[j.request_id].status == "completed" for j in jobs)

    await eventually(all_completed, timeout=90, message="the runners ran all 3 jobs")
    pod_names = {p["metadata"]["name"] for p in pods}
    ran_on = {w.gh.state.jobs[j.request_id].runner_name for j in jobs}
    assert ran_on <= pod_names | {None} and None not in ran_on

    await eventually(lambda: replicas(0), timeout=60, message="an empty queue: replicas 0")

    async def no_runners() -> bool:
        return await w.live(RUNNERS) == []

    await eventually(no_runners, timeout=90, message="every Runner gone after scale-down")
