"""The fake answers as the real Actions service does where clients branch on the answer.

Each case names where the real answer is documented: GitHub's Go client for scale sets
(``actions/scaleset``), ARC (``actions/actions-runner-controller``) and real listener logs
quoted in its public issues, as summarised in actions-service-api.md section 9.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from sim_helpers import Raw

from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer

NAMESPACE = "GitHub.Actions.Runtime.WebApi"


def _named(body: dict[str, Any], key: str) -> None:
    assert body["typeKey"] == key
    assert body["typeName"] == f"{NAMESPACE}.{key}, {NAMESPACE}"


@pytest.mark.pins("session-409")
async def test_second_session_is_409_runner_scale_set_session_conflict(raw: Raw) -> None:
    # actions/scaleset and ARC's listener match "RunnerScaleSetSessionConflictException"
    # ("... already has an active session."); actions-service-api.md section 9.
    ss = await raw.scale_set()
    await raw.session(ss["id"])
    r = await raw.svc(
        "POST", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions", json={"ownerName": "b"}
    )
    assert r.status_code == 409
    _named(r.json(), "RunnerScaleSetSessionConflictException")
    assert "already has an active session" in r.json()["message"]


async def test_deleting_a_stale_session_is_400_session_expired(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # Real listener logs in ARC's issues: deleting a session the service already dropped
    # answers 400 RunnerScaleSetSessionExpiredException, not 404.
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    gh.state.session_idle_timeout = 0.0  # the service drops the idle session
    path = f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/{s['sessionId']}"
    r = await raw.svc("DELETE", path)
    assert r.status_code == 400
    _named(r.json(), "RunnerScaleSetSessionExpiredException")
    r = await raw.svc("DELETE", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/no-such")
    assert r.status_code == 400
    _named(r.json(), "RunnerScaleSetSessionExpiredException")


async def test_refreshing_an_evicted_session_is_404_runner_admin(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # actions-service-api.md section 9: refreshing an evicted session is 404
    # RunnerAdminException (clients treat the 404 as "session gone, create a new one").
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    gh.state.session_idle_timeout = 0.0
    r = await raw.svc(
        "PATCH", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/{s['sessionId']}"
    )
    assert r.status_code == 404
    _named(r.json(), "RunnerAdminException")


async def test_every_actions_error_is_in_the_runtime_namespace(raw: Raw) -> None:
    r = await raw.svc("GET", "_apis/runtime/runnerscalesets/999")
    assert r.status_code == 404
    _named(r.json(), "RunnerScaleSetNotFoundException")
    r = await raw.svc("GET", "_apis/distributedtask/pools/0/agents/999")
    _named(r.json(), "AgentNotFoundException")


async def test_removing_a_runner_that_finished_its_job_is_204(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # actions/scaleset's RemoveRunner expects 204, and ARC's EphemeralRunner controller
    # (deleteRunnerFromService) calls it for every finished runner: a 404 there would make
    # its finalizer retry forever. The ephemeral runner de-registered itself after its job.
    ss = await raw.scale_set()
    r = await raw.svc(
        "POST",
        f"_apis/runtime/runnerscalesets/{ss['id']}/generatejitconfig",
        json={"name": "r-1", "workFolder": "_work"},
    )
    rid = r.json()["runner"]["id"]
    runner = gh.state.runners[rid]
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    assert gh.state.take_job(runner) is job
    gh.state.job_completed(runner, job.request_id, "succeeded")
    assert rid not in gh.state.runners  # gone from the service already
    gone = await raw.svc("DELETE", f"_apis/distributedtask/pools/0/agents/{rid}")
    assert gone.status_code == 204
    again = await raw.svc("DELETE", f"_apis/distributedtask/pools/0/agents/{rid}")
    assert again.status_code == 204
    never = await raw.svc("DELETE", "_apis/distributedtask/pools/0/agents/99999")
    assert never.status_code == 404
    _named(never.json(), "AgentNotFoundException")


# ---- service quirks (switches, off by default) ----------------------------------------------


async def _drain(raw: Raw, s: dict[str, Any], last: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Every message until a 202: (their bodies' job messages with statistics, last id)."""
    seen: list[dict[str, Any]] = []
    while True:
        r = await raw.poll(s, last)
        if r.status_code == 202:
            return seen, last
        msg = r.json()
        for j in json.loads(msg["body"]):
            seen.append({**j, "_stats": msg["statistics"], "_message": msg["messageId"]})
        last = msg["messageId"]


