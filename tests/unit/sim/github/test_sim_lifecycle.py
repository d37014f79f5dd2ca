"""Job lifecycle, label matching, runner-side API and the control API of the fake."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from sim_helpers import Raw

from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer


def _jobs(msg: httpx.Response) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = json.loads(msg.json()["body"])
    return body


async def test_runner_side_api_full_lifecycle(raw: Raw, gh: FakeGitHubServer) -> None:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    jit = (
        await raw.svc(
            "POST",
            f"_apis/runtime/runnerscalesets/{ss['id']}/generatejitconfig",
            json={"name": "r-1", "workFolder": "_work"},
        )
    ).json()
    conn = await raw.http.post(
        f"{gh.url}/_runner/connect", json={"encodedJITConfig": jit["encodedJITConfig"]}
    )
    assert conn.status_code == 200 and conn.json()["runnerName"] == "r-1"
    again = await raw.http.post(
        f"{gh.url}/_runner/connect", json={"encodedJITConfig": jit["encodedJITConfig"]}
    )
    assert again.status_code == 409
    auth = {"Authorization": f"Bearer {conn.json()['token']}"}
    waiting = asyncio.create_task(
        raw.http.get(f"{gh.url}/_runner/jobs/next", params={"timeout": 5}, headers=auth)
    )
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"], duration=1.5, result="succeeded")
    msg = await raw.poll(s)
    assert [j["messageType"] for j in _jobs(msg)] == ["JobAvailable"]
    assert gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    taken = await asyncio.wait_for(waiting, 5)
    assert taken.status_code == 200 and taken.json()["runnerRequestId"] == job.request_id
    assert taken.json()["durationSeconds"] == 1.5
    rid = job.request_id
    assert (
        await raw.http.post(f"{gh.url}/_runner/jobs/{rid}/started", headers=auth)
    ).status_code == 204
    m2 = await raw.poll(s, msg.json()["messageId"])
    assert [j["messageType"] for j in _jobs(m2)] == ["JobAssigned", "JobStarted"]
    assert m2.json()["statistics"]["totalBusyRunners"] == 1
    assert m2.json()["statistics"]["totalAssignedJobs"] == 1
    done = await raw.http.post(
        f"{gh.url}/_runner/jobs/{rid}/completed", headers=auth, json={"result": "failed"}
    )
    assert done.status_code == 204
    m3 = await raw.poll(s, m2.json()["messageId"])
    completed = _jobs(m3)[0]
    assert completed["messageType"] == "JobCompleted" and completed["result"] == "failed"
    assert completed["runnerName"] == "r-1"
    assert m3.json()["statistics"]["totalRegisteredRunners"] == 0  # ephemeral: de-registered
    assert (await raw.http.get(f"{gh.url}/_runner/jobs/next", headers=auth)).status_code == 401


async def test_labels_and_scope_matching(raw: Raw, gh: FakeGitHubServer) -> None:
    a = await raw.scale_set("linux-x64")
    b = await raw.scale_set("gpu")
    gh.state.create_repo("other-org/app")
    j1 = gh.enqueue_job(DEFAULT_REPO, ["linux-x64"])
    j2 = gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "GPU"])
    j3 = gh.enqueue_job(DEFAULT_REPO, ["gpu", "arm64"])  # no set has both labels
    j4 = gh.enqueue_job("other-org/app", ["gpu"])  # another org: not this tenant's
    assert j1.offered_to == {a["id"]} and j2.offered_to == {b["id"]}
    assert j3.offered_to == set() and j4.offered_to == set()


async def test_two_sets_one_acquires(raw: Raw, gh: FakeGitHubServer) -> None:
    a = await raw.scale_set("one")
    gh.state.update_scale_set(
        gh.state.tenants[1], a["id"], {"labels": [{"name": "one"}, {"name": "shared"}]}
    )
    b = await raw.scale_set("two")
    gh.state.update_scale_set(
        gh.state.tenants[1], b["id"], {"labels": [{"name": "two"}, {"name": "shared"}]}
    )
    job = gh.enqueue_job(DEFAULT_REPO, ["shared"])
    assert job.offered_to == {a["id"], b["id"]}
    st = gh.state
    assert st.acquire_jobs(st.scale_sets[b["id"]], [job.request_id]) == [job.request_id]
    assert st.acquire_jobs(st.scale_sets[a["id"]], [job.request_id]) == []
    assert st.statistics(st.scale_sets[a["id"]])["totalAvailableJobs"] == 0
    assert st.statistics(st.scale_sets[b["id"]])["totalAssignedJobs"] == 1


async def test_cancel_job(raw: Raw, gh: FakeGitHubServer) -> None:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    gh.cancel_job(job.request_id)
    msg = await raw.poll(s)
    kinds = [(j["messageType"], j.get("result")) for j in _jobs(msg)]
    assert kinds == [("JobAvailable", None), ("JobAssigned", None), ("JobCompleted", "canceled")]
    assert msg.json()["statistics"]["totalAssignedJobs"] == 0


async def test_poll_wakes_when_scale_set_deleted(raw: Raw, gh: FakeGitHubServer) -> None:
    gh.state.poll_timeout = 10
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    poll = asyncio.create_task(raw.poll(s))
    await asyncio.sleep(0.1)
    gh.state.delete_scale_set(ss["id"])
    r = await asyncio.wait_for(poll, 2)
    assert r.status_code == 401


async def test_control_api_over_http(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    u = gh.url + "/_fake"
    assert (await http.post(f"{u}/orgs", json={"name": "acme"})).status_code == 201
    assert (await http.post(f"{u}/repos", json={"name": "acme/web"})).status_code == 201
    tok = (await http.post(f"{u}/tokens", json={"orgs": ["acme"]})).json()["token"]
    app = (await http.post(f"{u}/apps", json={"account": "acme"})).json()
    assert "PRIVATE KEY" in app["privateKey"] and app["installationId"]
    job = (
        await http.post(
            f"{u}/jobs", json={"repo": "acme/web", "labels": ["x"], "durationSeconds": 2}
        )
    ).json()
    assert job["status"] == "queued" and job["durationSeconds"] == 2
    assert (await http.post(f"{u}/jobs/{job['runnerRequestId']}/cancel")).json()[
        "status"
    ] == "completed"
    assert len((await http.get(f"{u}/jobs")).json()) == 1
    fault = (
        await http.post(
            f"{u}/faults",
            json={
                "kind": "status",
                "status": 502,
                "count": 1,
                "route": "/api/v3/orgs/{org}/actions/runners",
            },
        )
    ).json()
    auth = {"Authorization": f"Bearer {tok}"}
    runners = f"{gh.url}/api/v3/orgs/acme/actions/runners"
    assert (await http.get(runners, headers=auth)).status_code == 502
    assert (await http.get(runners, headers=auth)).status_code == 200
    assert (await http.get(f"{u}/faults")).json()[0]["hits"] == 1
    assert (await http.delete(f"{u}/faults/{fault['id']}")).status_code == 204
    assert (
        await http.post(f"{u}/ratelimit", json={"token": tok, "resetIn": 30})
    ).status_code == 204
    limited = await http.get(runners, headers=auth)
    assert limited.status_code == 403 and limited.headers["X-RateLimit-Remaining"] == "0"
    assert "rate limit" in limited.json()["message"]
    assert (await http.post(f"{u}/revoke", json={"token": tok})).status_code == 204
    assert (await http.get(runners, headers=auth)).status_code == 401
    assert (await http.post(f"{u}/expire", json={"kind": "queue"})).json() == {"expired": 0}
    calls = (await http.get(f"{u}/calls")).json()
    assert {
        "method": "GET",
        "route": "/api/v3/orgs/{org}/actions/runners",
        "status": 502,
        "count": 1,
    } in calls
    assert gh.calls("/api/v3/orgs/{org}/actions/runners", status=401) == 1
    assert (await http.delete(f"{u}/calls")).status_code == 204
    assert gh.calls("/api/v3/*") == 0
    cfg = (await http.post(f"{u}/config", json={"pollTimeout": 2, "restMaxAge": 5})).json()
    assert cfg["pollTimeout"] == 2 and gh.state.rest_max_age == 5
    state = (await http.get(f"{u}/state")).json()
    assert "acme" in state["orgs"] and state["unhandledErrors"] == 0


@pytest.mark.looptime
async def test_latency_fault(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    """Loop time: the 5 s delay costs nothing, and a loaded machine cannot blur the two."""
    gh.add_fault("latency", route="/_fake/state", delay=5.0, count=1)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert (await http.get(f"{gh.url}/_fake/state")).status_code == 200
    assert loop.time() - start >= 5.0
    start = loop.time()
    await http.get(f"{gh.url}/_fake/state")
    assert loop.time() - start < 5.0  # count=1: the second request is not delayed


async def test_time_limited_fault(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    gh.add_fault("status", route="/_fake/state", status=503, seconds=0.2)
    assert (await http.get(f"{gh.url}/_fake/state")).status_code == 503
    await asyncio.sleep(0.25)
    assert (await http.get(f"{gh.url}/_fake/state")).status_code == 200


def test_cli_help() -> None:
    from typer.testing import CliRunner

    from testworld.cli import app

    result = CliRunner().invoke(app, ["sim", "github", "--help"])
    assert result.exit_code == 0 and "--port" in result.output
