"""The queued-job poll (reserves for queued jobs whose delivery was lost, once) and the
bounded per-owner REST clients."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS
from gharc.github.models import WorkflowJob, WorkflowRun
from gharc.webhook.batch import BatchScaler
from gharc.webhook.clients import OwnerClients
from gharc.webhook.lookup import TargetLookup
from gharc.webhook.payload import JobEvent
from gharc.webhook.poller import QueuedJobPoller, SeenRepos

sys.path.insert(0, str(Path(__file__).parent))
from _memkube import MemoryKube, world


class Jobs:
    """GitHub's runs and jobs, per repository."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], list[WorkflowJob]] = {}
        self.calls: list[tuple[str, str]] = []

    def add(self, repo: str, job_id: int, status: str = "queued", labels: Any = None) -> None:
        owner, _, name = repo.partition("/")
        job = WorkflowJob(
            id=job_id,
            run_id=job_id * 10,
            status=status,
            labels=labels or ["self-hosted", "linux"],
        )
        self.jobs.setdefault((owner, name), []).append(job)

    async def workflow_runs(self, owner: str, repo: str, status: str) -> list[WorkflowRun]:
        self.calls.append((owner, repo))
        jobs = self.jobs.get((owner, repo), [])
        run_status = {"queued": "queued", "in_progress": "in_progress"}
        return [
            WorkflowRun(id=j.run_id, status=j.status)
            for j in jobs
            if run_status.get(j.status or "") == status
        ]

    async def workflow_jobs(self, owner: str, repo: str, run_id: int) -> list[WorkflowJob]:
        return [j for j in self.jobs.get((owner, repo), []) if j.run_id == run_id]


async def _poller(kube: MemoryKube, jobs: Jobs, seen: SeenRepos | None = None) -> Any:
    scaler = BatchScaler(kube, window=0.01)  # type: ignore[arg-type]
    task = asyncio.create_task(scaler.run())
    poller = QueuedJobPoller(TargetLookup(kube), scaler, jobs, interval=3600, seen=seen)  # type: ignore[arg-type]
    return poller, task


async def test_a_queued_job_without_a_reservation_gets_one_once() -> None:
    """Issue 19: a job whose queued delivery was dropped never got a runner."""
    kube, jobs = world(), Jobs()
    jobs.add("acme/app", 1)
    jobs.add("acme/app", 2)
    jobs.add("acme/app", 3, status="in_progress")
    jobs.add("acme/app", 4, labels=["self-hosted", "gpu"])  # no HRA for these labels
    poller, task = await _poller(kube, jobs)
    try:
        first = await poller.poll()
        assert (first.repositories, first.queued, first.reserved) == (1, 3, 2)
        assert sorted(r["name"] for r in kube.reservations()) == ["job-1", "job-2"]
        again = await poller.poll()
        assert again.reserved == 0 and len(kube.reservations()) == 2
    finally:
        task.cancel()


async def test_org_targets_poll_named_and_delivered_repositories() -> None:
    kube = MemoryKube()
    kube.put(
        RUNNER_DEPLOYMENTS,
        {
            "metadata": {"name": "rd", "namespace": "ns"},
            "spec": {"template": {"spec": {"organization": "acme", "labels": ["linux"]}}},
        },
    )
    kube.put(
        HORIZONTAL_RUNNER_AUTOSCALERS,
        {
            "metadata": {"name": "hra", "namespace": "ns"},
            "spec": {
                "scaleTargetRef": {"name": "rd"},
                "maxReplicas": 9,
                "metrics": [{"repositoryNames": ["named"]}],
                "scaleUpTriggers": [{"githubEvent": {"workflowJob": {}}, "duration": "5m"}],
            },
        },
    )
    seen = SeenRepos(capacity=2)
    for repo in ("old", "seen", "other-org"):
        owner = "someone" if repo == "other-org" else "acme"
        seen.record(JobEvent("queued", 1, (), None, None, owner, "Organization", repo, ""))
    jobs = Jobs()
    poller, task = await _poller(kube, jobs, seen)
    try:
        repos = await poller.repositories()
        assert [(r.owner, r.name) for r in repos] == [("acme", "named"), ("acme", "seen")]
    finally:
        task.cancel()


class _Closing:
    def __init__(self, owner: str) -> None:
        self.owner, self.closed = owner, False

    async def aclose(self) -> None:
        self.closed = True


async def test_rest_clients_are_kept_for_a_bounded_number_of_owners() -> None:
    """Issue 20: one client per repository name seen in payloads was kept forever."""
    made: list[_Closing] = []

    def factory(owner: str) -> Any:
        made.append(_Closing(owner))
        return made[-1]

    clients = OwnerClients("https://github.com", None, capacity=3, factory=factory)  # type: ignore[arg-type]
    for i in range(50):
        clients.get(f"owner-{i}")
    clients.get("owner-49")
    assert len(clients) == 3 and len(made) == 50
    await asyncio.sleep(0)
    assert sum(not c.closed for c in made) == 3
    await clients.aclose()
    assert all(c.closed for c in made)


async def test_the_first_round_runs_at_start_not_after_an_interval() -> None:
    """Deliveries sent while no webhook server ran are lost: their jobs are found by the
    round at start, not an interval later."""
    kube, jobs = world(), Jobs()
    jobs.add("acme/app", 7)
    poller, task = await _poller(kube, jobs)
    runner = asyncio.create_task(poller.run())
    try:
        for _ in range(200):
            if kube.reservations():
                break
            await asyncio.sleep(0.01)
        assert [r["name"] for r in kube.reservations()] == ["job-7"]
        assert poller.rounds == 1  # the next waits its interval (3600 s here)
    finally:
        runner.cancel()
        task.cancel()
        await asyncio.gather(runner, task, return_exceptions=True)
