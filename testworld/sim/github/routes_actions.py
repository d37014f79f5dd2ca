"""The Actions service: runner groups, scale sets, sessions, the message queue, jobs, JIT
configs and agents, as ARC's scale set client calls them.

The service lives on the fake's own host under ``/_services/pipelines/t<tenant>/`` (the URL
runner-registration hands out) and the message queue under ``/_services/broker/<session>/``.
Calls need ``api-version`` (query, or the ``Accept`` header on the queue) and the admin JWT;
queue calls need the session's queue token.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from testworld.sim.github.http import STATE_KEY, bearer, int_param, read_json, read_object
from testworld.sim.github.state import (
    FakeGitHubState,
    Runner,
    ScaleSet,
    Session,
    StateError,
    Tenant,
    rfc3339,
)

PIPELINES = "/_services/pipelines/{tenant}"
BROKER = "/_services/broker/{session_id}"
RUNTIME = PIPELINES + "/_apis/runtime"
AGENTS = PIPELINES + "/_apis/distributedtask/pools/0/agents"


def _state(request: web.Request) -> FakeGitHubState:
    return request.app[STATE_KEY]


def _api_version(request: web.Request) -> None:
    if "api-version" in request.query or "api-version" in request.headers.get("Accept", ""):
        return
    raise StateError(
        400, "No api-version was supplied for the request.", "VssVersionNotSpecifiedException"
    )


def _tenant(request: web.Request) -> Tenant:
    """Admin-token auth for one tenant's service URL."""
    state = _state(request)
    raw = request.match_info["tenant"]
    if not raw.startswith("t") or not raw[1:].isdigit() or int(raw[1:]) not in state.tenants:
        raise StateError(404, "Not Found", "NotFoundException")
    _api_version(request)
    return state.check_admin_token(bearer(request), int(raw[1:]))


def _scale_set_json(state: FakeGitHubState, ss: ScaleSet) -> dict[str, Any]:
    tenant = state.tenants[ss.tenant]
    return {
        "id": ss.id,
        "name": ss.name,
        "runnerGroupId": ss.runner_group_id,
        "runnerGroupName": tenant.runner_groups.get(ss.runner_group_id, ""),
        "labels": [{"type": "System", "name": n} for n in ss.labels],
        "runnerSetting": dict(ss.runner_setting),
        "createdOn": rfc3339(ss.created_on),
        "runnerJitConfigUrl": (
            f"{state.service_url(tenant)}_apis/runtime/runnerscalesets/{ss.id}/generatejitconfig"
        ),
        "statistics": state.statistics(ss),
    }


def _session_json(state: FakeGitHubState, s: Session) -> dict[str, Any]:
    ss = state.scale_sets[s.scale_set_id]
    return {
        "sessionId": s.id,
        "ownerName": s.owner,
        "runnerScaleSet": _scale_set_json(state, ss),
        "messageQueueUrl": state.queue_url(s),
        "messageQueueAccessToken": s.queue_token,
        "statistics": state.statistics(ss),
    }


def _runner_ref(r: Runner) -> dict[str, Any]:
    return {"id": r.id, "name": r.name, "runnerScaleSetId": r.scale_set_id or 0}


def _agent(r: Runner) -> dict[str, Any]:
    """A registration as the agents API shows it: the reference and whether a runner holds it."""
    return {**_runner_ref(r), "status": "online" if r.online else "offline"}


def _ss_id(request: web.Request) -> int:
    return int_param(request.match_info["scale_set_id"], "runnerScaleSetId")


# ---- runner groups and scale sets -----------------------------------------------------------


async def runner_groups(request: web.Request) -> web.Response:
    tenant = _tenant(request)
    name = request.query.get("groupName")
    groups = [
        {"id": gid, "name": gname, "size": 0, "isDefaultGroup": gid == 1}
        for gid, gname in _state(request).runner_groups(tenant, name)
    ]
    return web.json_response({"count": len(groups), "value": groups})


