"""Typed errors of the Kubernetes API, built from the ``Status`` bodies the server returns.

Callers branch on *what happened* (the object is gone, somebody else wrote first, the
watch window expired), never on numbers, so each outcome a controller reacts to has a
class of its own. The HTTP status and the server's ``reason`` are both kept: a 409 is
either ``Conflict`` (stale resourceVersion) or ``AlreadyExists`` (create of an existing
name), and the two need opposite reactions (retry the read-modify-write vs. adopt).

Hierarchy::

    ApiError                    any non-2xx answer, or a watch ERROR event
     ├── BadRequest             400
     ├── Unauthorized           401
     ├── Forbidden              403
     ├── NotFound               404
     ├── MethodNotAllowed       405
     ├── Conflict               409 reason Conflict: optimistic-lock failure, retry from a read
     ├── AlreadyExists          409 reason AlreadyExists: not a subclass of Conflict on purpose
     ├── Gone                   410 (reason Expired/Gone): the resourceVersion is compacted; relist
     ├── UnsupportedMediaType   415
     ├── Invalid                422: validation failed; ``causes`` lists the offending fields
     ├── TooManyRequests        429: ``retry_after`` seconds from the Retry-After header
     ├── InternalError          500
     ├── ServiceUnavailable     503
     └── ServerTimeout          504, or reason ServerTimeout/Timeout on any code

Connection failures are *not* wrapped: they surface as ``aiohttp.ClientError`` or
``TimeoutError``, because nothing was said by the server and there is no Status to carry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "ServerTimeout",
    "ServiceUnavailable",
    "StatusCause",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "error_from_response",
    "error_from_status",
]


@dataclass(frozen=True, slots=True)
class StatusCause:
    """One entry of ``status.details.causes``: which field failed validation and why."""

    field: str
    reason: str
    message: str


class ApiError(Exception):
    """The API server refused a request: ``status`` is the HTTP code, ``reason`` its word."""

    default_status: int = 0

    def __init__(
        self,
        message: str = "",
        *,
        status: int | None = None,
        reason: str = "",
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message or reason or f"HTTP {status}")
        self.status: int = self.default_status if status is None else status
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] = body or {}
        self.retry_after = retry_after

    @property
    def details(self) -> Mapping[str, Any]:
        """``status.details`` (name, group, kind, causes, retryAfterSeconds) or empty."""
        details = self.body.get("details")
        return details if isinstance(details, Mapping) else {}

    @property
    def causes(self) -> list[StatusCause]:
        return [
            StatusCause(
                field=str(c.get("field", "")),
                reason=str(c.get("reason", "")),
                message=str(c.get("message", "")),
            )
            for c in self.details.get("causes", []) or []
            if isinstance(c, Mapping)
        ]

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(status={self.status}, reason={self.reason!r}, message={self.message!r})"


class BadRequest(ApiError):
    default_status = 400


class Unauthorized(ApiError):
    default_status = 401


class Forbidden(ApiError):
    default_status = 403


class NotFound(ApiError):
    default_status = 404


class MethodNotAllowed(ApiError):
    default_status = 405


class Conflict(ApiError):
    """Somebody else changed the object first: read it again and redo the change."""

    default_status = 409


class AlreadyExists(ApiError):
    """A create found the name taken; usually fine for deterministic names (adopt it)."""

    default_status = 409


class Gone(ApiError):
    """The requested resourceVersion is older than etcd's compaction: list again."""

    default_status = 410


class UnsupportedMediaType(ApiError):
    default_status = 415


class Invalid(ApiError):
    """Validation failed; ``causes`` names each field (a bug in what we sent, not transient)."""

    default_status = 422


class TooManyRequests(ApiError):
    """API priority and fairness or a rate limit said no; wait ``retry_after`` seconds."""

    default_status = 429


class InternalError(ApiError):
    default_status = 500


class ServiceUnavailable(ApiError):
    default_status = 503


class ServerTimeout(ApiError):
    default_status = 504


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: ServerTimeout,
}

_BY_REASON: dict[str, type[ApiError]] = {
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Expired": Gone,
    "Gone": Gone,
    "ServerTimeout": ServerTimeout,
    "Timeout": ServerTimeout,
    "TooManyRequests": TooManyRequests,
    "NotFound": NotFound,
    "Invalid": Invalid,
}

_REASON_FIRST = frozenset({"AlreadyExists", "ServerTimeout", "Timeout", "Expired"})


def error_from_status(
    status: Mapping[str, Any] | None,
    *,
    code: int | None = None,
    retry_after: float | None = None,
) -> ApiError:
    """Build the matching ApiError from a ``Status`` object (a response body or watch ERROR)."""
    body: Mapping[str, Any] = status or {}
    http = code if code is not None else int(body.get("code") or 0)
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or "")
    # NB: the reason wins where one code means two things (409) or the code is generic.
    cls: type[ApiError] | None = _BY_REASON.get(reason) if reason in _REASON_FIRST else None
    if cls is None:
        cls = _BY_STATUS.get(http) or _BY_REASON.get(reason) or ApiError
    if retry_after is None:
        details = body.get("details")
        if isinstance(details, Mapping) and details.get("retryAfterSeconds"):
            retry_after = float(details["retryAfterSeconds"])
    return cls(
        message,
        status=http or cls.default_status,
        reason=reason,
        body=body,
        retry_after=retry_after,
    )


def error_from_response(
    code: int, data: bytes, headers: Mapping[str, str] | None = None
) -> ApiError:
    """Build an ApiError from a raw HTTP answer, tolerating non-JSON bodies (proxies, 503 pages)."""
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        parsed = {}
    if not isinstance(parsed, dict) or parsed.get("kind") != "Status":
        parsed = {
            "message": data.decode("utf-8", "replace")[:1000],
            **(parsed if isinstance(parsed, dict) else {}),
        }
    retry_after: float | None = None
    raw = (headers or {}).get("Retry-After")
    if raw:
        try:
            retry_after = float(raw)
        except ValueError:
            retry_after = None
    return error_from_status(parsed, code=code, retry_after=retry_after)
