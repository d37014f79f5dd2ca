"""``workflow_job`` webhook deliveries from the fake GitHub (for legacy-mode tests and demos).

A repository or organization hook posts to a URL, as GitHub does: JSON body, headers
``X-GitHub-Event``, ``X-GitHub-Delivery`` (a fresh UUID per delivery), ``X-GitHub-Hook-ID``
and ``X-Hub-Signature-256`` (HMAC-SHA256 of the body with the hook's secret). Job
transitions in :class:`FakeGitHubState` become deliveries: enqueue -> ``queued``, the
runner starts it -> ``in_progress``, it finishes or is cancelled -> ``completed``.

Deliveries run in order on one task (``concurrency=1``) so a test sees ``queued`` before
``completed``; GitHub sends each on its own, out of order at times (``concurrency`` > 1). A
connection error or a 5xx answer is retried with a short backoff (``retry_delays``), a 4xx
is not (GitHub would not succeed by resending a rejected payload). GitHub itself retries
nothing: ``retry_delays=()`` (:data:`GITHUB_RETRIES`) delivers as it does, so a delivery to
a server that is down is lost until someone redelivers it. :meth:`WebhookDeliverer.redeliver`
is GitHub's "Redeliver" (the web UI or the REST API): the same body under the same
``X-GitHub-Delivery``, which names the event, not the attempt. Every attempt is kept in
:attr:`WebhookDeliverer.deliveries` for assertions.

    hooks = WebhookDeliverer(gh.state)
    hooks.add_hook("http://127.0.0.1:8000/", secret="s3cret")
    await hooks.start()
    gh.enqueue_job("octo-org/octo-repo", ["self-hosted", "linux"])   # -> queued delivery
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from testworld.sim.github.state import FakeGitHubState, Job, rfc3339

log = logging.getLogger("testworld.sim.github.webhooks")

_CONCLUSION = {"succeeded": "success", "failed": "failure", "canceled": "cancelled"}
#: GitHub does not retry a failed delivery by itself (its docs: "Handling failed webhook
#: deliveries"); the default short retries stand for a retrying proxy in front of the hook.
GITHUB_RETRIES: tuple[float, ...] = ()
RETRY_DELAYS: tuple[float, ...] = (0.2, 0.5, 1.0)


@dataclass
class Hook:
    id: int
    url: str
    secret: str
    owner: str | None = None  # only events of this owner (org or user); None: all
    signature: str | None = None  # force this X-Hub-Signature-256 (to test rejections)


@dataclass
class Delivery:
    hook_id: int
    guid: str
    event: str
    action: str
    job_id: int
    attempts: int = 0
    status: int | None = None  # last HTTP status; None after a connection error
    response: str = ""
    error: str = ""
    redelivery: bool = False

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class _Pending:
    hook: Hook
    delivery: Delivery
    body: bytes
    extra: dict[str, str] = field(default_factory=dict)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _time(ts: float | None) -> str | None:
    return rfc3339(ts).split(".")[0] + "Z" if ts else None


def workflow_job_payload(state: FakeGitHubState, job: Job, action: str) -> dict[str, Any]:
    """The body GitHub sends for a ``workflow_job`` event (the fields ARC reads, and more)."""
    status = {"queued": "queued", "in_progress": "in_progress"}.get(action, "completed")
    enterprise = state.orgs.get(job.owner)
    payload: dict[str, Any] = {
        "action": action,
        "workflow_job": {
            "id": job.numeric_id,
            "run_id": job.run_id,
            "name": job.display_name,
            "workflow_name": job.workflow_name,
            "head_branch": "main",
            "status": status,
            "conclusion": _CONCLUSION.get(job.conclusion or "", job.conclusion)
            if status == "completed"
            else None,
            "labels": list(job.labels),
            "runner_id": job.runner_id,
            "runner_name": job.runner_name,
            "runner_group_id": 1 if job.runner_id else None,
            "runner_group_name": "Default" if job.runner_id else None,
            "started_at": _time(job.start_time or job.queue_time),
            "completed_at": _time(job.finish_time),
        },
        "repository": {
            "id": abs(hash(job.full_repo)) % 10**8,
            "name": job.repo,
            "full_name": job.full_repo,
            "private": True,
            "owner": {"login": job.owner, "type": "Organization"},
        },
        "organization": {"login": job.owner},
        "sender": {"login": "octocat", "type": "User"},
    }
    if enterprise:
        payload["enterprise"] = {"slug": enterprise, "name": enterprise}
    return payload


class WebhookDeliverer:
    """Subscribes to a fake GitHub's job transitions and delivers them to hooks."""

    def __init__(
        self,
        state: FakeGitHubState,
        *,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        timeout: float = 10.0,
        concurrency: int = 1,
    ) -> None:
        """``concurrency``: deliveries in flight at once. One keeps them in order; GitHub
        sends each on its own, so a server that answers once a batch is stored (gharc's,
        every ``--batch-window``) gets a burst's deliveries together only with more."""
        self.state = state
        self.concurrency = concurrency
        self._busy = 0
        self.hooks: list[Hook] = []
        self.deliveries: list[Delivery] = []
        self.retry_delays = tuple(retry_delays)
        self.timeout = timeout
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._sent: dict[tuple[int, str], _Pending] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        state.job_observers.append(self._on_job)

    def add_hook(
        self, url: str, secret: str, *, owner: str | None = None, signature: str | None = None
    ) -> Hook:
        hook = Hook(len(self.hooks) + 1, url, secret, owner, signature)
        self.hooks.append(hook)
        return hook

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(), name=f"webhooks-{i}") for i in range(self.concurrency)
        ]

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.state.job_observers.remove(self._on_job)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> WebhookDeliverer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait until every delivery queued so far has been attempted to the end."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    def of(self, action: str | None = None) -> list[Delivery]:
        return [d for d in self.deliveries if action is None or d.action == action]

    # ---- producing --------------------------------------------------------------------

    def _on_job(self, job: Job, action: str) -> None:
        self.send("workflow_job", workflow_job_payload(self.state, job, action), job.numeric_id)

    def send(self, event: str, payload: dict[str, Any], job_id: int = 0) -> list[Delivery]:
        """Queue ``payload`` as ``event`` to every hook of its owner; returns the deliveries."""
        owner = ((payload.get("repository") or {}).get("owner") or {}).get("login")
        body = json.dumps(payload).encode()
        out = []
        for hook in self.hooks:
            if hook.owner is not None and hook.owner != owner:
                continue
            d = Delivery(hook.id, str(uuid.uuid4()), event, str(payload.get("action", "")), job_id)
            self.deliveries.append(d)
            pending = _Pending(hook, d, body)
            self._sent[(hook.id, d.guid)] = pending
            self._idle.clear()
            self._queue.put_nowait(pending)
            out.append(d)
        return out

    def redeliver(self, delivery: Delivery) -> Delivery:
        """Queue ``delivery`` again, as GitHub's "Redeliver" does: the same body, hook and
        ``X-GitHub-Delivery``, whatever became of the first attempt. Returns the new attempt's
        record (``redelivery`` set), also kept in :attr:`deliveries`."""
        first = self._sent[(delivery.hook_id, delivery.guid)]
        d = Delivery(
            first.hook.id,
            delivery.guid,
            delivery.event,
            delivery.action,
            delivery.job_id,
            redelivery=True,
        )
        self.deliveries.append(d)
        self._idle.clear()
        self._queue.put_nowait(_Pending(first.hook, d, first.body, first.extra))
        return d

    # ---- delivering -------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            self._busy += 1
            try:
                await self._deliver(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook delivery %s failed unexpectedly", item.delivery.guid)
            finally:
                self._busy -= 1
            if self._queue.empty() and not self._busy:
                self._idle.set()

    async def _deliver(self, item: _Pending) -> None:
        assert self._session is not None
        hook, d = item.hook, item.delivery
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/gharc-fake",
            "X-GitHub-Event": d.event,
            "X-GitHub-Delivery": d.guid,
            "X-GitHub-Hook-ID": str(hook.id),
            "X-Hub-Signature-256": hook.signature or sign(hook.secret, item.body),
        }
        for attempt, delay in enumerate((0.0, *self.retry_delays)):
            if delay:
                await asyncio.sleep(delay)
            d.attempts = attempt + 1
            try:
                async with self._session.post(hook.url, data=item.body, headers=headers) as resp:
                    d.status, d.response, d.error = resp.status, await resp.text(), ""
            except (aiohttp.ClientError, TimeoutError, OSError) as err:
                d.status, d.error = None, f"{type(err).__name__}: {err}"
                continue
            if d.status < 500:
                return
        log.warning("webhook %s to %s gave up after %d attempts", d.guid, hook.url, d.attempts)


def start_job(state: FakeGitHubState, job: Job, runner_id: int, runner_name: str) -> None:
    """A legacy (registration-token) runner picks up ``job``: ``in_progress`` is delivered.

    Legacy runners are not scale set members, so the Actions-service assignment flow does
    not apply; this sets what GitHub would show and notifies the observers.
    """
    job.status, job.runner_id, job.runner_name = "running", runner_id, runner_name
    job.runner_assign_time = job.start_time = state.now()
    runner = state.runners.get(runner_id)
    if runner is not None:
        runner.job = job.request_id
    state.notify_job(job, "in_progress")
    state.changed.fire()


def complete_job(state: FakeGitHubState, job: Job, result: str = "succeeded") -> None:
    """Finish ``job`` (``succeeded``/``failed``/``canceled``): ``completed`` is delivered."""
    state._finish(job, result, announce=job.scale_set_id is not None)
