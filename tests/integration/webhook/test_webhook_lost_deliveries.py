"""Lost ``queued`` deliveries: the webhook server's poll of GitHub's queued jobs reserves for
the jobs no delivery reached, within a bounded time, and for each job once."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from gharc.kube.client import KubeClient
from gharc.webhook.main import WebhookArgs
from testworld import webhook
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer
from testworld.sim.github.webhooks import WebhookDeliverer
from testworld.wait import eventually

sys.path.insert(0, str(Path(__file__).parents[1] / "legacy"))
from _hraworld import HRAWorld

pytestmark = pytest.mark.cluster
SECRET = "lost-s3cret"
JOBS = 20
POLL = 1.0


async def test_jobs_whose_queued_delivery_was_dropped_still_get_a_runner(
    api_client: Any, namespace: str, kubeconfig: str
) -> None:
    """Issue 19: with 30 % of queued deliveries dropped, 7 of 20 jobs never ran."""
    async with FakeGitHubServer(port=0, rest_max_age=0) as gh:
        w = HRAWorld(KubeClient(api_client), gh, namespace)
        await w.create_rd(replicas=0, labels=["linux"])
        await w.create_hra(
            minReplicas=0,
            maxReplicas=JOBS + 5,
            scaleUpTriggers=[{"githubEvent": {"workflowJob": {}}, "duration": "30m"}],
        )
        args = WebhookArgs(
            webhook_addr="127.0.0.1:0",
            metrics_addr="0",
            watch_namespace=namespace,
            secret=SECRET,
            batch_window=0.3,
            kubeconfig=kubeconfig,
            github_enterprise_url=gh.url,
            github_token=gh.token,
            queued_job_poll_interval=POLL,
        )
        holder: dict[str, Any] = {}
        task = asyncio.create_task(webhook.serve(args, holder))

        async def started() -> bool:
            return bool("server" in holder and holder["server"].started.is_set())

        await eventually(started, timeout=30, message="webhook server up")
        hooks = WebhookDeliverer(gh.state)
        hook = hooks.add_hook(f"http://127.0.0.1:{holder['server'].port}/", SECRET)
        await hooks.start()
        try:
            rng = random.Random(19)
            dropped = set(rng.sample(range(JOBS), int(JOBS * 0.3)))
            jobs = []
            for i in range(JOBS):
                hooks.hooks = [] if i in dropped else [hook]  # a dropped delivery never arrives
                jobs.append(w.gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"]))
            hooks.hooks = [hook]
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            await hooks.drain(timeout=60)
            assert len(hooks.of("queued")) == JOBS - len(dropped)

            async def all_reserved() -> list[str]:
                hra = await w.hra()
                names = [r.get("name") for r in hra["spec"].get("capacityReservations") or []]
                return names if len(names) >= JOBS else []

            names = await eventually(all_reserved, timeout=30, message="every job reserved")
            print(f"all {JOBS} jobs reserved {loop.time() - t0:.1f} s after the last was queued")
            assert sorted(names) == sorted(f"job-{j.numeric_id}" for j in jobs)
            await asyncio.sleep(3 * POLL)  # later polls add nothing
            assert len((await w.hra())["spec"]["capacityReservations"]) == JOBS
        finally:
            await hooks.stop()
            holder["manager"].stop()
            await asyncio.wait_for(task, 15)
