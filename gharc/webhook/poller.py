"""The safety net under webhooks: reserve for queued jobs whose ``queued`` delivery was lost.

GitHub does not retry a delivery that failed or never arrived, so with webhooks alone a
lost ``queued`` event is a job that waits until some other job's runner frees up, or
forever when the HRA scales to zero (ARC behaves the same). Every ``interval`` seconds this
lists the queued jobs of the repositories the workflow_job HRAs serve (GitHub REST, runs
``queued``, ``in_progress`` and ``waiting``, then their jobs), finds each job's HRA exactly as a
delivery would, and submits a +1 named after the job. The batch scaler adds nothing for a
job that already has its reservation or already completed, so a job is reserved for at
most once whichever of the delivery and the poll comes first, and a lost delivery costs at
most ``interval`` plus one batch window. The first round runs at start, so jobs whose
deliveries were lost while no server ran are found at once. The listings are revalidated
with their ETags, never served from the HTTP cache (which would add up to a minute): an
unchanged listing answers 304, which costs no rate-limit quota.

It also releases what a lost ``completed`` delivery left: a reservation named after a job
that is neither queued nor running in its repository's listing, once it is
``release_after`` seconds old (a job just queued may be missing from a listing for a
moment). Without this, each such reservation kept an idle runner until it expired (30
minutes by default). Only an HRA whose reservations' repositories are all known (recorded
on it, :mod:`gharc.webhook.repositories`) and were all listed this round has any released.

Which repositories: a repository-scoped target's own; for organization and enterprise
targets, the HRA's ``metrics[].repositoryNames``, the repositories its reservations came
from (recorded on the HRA, so a restarted server polls them in its first round) and every
repository of that organization or enterprise a delivery came from since the server
started (at most ``MAX_SEEN``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gharc.github.models import WorkflowJob, WorkflowRun
from gharc.kube import objects
from gharc.webhook import repositories as recorded
from gharc.webhook.batch import ADDED, REMOVED, BatchScaler, QueueFull, ScaleOp, job_key
from gharc.webhook.lookup import JSON, TargetLookup, TargetSpec
from gharc.webhook.payload import JobEvent
from gharc.webhook.settings import WebhookSettings

log = logging.getLogger(__name__)

POLL_INTERVAL = WebhookSettings.queued_job_poll_interval
MAX_SEEN = 1000
MAX_REPOSITORIES = 200
#: Seconds a named reservation must have been in effect before the poll may release it for
#: a job it does not find queued or running.
RELEASE_AFTER = 30.0
JOB_PREFIX = job_key(0)[:-1]


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
    released: int = 0
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
        release_after: float = RELEASE_AFTER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lookup = lookup
        self.scaler = scaler
        self.github = github
        self.interval = interval
        self.seen = seen if seen is not None else SeenRepos()
        self.wait = wait
        self.on_reserved = on_reserved
        self.release_after = release_after
        self.clock = clock
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
            if result.released:
                log.warning(
                    "queued-job poll released %d reservation(s) of jobs no longer queued or "
                    "running (their completed delivery was lost)",
                    result.released,
                )
            if result.reserved:
                log.warning(
                    "queued-job poll reserved %d runner(s) for queued jobs no delivery "
                    "reserved for (%d queued in %d repositories)",
                    result.reserved,
                    result.queued,
                    result.repositories,
                )

    async def repositories(
        self, targets: Sequence[tuple[JSON, TargetSpec]] | None = None
    ) -> list[Repo]:
        repos: dict[tuple[str, str], Repo] = {}
        seen = list(self.seen)
        if targets is None:
            targets = await self.lookup.workflow_job_targets()
        for hra, spec in targets:
            found: list[Repo] = []
            if spec.repository:
                owner, _, name = spec.repository.partition("/")
                found.append(Repo(owner, name))
            elif spec.organization:
                for metric in objects.spec_of(hra).get("metrics") or []:
                    for name in metric.get("repositoryNames") or []:
                        found.append(Repo(spec.organization, str(name)))
                found += [
                    Repo(owner, name)
                    for owner, _, name in (r.partition("/") for r in recorded.read(hra))
                    if owner == spec.organization
                ]
                found += [r for r in seen if r.owner == spec.organization]
            elif spec.enterprise:
                found += [
                    Repo(owner, name, enterprise=spec.enterprise)
                    for owner, _, name in (r.partition("/") for r in recorded.read(hra))
                ]
                found += [r for r in seen if r.enterprise == spec.enterprise]
            for repo in found:
                repos.setdefault((repo.owner, repo.name), repo)
        out = list(repos.values())
        if len(out) > MAX_REPOSITORIES:
            log.warning("queued-job poll: %d repositories, polling %d", len(out), MAX_REPOSITORIES)
        return out[:MAX_REPOSITORIES]

    async def _listing(self, repo: Repo) -> tuple[list[WorkflowJob], set[int]]:
        """The queued jobs of ``repo``, and the ids of every job not completed (queued or
        running) in its queued, in-progress and waiting runs (a run waiting for an approval
        may have other jobs queued or running)."""
        runs: Sequence[WorkflowRun] = [
            *await self.github.workflow_runs(repo.owner, repo.name, "queued"),
            *await self.github.workflow_runs(repo.owner, repo.name, "in_progress"),
            *await self.github.workflow_runs(repo.owner, repo.name, "waiting"),
        ]
        queued: list[WorkflowJob] = []
        active: set[int] = set()
        for run in {r.id: r for r in runs}.values():
            for j in await self.github.workflow_jobs(repo.owner, repo.name, run.id):
                if j.status != "completed":
                    active.add(j.id)
                if j.status == "queued":
                    queued.append(j)
        return queued, active

    async def poll(self) -> PollResult:
        self.rounds += 1
        result = PollResult()
        pending: list[asyncio.Future[str]] = []
        targets = await self.lookup.workflow_job_targets()
        listed: set[str] = set()
        active: set[int] = set()
        for repo in await self.repositories(targets):
            result.repositories += 1
            try:
                jobs, running = await self._listing(repo)
            except Exception as err:
                result.errors.append(f"{repo.owner}/{repo.name}: {err}")
                continue
            listed.add(f"{repo.owner}/{repo.name}")
            active |= running
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
                op = ScaleOp(
                    match.namespace,
                    match.name,
                    1,
                    match.duration,
                    job_key(job.id),
                    f"{repo.owner}/{repo.name}",
                )
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
        result.released = await self._release(targets, listed, active)
        for error in result.errors:
            log.warning("queued-job poll: %s", error)
        return result

    async def _release(
        self, targets: Sequence[tuple[JSON, TargetSpec]], listed: set[str], active: set[int]
    ) -> int:
        """Release the reservations of jobs this round found neither queued nor running,
        on the HRAs whose reservations' repositories were all listed; how many it did."""
        now = self.clock()
        pending: list[asyncio.Future[str]] = []
        for hra, _spec in targets:
            repos = recorded.read(hra)
            if not repos or len(repos) >= recorded.CAPACITY:
                continue  # a reservation's repository may be unknown
            if not set(repos) <= listed:
                continue
            for reservation in objects.spec_of(hra).get("capacityReservations") or []:
                name = str(reservation.get("name") or "")
                if not name.startswith(JOB_PREFIX):
                    continue
                try:
                    job_id = int(name[len(JOB_PREFIX) :])
                except ValueError:
                    continue
                since = objects.parse_time(reservation.get("effectiveTime"))
                if job_id in active or since is None:
                    continue
                if now - since.timestamp() < self.release_after:
                    continue
                hra_meta = objects.meta(hra)
                ns, hra_name = hra_meta.get("namespace", ""), hra_meta.get("name", "")
                op = ScaleOp(ns, hra_name, -1, dt.timedelta(0), name, own_only=True)
                try:
                    pending.append(self.scaler.submit(op))
                except QueueFull:
                    break
        if not pending:
            return 0
        done = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), self.wait)
        return sum(1 for outcome in done if outcome == REMOVED)
