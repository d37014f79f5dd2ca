"""Bad input gets the error GitHub gives, never the fake's last-resort 500."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web
from sim_helpers import Raw

from testworld.sim.github import FakeGitHubServer


@pytest.fixture(autouse=True)
async def no_unhandled(gh: FakeGitHubServer) -> AsyncIterator[None]:
    yield
    assert gh.state.unhandled_errors == 0


async def test_malformed_json_rest(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    reg = await http.post(
        f"{gh.url}/api/v3/orgs/octo-org/actions/runners/registration-token",
        headers={"Authorization": f"Bearer {gh.token}"},
    )
    r = await http.post(
        f"{gh.url}/api/v3/actions/runner-registration",
        headers={"Authorization": f"RemoteAuth {reg.json()['token']}"},
        content=b"{nope",
    )
    assert r.status_code == 400 and r.json()["message"] == "Problems parsing JSON"
    assert "documentation_url" in r.json()


async def test_malformed_json_actions(raw: Raw) -> None:
    r = await raw.svc("POST", "_apis/runtime/runnerscalesets", content=b"{nope")
    assert r.status_code == 400 and r.json()["typeKey"] == "InvalidRequestBodyException"
    r = await raw.svc("POST", "_apis/runtime/runnerscalesets", json=["not", "an", "object"])
    assert r.status_code == 400 and "typeName" in r.json()
    r = await raw.svc("POST", "_apis/runtime/runnerscalesets", json={"runnerGroupId": 1})
    assert r.status_code == 400
    r = await raw.svc("POST", "_apis/runtime/runnerscalesets", json={"name": "x", "labels": 3})
    assert r.status_code == 400


async def test_wrong_tokens(raw: Raw, gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    r = await http.post(
        f"{gh.url}/api/v3/actions/runner-registration",
        headers={"Authorization": "RemoteAuth bogus"},
        json={"url": gh.config_url(), "runner_event": "register"},
    )
    assert r.status_code == 401
    r = await http.get(
        f"{raw.service}_apis/runtime/runnergroups/?api-version=6.0-preview",
        headers={"Authorization": "Bearer not-a-jwt"},
    )
    assert r.status_code == 401 and r.json()["typeKey"] == "UnauthorizedRequestException"
    r = await http.get(f"{raw.service}_apis/runtime/runnergroups/?api-version=6.0-preview")
    assert r.status_code == 401
    r = await http.get(f"{gh.url}/api/v3/orgs/octo-org/actions/runners")
    assert r.status_code == 401 and r.json()["message"] == "Requires authentication"


async def test_missing_api_version(raw: Raw, http: httpx.AsyncClient) -> None:
    r = await http.get(
        f"{raw.service}_apis/runtime/runnergroups/",
        headers={"Authorization": f"Bearer {raw.admin}"},
    )
    assert r.status_code == 400 and r.json()["typeKey"] == "VssVersionNotSpecifiedException"


async def test_unknown_session_and_ids(raw: Raw, gh: FakeGitHubServer) -> None:
    ss = await raw.scale_set()
    r = await raw.svc("PATCH", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/no-such")
    assert r.status_code == 404 and r.json()["typeKey"] == "RunnerAdminException"
    r = await raw.http.get(
        f"{gh.url}/_services/broker/no-such/messages",
        headers={"Authorization": "Bearer x", "Accept": "api-version=6.0"},
    )
    assert r.status_code == 401
    r = await raw.svc("GET", "_apis/runtime/runnerscalesets/abc")
    assert r.status_code == 400
    r = await raw.svc("GET", "_apis/runtime/runnerscalesets/999")
    assert r.status_code == 404
    r = await raw.svc("GET", "_apis/distributedtask/pools/0/agents/999")
    assert r.status_code == 404 and r.json()["typeKey"] == "AgentNotFoundException"
    s = await raw.session(ss["id"])
    r = await raw.http.post(
        f"{raw.service}_apis/runtime/runnerscalesets/{ss['id']}/acquirejobs?api-version=6.0",
        headers={"Authorization": f"Bearer {s['messageQueueAccessToken']}"},
        json={"a": 1},
    )
    assert r.status_code == 400
    r = await raw.http.get(
        s["messageQueueUrl"],
        params={"lastMessageId": "x"},
        headers={
            "Authorization": f"Bearer {s['messageQueueAccessToken']}",
            "Accept": "application/json; api-version=6.0-preview",
        },
    )
    assert r.status_code == 400
    r = await raw.http.delete(
        f"{s['messageQueueUrl']}/12345",
        headers={"Authorization": f"Bearer {s['messageQueueAccessToken']}"},
    )
    assert r.status_code == 404


async def test_unknown_routes_and_accounts(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    auth = {"Authorization": f"Bearer {gh.token}"}
    r = await http.get(f"{gh.url}/api/v3/nothing/here", headers=auth)
    assert r.status_code == 404 and r.json()["message"] == "Not Found"
    r = await http.get(f"{gh.url}/api/v3/orgs/no-such-org/actions/runners", headers=auth)
    assert r.status_code == 404
    r = await http.put(f"{gh.url}/api/v3/orgs/octo-org/actions/runners", headers=auth)
    assert r.status_code == 404
    r = await http.get(f"{gh.url}/api/v3/orgs/octo-org/actions/runners?per_page=x", headers=auth)
    assert r.status_code == 400


async def test_bad_runner_api_input(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    r = await http.post(f"{gh.url}/_runner/connect", json={"encodedJITConfig": "!!!"})
    assert r.status_code == 400
    r = await http.post(f"{gh.url}/_runner/connect", json={})
    assert r.status_code == 400
    r = await http.get(f"{gh.url}/_runner/jobs/next", headers={"Authorization": "Bearer no"})
    assert r.status_code == 401


async def test_bad_control_api_input(gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
    r = await http.post(f"{gh.url}/_fake/jobs", json={"repo": "octo-org/octo-repo", "labels": []})
    assert r.status_code == 422
    r = await http.post(f"{gh.url}/_fake/faults", json={"kind": "meteor"})
    assert r.status_code == 422
    r = await http.post(f"{gh.url}/_fake/jobs", content=b"[")
    assert r.status_code == 400


async def test_unexpected_exception_is_github_shaped_500(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("bug in the fake")

    # a route added for the test only; real routes must never get here
    gh.app.router._frozen = False
    gh.app.router.add_get("/api/v3/boom", boom)
    gh.app.router._frozen = True
    r = await http.get(f"{gh.url}/api/v3/boom")
    assert r.status_code == 500
    assert r.json() == {
        "message": "Server Error",
        "documentation_url": r.json()["documentation_url"],
    }
    assert "bug in the fake" not in r.text
    assert gh.state.unhandled_errors == 1
    gh.state.unhandled_errors = 0  # expected here; the autouse check guards the other tests
