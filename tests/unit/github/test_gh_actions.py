"""ActionsClient against the fake GitHub: every endpoint, the error classes, token refresh."""

from __future__ import annotations

import asyncio
import time

import pytest
from gh_helpers import ClientFactory, FakeTime

from gharc.github import ActionsClient, ClientPool, GitHubMetrics, PersonalAccessToken
from gharc.github import errors as gherrors
from gharc.github.models import (
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    Label,
    RunnerScaleSet,
    RunnerScaleSetSession,
    RunnerSetting,
)
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer
from testworld.wait import eventually

SS = "*/runnerscalesets/{scale_set_id}"


async def _scale_set(client: ActionsClient, name: str = "arc") -> RunnerScaleSet:
    return await client.create_runner_scale_set(
        RunnerScaleSet(
            name=name, runner_group_id=1, labels=[Label(name=name)], runner_setting=RunnerSetting()
        )
    )


async def _session(client: ActionsClient, name: str = "arc") -> tuple[int, RunnerScaleSetSession]:
    ss = await _scale_set(client, name)
    assert ss.id is not None
    return ss.id, await client.create_message_session(ss.id, "listener-0")


async def test_runner_group_by_name(client: ActionsClient) -> None:
    group = await client.get_runner_group_by_name("Default")
    assert (group.id, group.name, group.is_default) == (1, "Default", True)
    with pytest.raises(gherrors.NotFound):
        await client.get_runner_group_by_name("nope")


async def test_scale_set_crud(client: ActionsClient, gh: FakeGitHubServer) -> None:
    assert await client.get_runner_scale_set(1, "arc") is None
    ss = await _scale_set(client)
    assert ss.id and ss.runner_group_name == "Default" and ss.labels[0].name == "arc"
    assert ss.statistics is not None
    found = await client.get_runner_scale_set(1, "arc")
    assert found is not None and found.id == ss.id
    by_id = await client.get_runner_scale_set_by_id(ss.id)
    assert by_id is not None and by_id.name == "arc"
    updated = await client.update_runner_scale_set(
        ss.id, {"labels": [{"type": "System", "name": "arc"}, {"type": "System", "name": "gpu"}]}
    )
    assert [lbl.name for lbl in updated.labels] == ["arc", "gpu"]
    updated = await client.update_runner_scale_set(
        ss.id, RunnerScaleSet(runner_setting=RunnerSetting(disable_update=True))
    )
    assert updated.runner_setting is not None and updated.runner_setting.disable_update
    await client.delete_runner_scale_set(ss.id)
    assert await client.get_runner_scale_set_by_id(ss.id) is None
    with pytest.raises(gherrors.RunnerScaleSetNotFound):
        await client.delete_runner_scale_set(ss.id)
    assert gh.calls(SS, method="GET", status=404) == 1


async def test_create_defaults_name_label(client: ActionsClient) -> None:
    ss = await client.create_runner_scale_set(RunnerScaleSet(name="plain", runner_group_id=1))
    assert [lbl.name for lbl in ss.labels] == ["plain"]


async def test_session_lifecycle_and_conflict(client: ActionsClient, gh: FakeGitHubServer) -> None:
    ss_id, session = await _session(client)
    assert session.runner_scale_set is not None and session.runner_scale_set.id == ss_id
    with pytest.raises(gherrors.SessionConflict) as info:
        await client.create_message_session(ss_id, "listener-1")
    assert info.value.status == 409 and isinstance(info.value, gherrors.Conflict)
    assert "active session" in str(info.value)
    refreshed = await client.refresh_message_session(ss_id, session.session_id)
    assert refreshed.message_queue_access_token != session.message_queue_access_token
    with pytest.raises(gherrors.MessageQueueTokenExpired):
        await client.get_message(
            session.message_queue_url, session.message_queue_access_token, 0, 1
        )
    await client.delete_message_session(ss_id, session.session_id)
    with pytest.raises(gherrors.NotFound):
        await client.refresh_message_session(ss_id, session.session_id)
    again = await client.create_message_session(ss_id, "listener-1")
    assert again.session_id != session.session_id
    # a 409 is a client error: never retried
    assert gh.calls(SS + "/sessions", method="POST", status=409) == 1


def _polls_held(gh: FakeGitHubServer) -> int:
    """Message polls the fake is holding open right now (long polls parked at the broker)."""
    return sum(s.polls_in_flight for s in gh.state.sessions.values())


async def test_empty_poll_returns_none(client: ActionsClient, gh: FakeGitHubServer) -> None:
    _ss_id, s = await _session(client)
    poll = asyncio.create_task(
        client.get_message(s.message_queue_url, s.message_queue_access_token, 0, 5)
    )
    await eventually(lambda: _polls_held(gh) == 1, message="the fake holds the poll")
    assert await poll is None  # answered 202 when the fake's long poll ran out
    assert gh.calls("*/messages", method="GET", status=202) == 1  # one poll, not a retry loop