async def test_lagging_statistics_are_one_delivery_behind(raw: Raw, gh: FakeGitHubServer) -> None:
    # ARC #3420: a message's statistics can lag the job messages in its body.
    gh.state.lagging_statistics = True
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    seen, last = await _drain(raw, s)
    assert seen[0]["messageType"] == "JobAvailable"
    assert seen[0]["_stats"]["totalAvailableJobs"] == 0  # its own job not counted yet
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    seen, _ = await _drain(raw, s, last)
    assert seen[0]["messageType"] == "JobAssigned"
    assert seen[0]["_stats"]["totalAssignedJobs"] == 0  # lags: the fresh read says 1
    fresh = await raw.svc("GET", f"_apis/runtime/runnerscalesets/{ss['id']}")
    assert fresh.json()["statistics"]["totalAssignedJobs"] == 1


async def test_github_com_flow_without_job_available_or_acquire(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # actions/scaleset restored acquire "for several versions of GHES": github.com assigns
    # jobs to a scale set without JobAvailable or an acquire call.
    gh.state.skip_acquire = True
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    seen, _ = await _drain(raw, s)
    assert [j["messageType"] for j in seen] == ["JobAssigned"]
    assert seen[0]["_stats"]["totalAssignedJobs"] == 1
    assert job.status == "assigned" and job.scale_set_id == ss["id"]
    assert gh.calls("*/acquirejobs") == 0


async def test_runner_request_id_is_zero_outside_job_available(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # Since about July 2025 the service sends runnerRequestId 0 outside JobAvailable
    # (actions-service-api.md §9); GitHub's Go clients read it as a plain zero.
    gh.state.zero_request_ids = True
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    seen, _ = await _drain(raw, s)
    ids = {j["messageType"]: j["runnerRequestId"] for j in seen}
    assert ids == {"JobAvailable": job.request_id, "JobAssigned": 0}


async def test_quirks_switch_over_the_control_api(raw: Raw, gh: FakeGitHubServer) -> None:
    r = await raw.http.post(
        f"{gh.url}/_fake/config",
        json={
            "reassignTimes": 3,
            "laggingStatistics": True,
            "skipAcquire": True,
            "zeroRequestIds": True,
            "queueUrlQuery": "a=1",
        },
    )
    assert r.status_code == 200
    st = gh.state
    assert (st.reassign_times, st.lagging_statistics, st.skip_acquire) == (3, True, True)
    assert st.zero_request_ids and st.queue_url_query == "a=1"


async def test_a_pat_as_basic_auth_and_a_doubled_slash_are_accepted(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # ARC's former client (github/actions/client.go, v0.27) sends a PAT as Basic auth and
    # builds the acquire URL as "<service URL>/_apis/...", the service URL ending with "/".
    basic = base64.b64encode(f"github:{gh.token}".encode()).decode()
    r = await raw.http.post(
        f"{gh.url}/api/v3/orgs/octo-org/actions/runners/registration-token",
        headers={"Authorization": f"Basic {basic}"},
    )
    assert r.status_code == 201
    assert raw.service.endswith("/")
    r = await raw.http.get(
        f"{raw.service}/_apis/runtime/runnergroups/?groupName=Default&api-version=6.0-preview",
        headers={"Authorization": f"Bearer {raw.admin}"},
    )
    assert r.status_code == 200 and r.json()["count"] == 1
