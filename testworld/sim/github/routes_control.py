"""The control API under ``/_fake`` (no auth; the fake only listens on 127.0.0.1).

World: ``POST /_fake/orgs`` ``{"name", "enterprise"?}``, ``POST /_fake/repos`` ``{"name":
"owner/repo"}``, ``POST /_fake/enterprises`` ``{"name"}``, ``POST /_fake/tokens``
``{"token"?, "orgs"?, "rateLimit"?}``, ``POST /_fake/apps`` ``{"account"}``,
``POST /_fake/runnergroups`` ``{"configUrl", "name"}``.
Jobs: ``POST /_fake/jobs`` ``{"repo", "labels", "durationSeconds", "result", "workflowName",
"jobName", "eventName", "runId"}``, ``POST /_fake/jobs/{id}/cancel``, ``GET /_fake/jobs``.
Reads: ``GET /_fake/runners``, ``/_fake/scalesets``, ``/_fake/sessions``, ``/_fake/state``.
Faults: ``POST /_fake/faults`` ``{"kind", "route", "method", "status", "count", "seconds",
"delay", "retryAfter"}``, ``GET``/``DELETE /_fake/faults``, ``DELETE /_fake/faults/{id}``;
``POST /_fake/ratelimit`` ``{"token"?, "resetIn"}``, ``POST /_fake/revoke`` ``{"token"}``,
``POST /_fake/expire`` ``{"kind"}``, ``DELETE /_fake/scalesets/{id}``.
Calls: ``GET /_fake/calls`` and ``DELETE /_fake/calls``. Settings: ``POST /_fake/config``
``{"pollTimeout", "runnerPollTimeout", "restMaxAge", "sessionIdleTimeout", "runnerLostTimeout",
"queueUrlQuery", "reassignTimes", "reassignAfter", "reassignGap", "reassignLimit",
"laggingStatistics", "skipAcquire", "zeroRequestIds", "truncateDeliveries"}``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from testworld.sim.github.http import CALLS_KEY, FAULTS_KEY, STATE_KEY, int_param, read_object
from testworld.sim.github.state import FakeGitHubState, StateError

PREFIX = "/_fake"


def _state(request: web.Request) -> FakeGitHubState:
    return request.app[STATE_KEY]


def _str(body: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise StateError(422, f"{key} must be a non-empty string")
    return value


async def create_org(request: web.Request) -> web.Response:
    body = await read_object(request)
    name = _str(body, "name")
    assert name is not None
    _state(request).create_org(name, _str(body, "enterprise", required=False))
    return web.json_response({"name": name}, status=201)


async def create_enterprise(request: web.Request) -> web.Response:
    name = _str(await read_object(request), "name")
    assert name is not None
    _state(request).create_enterprise(name)
    return web.json_response({"name": name}, status=201)


async def create_repo(request: web.Request) -> web.Response:
    name = _str(await read_object(request), "name")
    assert name is not None
    _state(request).create_repo(name)
    return web.json_response({"name": name}, status=201)


async def create_token(request: web.Request) -> web.Response:
    body = await read_object(request)
    orgs = body.get("orgs")
    if orgs is not None and not (isinstance(orgs, list) and all(isinstance(o, str) for o in orgs)):
        raise StateError(422, "orgs must be a list of strings")
    limit = body.get("rateLimit", 5000)
    if not isinstance(limit, int):
        raise StateError(422, "rateLimit must be an integer")
    token = _state(request).create_pat(
        _str(body, "token", required=False), orgs=orgs, rate_limit=limit
    )
    return web.json_response({"token": token}, status=201)


async def create_app(request: web.Request) -> web.Response:
    account = _str(await read_object(request), "account")
    assert account is not None
    app_id, inst, pem = _state(request).create_app(account)
    return web.json_response(
        {
            "appId": app_id,
            "clientId": _state(request).apps[app_id].client_id,
            "installationId": inst,
            "privateKey": pem,
        },
        status=201,
    )


async def create_runner_group(request: web.Request) -> web.Response:
    body = await read_object(request)
    state = _state(request)
    tenant = state.tenant_from_config_url(_str(body, "configUrl") or "")
    gid = state.add_runner_group(tenant, _str(body, "name") or "")
    return web.json_response({"id": gid}, status=201)


async def enqueue_job(request: web.Request) -> web.Response:
    body = await read_object(request)
    state = _state(request)
    labels = body.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels) or not labels:
        raise StateError(422, "labels must be a non-empty list of strings")
    duration = body.get("durationSeconds", 0)
    if not isinstance(duration, int | float):
        raise StateError(422, "durationSeconds must be a number")
    run_id = body.get("runId")
    if run_id is not None and not isinstance(run_id, int):
        raise StateError(422, "runId must be an integer")
    job = state.enqueue_job(
        _str(body, "repo") or "",
        labels,
        duration=float(duration),
        result=_str(body, "result", required=False) or "succeeded",
        workflow_name=_str(body, "workflowName", required=False) or "ci",
        job_name=_str(body, "jobName", required=False) or "build",
        event_name=_str(body, "eventName", required=False) or "push",
        run_id=run_id,
    )
    return web.json_response(state.job_summary(job), status=201)


async def cancel_job(request: web.Request) -> web.Response:
    state = _state(request)
    job = state.cancel_job(int_param(request.match_info["request_id"], "id"))
    return web.json_response(state.job_summary(job))


async def list_jobs(request: web.Request) -> web.Response:
    state = _state(request)
    return web.json_response([state.job_summary(j) for j in state.jobs.values()])


async def list_runners(request: web.Request) -> web.Response:
    state = _state(request)
    return web.json_response([state.runner_summary(r) for r in state.runners.values()])


async def list_scale_sets(request: web.Request) -> web.Response:
    state = _state(request)
    return web.json_response([state.scale_set_summary(s) for s in state.scale_sets.values()])


async def delete_scale_set(request: web.Request) -> web.Response:
    state = _state(request)
    sid = int_param(request.match_info["scale_set_id"], "id")
    if sid not in state.scale_sets:
        raise StateError(404, "Not Found")
    state.delete_scale_set(sid)
    return web.Response(status=204)


async def list_sessions(request: web.Request) -> web.Response:
    state = _state(request)
    return web.json_response([state.session_summary(s) for s in state.sessions.values()])


async def summary(request: web.Request) -> web.Response:
    state = _state(request)
    return web.json_response(
        {
            "url": state.base_url,
            "orgs": sorted(state.orgs),
            "repos": sorted(state.repos),
            "enterprises": sorted(state.enterprises),
            "scaleSets": len(state.scale_sets),
            "sessions": len(state.sessions),
            "runners": len(state.runners),
            "jobs": len(state.jobs),
            "unhandledErrors": state.unhandled_errors,
        }
    )


async def add_fault(request: web.Request) -> web.Response:
    body = await read_object(request)
    state = _state(request)
    seconds = body.get("seconds")
    try:
        fault = request.app[FAULTS_KEY].add(
            str(body.get("kind", "status")),
            route=str(body.get("route", "*")),
            method=body.get("method"),
            status=body.get("status"),
            count=body.get("count"),
            until=state.now() + float(seconds) if seconds is not None else None,
            delay=float(body.get("delay", 0.0)),
            retry_after=int(body.get("retryAfter", 60)),
        )
    except (TypeError, ValueError) as exc:
        raise StateError(422, str(exc)) from None
    return web.json_response(fault.to_json(), status=201)


async def list_faults(request: web.Request) -> web.Response:
    return web.json_response([f.to_json() for f in request.app[FAULTS_KEY].all()])


async def clear_faults(request: web.Request) -> web.Response:
    request.app[FAULTS_KEY].clear()
    return web.Response(status=204)


async def delete_fault(request: web.Request) -> web.Response:
    if not request.app[FAULTS_KEY].remove(int_param(request.match_info["fault_id"], "id")):
        raise StateError(404, "Not Found")
    return web.Response(status=204)


async def rate_limit(request: web.Request) -> web.Response:
    body = await read_object(request)
    _state(request).exhaust_rate_limit(
        _str(body, "token", required=False), float(body.get("resetIn", 60))
    )
    return web.Response(status=204)


async def revoke(request: web.Request) -> web.Response:
    _state(request).revoke_token(_str(await read_object(request), "token") or "")
    return web.Response(status=204)


async def expire(request: web.Request) -> web.Response:
    n = _state(request).expire(_str(await read_object(request), "kind") or "")
    return web.json_response({"expired": n})


async def calls(request: web.Request) -> web.Response:
    counts = request.app[CALLS_KEY]
    return web.json_response(
        [
            {"method": m, "route": r, "status": s, "count": c}
            for (m, r, s), c in sorted(counts.items())
        ]
    )


async def reset_calls(request: web.Request) -> web.Response:
    request.app[CALLS_KEY].clear()
    return web.Response(status=204)


async def config(request: web.Request) -> web.Response:
    body = await read_object(request)
    state = _state(request)
    try:
        if "pollTimeout" in body:
            state.poll_timeout = float(body["pollTimeout"])
        if "runnerPollTimeout" in body:
            state.runner_poll_timeout = float(body["runnerPollTimeout"])
        if "restMaxAge" in body:
            state.rest_max_age = int(body["restMaxAge"])
        if "sessionIdleTimeout" in body:
            v = body["sessionIdleTimeout"]
            state.session_idle_timeout = None if v is None else float(v)
        if "runnerLostTimeout" in body:
            v = body["runnerLostTimeout"]
            state.runner_lost_timeout = None if v is None else float(v)
        if "queueUrlQuery" in body:
            state.queue_url_query = str(body["queueUrlQuery"] or "")
        if "reassignTimes" in body:
            state.reassign_times = max(0, int(body["reassignTimes"]))
        if "reassignAfter" in body:
            v = body["reassignAfter"]
            state.reassign_after = None if v is None else float(v)
        if "reassignGap" in body:
            state.reassign_gap = max(0.0, float(body["reassignGap"]))
        if "reassignLimit" in body:
            state.reassign_limit = max(0, int(body["reassignLimit"]))
        for key, attr in _SWITCHES.items():
            if key in body:
                setattr(state, attr, bool(body[key]))
    except (TypeError, ValueError):
        raise StateError(422, "config values must be numbers") from None
    return web.json_response(
        {
            "pollTimeout": state.poll_timeout,
            "runnerPollTimeout": state.runner_poll_timeout,
            "restMaxAge": state.rest_max_age,
            "sessionIdleTimeout": state.session_idle_timeout,
            "runnerLostTimeout": state.runner_lost_timeout,
            "queueUrlQuery": state.queue_url_query,
            "reassignTimes": state.reassign_times,
            "reassignAfter": state.reassign_after,
            "reassignGap": state.reassign_gap,
            "reassignLimit": state.reassign_limit,
            **{key: getattr(state, attr) for key, attr in _SWITCHES.items()},
        }
    )


#: Service quirks switched on and off by ``POST /_fake/config`` (see ``FakeGitHubState``).
_SWITCHES = {
    "laggingStatistics": "lagging_statistics",
    "skipAcquire": "skip_acquire",
    "zeroRequestIds": "zero_request_ids",
    "truncateDeliveries": "truncate_deliveries",
}


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get(PREFIX + "/state", summary)
    r.add_post(PREFIX + "/orgs", create_org)
    r.add_post(PREFIX + "/enterprises", create_enterprise)
    r.add_post(PREFIX + "/repos", create_repo)
    r.add_post(PREFIX + "/tokens", create_token)
    r.add_post(PREFIX + "/apps", create_app)
    r.add_post(PREFIX + "/runnergroups", create_runner_group)
    r.add_post(PREFIX + "/jobs", enqueue_job)
    r.add_get(PREFIX + "/jobs", list_jobs)
    r.add_post(PREFIX + "/jobs/{request_id}/cancel", cancel_job)
    r.add_get(PREFIX + "/runners", list_runners)
    r.add_get(PREFIX + "/scalesets", list_scale_sets)
    r.add_delete(PREFIX + "/scalesets/{scale_set_id}", delete_scale_set)
    r.add_get(PREFIX + "/sessions", list_sessions)
    r.add_post(PREFIX + "/faults", add_fault)
    r.add_get(PREFIX + "/faults", list_faults)
    r.add_delete(PREFIX + "/faults", clear_faults)
    r.add_delete(PREFIX + "/faults/{fault_id}", delete_fault)
    r.add_post(PREFIX + "/ratelimit", rate_limit)
    r.add_post(PREFIX + "/revoke", revoke)
    r.add_post(PREFIX + "/expire", expire)
    r.add_get(PREFIX + "/calls", calls)
    r.add_delete(PREFIX + "/calls", reset_calls)
    r.add_post(PREFIX + "/config", config)
