"""Typed errors for GitHub REST and the Actions service.

Callers branch on *what went wrong*, not on status codes, so each case the controllers and
the listener handle differently has its own class::

    GitHubError(status, message, request_id, url)       url never holds a secret
    ├── ConnectionFailed         transport error after retries (status None)
    ├── BadRequest               400
    ├── Unauthorized             401
    │   └── MessageQueueTokenExpired   401 from the message queue: refresh the session
    ├── Forbidden                403 that is not a rate limit
    ├── RateLimited              403/429 rate limit (reset_at, retry_after, until)
    ├── CircuitOpen              not sent: the host failed too often lately (until)
    ├── NotFound                 404
    ├── Conflict                 409
    ├── UnprocessableEntity      422 (REST remove of a busy runner)
    ├── ServerError              5xx after retries
    ├── MalformedResponse        a 2xx whose body cannot be read
    └── ActionsServiceError      an Actions service exception with a known name
        ├── RunnerScaleSetNotFound   (also a NotFound)
        ├── AgentNotFound            (also a NotFound)
        ├── AgentExists              (also a Conflict)
        ├── SessionConflict          (also a Conflict)
        └── JobStillRunning

Every error carries ``exception_name`` (the short ``typeKey``/``typeName`` of an Actions
service error body, else None); an Actions error with a name not listed above is raised as
the class for its status with that name set, so ``except NotFound`` still catches it.
"""

from __future__ import annotations

from typing import ClassVar


class GitHubError(Exception):
    """Base of every error this package raises for an HTTP exchange."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        url: str | None = None,
        method: str | None = None,
        exception_name: str | None = None,
    ) -> None:
        self.message = message
        self.status = status
        self.request_id = request_id
        self.url = url
        self.method = method
        self.exception_name = exception_name
        super().__init__(self._render())

    def _render(self) -> str:
        where = " ".join(p for p in (self.method, self.url) if p)
        bits = [f"status={self.status}"] if self.status is not None else []
        if self.exception_name:
            bits.append(f"exception={self.exception_name}")
        if self.request_id:
            bits.append(f"request_id={self.request_id}")
        detail = f" ({', '.join(bits)})" if bits else ""
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.message}{detail}"

    def is_exception(self, name: str) -> bool:
        """True when the Actions service named this exception (substring, as ARC matches)."""
        return bool(self.exception_name) and name in (self.exception_name or "")


class ConnectionFailed(GitHubError):
    """The request never got a response (DNS, refused, reset, timeout) after retries."""


class BadRequest(GitHubError):
    """400."""


class Unauthorized(GitHubError):
    """401: the token is wrong, revoked or expired."""


class MessageQueueTokenExpired(Unauthorized):
    """401 from the message queue: refresh the session and retry with the new token."""


class Forbidden(GitHubError):
    """403 for a reason other than a rate limit (missing permission)."""


class RateLimited(GitHubError):
    """A primary (403/429 with X-RateLimit-Remaining: 0) or secondary (Retry-After) limit.

    Raised only when waiting it out would exceed the client's cap; ``reset_at`` is an epoch
    time in seconds, ``retry_after`` seconds from the response, ``until`` the epoch time the
    limit lifts (whichever of the two the response gave, else a minute on).
    """

    def __init__(
        self,
        message: str,
        *,
        reset_at: float | None = None,
        retry_after: float | None = None,
        until: float | None = None,
        **kwargs: object,
    ) -> None:
        self.reset_at = reset_at
        self.retry_after = retry_after
        self.until = until
        super().__init__(message, **kwargs)  # type: ignore[arg-type]


class CircuitOpen(GitHubError):
    """Not sent: calls to this host with this credential failed too often lately (5xx,
    connection errors), so they are held back until ``until`` (epoch seconds)."""

    def __init__(self, message: str, *, until: float, **kwargs: object) -> None:
        self.until = until
        super().__init__(message, **kwargs)  # type: ignore[arg-type]


#: The errors that say when to try again (``until``): a reconciler requeues for then.
RETRY_LATER: tuple[type[GitHubError], ...] = (RateLimited, CircuitOpen)


def retry_delay(err: GitHubError, now: float, *, floor: float = 1.0, cap: float = 900.0) -> float:
    """Seconds from ``now`` until ``err`` says to try again, within [floor, cap]."""
    until = getattr(err, "until", None)
    if until is None:
        return min(cap, 60.0)
    return min(cap, max(floor, float(until) - now))


class NotFound(GitHubError):
    """404."""


class Conflict(GitHubError):
    """409."""


class UnprocessableEntity(GitHubError):
    """422 (GitHub REST: e.g. removing a runner that is running a job)."""


class ServerError(GitHubError):
    """5xx still failing after the retries."""


class MalformedResponse(GitHubError):
    """A success status whose body cannot be read (not JSON, not the expected shape):
    a proxy in the way or a service hiccup, worth retrying later."""


class ActionsServiceError(GitHubError):
    """An Actions service exception whose name clients branch on."""

    exception_type: ClassVar[str] = ""


class RunnerScaleSetNotFound(ActionsServiceError, NotFound):
    exception_type = "RunnerScaleSetNotFoundException"


class AgentNotFound(ActionsServiceError, NotFound):
    exception_type = "AgentNotFoundException"


class AgentExists(ActionsServiceError, Conflict):
    exception_type = "AgentExistsException"


class SessionConflict(ActionsServiceError, Conflict):
    """The scale set already has an active message session (another listener holds it).

    Matched by substring: the service names it ``RunnerScaleSetSessionConflictException``;
    older services and clients used ``TaskAgentSessionConflictException``.
    """

    exception_type = "SessionConflictException"


class JobStillRunning(ActionsServiceError):
    exception_type = "JobStillRunningException"


RunnerNotFound = AgentNotFound
RunnerExists = AgentExists

_NAMED: tuple[type[ActionsServiceError], ...] = (
    RunnerScaleSetNotFound,
    AgentNotFound,
    AgentExists,
    SessionConflict,
    JobStillRunning,
)

_BY_STATUS: dict[int, type[GitHubError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: UnprocessableEntity,
}


def class_for(status: int, exception_name: str | None) -> type[GitHubError]:
    """Pick the error class for a status and an optional Actions exception name."""
    if exception_name:
        for cls in _NAMED:
            if cls.exception_type in exception_name:
                return cls
    if status == 409 and exception_name is None:
        return Conflict
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, GitHubError)
