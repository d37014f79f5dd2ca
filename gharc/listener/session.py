"""The message session: create it (waiting out another listener's), refresh it, close it.

Only one listener may hold a scale set's session. A 409 at start-up usually means the
previous listener died without deleting its session (the service drops it only after
minutes). ARC waits that out, with no runner created meanwhile. gharc takes it over: every
listener records its session id on its EphemeralRunnerSet (:class:`SessionRecord`), and
its successor first refreshes that session (a new queue token; undeleted messages are
delivered again) and, if the service no longer knows it, deletes it and creates a new one.
Only a 409 with no recorded session of ours left (a second cluster on the same scale set)
is waited out for a bounded time and then reported with a line that says exactly that.

Errors are sorted once, here, into three kinds, because the caller reacts to the kind only:

* transient (connection failures, timeouts, 5xx, Kubernetes hiccups): retry in-process with
  jittered backoff, never exit (ARC users saw crash loops on a plain EOF, #4488);
* fatal (401 after the client's own refresh, 403, a rate limit the client would not wait
  out, 404 of the scale set, other 4xx): exit non-zero with one line and let the
  controller's restart backoff (behaviours.md B1) pace the next attempt;
* the queue token expired (401 from the message queue): refresh the session and retry.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import httpx

from gharc.github import errors as gherrors
from gharc.github.models import (
    AcquirableJob,
    RunnerScaleSet,
    RunnerScaleSetMessage,
    RunnerScaleSetSession,
)
from gharc.listener.config import backoff_schedule
from gharc.listener.runnerset_writes import KubePatchError, RunnerNotFound, SessionRecord

__all__ = [
    "ActionsAPI",
    "FatalError",
    "SessionClient",
    "Stopped",
    "describe_fatal",
    "is_fatal",
    "is_transient",
    "jittered",
]

log = logging.getLogger("gharc.listener.session")

T = TypeVar("T")


class ActionsAPI(Protocol):
    """The part of ``gharc.github.actions.ActionsClient`` the listener uses."""

    async def create_message_session(
        self, scale_set_id: int, owner: str
    ) -> RunnerScaleSetSession: ...

    async def refresh_message_session(
        self, scale_set_id: int, session_id: str
    ) -> RunnerScaleSetSession: ...

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None: ...

    async def get_message(
        self, queue_url: str, queue_token: str, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None: ...

    async def delete_message(self, queue_url: str, queue_token: str, message_id: int) -> None: ...

    async def acquire_jobs(
        self, scale_set_id: int, queue_token: str, request_ids: list[int]
    ) -> list[int]: ...

    async def get_acquirable_jobs(self, scale_set_id: int) -> list[AcquirableJob]: ...

    async def get_runner_scale_set_by_id(self, scale_set_id: int) -> RunnerScaleSet | None: ...

    async def aclose(self) -> None: ...


class FatalError(Exception):
    """The listener cannot make progress by retrying; ``str()`` is the one line to print."""


class Stopped(Exception):
    """A stop was requested while waiting; unwind without further calls."""


def is_transient(err: BaseException) -> bool:
    """True for failures that a later retry can fix without anybody changing anything.

    A plain ``ValueError`` or ``TypeError`` is not: it comes from this code or from an
    answer it cannot read, and the same input fails the same way again (retrying a
    message forever stalls the queue behind it). Answers the client cannot read at all
    are :class:`MalformedResponse`, which a proxy in the way can cause for a while.
    """
    if isinstance(err, RunnerNotFound):
        return False  # the caller ignores it; retrying cannot make the runner appear
    if isinstance(err, KubePatchError):
        return True  # API server restarts, RBAC that lands a moment late, 5xx, timeouts
    if isinstance(err, gherrors.RateLimited):
        return False  # the client already waited out every limit it could
    if isinstance(err, gherrors.MalformedResponse):
        return True
    if isinstance(err, gherrors.GitHubError):
        return err.status is None or err.status >= 500 or err.status == 429
    return isinstance(err, httpx.HTTPError | OSError | TimeoutError)


def is_fatal(err: BaseException) -> bool:
    """A failure of the listener as a whole (credentials, rate limit, scale set gone), as
    opposed to one of a single message: the listener exits and its restart backoff paces
    the next attempt."""
    if isinstance(err, gherrors.RateLimited):
        return True
    return isinstance(err, gherrors.GitHubError) and err.status in (401, 403, 404)


def describe_fatal(err: BaseException, scale_set_id: int, config_url: str) -> str:
    """One line saying what failed and what to look at."""
    detail = getattr(err, "message", None) or str(err) or type(err).__name__
    status = getattr(err, "status", None)
    code = f"{status} " if status else ""
    if isinstance(err, gherrors.RateLimited):
        when = f" (resets at epoch {int(err.reset_at)})" if err.reset_at else ""
        return f"GitHub API rate limit exhausted for {config_url}{when}: {detail}"
    if isinstance(err, gherrors.Unauthorized):
        return (
            f"GitHub rejected the listener's credentials for {config_url} ({code}{detail}); "
            "check the GitHub config secret"
        )
    if isinstance(err, gherrors.NotFound):
        return (
            f"runner scale set {scale_set_id} not found at {config_url} ({code}{detail}); "
            "was it deleted on GitHub?"
        )
    if isinstance(err, gherrors.GitHubError) and status == 403:
        return f"GitHub refused access for {config_url} ({code}{detail})"
    return f"{type(err).__name__}: {err}"


class SessionClient:
    """One scale set's message session over an :class:`ActionsAPI`.

    Queue calls refresh the session once on :class:`MessageQueueTokenExpired` and retry;
    a second 401 right after a refresh is fatal (the credential itself is gone).
    """

    def __init__(
        self,
        api: ActionsAPI,
        scale_set_id: int,
        owner: str,
        *,
        config_url: str = "",
        sleep: Callable[[float], Awaitable[bool]] | None = None,
        rng: random.Random | None = None,
        record: SessionRecord | None = None,
    ) -> None:
        self.api = api
        self.scale_set_id = scale_set_id
        self.owner = owner
        self.config_url = config_url
        self.session: RunnerScaleSetSession | None = None
        self._sleep = sleep or _plain_sleep
        self._rng = rng or random.Random()
        self._record = record
        self.refreshes = 0
        self.taken_over: str | None = None
        """The id of a predecessor's session this client resumed or deleted, if any."""

    # -- session lifecycle -------------------------------------------------------------------

    async def open(
        self,
        *,
        conflict_attempts: int = 10,
        conflict_initial_backoff: float = 2.0,
        conflict_max_backoff: float = 30.0,
        transient_max_backoff: float = 30.0,
    ) -> RunnerScaleSetSession:
        """Create the session; 409 is retried ``conflict_attempts`` times in all, then fatal.

        Transient failures are retried without limit (they do not count as attempts); the
        ``sleep`` callable returns True when a stop was requested, which raises
        :class:`Stopped`.
        """
        recorded = await self._recorded()
        if recorded is not None:
            resumed = await self._resume(recorded, transient_max_backoff)
            if resumed is not None:
                return resumed
        waits = backoff_schedule(conflict_initial_backoff, conflict_max_backoff, conflict_attempts)
        conflicts = 0
        transient = 0
        while True:
            try:
                self.session = await self.api.create_message_session(self.scale_set_id, self.owner)
                log.info(
                    "message session %s created for scale set %d (owner %s)",
                    self.session.session_id,
                    self.scale_set_id,
                    self.owner,
                )
                await self._save(self.session.session_id)
                return self.session
            except (gherrors.SessionConflict, gherrors.Conflict) as err:
                if recorded is not None and await self._delete_stale(recorded):
                    recorded = None
                    continue  # the predecessor's session is gone now: create at once
                conflicts += 1
                if conflicts >= conflict_attempts:
                    raise FatalError(
                        f"runner scale set {self.scale_set_id} at {self.config_url} already has "
                        f"an active message session held by another listener (409 after "
                        f"{conflicts} attempts): is another listener or cluster using this "
                        f"scale set? ({err.message})"
                    ) from None
                wait = waits[conflicts - 1]
                log.warning(
                    "scale set %d already has an active session (attempt %d/%d); retrying in %.1fs",
                    self.scale_set_id,
                    conflicts,
                    conflict_attempts,
                    wait,
                )
            except Exception as err:
                if not is_transient(err):
                    raise FatalError(
                        describe_fatal(err, self.scale_set_id, self.config_url)
                    ) from None
                transient += 1
                wait = jittered(transient, transient_max_backoff, self._rng)
                log.warning(
                    "creating the message session failed (%s); retrying in %.1fs", err, wait
                )
            if await self._sleep(wait):
                raise Stopped

    async def refresh(self) -> RunnerScaleSetSession:
        """A new queue token; a vanished session (404) is recreated."""
        session = self._require()
        try:
            self.session = await self.api.refresh_message_session(
                self.scale_set_id, session.session_id
            )
            self.refreshes += 1
        except gherrors.NotFound:
            log.warning("message session %s is gone; creating a new one", session.session_id)
            self.session = None
            return await self.open()
        return self.session

    async def close(self) -> bool:
        """Delete the session and its record (best effort); True when the service confirmed it.

        Only a requested stop closes the session. A listener that fails leaves it open and
        recorded, so that its successor resumes it (see the module docstring).
        """
        session = self.session
        if session is None:
            return False
        self.session = None
        try:
            await self.api.delete_message_session(self.scale_set_id, session.session_id)
        except gherrors.NotFound:
            pass
        except gherrors.GitHubError as err:
            # The service answers a session it already dropped with 400 SessionExpired.
            if not (err.status == 400 and err.is_exception("SessionExpired")):
                log.warning("deleting message session %s failed: %s", session.session_id, err)
                return False
        except Exception as err:
            log.warning("deleting message session %s failed: %s", session.session_id, err)
            return False
        log.info("message session %s deleted", session.session_id)
        await self._save(None)
        return True

    # -- takeover ------------------------------------------------------------------------------

    async def _recorded(self) -> str | None:
        """The session id a predecessor left on the EphemeralRunnerSet, if it can be read."""
        if self.session is not None:
            return self.session.session_id  # our own, from before a failure in this process
        if self._record is None:
            return None
        try:
            return await self._record.recorded_session()
        except Exception as err:
            log.warning("cannot read the recorded message session: %s", err)
            return None

    async def _save(self, session_id: str | None) -> None:
        if self._record is None:
            return
        try:
            await self._record.record_session(session_id)
        except Exception as err:
            # Not fatal: without the record a successor waits out a 409, as ARC's does.
            log.warning("cannot record message session %s: %s", session_id, err)

    async def _resume(
        self, session_id: str, transient_max_backoff: float
    ) -> RunnerScaleSetSession | None:
        """Take over a recorded session by refreshing it; None when the service dropped it."""
        for attempt in range(1, 6):
            try:
                self.session = await self.api.refresh_message_session(self.scale_set_id, session_id)
            except gherrors.GitHubError as err:
                if err.status in (400, 404, 409):
                    log.info(
                        "recorded message session %s of scale set %d is gone (%s); "
                        "creating a new one",
                        session_id,
                        self.scale_set_id,
                        err.status,
                    )
                    self.session = None
                    return None
                if not is_transient(err):
                    raise FatalError(
                        describe_fatal(err, self.scale_set_id, self.config_url)
                    ) from None
            except Exception as err:
                if not is_transient(err):
                    raise
            else:
                self.taken_over = session_id
                log.info(
                    "message session %s of scale set %d taken over (owner %s)",
                    session_id,
                    self.scale_set_id,
                    self.owner,
                )
                return self.session
            if await self._sleep(jittered(attempt, transient_max_backoff, self._rng)):
                raise Stopped
        self.session = None
        return None

    async def _delete_stale(self, session_id: str) -> bool:
        """Delete a recorded session the service still holds; True when it is gone now."""
        try:
            await self.api.delete_message_session(self.scale_set_id, session_id)
        except gherrors.GitHubError as err:
            if err.status not in (400, 404):
                log.warning("deleting stale message session %s failed: %s", session_id, err)
                return False
        except Exception as err:
            log.warning("deleting stale message session %s failed: %s", session_id, err)
            return False
        self.taken_over = session_id
        log.info("stale message session %s of scale set %d deleted", session_id, self.scale_set_id)
        return True

    # -- queue calls -------------------------------------------------------------------------

    async def get_message(
        self, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None:
        return await self._with_queue_token(
            lambda s: self.api.get_message(
                s.message_queue_url, s.message_queue_access_token, last_message_id, max_capacity
            )
        )

    async def delete_message(self, message_id: int) -> None:
        await self._with_queue_token(
            lambda s: self.api.delete_message(
                s.message_queue_url, s.message_queue_access_token, message_id
            )
        )

    async def acquire_jobs(self, request_ids: list[int]) -> list[int]:
        return await self._with_queue_token(
            lambda s: self.api.acquire_jobs(
                self.scale_set_id, s.message_queue_access_token, request_ids
            )
        )

    async def acquirable_jobs(self) -> list[int]:
        """Request ids of the jobs the service would let this scale set acquire now."""
        jobs = await self.api.get_acquirable_jobs(self.scale_set_id)
        return [j.runner_request_id for j in jobs if j.runner_request_id]

    async def _with_queue_token(self, call: Callable[[RunnerScaleSetSession], Awaitable[T]]) -> T:
        try:
            return await call(self._require())
        except gherrors.MessageQueueTokenExpired:
            log.info("message queue token expired; refreshing the session")
        await self.refresh()
        try:
            return await call(self._require())
        except gherrors.MessageQueueTokenExpired as err:
            raise FatalError(
                f"the message queue of scale set {self.scale_set_id} rejected a freshly "
                f"refreshed token ({err.message})"
            ) from None

    def _require(self) -> RunnerScaleSetSession:
        if self.session is None:
            raise RuntimeError("no message session is open")
        return self.session


def jittered(attempt: int, cap: float, rng: random.Random, base: float = 0.5) -> float:
    """Full-jitter exponential backoff: uniform in [d/2, d], d = min(cap, base * 2^(n-1))."""
    delay = min(cap, base * (2 ** max(0, attempt - 1)))
    return rng.uniform(delay / 2, delay)


async def _plain_sleep(seconds: float) -> bool:
    await asyncio.sleep(seconds)
    return False