async def test_long_poll_returns_on_new_job_quickly(
    client: ActionsClient, gh: FakeGitHubServer
) -> None:
    gh.state.poll_timeout = 10.0
    _ss_id, s = await _session(client)
    poll = asyncio.create_task(
        client.get_message(s.message_queue_url, s.message_queue_access_token, 0, 5)
    )
    await eventually(lambda: _polls_held(gh) == 1, message="the fake holds the poll")
    gh.enqueue_job(DEFAULT_REPO, ["arc"])
    # The job ends the held poll, long before the fake's 10 s would (how fast, in
    # bench/listener_latency.py: timings are not asserted on a shared test machine).
    msg = await asyncio.wait_for(poll, gh.state.poll_timeout / 2)
    assert msg is not None
    assert [type(j) for j in msg.jobs] == [JobAvailable]
    assert msg.statistics is not None and msg.statistics.total_available_jobs == 1
    assert gh.state.last_max_capacity[_ss_id] == 5


async def test_full_job_flow_through_messages(client: ActionsClient, gh: FakeGitHubServer) -> None:
    ss_id, s = await _session(client)
    url, tok = s.message_queue_url, s.message_queue_access_token
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"], result="failed")
    msg = await client.get_message(url, tok, 0, 10)
    assert msg is not None
    avail = msg.of_type(JobAvailable)
    assert [j.runner_request_id for j in avail] == [job.request_id]
    acquirable = await client.get_acquirable_jobs(ss_id)
    assert [j.runner_request_id for j in acquirable] == [job.request_id]
    assert await client.acquire_jobs(ss_id, tok, [job.request_id, 999]) == [job.request_id]
    assert await client.get_acquirable_jobs(ss_id) == []
    await client.delete_message(url, tok, msg.message_id)
    last = msg.message_id
    msg = await client.get_message(url, tok, last, 10)
    assert msg is not None and msg.of_type(JobAssigned)
    assert msg.statistics is not None and msg.statistics.total_assigned_jobs == 1
    last = msg.message_id
    jit = await client.generate_jit_runner_config(ss_id, "arc-runner-1")
    assert jit.runner.runner_scale_set_id == ss_id and jit.encoded_jit_config
    runner = gh.state.redeem_jit_config(jit.encoded_jit_config)
    taken = gh.state.take_job(runner)
    assert taken is not None and taken.request_id == job.request_id
    with pytest.raises(gherrors.JobStillRunning):
        await client.remove_runner(jit.runner.id)
    gh.state.job_started(runner, job.request_id)
    msg = await client.get_message(url, tok, last, 10)
    assert msg is not None
    started = msg.of_type(JobStarted)
    assert started and started[0].runner_name == "arc-runner-1"
    assert msg.statistics is not None and msg.statistics.total_running_jobs == 1
    last = msg.message_id
    gh.state.job_completed(runner, job.request_id, "failed")
    msg = await client.get_message(url, tok, last, 10)
    assert msg is not None
    done = msg.of_type(JobCompleted)
    assert done and done[0].result == "failed" and done[0].runner_id == jit.runner.id
    # ephemeral runner de-registered after its job
    assert await client.get_runner(jit.runner.id) is None
    assert msg.statistics is not None and msg.statistics.total_registered_runners == 0


async def test_runners(client: ActionsClient) -> None:
    ss = await _scale_set(client)
    assert ss.id is not None
    jit = await client.generate_jit_runner_config(ss.id, "r-1", work_folder="/w")
    with pytest.raises(gherrors.AgentExists):
        await client.generate_jit_runner_config(ss.id, "r-1")
    ref = await client.get_runner(jit.runner.id)
    assert ref is not None and ref.name == "r-1"
    by_name = await client.get_runner_by_name("r-1")
    assert by_name is not None and by_name.id == jit.runner.id
    assert await client.get_runner_by_name("nobody") is None
    await client.remove_runner(jit.runner.id)
    assert await client.get_runner(jit.runner.id) is None
    await client.remove_runner(jit.runner.id)  # already gone: a success, as the service says
    with pytest.raises(gherrors.AgentNotFound):
        await client.remove_runner(987654)


async def test_admin_token_refreshed_once_on_401(
    client: ActionsClient, gh: FakeGitHubServer
) -> None:
    await client.get_runner_group_by_name("Default")
    assert gh.calls("*/actions/runner-registration") == 1
    gh.state.expire("admin")
    await client.get_runner_group_by_name("Default")
    assert gh.calls("*/runnergroups/", status=401) == 1
    assert gh.calls("*/actions/runner-registration", status=200) == 2
    # the cached registration token was reused for the second exchange
    assert gh.calls("*/registration-token") == 1


