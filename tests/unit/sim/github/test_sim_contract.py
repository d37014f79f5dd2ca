"""Pin the fake's wire shapes to actions-service-api.md so the fake cannot drift."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from sim_helpers import Raw

from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer

STATS = {
    "totalAvailableJobs",
    "totalAcquiredJobs",
    "totalAssignedJobs",
    "totalRunningJobs",
    "totalRegisteredRunners",
    "totalBusyRunners",
    "totalIdleRunners",
}
SCALE_SET = {
    "id",
    "name",
    "runnerGroupId",
    "runnerGroupName",
    "labels",
    "runnerSetting",
    "createdOn",
    "runnerJitConfigUrl",
    "statistics",
}
SESSION = {
    "sessionId",
    "ownerName",
    "runnerScaleSet",
    "messageQueueUrl",
    "messageQueueAccessToken",
    "statistics",
}
JOB_BASE = {
    "messageType",
    "runnerRequestId",
    "repositoryName",
    "ownerName",
    "jobId",
    "jobWorkflowRef",
    "jobDisplayName",
    "workflowRunId",
    "eventName",
    "requestLabels",
    "queueTime",
    "scaleSetAssignTime",
    "runnerAssignTime",
    "finishTime",
}
ACTIONS_ERROR = {"$id", "innerException", "message", "typeName", "typeKey", "errorCode", "eventId"}


async def test_rest_registration_and_headers(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    r = await http.post(
        f"{gh.url}/api/v3/orgs/octo-org/actions/runners/registration-token",
        headers={"Authorization": f"Bearer {gh.token}"},
    )
    assert r.status_code == 201
    assert set(r.json()) == {"token", "expires_at"}
    assert r.json()["expires_at"].endswith("Z")
    for h in (
        "X-GitHub-Request-Id",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "X-RateLimit-Used",
        "X-RateLimit-Resource",
    ):
        assert h in r.headers, h
    r2 = await http.post(
        f"{gh.url}/api/v3/actions/runner-registration",
        headers={"Authorization": f"RemoteAuth {r.json()['token']}"},
        json={"url": gh.config_url(), "runner_event": "register"},
    )
    assert r2.status_code == 200 and {"url", "token"} <= set(r2.json())
    assert r2.json()["url"].startswith(gh.url + "/") and r2.json()["url"].endswith("/")
    claims = json.loads(base64.urlsafe_b64decode(r2.json()["token"].split(".")[1] + "=="))
    assert "exp" in claims


async def test_rest_error_shape(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    r = await http.get(
        f"{gh.url}/api/v3/orgs/octo-org/actions/runners", headers={"Authorization": "Bearer wrong"}
    )
    assert r.status_code == 401
    assert r.json() == {
        "message": "Bad credentials",
        "documentation_url": r.json()["documentation_url"],
    }
    assert "X-GitHub-Request-Id" in r.headers


async def test_rest_runners_shape_and_cache_headers(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    gh.state.register_static_runner(gh.state.tenant_for("org", "octo-org"), "s1", ["linux"])
    r = await http.get(
        f"{gh.url}/api/v3/orgs/octo-org/actions/runners?per_page=100",
        headers={"Authorization": f"Bearer {gh.token}"},
    )
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"total_count", "runners"} and body["total_count"] == 1
    assert {"id", "name", "os", "status", "busy", "labels"} <= set(body["runners"][0])
    assert "max-age=60" in r.headers["Cache-Control"] and "private" in r.headers["Cache-Control"]
    etag = r.headers["ETag"]
    assert etag.startswith('W/"')
    r2 = await http.get(
        f"{gh.url}/api/v3/orgs/octo-org/actions/runners?per_page=100",
        headers={"Authorization": f"Bearer {gh.token}", "If-None-Match": etag},
    )
    assert r2.status_code == 304 and r2.content == b""


@pytest.mark.pins("rest-304-free")
async def test_workflow_run_and_job_listings_answer_304_for_free_until_a_job_changes(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    """The queued-job poll's listings, as on github.com: an unchanged listing answers a
    matching ``If-None-Match`` with a 304 that leaves ``X-RateLimit-Remaining`` alone, and
    a job queued since changes the ETag. The runs' ``updated_at`` was the time of the
    request, so every listing was new and no poll ever got a 304."""
    auth = {"Authorization": f"Bearer {gh.token}"}
    job = gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"])
    runs = f"{gh.url}/api/v3/repos/{DEFAULT_REPO}/actions/runs?status=queued"
    jobs = f"{gh.url}/api/v3/repos/{DEFAULT_REPO}/actions/runs/{job.run_id}/jobs"
    for url in (runs, jobs):
        first = await http.get(url, headers=auth)
        assert first.status_code == 200
        remaining = int(first.headers["X-RateLimit-Remaining"])
        later = gh.state.now() + 5.0  # the next poll, seconds later
        gh.state.clock = lambda later=later: later  # type: ignore[misc]
        again = await http.get(url, headers={**auth, "If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304 and again.content == b""
        assert int(again.headers["X-RateLimit-Remaining"]) == remaining
    etag = (await http.get(runs, headers=auth)).headers["ETag"]
    gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"])
    changed = await http.get(runs, headers={**auth, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.json()["total_count"] == 2


async def test_scale_set_session_and_message_shapes(raw: Raw, gh: FakeGitHubServer) -> None:
    ss = await raw.scale_set()
    assert set(ss) == SCALE_SET and set(ss["statistics"]) == STATS
    assert ss["labels"] == [{"type": "System", "name": "arc"}]
    assert set(ss["runnerSetting"]) == {"ephemeral", "isElastic", "disableUpdate"}
    r = await raw.svc("GET", "_apis/runtime/runnerscalesets?runnerGroupId=1&name=arc")
    assert set(r.json()) == {"count", "value"} and r.json()["count"] == 1
    r = await raw.svc("GET", "_apis/runtime/runnergroups/?groupName=Default")
    assert r.json()["value"][0] == {"id": 1, "name": "Default", "size": 0, "isDefaultGroup": True}
    assert "ActivityId" in r.headers
    s = await raw.session(ss["id"])
    assert set(s) == SESSION and set(s["runnerScaleSet"]) == SCALE_SET
    empty = await raw.poll(s)
    assert empty.status_code == 202 and empty.content == b""
    gh.enqueue_job(DEFAULT_REPO, ["arc"])
    msg = await raw.poll(s)
    assert msg.status_code == 200
    assert set(msg.json()) == {"messageId", "messageType", "body", "statistics"}
    assert msg.json()["messageType"] == "RunnerScaleSetJobMessages"
    assert isinstance(msg.json()["body"], str)
    jobs = json.loads(msg.json()["body"])
    assert set(jobs[0]) == JOB_BASE | {"acquireJobUrl"}
    assert jobs[0]["messageType"] == "JobAvailable"
    assert jobs[0]["repositoryName"] == "octo-repo" and jobs[0]["ownerName"] == "octo-org"
    assert jobs[0]["scaleSetAssignTime"] == "0001-01-01T00:00:00Z"
    r = await raw.svc("GET", f"_apis/runtime/runnerscalesets/{ss['id']}/acquirablejobs")
    assert set(r.json()["value"][0]) == {
        "acquireJobUrl",
        "messageType",
        "runnerRequestId",
        "repositoryName",
        "ownerName",
        "jobWorkflowRef",
        "eventName",
        "requestLabels",
    }
    r = await raw.http.post(
        f"{raw.service}_apis/runtime/runnerscalesets/{ss['id']}/acquirejobs?api-version=6.0-preview",
        headers={"Authorization": f"Bearer {s['messageQueueAccessToken']}"},
        json=[jobs[0]["runnerRequestId"]],
    )
    assert r.status_code == 200 and r.json() == {"count": 1, "value": [jobs[0]["runnerRequestId"]]}
    d = await raw.http.delete(
        f"{s['messageQueueUrl']}/{msg.json()['messageId']}",
        headers={"Authorization": f"Bearer {s['messageQueueAccessToken']}"},
    )
    assert d.status_code == 204
    assigned = await raw.poll(s, msg.json()["messageId"])
    body = json.loads(assigned.json()["body"])
    assert set(body[0]) == JOB_BASE and body[0]["messageType"] == "JobAssigned"


async def test_jit_and_agent_shapes(raw: Raw) -> None:
    ss = await raw.scale_set()
    r = await raw.svc(
        "POST",
        f"_apis/runtime/runnerscalesets/{ss['id']}/generatejitconfig",
        json={"name": "r-1", "workFolder": "_work"},
    )
    assert r.status_code == 200
    assert set(r.json()) == {"runner", "encodedJITConfig"}
    assert set(r.json()["runner"]) == {"id", "name", "runnerScaleSetId"}
    config = json.loads(base64.b64decode(r.json()["encodedJITConfig"]))
    assert config["runnerName"] == "r-1" and config["runnerScaleSetId"] == ss["id"]
    rid = r.json()["runner"]["id"]
    r = await raw.svc("GET", f"_apis/distributedtask/pools/0/agents/{rid}")
    # As the service's TaskAgent: a registration nobody connected with is offline.
    assert r.json() == {
        "id": rid,
        "name": "r-1",
        "runnerScaleSetId": ss["id"],
        "status": "offline",
    }
    r = await raw.svc("GET", "_apis/distributedtask/pools/0/agents?agentName=r-1")
    assert r.json()["count"] == 1
    dup = await raw.svc(
        "POST",
        f"_apis/runtime/runnerscalesets/{ss['id']}/generatejitconfig",
        json={"name": "r-1", "workFolder": "_work"},
    )
    assert dup.status_code == 409 and set(dup.json()) == ACTIONS_ERROR
    assert dup.json()["typeKey"] == "AgentExistsException"
    assert dup.json()["typeName"].startswith("GitHub.Actions.Runtime.WebApi.AgentExistsException")
    assert (
        await raw.svc("DELETE", f"_apis/distributedtask/pools/0/agents/{rid}")
    ).status_code == 204
    gone = await raw.svc("DELETE", f"_apis/distributedtask/pools/0/agents/{rid}")
    assert gone.status_code == 204  # already removed: a success (test_sim_real_answers)


async def test_status_codes(raw: Raw) -> None:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    conflict = await raw.svc(
        "POST", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions", json={"ownerName": "other"}
    )
    assert (
        conflict.status_code == 409
        and "already has an active session" in conflict.json()["message"]
    )
    path = f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/{s['sessionId']}"
    assert (await raw.svc("PATCH", path)).status_code == 200
    assert (await raw.svc("DELETE", path)).status_code == 204
    assert (
        await raw.svc("GET", f"_apis/runtime/runnerscalesets/{ss['id']}/acquirablejobs")
    ).status_code == 204
    assert (await raw.svc("DELETE", f"_apis/runtime/runnerscalesets/{ss['id']}")).status_code == 204
    missing = await raw.svc("GET", f"_apis/runtime/runnerscalesets/{ss['id']}")
    assert missing.status_code == 404
    assert missing.json()["typeKey"] == "RunnerScaleSetNotFoundException"
