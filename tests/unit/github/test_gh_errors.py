from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gharc.github import errors as gherrors
from gharc.github.transport import error_from_response, redact_url


def _resp(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    request = httpx.Request("GET", "https://ghes.example.com/api/v3/x?token=s3cr3t&page=2")
    content = json.dumps(body).encode() if body is not None else b""
    return httpx.Response(
        status,
        content=content,
        headers={
            "content-type": "application/json",
            "X-GitHub-Request-Id": "RID-1",
            **(headers or {}),
        },
        request=request,
    )


def _actions(name: str) -> dict[str, Any]:
    return {
        "$id": "1",
        "innerException": None,
        "message": f"{name} happened",
        "typeName": f"GitHub.DistributedTask.WebApi.{name}, GitHub.DistributedTask.WebApi",
        "typeKey": name,
        "errorCode": 0,
        "eventId": 3000,
    }


@pytest.mark.parametrize(
    ("status", "body", "headers", "cls"),
    [
        (400, {"message": "Problems parsing JSON"}, {}, gherrors.BadRequest),
        (401, {"message": "Bad credentials"}, {}, gherrors.Unauthorized),
        (403, {"message": "Resource not accessible by integration"}, {}, gherrors.Forbidden),
        (
            403,
            {"message": "API rate limit exceeded for user"},
            {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000000"},
            gherrors.RateLimited,
        ),
        (403, {"message": "secondary"}, {"Retry-After": "30"}, gherrors.RateLimited),
        (429, {"message": "slow down"}, {}, gherrors.RateLimited),
        (404, {"message": "Not Found"}, {}, gherrors.NotFound),
        (409, {"message": "conflict"}, {}, gherrors.Conflict),
        (422, {"message": "Runner is still running a job"}, {}, gherrors.UnprocessableEntity),
        (500, {"message": "Server Error"}, {}, gherrors.ServerError),
        (503, None, {}, gherrors.ServerError),
        (404, _actions("RunnerScaleSetNotFoundException"), {}, gherrors.RunnerScaleSetNotFound),
        (404, _actions("AgentNotFoundException"), {}, gherrors.AgentNotFound),
        (409, _actions("AgentExistsException"), {}, gherrors.AgentExists),
        (409, _actions("TaskAgentSessionConflictException"), {}, gherrors.SessionConflict),
        # The service's own names (actions-service-api.md section 9):
        (409, _actions("RunnerScaleSetSessionConflictException"), {}, gherrors.SessionConflict),
        (400, _actions("RunnerScaleSetSessionExpiredException"), {}, gherrors.BadRequest),
        (404, _actions("RunnerAdminException"), {}, gherrors.NotFound),
        (400, _actions("JobStillRunningException"), {}, gherrors.JobStillRunning),
    ],
)
def test_error_mapping(
    status: int, body: Any, headers: dict[str, str], cls: type[gherrors.GitHubError]
) -> None:
    err = error_from_response(_resp(status, body, headers))
    assert type(err) is cls
    assert err.status == status and err.request_id == "RID-1"
    assert "s3cr3t" not in str(err) and err.url is not None and "s3cr3t" not in err.url


def test_named_errors_are_also_status_errors() -> None:
    err = error_from_response(_resp(404, _actions("RunnerScaleSetNotFoundException")))
    assert isinstance(err, gherrors.NotFound) and isinstance(err, gherrors.ActionsServiceError)
    assert err.exception_name == "RunnerScaleSetNotFoundException"
    assert err.is_exception("RunnerScaleSetNotFound")


def test_unknown_actions_name_keeps_status_class() -> None:
    err = error_from_response(_resp(404, _actions("SomethingElseException")))
    assert type(err) is gherrors.NotFound and err.exception_name == "SomethingElseException"


def test_type_name_without_type_key() -> None:
    body = _actions("AgentExistsException")
    del body["typeKey"]
    assert isinstance(error_from_response(_resp(409, body)), gherrors.AgentExists)


def test_rate_limited_carries_reset() -> None:
    err = error_from_response(
        _resp(
            403,
            {"message": "API rate limit exceeded"},
            {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000000"},
        )
    )
    assert isinstance(err, gherrors.RateLimited) and err.reset_at == 1700000000


def test_redact_url() -> None:
    out = redact_url("https://u:p@h.example/x?sig=abc&code=1&page=3")
    assert "abc" not in out and "u:p" not in out and "page=3" in out