async def test_admin_token_refreshed_before_expiry(
    make_client: ClientFactory, gh: FakeGitHubServer
) -> None:
    t = FakeTime(time.time())
    gh.state.clock = t.clock  # one clock for both sides
    client = make_client(clock=t.clock, sleep=t.sleep)
    conn = await client.admin_connection()
    t.now = conn.expires_at - 30  # inside the 60 s margin
    await client.get_runner_group_by_name("Default")
    assert gh.calls("*/actions/runner-registration") == 2
    assert gh.calls("*/runnergroups/", status=401) == 0


async def test_revoked_pat_is_unauthorized(client: ActionsClient, gh: FakeGitHubServer) -> None:
    gh.state.revoke_token(gh.token)
    with pytest.raises(gherrors.Unauthorized) as info:
        await client.get_runner_group_by_name("Default")
    assert gh.token not in str(info.value)
    assert gh.calls("*/registration-token", status=401) == 1  # 4xx: not retried


async def test_server_errors_retried_then_succeed(
    client: ActionsClient, gh: FakeGitHubServer, metrics: GitHubMetrics
) -> None:
    await client.get_runner_group_by_name("Default")
    gh.add_fault("status", route="*/runnergroups/", status=503, count=2)
    group = await client.get_runner_group_by_name("Default")
    assert group.name == "Default"
    assert gh.calls("*/runnergroups/", status=503) == 2
    assert metrics.count("/_apis/runtime/runnergroups", "GET", 503) == 2
    assert metrics.count("/_apis/runtime/runnergroups", "GET", 200) == 2


async def test_server_errors_exhausted(client: ActionsClient, gh: FakeGitHubServer) -> None:
    await client.get_runner_group_by_name("Default")
    gh.add_fault("status", route="*/runnergroups/", status=500)
    with pytest.raises(gherrors.ServerError):
        await client.get_runner_group_by_name("Default")
    assert gh.calls("*/runnergroups/", status=500) == 4  # FAST_RETRY.max_attempts


async def test_scale_set_deleted_under_the_listener(
    client: ActionsClient, gh: FakeGitHubServer
) -> None:
    ss_id, s = await _session(client)
    gh.state.delete_scale_set(ss_id)
    assert await client.get_runner_scale_set_by_id(ss_id) is None
    with pytest.raises(gherrors.RunnerScaleSetNotFound):
        await client.create_message_session(ss_id, "x")
    with pytest.raises(gherrors.MessageQueueTokenExpired):
        await client.get_message(s.message_queue_url, s.message_queue_access_token, 0, 1)


async def test_queue_token_expiry_and_acquire(client: ActionsClient, gh: FakeGitHubServer) -> None:
    ss_id, s = await _session(client)
    gh.state.expire("queue")
    with pytest.raises(gherrors.MessageQueueTokenExpired):
        await client.acquire_jobs(ss_id, s.message_queue_access_token, [1])
    with pytest.raises(gherrors.MessageQueueTokenExpired):
        await client.delete_message(s.message_queue_url, s.message_queue_access_token, 1)
    s2 = await client.refresh_message_session(ss_id, s.session_id)
    assert await client.acquire_jobs(ss_id, s2.message_queue_access_token, [1]) == []


async def test_pool_shares_clients(gh: FakeGitHubServer, metrics: GitHubMetrics) -> None:
    pool = ClientPool(metrics=metrics)
    try:
        a = pool.get(gh.config_url(), PersonalAccessToken(gh.token))
        b = pool.get(gh.config_url() + "/", PersonalAccessToken(gh.token))
        c = pool.get(gh.config_url(repo="octo-repo"), PersonalAccessToken(gh.token))
        assert a is b and a is not c and len(pool) == 2
        assert pool.get_rest(gh.config_url(), PersonalAccessToken(gh.token)) is a.rest
        await a.get_runner_group_by_name("Default")
        await b.get_runner_group_by_name("Default")
        assert gh.calls("*/actions/runner-registration") == 1
    finally:
        await pool.aclose()


async def test_client_repr_has_no_secrets(client: ActionsClient, gh: FakeGitHubServer) -> None:
    conn = await client.admin_connection()
    assert gh.token not in repr(client) and conn.token not in repr(conn)


@pytest.mark.pins("last-message-id-ack")
async def test_a_message_acknowledged_by_last_message_id_is_gone_for_delete(
    client: ActionsClient, gh: FakeGitHubServer
) -> None:
    """A poll's lastMessageId acknowledges the messages up to it; deleting one afterwards
    answers 404, which the listener counts as done (GitHub's client deletes first)."""
    _ss_id, s = await _session(client)
    url, tok = s.message_queue_url, s.message_queue_access_token
    gh.enqueue_job(DEFAULT_REPO, ["arc"])
    first = await client.get_message(url, tok, 0, 10)
    assert first is not None
    gh.state.poll_timeout = 0.1
    assert await client.get_message(url, tok, first.message_id, 10) is None
    with pytest.raises(gherrors.NotFound):
        await client.delete_message(url, tok, first.message_id)
