"""What one queue message does: statistics, acquire, runner job info, completions, ack.

The order matters. Available jobs are acquired in one call per message (one API call for a
burst of 100 jobs, not 100). JobStarted writes the job onto the EphemeralRunner so the
controller knows the runner is busy and never scales it down. JobCompleted marks the scaler
dirty, so the next patch carries a fresh ID and the controller re-counts (cleaning up
finished runners) instead of treating the state as idle. A JobStarted does not: ARC patches
the set for it with a fresh ID and the same count, but nothing has finished and the
runner's busy mark is its status write, so that patch (a quarter of a quiet set's
EphemeralRunnerSet writes per job) would only make the controller count again. The message is
deleted (acknowledged) only after all of that, so a crash in the middle redelivers it;
every step is idempotent, which makes the redelivery harmless.

Each remote step retries transient failures itself (bounded) through ``retry``: one flaky
call must not cost the whole batch or hold up the publish that follows.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gharc.github import errors as gherrors
from gharc.github.models import (
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    RunnerScaleSetMessage,
    RunnerScaleSetStatistic,
)
from gharc.listener.metrics import ListenerMetrics
from gharc.listener.runnerset_writes import RunnerNotFound, RunnerSetPatcher, job_status
from gharc.listener.scaler import Scaler
from gharc.listener.session import SessionClient

__all__ = ["BatchResult", "MessageHandler", "Retry"]

log = logging.getLogger("gharc.listener.handler")

T = TypeVar("T")
Retry = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def _once(what: str, op: Callable[[], Awaitable[T]]) -> T:
    return await op()


@dataclass
class BatchResult:
    """What a message contained and what was done with it (for logs and tests)."""

    message_id: int
    available: int = 0
    acquired: int = 0
    assigned: int = 0
    started: int = 0
    completed: Counter[str] = field(default_factory=Counter)
    runner_patches: int = 0
    runners_missing: int = 0
    statistics_behind: bool = False
    """The body holds more assigned jobs than the message's statistics count (ARC #3420)."""
    acknowledged: bool = False
    """The message was deleted already (one that could not be read); the loop deletes the
    others beside the patch they lead to."""


