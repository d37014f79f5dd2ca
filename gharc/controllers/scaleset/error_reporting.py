"""From an error met while reconciling a scale set to the reason and message users see.

Failures to reach GitHub or the Kubernetes API on behalf of a scale set are reported on
the AutoscalingRunnerSet (condition ``ScaleSetReady``, ``status.message``, one Warning
event per change of reason), not only in the controller's log, which tenants cannot read.

Messages are stable from one attempt to the next (no request ids, no timestamps): a status
write wakes the reconciler again, so a message that changed on every retry would turn the
work queue's backoff into a hot loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from gharc.github import errors as gherrors
from gharc.kube import errors as kerrors
from gharc.kube.reconcile import Request, Result

__all__ = ["REPORTED", "describe", "reconcile_or_wait_for_github"]

log = logging.getLogger(__name__)

#: The errors :func:`describe` knows; anything else is a bug and keeps its traceback.
REPORTED: tuple[type[BaseException], ...] = (gherrors.GitHubError, kerrors.Forbidden)

_GITHUB_REASONS: tuple[tuple[type[gherrors.GitHubError], str], ...] = (
    (gherrors.ConnectionFailed, "GitHubUnreachable"),
    (gherrors.Unauthorized, "GitHubUnauthorized"),
    (gherrors.RateLimited, "GitHubRateLimited"),
    (gherrors.CircuitOpen, "GitHubUnavailable"),
    (gherrors.Forbidden, "GitHubForbidden"),
    (gherrors.ServerError, "GitHubServerError"),
    (gherrors.BadRequest, "GitHubRejected"),
    (gherrors.MalformedResponse, "GitHubMalformedResponse"),
)


def _github_message(err: gherrors.GitHubError) -> str:
    where = " ".join(p for p in (err.method, err.url) if p)
    status = f" (HTTP {err.status})" if err.status is not None else ""
    name = f" [{err.exception_name}]" if err.exception_name else ""
    return f"{where}: {err.message}{name}{status}" if where else f"{err.message}{status}"


def describe(err: BaseException) -> tuple[str, str]:
    """``(reason, message)`` for one of :data:`REPORTED`."""
    if isinstance(err, gherrors.GitHubError):
        reason = next((r for cls, r in _GITHUB_REASONS if isinstance(err, cls)), "GitHubError")
        return reason, f"GitHub: {_github_message(err)}"
    if isinstance(err, kerrors.Forbidden):
        return "KubernetesForbidden", (
            f"Kubernetes API: {err.message} (is the controller's manager Role bound in "
            f"this namespace?)"
        )
    return "KubernetesError", f"Kubernetes API: {type(err).__name__}"


async def reconcile_or_wait_for_github(
    request: Request, reconcile: Callable[[Request], Awaitable[Result | None]]
) -> Result | None:
    """Run ``reconcile``; when GitHub asks to wait (rate limit) or is held back after failures
    (circuit breaker), come back when it says, instead of holding a worker, or this object's
    other steps, until then."""
    try:
        return await reconcile(request)
    except gherrors.RETRY_LATER as err:
        wait = gherrors.retry_delay(err, time.time())
        log.info("%s: %s; retry in %.0fs", request, err, wait)
        return Result(requeue_after=wait)
