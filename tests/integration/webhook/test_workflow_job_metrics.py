"""ARC's github_workflow_job* metrics, scraped from a running ``gharc webhook-server``'s
/metrics after signed workflow_job deliveries, with HRAs in the real API server.

Two ways to run it, as the legacy chart does: the webhook server with
``--workflow-job-metrics`` (it scales and counts), and ``--metrics-only`` (ARC's
actions-metrics-server: it counts and never touches an HRA).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS
from gharc.kube.client import KubeClient
from gharc.webhook.main import WebhookArgs, parse_args
from testworld import legacy, webhook
from testworld.wait import eventually

pytestmark = pytest.mark.cluster
SECRET = "metrics-s3cret"
REPO = {"name": "app", "full_name": "acme/app", "owner": {"login": "acme", "type": "User"}}


def delivery(action: str, job_id: int, **job: Any) -> dict[str, Any]:
    return {
        "action": action,
        "workflow_job": {
            "id": job_id,
            "run_id": 1,
            "name": "build",
            "workflow_name": "CI",
            "head_branch": "main",
            "labels": ["self-hosted", "linux"],
            "created_at": "2026-01-01T10:00:00Z",
            **job,
        },
        "repository": REPO,
    }


class Running:
    """A webhook server task, its HTTP session and the two ports it serves."""

    def __init__(self, holder: dict[str, Any], task: asyncio.Task[None]) -> None:
        self.holder, self.task = holder, task
        self.session = aiohttp.ClientSession()

    async def post(self, body: dict[str, Any], delivery_id: str) -> tuple[int, str]:
        data = json.dumps(body).encode()
        headers = webhook.delivery_headers(SECRET, data, delivery_id)
        url = f"http://127.0.0.1:{self.holder['server'].port}/"
        async with self.session.post(url, data=data, headers=headers) as resp:
            return resp.status, await resp.text()

    async def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        url = f"http://127.0.0.1:{self.holder['manager'].metrics_port}/metrics"
        async with self.session.get(url) as resp:
            text = await resp.text()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


@pytest.fixture
async def serve(kubeconfig: str, namespace: str) -> AsyncIterator[Any]:
    running: list[Running] = []

    async def start(*flags: str) -> Running:
        args: WebhookArgs = parse_args(
            [
                "--webhook-addr=127.0.0.1:0",
                "--metrics-addr=127.0.0.1:0",
                f"--watch-namespace={namespace}",
                "--batch-window=0.2",
                f"--kubeconfig={kubeconfig}",
                *flags,
            ],
            {"GITHUB_WEBHOOK_SECRET_TOKEN": SECRET},
        )
        holder: dict[str, Any] = {}
        task = asyncio.create_task(webhook.serve(args, holder))

        async def up() -> bool:
            s, m = holder.get("server"), holder.get("manager")
            return bool(s and s.started.is_set() and m.metrics_port)

        await eventually(up, timeout=30, message="webhook server up")
        r = Running(holder, task)
        running.append(r)
        return r

    yield start
    for r in running:
        await r.session.close()
        r.holder["manager"].stop()
        await asyncio.wait_for(r.task, 15)


async def _hra(kube: KubeClient, namespace: str) -> None:
    await kube.create(
        RUNNER_DEPLOYMENTS, legacy.runner_deployment(namespace, repository="acme/app", replicas=0)
    )
    await kube.create(
        HORIZONTAL_RUNNER_AUTOSCALERS,
        legacy.horizontal_runner_autoscaler(namespace, 5, duration="5m"),
    )


LABELS = {
    "runs_on": "self-hosted,linux",
    "job_name": "build",
    "organization": "",
    "repository": "app",
    "repository_full_name": "acme/app",
    "owner": "acme",
    "workflow_name": "CI",
    "head_branch": "main",
}


def key(name: str, **extra: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset({**LABELS, **extra}.items())


async def test_the_webhook_server_scales_and_counts_each_job_event_once(
    serve: Any, api_client: Any, namespace: str
) -> None:
    kube = KubeClient(api_client)
    await _hra(kube, namespace)
    r = await serve("--workflow-job-metrics")
    assert await r.post(delivery("queued", 1), "q1") == (200, "scaled hra by 1")
    assert await r.post(delivery("queued", 1), "q1") == (200, "scaled hra by 1")  # repeat
    started = {"started_at": "2026-01-01T10:00:45Z"}
    assert (await r.post(delivery("in_progress", 1, **started), "p1"))[0] == 200
    failed = delivery(
        "completed",
        1,
        conclusion="failure",
        completed_at="2026-01-01T10:01:45Z",
        steps=[{"conclusion": "success"}, {"conclusion": "failure"}],
        **started,
    )
    assert await r.post(failed, "c1") == (200, "scaled hra by -1")
    m = await r.scrape()
    assert m[key("github_workflow_jobs_queued_total")] == 1
    assert m[key("github_workflow_jobs_started_total")] == 1
    assert m[key("github_workflow_jobs_completed_total")] == 1
    assert m[key("github_workflow_job_conclusions_total", job_conclusion="failure")] == 1
    assert m[key("github_workflow_job_failures_total", failed_step="1", exit_code="na")] == 1
    assert m[key("github_workflow_job_queue_duration_seconds_sum")] == 45
    run = key("github_workflow_job_run_duration_seconds_sum", job_conclusion="failure")
    assert m[run] == 60
    hra = await kube.get(HORIZONTAL_RUNNER_AUTOSCALERS, "hra", namespace=namespace)
    assert not hra["spec"].get("capacityReservations")


async def test_metrics_only_counts_and_never_touches_an_hra(
    serve: Any, api_client: Any, namespace: str
) -> None:
    kube = KubeClient(api_client)
    await _hra(kube, namespace)
    r = await serve("--metrics-only", "--workflow-job-metrics-max-series=2")
    for i in range(4):
        assert await r.post(delivery("queued", 10 + i, name=f"job-{i}"), f"q{i}") == (200, "")
    m = await r.scrape()
    assert m[key("github_workflow_jobs_queued_total", job_name="job-0")] == 1
    assert m[key("github_workflow_jobs_queued_total", job_name="job-1")] == 1
    other = ("github_workflow_jobs_queued_total", frozenset({k: "other" for k in LABELS}.items()))
    assert m[other] == 2
    queued = [k for k in m if k[0] == "github_workflow_jobs_queued_total"]
    assert len(queued) == 3
    hra = await kube.get(HORIZONTAL_RUNNER_AUTOSCALERS, "hra", namespace=namespace)
    assert not hra["spec"].get("capacityReservations")
    assert r.holder["server"].scaler.patches == 0