async def list_scale_sets(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    gid = request.query.get("runnerGroupId")
    found = state.find_scale_sets(
        tenant, int_param(gid, "runnerGroupId") if gid else None, request.query.get("name")
    )
    value = [_scale_set_json(state, s) for s in found]
    return web.json_response({"count": len(value), "value": value})


async def create_scale_set(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    ss = state.create_scale_set(tenant, await read_object(request))
    return web.json_response(_scale_set_json(state, ss))


async def get_scale_set(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    return web.json_response(_scale_set_json(state, state.scale_set(tenant, _ss_id(request))))


async def update_scale_set(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    ss = state.update_scale_set(tenant, _ss_id(request), await read_object(request))
    return web.json_response(_scale_set_json(state, ss))


async def delete_scale_set(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    state.scale_set(tenant, _ss_id(request))
    state.delete_scale_set(_ss_id(request))
    return web.Response(status=204)


# ---- sessions -------------------------------------------------------------------------------


async def create_session(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    body = await read_object(request)
    owner = body.get("ownerName")
    if not isinstance(owner, str) or not owner:
        raise StateError(400, "ownerName is required.", "ArgumentNullException")
    s = state.create_session(tenant, _ss_id(request), owner)
    return web.json_response(_session_json(state, s))


async def refresh_session(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    s = state.refresh_session(tenant, _ss_id(request), request.match_info["session_id"])
    return web.json_response(_session_json(state, s))


async def delete_session(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    state.delete_session(tenant, _ss_id(request), request.match_info["session_id"])
    return web.Response(status=204)


# ---- message queue --------------------------------------------------------------------------

_GONE = (-1, "")


async def get_message(request: web.Request) -> web.Response:
    state = _state(request)
    _api_version(request)
    state.check_queue_query(request.query)
    s, ss = state.session_by_queue_token(request.match_info["session_id"], bearer(request))
    last = int_param(request.query.get("lastMessageId", "0"), "lastMessageId")
    cap = request.headers.get("X-ScaleSetMaxCapacity")
    if cap is not None:
        if int_param(cap, "X-ScaleSetMaxCapacity") < 0:
            raise StateError(400, "X-ScaleSetMaxCapacity must not be negative", "ArgumentException")
        state.set_max_capacity(ss.id, int(cap))

    def check() -> tuple[int, str] | None:
        if state.sessions.get(s.id) is not s or ss.id not in state.scale_sets:
            return _GONE
        return state.next_message(ss, last)

    s.polls_in_flight += 1  # a session is never idle while its listener waits on it
    try:
        found = await ss.signal.wait_for(check, state.poll_timeout)
    finally:
        s.polls_in_flight -= 1
        s.last_seen = state.now()
    if found is _GONE:
        raise StateError(401, "The session no longer exists.", "UnauthorizedRequestException")
    if found is None:
        return web.Response(status=202)
    message_id, body = found
    return web.json_response(
        {
            "messageId": message_id,
            "messageType": "RunnerScaleSetJobMessages",
            "body": body,
            "statistics": state.message_statistics(ss),
        }
    )


async def delete_message(request: web.Request) -> web.Response:
    state = _state(request)
    state.check_queue_query(request.query)
    _s, ss = state.session_by_queue_token(request.match_info["session_id"], bearer(request))
    state.delete_message(ss, int_param(request.match_info["message_id"], "messageId"))
    return web.Response(status=204)


# ---- jobs -----------------------------------------------------------------------------------


async def acquirable_jobs(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    ss = state.scale_set(tenant, _ss_id(request))
    jobs = state.acquirable_jobs(ss)
    if not jobs:
        return web.Response(status=204)
    value = []
    for j in jobs:
        m = state.job_message(j, "JobAvailable")
        value.append(
            {
                k: m[k]
                for k in (
                    "acquireJobUrl",
                    "messageType",
                    "runnerRequestId",
                    "repositoryName",
                    "ownerName",
                    "jobWorkflowRef",
                    "eventName",
                    "requestLabels",
                )
            }
        )
    return web.json_response({"count": len(value), "value": value})


async def acquire_jobs(request: web.Request) -> web.Response:
    state = _state(request)
    _api_version(request)
    ss_id = _ss_id(request)
    token = bearer(request)
    session = next(
        (s for s in state.sessions.values() if s.scale_set_id == ss_id and s.queue_token == token),
        None,
    )
    if session is None or session.queue_token_expires_at <= state.now():
        raise StateError(
            401,
            "The message queue access token is invalid or has expired.",
            "UnauthorizedRequestException",
        )
    body = await read_json(request)
    if not isinstance(body, list) or not all(isinstance(i, int) for i in body):
        raise StateError(
            400, "The request body must be a list of job request ids.", "ArgumentException"
        )
    acquired = state.acquire_jobs(state.scale_sets[ss_id], body)
    return web.json_response({"count": len(acquired), "value": acquired})


# ---- JIT config and agents ------------------------------------------------------------------


async def generate_jit_config(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    body = await read_object(request)
    name = body.get("name")
    if not isinstance(name, str):
        raise StateError(400, "The runner name is required.", "ArgumentNullException")
    runner, encoded = state.generate_jit_config(
        tenant, _ss_id(request), name, str(body.get("workFolder") or "_work")
    )
    return web.json_response({"runner": _runner_ref(runner), "encodedJITConfig": encoded})


async def get_agent(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    r = state.runner(tenant, int_param(request.match_info["runner_id"], "agentId"))
    return web.json_response(_agent(r))


async def list_agents(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    name = request.query.get("agentName")
    # Like the service's TaskAgent list: status always, the job it holds on request.
    assigned = request.query.get("includeAssignedRequest", "").lower() == "true"
    found = [
        {
            **_agent(r),
            **({"assignedRequest": {"requestId": r.job} if r.job else None} if assigned else {}),
        }
        for r in state.runners.values()
        if r.tenant == tenant.id and (name is None or r.name == name)
    ]
    return web.json_response({"count": len(found), "value": found})


async def delete_agent(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    state.remove_runner(tenant, int_param(request.match_info["runner_id"], "agentId"))
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get(RUNTIME + "/runnergroups/", runner_groups)
    r.add_get(RUNTIME + "/runnergroups", runner_groups)
    r.add_get(RUNTIME + "/runnerscalesets", list_scale_sets)
    r.add_post(RUNTIME + "/runnerscalesets", create_scale_set)
    r.add_get(RUNTIME + "/runnerscalesets/{scale_set_id}", get_scale_set)
    r.add_patch(RUNTIME + "/runnerscalesets/{scale_set_id}", update_scale_set)
    r.add_delete(RUNTIME + "/runnerscalesets/{scale_set_id}", delete_scale_set)
    r.add_post(RUNTIME + "/runnerscalesets/{scale_set_id}/sessions", create_session)
    r.add_patch(RUNTIME + "/runnerscalesets/{scale_set_id}/sessions/{session_id}", refresh_session)
    r.add_delete(RUNTIME + "/runnerscalesets/{scale_set_id}/sessions/{session_id}", delete_session)
    r.add_get(RUNTIME + "/runnerscalesets/{scale_set_id}/acquirablejobs", acquirable_jobs)
    r.add_post(RUNTIME + "/runnerscalesets/{scale_set_id}/acquirejobs", acquire_jobs)
    r.add_post(RUNTIME + "/runnerscalesets/{scale_set_id}/generatejitconfig", generate_jit_config)
    r.add_get(AGENTS, list_agents)
    r.add_get(AGENTS + "/{runner_id}", get_agent)
    r.add_delete(AGENTS + "/{runner_id}", delete_agent)
    r.add_get(BROKER + "/messages", get_message)
    r.add_delete(BROKER + "/messages/{message_id}", delete_message)
