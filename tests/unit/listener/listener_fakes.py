"""In-memory stand-ins for the Actions service and the Kubernetes patcher (unit tests only)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from gharc.github import errors as gherrors
from gharc.github.models import AcquirableJob, RunnerScaleSetMessage, RunnerScaleSetSession
from gharc.listener.app import Listener
from gharc.listener.config import ListenerConfig
from gharc.listener.runnerset_writes import RunnerNotFound
from testworld.wait import eventually

Item = RunnerScaleSetMessage | BaseException | None


def config(**overrides: Any) -> ListenerConfig:
    base: dict[str, Any] = {
        "configure_url": "http://127.0.0.1:1/acme",
        "github_token": "t",
        "ephemeral_runner_set_namespace": "ns",
        "ephemeral_runner_set_name": "ers",
        "runner_scale_set_id": 7,
        "min_runners": 0,
        "max_runners": 10,
    }
    base.update(overrides)
    cfg = ListenerConfig.model_validate(base)
    cfg.validate_semantics()
    return cfg


def stats(assigned: int = 0, **more: int) -> dict[str, int]:
    return {"totalAssignedJobs": assigned, **more}


def message(
    message_id: int, jobs: list[dict[str, Any]], assigned: int, **statistics: int
) -> RunnerScaleSetMessage:
    return RunnerScaleSetMessage.from_wire(
        {
            "messageId": message_id,
            "messageType": "RunnerScaleSetJobMessages",
            "body": json.dumps(jobs),
            "statistics": stats(assigned, **statistics),
        }
    )


def job(kind: str, request_id: int, **more: Any) -> dict[str, Any]:
    return {
        "messageType": kind,
        "runnerRequestId": request_id,
        "ownerName": "acme",
        "repositoryName": "app",
        "jobId": f"job-{request_id}",
        "workflowRunId": 1000 + request_id,
        "jobWorkflowRef": "acme/app/.github/workflows/ci.yml@refs/heads/main",
        "jobDisplayName": "build",
        "eventName": "push",
        **more,
    }


class FakeActions:
    """Scripted queue: ``queue`` items are messages, None (a 202) or errors to raise."""

    def __init__(self, initial_assigned: int = 0, poll_seconds: float = 50.0) -> None:
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        self.poll_seconds = poll_seconds
        self.initial_assigned = initial_assigned
        self.create_errors: list[BaseException] = []
        self.acquire_errors: list[BaseException] = []
        self.calls: list[tuple[Any, ...]] = []
        self.token = "q1"
        self.sessions_created = 0
        self.deleted_sessions: list[str] = []
        self.deleted_messages: list[int] = []
        self.acquired: list[list[int]] = []
        self.acquirable: list[int] = []
        """Request ids ``get_acquirable_jobs`` lists (the service's view, not the messages')."""
        self.expire_next_poll = False
        self.delete_gate: asyncio.Event | None = None
        """When set, a message delete waits for it (a slow service)."""
        self.delete_errors: list[BaseException] = []

    def _session(self) -> RunnerScaleSetSession:
        return RunnerScaleSetSession.model_validate(
            {
                "sessionId": f"s{self.sessions_created}",
                "ownerName": "me",
                "messageQueueUrl": "http://127.0.0.1:1/queue",
                "messageQueueAccessToken": self.token,
                "statistics": stats(self.initial_assigned),
            }
        )

    async def create_message_session(self, scale_set_id: int, owner: str) -> RunnerScaleSetSession:
        self.calls.append(("create", scale_set_id, owner))
        if self.create_errors:
            raise self.create_errors.pop(0)
        self.sessions_created += 1
        return self._session()

    async def refresh_message_session(
        self, scale_set_id: int, session_id: str
    ) -> RunnerScaleSetSession:
        self.calls.append(("refresh", session_id))
        self.token = self.token + "'"
        return self._session()

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None:
        self.deleted_sessions.append(session_id)

    async def get_message(
        self, queue_url: str, queue_token: str, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None:
        self.calls.append(("get", last_message_id, max_capacity, queue_token))
        if self.expire_next_poll:
            self.expire_next_poll = False
            raise gherrors.MessageQueueTokenExpired("expired", status=401)
        if queue_token != self.token:
            raise gherrors.MessageQueueTokenExpired("stale token", status=401)
        try:
            item = await asyncio.wait_for(self.queue.get(), timeout=self.poll_seconds)
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    async def delete_message(self, queue_url: str, queue_token: str, message_id: int) -> None:
        if self.delete_gate is not None:
            await self.delete_gate.wait()
        if self.delete_errors:
            raise self.delete_errors.pop(0)
        self.deleted_messages.append(message_id)

    async def acquire_jobs(
        self, scale_set_id: int, queue_token: str, request_ids: list[int]
    ) -> list[int]:
        if self.acquire_errors:
            raise self.acquire_errors.pop(0)
        self.acquired.append(list(request_ids))
        return list(request_ids)

    async def get_acquirable_jobs(self, scale_set_id: int) -> list[AcquirableJob]:
        self.calls.append(("acquirable", scale_set_id))
        return [AcquirableJob(runner_request_id=rid) for rid in self.acquirable]

    async def aclose(self) -> None:
        pass


def conflict() -> gherrors.SessionConflict:
    return gherrors.SessionConflict(
        "The runner scale set already has an active session", status=409, exception_name="X"
    )


class FakePatcher:
    """Records patches; ``runners`` are the EphemeralRunners that exist."""

    def __init__(self, runners: set[str] | None = None) -> None:
        self.replicas: list[tuple[int, int]] = []
        self.runner_status: dict[str, dict[str, Any]] = {}
        self.runners = runners if runners is not None else set()
        self.errors: list[BaseException] = []
        self.changed = asyncio.Event()

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        if self.errors:
            raise self.errors.pop(0)
        self.replicas.append((replicas, patch_id))
        self.changed.set()

    async def patch_runner_job(self, runner_name: str, status: dict[str, Any]) -> None:
        if runner_name not in self.runners:
            raise RunnerNotFound(f"{runner_name} not found", 404)
        self.runner_status.setdefault(runner_name, {}).update(status)

    async def aclose(self) -> None:
        pass


#: Wait (in loop time) until ``cond()`` holds; fail the test after ``timeout``. The shared
#: helper with a 600 s default: under looptime a long poll's worth of waiting is free.
until = functools.partial(eventually, timeout=600.0)


@asynccontextmanager
async def running(listener: Listener) -> AsyncIterator[asyncio.Task[None]]:
    """``listener.run()`` as a task for the block, stopped and awaited after it."""
    task = asyncio.create_task(listener.run())
    try:
        yield task
    finally:
        listener.request_stop()
        await asyncio.wait_for(task, timeout=30)
