"""Legacy (registration-token) runners in the fake GitHub: ``POST /_runner/register`` and
jobs taken by label from ``/_runner/jobs/next``, as ``summerwind/actions-runner`` pods do."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from testworld.sim.github import FakeGitHubServer
from testworld.wait import eventually


async def _registration_token(gh: FakeGitHubServer, http: httpx.AsyncClient, scope: str) -> str:
    r = await http.post(
        f"{gh.url}/api/v3/{scope}/actions/runners/registration-token",
        headers={"Authorization": f"Bearer {gh.token}"},
    )
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


async def _register(
    gh: FakeGitHubServer,
    http: httpx.AsyncClient,
    token: str,
    *,
    url: str | None = None,
    name: str = "rd-abc",
    labels: list[str] | None = None,
    ephemeral: bool = True,
) -> httpx.Response:
    body: dict[str, Any] = {
        "url": url or gh.config_url(),
        "token": token,
        "name": name,
        "labels": labels if labels is not None else ["linux", "gpu"],
        "ephemeral": ephemeral,
    }
    return await http.post(f"{gh.url}/_runner/register", json=body)


async def _next(gh: FakeGitHubServer, http: httpx.AsyncClient, token: str) -> httpx.Response:
    return await http.get(
        f"{gh.url}/_runner/jobs/next",
        params={"timeout": "0.2"},
        headers={"Authorization": f"Bearer {token}"},
    )


async def test_a_registered_runner_takes_a_matching_job_runs_it_and_deregisters(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    token = await _registration_token(gh, http, "orgs/octo-org")
    r = await _register(gh, http, token)
    assert r.status_code == 200, r.text
    runner = r.json()
    assert runner["runnerName"] == "rd-abc" and runner["ephemeral"] is True
    listed = await http.get(
        f"{gh.url}/api/v3/orgs/octo-org/actions/runners",
        headers={"Authorization": f"Bearer {gh.token}"},
    )
    assert [x["name"] for x in listed.json()["runners"]] == ["rd-abc"]

    other = gh.enqueue_job("octo-org/octo-repo", ["self-hosted", "windows"])
    job = gh.enqueue_job("octo-org/octo-repo", ["self-hosted", "linux", "gpu"], duration=1)
    r = await _next(gh, http, runner["token"])
    assert r.status_code == 200, r.text
    assert r.json()["runnerRequestId"] == job.request_id  # not the windows job
    auth = {"Authorization": f"Bearer {runner['token']}"}
    rid = job.request_id
    assert (await http.post(f"{gh.url}/_runner/jobs/{rid}/started", headers=auth)).status_code
    assert gh.state.jobs[rid].status == "running"
    assert gh.state.jobs[rid].runner_name == "rd-abc"
    done = await http.post(
        f"{gh.url}/_runner/jobs/{rid}/completed", headers=auth, json={"result": "succeeded"}
    )
    assert done.status_code == 204
    assert gh.state.jobs[rid].status == "completed"
    assert gh.state.jobs[other.request_id].status == "queued"
    assert runner["runnerId"] not in gh.state.runners  # ephemeral: de-registered
    assert (await _next(gh, http, runner["token"])).status_code == 401


async def test_a_long_poll_wakes_up_when_a_job_is_queued(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    token = await _registration_token(gh, http, "orgs/octo-org")
    runner = (await _register(gh, http, token, labels=[])).json()
    poll = asyncio.create_task(
        http.get(
            f"{gh.url}/_runner/jobs/next",
            params={"timeout": "5"},
            headers={"Authorization": f"Bearer {runner['token']}"},
        )
    )
    held = gh.state.runners[runner["runnerId"]]
    await eventually(lambda: held.polls_in_flight == 1, message="the fake holds the poll")
    assert not poll.done()
    job = gh.enqueue_job("octo-org/octo-repo", ["self-hosted"])
    r = await asyncio.wait_for(poll, 4)  # well before the poll's own 5 s timeout
    assert r.status_code == 200 and r.json()["runnerRequestId"] == job.request_id


async def test_registration_needs_a_live_token_of_the_same_scope(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    assert (await _register(gh, http, "ANOTVALIDTOKEN")).status_code == 401
    repo_token = await _registration_token(gh, http, "repos/octo-org/octo-repo")
    r = await _register(gh, http, repo_token)  # an org URL with a repository's token
    assert r.status_code == 403
    r = await _register(gh, http, repo_token, url=gh.config_url(repo="octo-repo"))
    assert r.status_code == 200, r.text
    gh.state.expire("registration")
    assert (await _register(gh, http, repo_token, name="later")).status_code == 401


async def test_a_same_named_idle_runner_is_replaced_and_a_repo_runner_sees_only_its_repo(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    gh.state.create_repo("octo-org/other-repo")
    token = await _registration_token(gh, http, "repos/octo-org/octo-repo")
    url = gh.config_url(repo="octo-repo")
    first = (await _register(gh, http, token, url=url, ephemeral=False)).json()
    second = (await _register(gh, http, token, url=url, ephemeral=False)).json()
    assert first["runnerId"] != second["runnerId"]
    assert first["runnerId"] not in gh.state.runners  # --replace
    gh.enqueue_job("octo-org/other-repo", ["self-hosted"])
    assert (await _next(gh, http, second["token"])).status_code == 204
