"""The safety net under webhooks: reserve for queued jobs whose ``queued`` delivery was lost.

GitHub does not retry a delivery that failed or never arrived, so with webhooks alone a
lost ``queued`` event is a job that waits until some other job's runner frees up, or
forever when the HRA scales to zero (ARC behaves the same). Every ``interval`` seconds this
lists the queued jobs of the repositories the workflow_job HRAs serve (GitHub REST, runs
``queued`` and ``in_progress``, then their jobs), finds each job's HRA exactly as a
delivery would, and submits a +1 named after the job. The batch scaler adds nothing for a
job that already has its reservation or already completed, so a job is reserved for at
most once whichever of the delivery and the poll comes first, and a lost delivery costs at
most ``interval`` plus one batch window. The first round runs at start, so jobs whose
deliveries were lost while no server ran are found at once. The listings are revalidated
with their ETags, never served from the HTTP cache (which would add up to a minute): an
unchanged listing answers 304, which costs no rate-limit quota.

Which repositories: a repository-scoped target's own; for organization and enterprise
targets, the HRA's ``metrics[].repositoryNames`` and every repository of that organization
or enterprise a delivery came from since the server started (at most ``MAX_SEEN``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gharc.github.models import WorkflowJob, WorkflowRun
from gharc.kube import objects
from gharc.webhook.batch import ADDED, BatchScaler, QueueFull, ScaleOp, job_key
from gharc.webhook.lookup import TargetLookup
from gharc.webhook.payload import JobEvent
from gharc.webhook.settings import WebhookSettings

log = logging.getLogger(__name__)

POLL_INTERVAL = WebhookSettings.queued_job_poll_interval
MAX_SEEN = 1000
MAX_REPOSITORIES = 200


class JobSource(Protocol):
    async def workflow_runs(self, owner: str, repo: str, status: str) -> list[WorkflowRun]: ...

    async def workflow_jobs(self, owner: str, repo: str, run_id: int) -> list[WorkflowJob]: ...


@dataclass(frozen=True)
class Repo:
    owner: str
    name: str
    owner_type: str = "Organization"
    enterprise: str = ""


class SeenRepos:
    """Repositories deliveries came from, most recent last, at most ``capacity``."""

    def __init__(self, capacity: int = MAX_SEEN) -> None:
        self.capacity = capacity
        self._repos: OrderedDict[tuple[str, str], Repo] = OrderedDict()

    def record(self, job: JobEvent) -> None:
        key = (job.owner, job.repo)
        owner_type = job.owner_type or "Organization"
        self._repos[key] = Repo(job.owner, job.repo, owner_type, job.enterprise)
        self._repos.move_to_end(key)
        while len(self._repos) > self.capacity:
            self._repos.popitem(last=False)

    def __iter__(self) -> Iterator[Repo]:
        return iter(list(self._repos.values()))


@dataclass
class PollResult:
    repositories: int = 0
    queued: int = 0
    reserved: int = 0
    errors: list[str] = field(default_factory=list)


class QueuedJobPoller:
    """Run :meth:`run` as a task; :meth:`poll` is one round."""

    def __init__(
        self,
        lookup: TargetLookup,
        scaler: BatchScaler,
        github: JobSource,
        *,
        interval: float = POLL_INTERVAL,
        seen: SeenRepos | None = None,
        wait: float = 30.0,
        on_reserved: Callable[[int], None] | None = None,
    ) -> None:
        self.lookup = lookup
        self.scaler = scaler
        self.github = github
        self.interval = interval
        self.seen = seen if seen is not None else SeenRepos()
        self.wait = wait
        self.on_reserved = on_reserved
        self.rounds = 0

    async def run(self) -> None:
        """A first round at start (deliveries sent while no server ran are lost, and the
        jobs they announced are queued now), then one every ``interval``."""
        first = True
        while True:
            if not first:
                await asyncio.sleep(self.interval)
            first = False
            try:
                result = await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("queued-job poll failed: %s", err)
                continue
            if result.reserved:
                log.warning(
                    "queued-job poll reserved %d runner(s) for queued jobs no delivery "
                    "reserved for (%d queued in %d repositories)",
                    result.reserved,
                    result.queued,
                    result.repositories,
                )

    async def repositories(self) -> list[Repo]:
        repos: dict[tuple[str, str], Repo] = {}
        seen = list(self.seen)
        for hra, spec in await self.lookup.workflow_job_targets():
            found: list[Repo] = []
            if spec.repository:
                owner, _, name = spec.repository.partition("/")
                found.append(Repo(owner, name))
            elif spec.organization:
                for metric in objects.spec_of(hra).get("metrics") or []:
                    for name in metric.get("repositoryNames") or []:
                        found.append(Repo(spec.organization, str(name)))
                found += [r for r in seen if r.owner == spec.organization]
            elif spec.enterprise:
                found += [r for r in seen if r.enterprise == spec.enterprise]
            for repo in found:
                repos.setdefault((repo.owner, repo.name), repo)
        out = list(repos.values())
        if len(out) > MAX_REPOSITORIES:
            log.warning("queued-job poll: %d repositories, polling %d", len(out), MAX_REPOSITORIES)
        return out[:MAX_REPOSITORIES]

    async def _queued(self, repo: Repo) -> list[WorkflowJob]:
        runs: Sequence[WorkflowRun] = [
            *await self.github.workflow_runs(repo.owner, repo.name, "queued"),
            *await self.github.workflow_runs(repo.owner, repo.name, "in_progress"),
        ]
        jobs: list[WorkflowJob] = []
        for run in {r.id: r for r in runs}.values():
            jobs += [
                j
                for j in await self.github.workflow_jobs(repo.owner, repo.name, run.id)
                if j.status == "queued"
            ]
        return jobs

    async def poll(self) -> PollResult:
        self.rounds += 1
        result = PollResult()
        pending: list[asyncio.Future[str]] = []
        for repo in await self.repositories():
            result.repositories += 1
            try:
                jobs = await self._queued(repo)
            except Exception as err:
                result.errors.append(f"{repo.owner}/{repo.name}: {err}")
                continue
            for job in jobs:
                result.queued += 1
                match = await self.lookup.find(
                    owner=repo.owner,
                    repo=repo.name,
                    owner_type=repo.owner_type,
                    enterprise=repo.enterprise,
                    labels=job.labels,
                )
                if match is None:
                    continue
                op = ScaleOp(match.namespace, match.name, 1, match.duration, job_key(job.id))
                try:
                    pending.append(self.scaler.submit(op))
                except QueueFull:
                    result.errors.append("scale queue full; the next round continues")
                    break
        if pending:
            done = await asyncio.wait_for(
                asyncio.gather(*pending, return_exceptions=True), self.wait
            )
            result.reserved = sum(1 for outcome in done if outcome == ADDED)
        if result.reserved and self.on_reserved is not None:
            self.on_reserved(result.reserved)
        for error in result.errors:
            log.warning("queued-job poll: %s", error)
        return result
