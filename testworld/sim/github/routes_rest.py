"""GitHub REST as GHES serves it under ``/api/v3``: App installation tokens, registration
tokens, runner-registration (the door to the Actions service), runners, runner groups and
the legacy autoscaler's workflow runs and jobs.

REST responses carry ``X-RateLimit-*`` headers and are charged against the caller's bucket;
GETs carry ``Cache-Control: private, max-age=N`` and a weak ``ETag``, and a matching
``If-None-Match`` gets a 304 that costs nothing, as on github.com.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

from aiohttp import web

from testworld.sim.github.http import (
    RATE_LIMIT_DOCS,
    STATE_KEY,
    bearer,
    int_param,
    read_object,
    rest_error,
)
from testworld.sim.github.state import (
    FakeGitHubState,
    InstallationToken,
    Job,
    Pat,
    Runner,
    StateError,
    Tenant,
    rfc3339,
)

PREFIX = "/api/v3"
VARY = "Accept, Authorization, Cookie, X-GitHub-OTP"
Principal = Pat | InstallationToken


def _state(request: web.Request) -> FakeGitHubState:
    return request.app[STATE_KEY]


def _principal(request: web.Request) -> Principal:
    state = _state(request)
    token = bearer(request)
    pat = state.pats.get(token)
    if pat is not None and not pat.revoked:
        return pat
    inst = state.installation_tokens.get(token)
    if inst is not None and not inst.revoked and inst.expires_at > state.now():
        return inst
    raise StateError(401, "Bad credentials")


def _rate_headers(state: FakeGitHubState, p: Principal) -> dict[str, str]:
    b = p.bucket
    return {
        "X-RateLimit-Limit": str(b.limit),
        "X-RateLimit-Remaining": str(b.remaining),
        "X-RateLimit-Reset": str(math.ceil(b.reset_at or state.now() + 3600)),
        "X-RateLimit-Used": str(b.used),
        "X-RateLimit-Resource": "core",
    }


def _scope(request: web.Request) -> tuple[str, str]:
    m = request.match_info
    if "enterprise" in m:
        return "enterprise", m["enterprise"]
    if "repo" in m:
        return "repo", f"{m['owner']}/{m['repo']}"
    return "org", m["org"]


async def _rest(
    request: web.Request,
    produce: Callable[[FakeGitHubState, Principal], Any],
    *,
    status: int = 200,
    scoped: bool = True,
    per_page_key: str | None = None,
) -> web.Response:
    """Authenticate, check access and rate limit, run ``produce``, render with headers."""
    state = _state(request)
    p = _principal(request)
    now = state.now()
    if p.bucket.reset_at <= now:
        p.bucket.used, p.bucket.reset_at = 0, now + 3600
    if p.bucket.remaining <= 0:
        return _rate_limited(state, p)
    if scoped:
        kind, name = _scope(request)
        state.tenant_for(kind, name)  # 404 for an unknown account
        if not state.principal_can_access(p, kind, name):
            state.charge(p.bucket)
            raise StateError(403, "Resource not accessible by integration")
    try:
        payload = produce(state, p)
    except StateError as err:
        state.charge(p.bucket)
        return rest_error(err.status, err.message, headers=_rate_headers(state, p))
    headers: dict[str, str] = {}
    if per_page_key is not None:
        payload, link = _paginate(request, payload, per_page_key)
        if link:
            headers["Link"] = link
    if status == 204:
        state.charge(p.bucket)
        return web.Response(status=204, headers={**headers, **_rate_headers(state, p)})
    body = json.dumps(payload).encode()
    if request.method == "GET":
        age = state.rest_max_age
        etag = 'W/"' + hashlib.sha256(body).hexdigest()[:40] + '"'
        headers.update(
            {
                "ETag": etag,
                "Cache-Control": f"private, max-age={age}, s-maxage={age}",
                "Vary": VARY,
            }
        )
        inm = request.headers.get("If-None-Match", "")
        if etag in [t.strip() for t in inm.split(",")]:
            return web.Response(status=304, headers={**headers, **_rate_headers(state, p)})
    state.charge(p.bucket)
    return web.Response(
        status=status,
        body=body,
        content_type="application/json",
        headers={**headers, **_rate_headers(state, p)},
    )


def _rate_limited(state: FakeGitHubState, p: Principal) -> web.Response:
    who = f"user {p.login}" if isinstance(p, Pat) else f"installation ID {p.installation_id}"
    return web.json_response(
        {"message": f"API rate limit exceeded for {who}.", "documentation_url": RATE_LIMIT_DOCS},
        status=403,
        headers=_rate_headers(state, p),
    )


def _paginate(
    request: web.Request, payload: dict[str, Any], key: str
) -> tuple[dict[str, Any], str]:
    per_page = min(100, max(1, int_param(request.query.get("per_page", "30"), "per_page")))
    page = max(1, int_param(request.query.get("page", "1"), "page"))
    items = payload[key]
    last = max(1, math.ceil(len(items) / per_page))
    payload = {**payload, key: items[(page - 1) * per_page : page * per_page]}
    links = []
    url = request.url
    if page < last:
        links.append(f'<{url.update_query(page=page + 1, per_page=per_page)}>; rel="next"')
        links.append(f'<{url.update_query(page=last, per_page=per_page)}>; rel="last"')
    if page > 1:
        links.append(f'<{url.update_query(page=1, per_page=per_page)}>; rel="first"')
        links.append(f'<{url.update_query(page=page - 1, per_page=per_page)}>; rel="prev"')
    return payload, ", ".join(links)


# ---- App installation tokens --------------------------------------------------------------


async def installation_token(request: web.Request) -> web.Response:
    import jwt

    state = _state(request)
    app_jwt = bearer(request)
    try:
        unverified = jwt.decode(app_jwt, options={"verify_signature": False})
        app = state.app_by_issuer(unverified["iss"])
        claims = jwt.decode(
            app_jwt,
            app.public_key_pem,
            algorithms=["RS256"],
            options={"require": ["iat", "exp", "iss"]},
            leeway=60,
        )
    except (jwt.PyJWTError, KeyError, ValueError, TypeError):
        raise StateError(401, "A JSON web token could not be decoded") from None
    if claims["exp"] - claims["iat"] > 660 or claims["exp"] > state.now() + 660:
        raise StateError(401, "'Expiration time' claim ('exp') is too far in the future")
    inst_id = int_param(request.match_info["installation_id"], "installation_id")
    if inst_id not in app.installations:
        raise StateError(404, "Not Found")
    token = state.issue_installation_token(app.app_id, inst_id)
    return web.json_response(
        {
            "token": token.token,
            "expires_at": rfc3339(token.expires_at).split(".")[0] + "Z",
            "permissions": {"administration": "write", "organization_self_hosted_runners": "write"},
            "repository_selection": "all",
        },
        status=201,
    )


# ---- registration ---------------------------------------------------------------------------


async def registration_token(request: web.Request) -> web.Response:
    def produce(state: FakeGitHubState, p: Principal) -> dict[str, Any]:
        tenant = state.tenant_for(*_scope(request))
        token, exp = state.create_registration_token(tenant)
        return {"token": token, "expires_at": rfc3339(exp).split(".")[0] + "Z"}

    return await _rest(request, produce, status=201)


async def runner_registration(request: web.Request) -> web.Response:
    state = _state(request)
    token = bearer(request, "RemoteAuth")
    body = await read_object(request)
    url = body.get("url")
    if not isinstance(url, str) or not url:
        raise StateError(400, "url is required")
    service_url, admin = state.redeem_registration_token(token, url)
    return web.json_response(
        {"url": service_url, "token": admin, "token_schema": "OAuthAccessToken"}
    )


# ---- runners --------------------------------------------------------------------------------


def _runner_json(state: FakeGitHubState, r: Runner) -> dict[str, Any]:
    ss = state.scale_sets.get(r.scale_set_id or 0)
    labels = [{"id": i + 1, "name": n, "type": "custom"} for i, n in enumerate(r.labels)]
    if ss is None:
        labels.insert(0, {"id": 0, "name": "self-hosted", "type": "read-only"})
    return {
        "id": r.id,
        "name": r.name,
        "os": r.os,
        "status": "online" if r.online else "offline",
        "busy": r.job is not None,
        "ephemeral": r.ephemeral,
        "runner_group_id": ss.runner_group_id if ss else 1,
        "labels": labels,
    }


def _tenant_runners(state: FakeGitHubState, tenant: Tenant) -> list[Runner]:
    return sorted((r for r in state.runners.values() if r.tenant == tenant.id), key=lambda r: r.id)


async def list_runners(request: web.Request) -> web.Response:
    def produce(state: FakeGitHubState, p: Principal) -> dict[str, Any]:
        tenant = state.tenant_for(*_scope(request))
        runners = [_runner_json(state, r) for r in _tenant_runners(state, tenant)]
        return {"total_count": len(runners), "runners": runners}

    return await _rest(request, produce, per_page_key="runners")


async def remove_runner(request: web.Request) -> web.Response:
    def produce(state: FakeGitHubState, p: Principal) -> None:
        tenant = state.tenant_for(*_scope(request))
        rid = int_param(request.match_info["runner_id"], "runner_id")
        r = state.runners.get(rid)
        if r is None or r.tenant != tenant.id:
            raise StateError(404, "Not Found")
        if r.job is not None:
            raise StateError(422, f'Bad request - Runner "{r.name}" is still running a job"')
        state.remove_runner(tenant, rid)

    return await _rest(request, produce, status=204)


async def list_runner_groups(request: web.Request) -> web.Response:
    def produce(state: FakeGitHubState, p: Principal) -> dict[str, Any]:
        tenant = state.tenant_for(*_scope(request))
        base = str(request.url.with_query(None))
        groups = [
            {
                "id": gid,
                "name": name,
                "visibility": "all",
                "default": gid == 1,
                "runners_url": f"{base}/{gid}/runners",
                "inherited": False,
                "allows_public_repositories": False,
                "restricted_to_workflows": False,
            }
            for gid, name in state.runner_groups(tenant)
        ]
        return {"total_count": len(groups), "runner_groups": groups}

    return await _rest(request, produce, per_page_key="runner_groups")


# ---- workflow runs and jobs (legacy autoscaler) ---------------------------------------------


def _rest_job_status(job: Job) -> str:
    if job.status == "completed":
        return "completed"
    if job.status == "running" or job.runner_id is not None:
        return "in_progress"
    return "queued"


def _run_status(jobs: list[Job]) -> tuple[str, str | None]:
    statuses = {_rest_job_status(j) for j in jobs}
    if statuses == {"completed"}:
        conclusions = {j.conclusion for j in jobs}
        return "completed", (
            "failure"
            if "failed" in conclusions
            else "cancelled"
            if "canceled" in conclusions
            else "success"
        )
    if statuses == {"queued"}:
        return "queued", None
    return "in_progress", None


_CONCLUSION = {"succeeded": "success", "failed": "failure", "canceled": "cancelled"}


async def list_workflow_runs(request: web.Request) -> web.Response:
    def produce(state: FakeGitHubState, p: Principal) -> dict[str, Any]:
        repo = f"{request.match_info['owner']}/{request.match_info['repo']}"
        want = request.query.get("status")
        runs = []
        for run in sorted(state.runs.values(), key=lambda r: -r.id):
            if f"{run.owner}/{run.repo}" != repo:
                continue
            jobs = [state.jobs[j] for j in run.jobs]
            status, conclusion = _run_status(jobs)
            if want and want not in (status, conclusion):
                continue
            # the run's last change, as GitHub's: an unchanged listing keeps its ETag, so a
            # conditional request gets its free 304
            updated = max(
                [run.created_at]
                + [t for j in jobs for t in (j.queue_time, j.start_time, j.finish_time) if t]
            )
            runs.append(
                {
                    "id": run.id,
                    "name": run.name,
                    "status": status,
                    "conclusion": conclusion,
                    "run_number": run.id,
                    "event": "push",
                    "head_branch": "main",
                    "created_at": rfc3339(run.created_at).split(".")[0] + "Z",
                    "updated_at": rfc3339(updated).split(".")[0] + "Z",
                }
            )
        return {"total_count": len(runs), "workflow_runs": runs}

    return await _rest(request, produce, per_page_key="workflow_runs")


async def list_workflow_jobs(request: web.Request) -> web.Response:
    def produce(state: FakeGitHubState, p: Principal) -> dict[str, Any]:
        run_id = int_param(request.match_info["run_id"], "run_id")
        run = state.runs.get(run_id)
        repo = f"{request.match_info['owner']}/{request.match_info['repo']}"
        if run is None or f"{run.owner}/{run.repo}" != repo:
            raise StateError(404, "Not Found")
        jobs = []
        for rid in run.jobs:
            j = state.jobs[rid]
            jobs.append(
                {
                    "id": j.numeric_id,
                    "run_id": j.run_id,
                    "name": j.display_name,
                    "workflow_name": j.workflow_name,
                    "head_branch": "main",
                    "status": _rest_job_status(j),
                    "conclusion": _CONCLUSION.get(j.conclusion or "", j.conclusion),
                    "labels": j.labels,
                    "runner_id": j.runner_id,
                    "runner_name": j.runner_name,
                    "runner_group_id": 1 if j.runner_id else None,
                    "started_at": rfc3339(j.start_time).split(".")[0] + "Z"
                    if j.start_time
                    else None,
                    "completed_at": rfc3339(j.finish_time).split(".")[0] + "Z"
                    if j.finish_time
                    else None,
                }
            )
        return {"total_count": len(jobs), "jobs": jobs}

    return await _rest(request, produce, per_page_key="jobs")


async def rate_limit(request: web.Request) -> web.Response:
    state = _state(request)
    p = _principal(request)
    b = p.bucket
    core = {
        "limit": b.limit,
        "remaining": b.remaining,
        "used": b.used,
        "reset": math.ceil(b.reset_at or state.now() + 3600),
    }
    return web.json_response(
        {"resources": {"core": core}, "rate": core}, headers=_rate_headers(state, p)
    )


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post(PREFIX + "/app/installations/{installation_id}/access_tokens", installation_token)
    r.add_post(PREFIX + "/actions/runner-registration", runner_registration)
    r.add_get(PREFIX + "/rate_limit", rate_limit)
    for scope in ("/orgs/{org}", "/repos/{owner}/{repo}", "/enterprises/{enterprise}"):
        r.add_post(PREFIX + scope + "/actions/runners/registration-token", registration_token)
        r.add_get(PREFIX + scope + "/actions/runners", list_runners)
        r.add_delete(PREFIX + scope + "/actions/runners/{runner_id}", remove_runner)
    r.add_get(PREFIX + "/orgs/{org}/actions/runner-groups", list_runner_groups)
    r.add_get(PREFIX + "/enterprises/{enterprise}/actions/runner-groups", list_runner_groups)
    r.add_get(PREFIX + "/repos/{owner}/{repo}/actions/runs", list_workflow_runs)
    r.add_get(PREFIX + "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs", list_workflow_jobs)
