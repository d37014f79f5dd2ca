"""The queued-job poll (reserves for queued jobs whose delivery was lost, once) and the
bounded per-owner REST clients."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS
from gharc.github.models import WorkflowJob, WorkflowRun
from gharc.kube import objects
from gharc.webhook import repositories as recorded
from gharc.webhook.batch import NOTHING, REMOVED, BatchScaler, ScaleOp, plan
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
        self.run_status: dict[int, str] = {}

    def add(
        self,
        repo: str,
        job_id: int,
        status: str = "queued",
        labels: Any = None,
        run_status: str = "",
    ) -> None:
        """``run_status``: the job's run's, when not the job's own (a run waiting for an
        approval while another of its jobs is queued)."""
        owner, _, name = repo.partition("/")
        if run_status:
            self.run_status[job_id * 10] = run_status
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
            if self.run_status.get(j.run_id, run_status.get(j.status or "")) == status
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


def _reservation(name: str, age: float, now: float) -> dict[str, Any]:
    start = dt.datetime.fromtimestamp(now - age, dt.UTC)
    return {
        "effectiveTime": objects.format_time(start),
        "expirationTime": objects.format_time(start + dt.timedelta(minutes=30)),
        "replicas": 1,
        **({"name": name} if name else {}),
    }


async def test_a_reservation_whose_job_is_no_longer_queued_or_running_is_released() -> None:
    """A completed delivery lost (the server was down) left its job's reservation, and an
    idle runner with it, for the reservation's whole duration."""
    kube, jobs = world(), Jobs()
    now = time.time()
    hra = kube.objects[(HORIZONTAL_RUNNER_AUTOSCALERS, "ns", "hra")]
    hra["metadata"]["annotations"] = {recorded.ANNOTATION: '["acme/app"]'}
    hra["spec"]["capacityReservations"] = [
        _reservation("job-7", 120, now),  # completed: its run is no longer listed
        _reservation("job-8", 120, now),  # running
        _reservation("job-9", 10, now),  # too young to tell from a listing lag
        _reservation("", 120, now),  # ARC's unnamed one: never the poll's to release
    ]
    jobs.add("acme/app", 8, status="in_progress")
    poller, task = await _poller(kube, jobs)
    try:
        result = await poller.poll()
        assert result.released == 1
        assert [r.get("name") for r in kube.reservations()] == ["job-8", "job-9", None]
        assert (await poller.poll()).released == 0  # released once
    finally:
        task.cancel()


async def test_no_reservation_is_released_while_a_repository_may_be_unknown() -> None:
    kube, jobs = world(), Jobs()
    now = time.time()
    hra = kube.objects[(HORIZONTAL_RUNNER_AUTOSCALERS, "ns", "hra")]
    hra["spec"]["capacityReservations"] = [_reservation("job-7", 120, now)]
    poller, task = await _poller(kube, jobs)
    try:
        assert (await poller.poll()).released == 0  # no repositories recorded on the HRA
        hra["metadata"]["annotations"] = {recorded.ANNOTATION: '["acme/app", "acme/gone"]'}
        assert (await poller.poll()).released == 0  # acme/gone is not this target's: unlisted
        assert [r.get("name") for r in kube.reservations()] == ["job-7"]
    finally:
        task.cancel()


async def test_an_org_target_polls_the_repositories_recorded_on_its_hra_after_a_restart() -> None:
    """A restarted server has seen no delivery: the recorded repositories are polled in
    its first round, so jobs whose deliveries were lost while it was down are found."""
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
            "metadata": {
                "name": "hra",
                "namespace": "ns",
                "annotations": {recorded.ANNOTATION: '["acme/app", "other/x"]'},
            },
            "spec": {
                "scaleTargetRef": {"name": "rd"},
                "maxReplicas": 9,
                "scaleUpTriggers": [{"githubEvent": {"workflowJob": {}}, "duration": "5m"}],
            },
        },
    )
    jobs = Jobs()
    jobs.add("acme/app", 1)
    poller, task = await _poller(kube, jobs)
    try:
        assert [(r.owner, r.name) for r in await poller.repositories()] == [("acme", "app")]
        assert (await poller.poll()).reserved == 1
    finally:
        task.cancel()


async def test_a_reservation_records_its_repository_on_the_hra_in_the_same_patch() -> None:
    kube = world()
    scaler = BatchScaler(kube, window=0.01)  # type: ignore[arg-type]
    task = asyncio.create_task(scaler.run())
    try:
        ten = dt.timedelta(minutes=10)
        ops = [ScaleOp("ns", "hra", 1, ten, f"job-{i}", "acme/app") for i in (1, 2)]
        ops.append(ScaleOp("ns", "hra", 1, ten, "job-3", "acme/lib"))
        await asyncio.gather(*(scaler.submit(op) for op in ops))
        hra = await kube.get(HORIZONTAL_RUNNER_AUTOSCALERS, "hra", namespace="ns")
        assert recorded.read(hra) == ["acme/app", "acme/lib"]
        assert len(hra["spec"]["capacityReservations"]) == 3
        patches = scaler.patches
        await scaler.submit(ScaleOp("ns", "hra", 1, ten, "job-1", "acme/app"))
        assert scaler.patches == patches  # a repeat with a known repository writes nothing
    finally:
        task.cancel()


def test_the_polls_release_neither_takes_an_unnamed_reservation_nor_marks_the_job_done() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    unnamed = _reservation("", 10, now.timestamp())
    done: set[str] = set()
    release = ScaleOp("ns", "hra", -1, dt.timedelta(0), "job-4", own_only=True)
    planned, outcomes = plan([unnamed], 10, [release], now, done)
    assert planned == [unnamed] and outcomes == [NOTHING] and done == set()
    own = _reservation("job-4", 10, now.timestamp())
    planned, outcomes = plan([own], 10, [release], now, done)
    assert planned == [] and outcomes == [REMOVED] and done == set()


async def test_the_polls_reservations_record_their_repository_and_waiting_runs_count() -> None:
    """A reservation of the poll's own must name its repository on the HRA too, or a round
    whose listing of that repository failed would release it; a queued job of a run
    waiting for an approval is queued all the same."""
    kube, jobs = world(), Jobs()
    jobs.add("acme/app", 1, run_status="waiting")
    poller, task = await _poller(kube, jobs)
    try:
        assert (await poller.poll()).reserved == 1
        hra = await kube.get(HORIZONTAL_RUNNER_AUTOSCALERS, "hra", namespace="ns")
        assert recorded.read(hra) == ["acme/app"]
        poller.release_after = 0.0
        assert (await poller.poll()).released == 0  # still queued in its waiting run
    finally:
        task.cancel()
