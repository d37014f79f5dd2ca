"""What the client sends: the queue URL as given (query kept), and the runner settings that
GitHub's own client sends (actions-service-api.md section 9)."""

from __future__ import annotations

import json

import httpx
from gh_helpers import FAST_RETRY

from gharc.github import ActionsClient, PersonalAccessToken
from gharc.github.config import parse_config_url
from gharc.github.models import Label, RunnerScaleSet, RunnerSetting
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer


async def test_queue_url_query_is_kept_on_get_and_delete(
    client: ActionsClient, gh: FakeGitHubServer
) -> None:
    gh.state.queue_url_query = "rid=abc&tenant=7"
    ss = await client.create_runner_scale_set(
        RunnerScaleSet(name="arc", runner_group_id=1, labels=[Label(name="arc")])
    )
    assert ss.id is not None
    s = await client.create_message_session(ss.id, "listener-0")
    assert s.message_queue_url.endswith("/messages?rid=abc&tenant=7")
    url, tok = s.message_queue_url, s.message_queue_access_token
    gh.enqueue_job(DEFAULT_REPO, ["arc"])
    first = await client.get_message(url, tok, 0, 5)  # no lastMessageId: query as given
    assert first is not None
    await client.acquire_jobs(ss.id, tok, [j.runner_request_id for j in first.jobs])
    await client.delete_message(url, tok, first.message_id)
    second = await client.get_message(url, tok, first.message_id, 5)  # query + lastMessageId
    assert second is not None and second.message_id > first.message_id
    await client.delete_message(url, tok, second.message_id)
    assert gh.calls("/_services/broker/{session_id}/messages/{message_id}", status=204) == 2


async def test_create_scale_set_sends_only_disable_update() -> None:
    """GitHub's client (actions/scaleset) sends ``runnerSetting: {disableUpdate}`` alone;
    ARC's older client sent a PascalCase ``RunnerSetting``; neither sends ``isElastic``."""
    bodies: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/registration-token"):
            return httpx.Response(201, json={"token": "r", "expires_at": "2099-01-01T00:00:00Z"})
        if request.url.path.endswith("/runner-registration"):
            return httpx.Response(200, json={"url": "http://127.0.0.1:9/svc/", "token": "a.b.c"})
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"id": 5, "name": "arc"})

    client = ActionsClient(
        parse_config_url("http://127.0.0.1:9/octo-org"),
        PersonalAccessToken("t"),
        transport=httpx.MockTransport(answer),
        retry=FAST_RETRY,
    )
    async with client:
        await client.create_runner_scale_set(
            RunnerScaleSet(
                name="arc",
                runner_group_id=1,
                labels=[Label(name="arc")],
                runner_setting=RunnerSetting(disable_update=True),
            )
        )
    assert bodies[0]["runnerSetting"] == {"disableUpdate": True}
