"""What the fake Actions service does as time passes: idle message sessions expire, and the
jobs of lost runners are settled (failed when started, handed back when not).

Time is moved by back-dating ``last_seen`` and running the timers (``state.sweep``) at once,
so nothing here waits out the real timeouts.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from sim_helpers import Raw

from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer
from testworld.sim.github.state import RUNNER_LOST_TIMEOUT, SESSION_IDLE_TIMEOUT, Job, Runner


def _jobs(resp: httpx.Response) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = json.loads(resp.json()["body"])
    return body


def test_the_modelled_timings_are_the_documented_defaults() -> None:
    state = FakeGitHubServer().state
    assert state.session_idle_timeout == SESSION_IDLE_TIMEOUT == 120.0
    assert state.runner_lost_timeout == RUNNER_LOST_TIMEOUT == 600.0


async def test_an_idle_session_expires_and_frees_the_scale_set(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    conflict = await raw.svc(
        "POST", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions", json={"ownerName": "b"}
    )
    assert conflict.status_code == 409
    gh.state.sessions[s["sessionId"]].last_seen -= SESSION_IDLE_TIMEOUT + 1
    gh.state.sweep()

    assert s["sessionId"] not in gh.state.sessions
    assert (await raw.poll(s)).status_code == 401
    refresh = await raw.svc(
        "PATCH", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/{s['sessionId']}"
    )
    assert refresh.status_code == 404
    assert (await raw.session(ss["id"]))["sessionId"] != s["sessionId"]


async def test_a_polled_or_polling_session_does_not_expire(raw: Raw, gh: FakeGitHubServer) -> None:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    session = gh.state.sessions[s["sessionId"]]
    session.last_seen -= SESSION_IDLE_TIMEOUT - 5
    assert (await raw.poll(s)).status_code == 202  # the poll counts as activity
    session.last_seen -= SESSION_IDLE_TIMEOUT + 1
    session.polls_in_flight += 1  # a long poll longer than the idle timeout
    gh.state.sweep()
    assert s["sessionId"] in gh.state.sessions
    session.polls_in_flight -= 1
    gh.state.sweep()
    assert s["sessionId"] not in gh.state.sessions


async def test_a_successor_deletes_its_predecessors_session_with_its_own_credentials(
    gh: FakeGitHubServer, http: httpx.AsyncClient
) -> None:
    """A new listener pod (its own admin token, from another PAT) deletes the session the
    one before it left behind, by id, and can then open its own."""
    first = Raw(gh, http)
    await first.connect()
    ss = await first.scale_set()
    s = await first.session(ss["id"])
    successor = Raw(gh, http)
    await successor.connect(token=gh.state.create_pat())
    assert successor.admin != first.admin
    path = f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/{s['sessionId']}"
    assert (await successor.svc("DELETE", path)).status_code == 204
    assert s["sessionId"] not in gh.state.sessions
    assert (await successor.session(ss["id"]))["sessionId"] != s["sessionId"]

    gh.state.create_org("other-org")
    stranger = Raw(gh, http)
    await stranger.connect("other-org")
    current = next(iter(gh.state.sessions))
    denied = await stranger.svc(
        "DELETE", f"_apis/runtime/runnerscalesets/{ss['id']}/sessions/{current}"
    )
    assert denied.status_code == 404  # another tenant does not see the scale set
    assert current in gh.state.sessions


async def _runner_with_job(
    raw: Raw, gh: FakeGitHubServer, *, start: bool
) -> tuple[dict[str, Any], dict[str, Any], Runner, Job]:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    state = gh.state
    scale_set = state.scale_sets[ss["id"]]
    runner, _ = state.generate_jit_config(state.tenants[scale_set.tenant], ss["id"], "r-1", "")
    runner.online = True
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"], duration=60)
    state.acquire_jobs(scale_set, [job.request_id])
    assert state.take_job(runner) is job
    if start:
        state.job_started(runner, job.request_id)
    return ss, s, runner, job


async def test_a_lost_runners_started_job_fails(raw: Raw, gh: FakeGitHubServer) -> None:
    _ss, s, runner, job = await _runner_with_job(raw, gh, start=True)
    runner.last_seen = gh.state.now() - (RUNNER_LOST_TIMEOUT - 5)
    gh.state.sweep()
    assert job.status == "running"  # not lost yet

    runner.last_seen -= 10
    gh.state.sweep()

    assert job.status == "completed" and job.conclusion == "failed"
    assert runner.id not in gh.state.runners  # ephemeral: de-registered with its job
    seen: list[dict[str, Any]] = []
    last = 0
    while not any(m["messageType"] == "JobCompleted" for m in seen):
        resp = await raw.poll(s, last)
        assert resp.status_code == 200, "no JobCompleted for the lost runner's job"
        seen += _jobs(resp)
        last = resp.json()["messageId"]
    [done] = [m for m in seen if m["messageType"] == "JobCompleted"]
    assert done["result"] == "failed" and done["runnerName"] == "r-1"


async def test_a_job_given_to_a_runner_lost_before_starting_goes_to_another(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    ss, _s, runner, job = await _runner_with_job(raw, gh, start=False)
    runner.last_seen = gh.state.now() - RUNNER_LOST_TIMEOUT - 1
    gh.state.sweep()

    assert job.status == "assigned" and job.runner_id is None and runner.job is None
    state = gh.state
    scale_set = state.scale_sets[ss["id"]]
    other, _ = state.generate_jit_config(state.tenants[scale_set.tenant], ss["id"], "r-2", "")
    assert state.take_job(other) is job and job.runner_name == "r-2"


async def test_a_runner_that_renews_its_job_is_not_lost(raw: Raw, gh: FakeGitHubServer) -> None:
    _ss, _s, runner, job = await _runner_with_job(raw, gh, start=True)
    runner.last_seen = gh.state.now() - RUNNER_LOST_TIMEOUT - 1
    renew = await raw.http.get(
        f"{gh.url}/_runner/jobs/{job.request_id}",
        headers={"Authorization": f"Bearer {runner.token}"},
    )
    assert renew.status_code == 200
    gh.state.sweep()
    assert job.status == "running"


async def test_a_just_registered_runner_given_a_job_is_not_lost(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    """The lost-runner timer runs from registration: a runner that was handed a job before
    its first call is not lost at once (it was, with a zero last contact)."""
    _ss, _s, runner, job = await _runner_with_job(raw, gh, start=False)
    gh.state.sweep()
    assert runner.job == job.request_id and job.runner_id == runner.id
