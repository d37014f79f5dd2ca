"""The runner side, for the runner simulator (not a GitHub API; documented in
``docs/sim-github.md``).

A real runner redeems its JIT config, long-polls for a job, and reports progress. Here:

* ``POST /_runner/register`` ``{"url", "token", "name", "labels", "ephemeral"}`` -> 200
  ``{"runnerId", "runnerName", "ephemeral", "token"}``: a legacy runner's ``config.sh``
  with a registration token (401/403 for a bad or foreign token); such a runner then
  takes queued jobs by its labels from ``jobs/next``.
* ``POST /_runner/connect`` ``{"encodedJITConfig": ...}`` -> 200 ``{"runnerId", "runnerName",
  "runnerScaleSetId", "ephemeral", "token"}``; 401 if the registration is gone, 409 if
  the config was already redeemed (a runner session is active).
* ``GET /_runner/jobs/next?timeout=<s>`` (Bearer runner token) -> 200 job or 204.
* ``GET /_runner/jobs/{runnerRequestId}`` -> the job (``cancelRequested`` tells it to stop).
* ``POST /_runner/jobs/{runnerRequestId}/started`` -> 204 (JobStarted).
* ``POST /_runner/jobs/{runnerRequestId}/completed`` ``{"result": "succeeded"}`` -> 204
  (JobCompleted; an ephemeral runner is de-registered).
* ``POST /_runner/disconnect`` -> 204 (the runner goes offline).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from testworld.sim.github.http import STATE_KEY, bearer, int_param, read_json, read_object
from testworld.sim.github.state import FakeGitHubState, Job, Runner, StateError

PREFIX = "/_runner"
RESULTS = ("succeeded", "failed", "canceled", "skipped")


def _state(request: web.Request) -> FakeGitHubState:
    return request.app[STATE_KEY]


def _runner(request: web.Request) -> Runner:
    return _state(request).runner_by_token(bearer(request))


def job_json(job: Job) -> dict[str, Any]:
    return {
        "runnerRequestId": job.request_id,
        "jobId": job.job_id,
        "repositoryName": job.repo,
        "ownerName": job.owner,
        "workflowRunId": job.run_id,
        "jobDisplayName": job.display_name,
        "jobWorkflowRef": job.workflow_ref,
        "labels": job.labels,
        "durationSeconds": job.duration,
        "result": job.result,
        "status": job.status,
        "cancelRequested": job.cancel_requested,
    }


async def register(request: web.Request) -> web.Response:
    body = await read_object(request)
    url, token, name = body.get("url"), body.get("token"), body.get("name")
    labels = body.get("labels") or []
    if not all(isinstance(v, str) for v in (url, token, name)):
        raise StateError(400, "url, token and name are required strings")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise StateError(400, "labels must be a list of strings")
    assert isinstance(url, str) and isinstance(token, str) and isinstance(name, str)
    r = _state(request).register_runner_with_token(
        token, url, name, labels, ephemeral=bool(body.get("ephemeral", False))
    )
    return web.json_response(
        {"runnerId": r.id, "runnerName": r.name, "ephemeral": r.ephemeral, "token": r.token}
    )


async def connect(request: web.Request) -> web.Response:
    body = await read_object(request)
    encoded = body.get("encodedJITConfig")
    if not isinstance(encoded, str):
        raise StateError(400, "encodedJITConfig is required")
    r = _state(request).redeem_jit_config(encoded)
    return web.json_response(
        {
            "runnerId": r.id,
            "runnerName": r.name,
            "runnerScaleSetId": r.scale_set_id,
            "ephemeral": r.ephemeral,
            "token": r.token,
        }
    )


async def next_job(request: web.Request) -> web.Response:
    state, r = _state(request), _runner(request)
    raw = request.query.get("timeout")
    timeout = state.runner_poll_timeout
    if raw is not None:
        try:
            timeout = max(0.0, min(float(raw), state.runner_poll_timeout))
        except ValueError:
            raise StateError(400, "timeout must be a number") from None
    gone: list[bool] = []

    def check() -> Job | None:
        if r.id not in state.runners:
            if not state.is_ghost(r):  # a ghost polls on, idle, and is never given a job
                gone.append(True)
            return None
        return state.take_job(r)

    r.polls_in_flight += 1
    try:
        job = await r.signal.wait_for(check, timeout)
    finally:
        r.polls_in_flight -= 1
        r.last_seen = state.now()
    if gone:
        raise StateError(401, "The runner was removed.")
    if job is None:
        return web.Response(status=204)
    return web.json_response(job_json(job))


async def get_job(request: web.Request) -> web.Response:
    state, r = _state(request), _runner(request)
    job = state.job(int_param(request.match_info["request_id"], "runnerRequestId"))
    if job.runner_id != r.id:
        raise StateError(403, "The job is not assigned to this runner.")
    return web.json_response(job_json(job))


async def started(request: web.Request) -> web.Response:
    state, r = _state(request), _runner(request)
    state.job_started(r, int_param(request.match_info["request_id"], "runnerRequestId"))
    return web.Response(status=204)


async def completed(request: web.Request) -> web.Response:
    state, r = _state(request), _runner(request)
    body = await read_json(request, required=False) or {}
    result = body.get("result", "succeeded") if isinstance(body, dict) else None
    if result not in RESULTS:
        raise StateError(400, f"result must be one of {', '.join(RESULTS)}")
    state.job_completed(r, int_param(request.match_info["request_id"], "runnerRequestId"), result)
    return web.Response(status=204)


async def disconnect(request: web.Request) -> web.Response:
    r = _runner(request)
    r.online = False
    _state(request).changed.fire()
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post(PREFIX + "/register", register)
    r.add_post(PREFIX + "/connect", connect)
    r.add_get(PREFIX + "/jobs/next", next_job)
    r.add_get(PREFIX + "/jobs/{request_id}", get_job)
    r.add_post(PREFIX + "/jobs/{request_id}/started", started)
    r.add_post(PREFIX + "/jobs/{request_id}/completed", completed)
    r.add_post(PREFIX + "/disconnect", disconnect)
