"""HTTP plumbing shared by the fake's route modules: the two error dialects, JSON reading,
response headers, call counting and the last-resort 500.

GitHub REST errors are ``{"message", "documentation_url"}``; Actions service errors are
``{"$id", "innerException", "message", "typeName", "typeKey", "errorCode", "eventId"}``.
Handlers raise :class:`StateError`; which dialect renders it depends on the route.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from testworld.sim.github.faults import FaultTable
from testworld.sim.github.state import FakeGitHubState, StateError

log = logging.getLogger("testworld.sim.github")

DOCS = "https://docs.github.com/rest"
RATE_LIMIT_DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
#: Where the service's exception types live (``typeName`` is "<namespace>.<Name>, <namespace>").
ACTIONS_NAMESPACE = "GitHub.Actions.Runtime.WebApi"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

STATE_KEY = web.AppKey("state", FakeGitHubState)
FAULTS_KEY = web.AppKey("faults", FaultTable)
CallKey = tuple[str, str, int]
CALLS_KEY: web.AppKey[Counter[CallKey]] = web.AppKey("calls", Counter)


class SlashTolerantRouter(web.UrlDispatcher):
    """Routes ``/a//b`` as ``/a/b``: the service URL ends with a slash and ARC's older client
    appends ``/_apis/...`` to it, which GitHub's service accepts."""

    async def resolve(self, request: web.Request) -> web.UrlMappingMatchInfo:
        path = request.rel_url.path
        if "//" in path:
            merged = re.sub("/{2,}", "/", path)
            request = request.clone(rel_url=request.rel_url.with_path(merged))
        return await super().resolve(request)


def is_actions_route(path: str) -> bool:
    return path.startswith("/_services/")


def rest_error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"message": message, "documentation_url": DOCS}
    return web.json_response(body, status=status, headers=headers)


def actions_error(status: int, message: str, type_key: str | None) -> web.Response:
    key = type_key or {
        400: "ArgumentException",
        401: "UnauthorizedRequestException",
        404: "NotFoundException",
        409: "ConflictException",
    }.get(status, "VssServiceException")
    body = {
        "$id": "1",
        "innerException": None,
        "message": message,
        "typeName": f"{ACTIONS_NAMESPACE}.{key}, {ACTIONS_NAMESPACE}",
        "typeKey": key,
        "errorCode": 0,
        "eventId": 3000,
    }
    return web.json_response(body, status=status)


def render_error(request: web.Request, err: StateError) -> web.Response:
    if is_actions_route(request.path):
        return actions_error(err.status, err.message, err.type_key)
    return rest_error(err.status, err.message)


async def read_json(request: web.Request, *, required: bool = True) -> Any:
    """The request body as JSON; malformed JSON is the 400 GitHub gives, not a 500."""
    raw = await request.read()
    if not raw.strip():
        if required:
            raise StateError(400, "Problems parsing JSON", "ArgumentNullException")
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise StateError(400, "Problems parsing JSON", "InvalidRequestBodyException") from None


async def read_object(request: web.Request) -> dict[str, Any]:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise StateError(400, "Problems parsing JSON: expected an object", "ArgumentException")
    return body


def bearer(request: web.Request, scheme: str = "Bearer") -> str:
    header = request.headers.get("Authorization", "")
    prefix = scheme.lower() + " "
    if header.lower().startswith(prefix) and header[len(prefix) :].strip():
        return header[len(prefix) :].strip()
    if scheme == "Bearer" and header.lower().startswith("token "):
        return header[6:].strip()
    if scheme == "Bearer" and header.lower().startswith("basic "):
        # GitHub takes a PAT as the password of Basic auth; ARC's older client sends it so.
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        password = decoded.partition(":")[2]
        if password:
            return password
    raise StateError(401, "Requires authentication" if not header else "Bad credentials")


def int_param(value: str, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise StateError(400, f"{what} must be an integer", "ArgumentException") from None


def route_template(request: web.Request) -> str:
    info = request.match_info
    route = getattr(info, "route", None)
    resource = getattr(route, "resource", None)
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Expected refusals become GitHub-shaped errors; anything else is a logged 500."""
    state = request.app[STATE_KEY]
    try:
        return await handler(request)
    except StateError as err:
        return render_error(request, err)
    except web.HTTPException as exc:
        if exc.status == 404:
            return render_error(request, StateError(404, "Not Found"))
        if exc.status == 405:
            return render_error(request, StateError(404, "Not Found"))
        raise
    except asyncio.CancelledError:
        raise
    except Exception:
        state.unhandled_errors += 1
        log.exception("fake GitHub: unhandled error on %s %s", request.method, request.path)
        if is_actions_route(request.path):
            return actions_error(500, "Internal server error.", "VssServiceException")
        return rest_error(500, "Server Error")


@web.middleware
async def headers_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request ids on every response, call counting, then the configured faults."""
    state = request.app[STATE_KEY]
    route = route_template(request)
    request_id = uuid.uuid4().hex[:8].upper() + ":" + uuid.uuid4().hex[:12].upper()
    response: web.StreamResponse
    faults = request.app[FAULTS_KEY].match(request.method, route, state.now())
    injected: web.StreamResponse | None = None
    for f in faults:
        if f.kind == "latency" and f.delay > 0:
            await asyncio.sleep(f.delay)
        elif f.kind == "status" and injected is None:
            injected = render_error(
                request,
                StateError(
                    f.status,
                    "Server Error" if f.status >= 500 else "Fault injected",
                    f.exception,
                ),
            )
        elif f.kind == "secondary_rate_limit" and injected is None:
            injected = rest_error(
                f.status,
                "You have exceeded a secondary rate limit. Please wait a few minutes before you "
                "try again.",
                headers={"Retry-After": str(f.retry_after)},
            )
    if injected is not None:
        response = injected
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = web.Response(status=exc.status, text=exc.text, headers=exc.headers)
        lost = next((f for f in faults if f.kind == "lost_response"), None)
        if lost is not None:
            # The work is done (state changed); only its answer is lost on the way back.
            response = render_error(request, StateError(lost.status, "Bad Gateway"))
    response.headers.setdefault("X-GitHub-Request-Id", request_id)
    if is_actions_route(request.path):
        response.headers.setdefault("ActivityId", str(uuid.uuid4()))
    request.app[CALLS_KEY][(request.method, route, response.status)] += 1
    return response