class MessageHandler:
    """Applies messages; owns the latest statistics the scaler is evaluated against."""

    def __init__(
        self,
        session: SessionClient,
        patcher: RunnerSetPatcher,
        scaler: Scaler,
        metrics: ListenerMetrics | None = None,
        retry: Retry | None = None,
    ) -> None:
        self.session = session
        self.patcher = patcher
        self.scaler = scaler
        self.metrics = metrics
        self.retry: Retry = retry or _once
        self.statistics = RunnerScaleSetStatistic()
        self.completed_by_result: Counter[str] = Counter()
        self.acquired_total = 0
        self.started_total = 0
        self.statistics_marker: int | None = None
        """The cleanup marker known before :attr:`statistics` were read (B3)."""
        self.statistics_unconfirmed = False
        """Job messages arrived since statistics were last read fresh: a message's own may
        lag its body, so the loop re-reads them once the queue goes quiet."""
        self.dropped: Counter[str] = Counter()
        """Messages given up on, by reason (``gharc_listener_messages_dropped_total``)."""

    def record_statistics(
        self, stats: RunnerScaleSetStatistic | None, marker: int | None = None
    ) -> None:
        """Keep ``stats``; ``marker`` is the set's cleanup marker known before they were read
        (``None``: unknown), which a patch built on them is conditioned on (B3)."""
        if stats is None:
            return
        self.statistics = stats
        self.statistics_marker = marker
        if self.metrics is not None:
            self.metrics.record_statistics(stats)

    async def handle(self, msg: RunnerScaleSetMessage, marker: int | None = None) -> BatchResult:
        """Everything but the publish and the delete, which the loop does right after, side
        by side (:meth:`delete`); ``marker`` is the cleanup marker known when the poll that
        brought ``msg`` began."""
        result = BatchResult(message_id=msg.message_id)
        self.record_statistics(msg.statistics, marker)
        if msg.malformed is not None:
            log.error("message %d cannot be read, dropped: %s", msg.message_id, msg.malformed)
            self.count_dropped("malformed")
            await self.delete(msg.message_id)
            result.acknowledged = True
            return result
        if msg.skipped_jobs:
            self.count_dropped("job", msg.skipped_jobs)
        if msg.jobs:
            self.statistics_unconfirmed = True
            result.statistics_behind = _ahead_of_statistics(msg)
        if msg.message_type and msg.message_type != "RunnerScaleSetJobMessages":
            log.info("message %d of type %r ignored", msg.message_id, msg.message_type)
        available = [j for j in msg.jobs if isinstance(j, JobAvailable)]
        offered = [j.runner_request_id for j in available]
        if offered:
            await self._acquire(offered, result)
        if msg.statistics is not None and msg.statistics.total_available_jobs > len(offered):
            await self._acquire_unoffered(set(offered), result)
        for job in msg.jobs:
            if isinstance(job, JobAssigned):
                result.assigned += 1
                log.debug("job %s (request %d) assigned", job.job_id, job.runner_request_id)
            elif isinstance(job, JobStarted):
                result.started += 1
                self.started_total += 1
                await self._job_started(job, result)
            elif isinstance(job, JobCompleted):
                result.completed[job.result or "unknown"] += 1
                self.completed_by_result[job.result or "unknown"] += 1
                self.scaler.mark_dirty()
                if self.metrics is not None:
                    self.metrics.record_job_completed(job)
                log.info(
                    "job %s (request %d) completed: %s on %s",
                    job.job_id,
                    job.runner_request_id,
                    job.result,
                    job.runner_name,
                )
        return result

    async def delete(self, message_id: int) -> None:
        """Acknowledge a message: the service stops redelivering it.

        Already gone (404) counts as done: a redelivered message that an earlier attempt
        deleted after all, or one the service dropped.
        """
        try:
            await self.retry("delete message", lambda: self.session.delete_message(message_id))
        except gherrors.NotFound as err:
            log.info("message %d was already deleted (%s)", message_id, err.status)

    def count_dropped(self, reason: str, count: int = 1) -> None:
        self.dropped[reason] += count
        if self.metrics is not None:
            self.metrics.record_dropped(reason, count)

    async def _acquire(self, ids: list[int], result: BatchResult) -> None:
        acquired: list[int] = await self.retry(
            "acquire jobs", lambda: self.session.acquire_jobs(ids)
        )
        result.available += len(ids)
        result.acquired += len(acquired)
        self.acquired_total += len(acquired)
        log.info("acquired %d of %d available jobs", len(acquired), len(ids))

    async def _acquire_unoffered(self, offered: set[int], result: BatchResult) -> None:
        """The statistics count more available jobs than the message offered: the service
        truncates a delivery (at 50 job messages) and never offers the rest again, so a
        listener that acquired only what it was offered would leave them queued for good.
        Ask for the acquirable jobs (one GET, only when the counts disagree) and acquire
        those."""
        listed: list[int] = await self.retry(
            "list acquirable jobs", lambda: self.session.acquirable_jobs()
        )
        rest = [rid for rid in listed if rid not in offered]
        if rest:
            log.info("%d available job(s) were not offered in the message", len(rest))
            await self._acquire(rest, result)

    async def _job_started(self, job: JobStarted, result: BatchResult) -> None:
        if self.metrics is not None:
            self.metrics.record_job_started(job)
        if not job.runner_name:
            log.warning("JobStarted for request %d names no runner", job.runner_request_id)
            return
        status = job_status(
            runner_request_id=job.runner_request_id,
            owner_name=job.owner_name,
            repository_name=job.repository_name,
            job_id=job.job_id,
            workflow_run_id=job.workflow_run_id,
            job_workflow_ref=job.job_workflow_ref,
            job_display_name=job.job_display_name,
        )
        try:
            await self.retry(
                f"patch runner {job.runner_name}",
                lambda: self.patcher.patch_runner_job(job.runner_name, status),
            )
            result.runner_patches += 1
        except RunnerNotFound:
            # The runner may already be cleaned up (a fast job); nothing to annotate.
            result.runners_missing += 1
            log.info("EphemeralRunner %s not found; job info not recorded", job.runner_name)


def _ahead_of_statistics(msg: RunnerScaleSetMessage) -> bool:
    """True when the batch assigns more jobs (not completed in it) than its statistics count.

    Jobs are told apart by ``jobId``: ``runnerRequestId`` is 0 outside JobAvailable.
    """
    if msg.statistics is None:
        return False
    assigned = {j.job_id or j.runner_request_id for j in msg.jobs if isinstance(j, JobAssigned)}
    done = {j.job_id or j.runner_request_id for j in msg.jobs if isinstance(j, JobCompleted)}
    return len(assigned - done) > msg.statistics.total_assigned_jobs
