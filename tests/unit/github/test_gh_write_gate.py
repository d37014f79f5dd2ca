"""The write gate: a controller replica that lost its Lease changes nothing at GitHub.

A leader paused past its Lease (SIGSTOP, a VM pause) woke up mid-reconcile and registered a
runner at GitHub whose JIT config it then could not store (its Kubernetes write was fenced):
a registration nobody would ever run or delete. So the calls that change GitHub's state go
through the same fence as the replica's Kubernetes writes; reads and credential exchanges
do not (a follower may still read, and a refused token would only delay the next leader).
"""

from __future__ import annotations

import time

import httpx
import pytest
from gh_helpers import ClientFactory, scripted_http_client

from gharc.github.endpoint_class import changes_github
from gharc.github.models import RunnerScaleSet
from gharc.github.transport import RetryPolicy, Sender
from gharc.kube.fence import NotLeading, WriteFence
from testworld.sim.github import FakeGitHubServer

JIT_URL = "http://127.0.0.1:9/_apis/runtime/runnerscalesets/1/generatejitconfig"
JIT = "/_apis/runtime/runnerscalesets/{id}/generatejitconfig"


def _held_fence(seconds_left: float) -> WriteFence:
    fence = WriteFence()
    fence.arm()
    fence.extend_to(time.monotonic() + seconds_left)
    return fence


@pytest.mark.parametrize(
    ("method", "endpoint", "changes"),
    [
        ("POST", JIT, True),
        ("POST", "/_apis/runtime/runnerscalesets/{id}/acquirejobs", True),
        ("DELETE", "{messageQueueUrl}/{message_id}", True),
        ("POST", "/_apis/runtime/runnerscalesets/{id}/sessions", True),
        ("PATCH", "/_apis/runtime/runnerscalesets/{id}/sessions/{session_id}", True),
        ("DELETE", "/_apis/distributedtask/pools/0/agents/{id}", True),
        ("DELETE", "/orgs/{org}/actions/runners/{runner_id}", True),
        ("GET", "{messageQueueUrl}", False),
        ("GET", "/_apis/runtime/runnerscalesets/{id}", False),
        ("POST", "/actions/runner-registration", False),
        ("POST", "/orgs/{org}/actions/runners/registration-token", False),
        ("POST", "/app/installations/{installation_id}/access_tokens", False),
    ],
)
def test_which_calls_change_github(method: str, endpoint: str, changes: bool) -> None:
    assert changes_github(method, endpoint) is changes


async def test_a_replica_without_the_lease_registers_no_runner(
    make_client: ClientFactory, gh: FakeGitHubServer
) -> None:
    fence = WriteFence()  # open while the scale set is made, as for a leader
    client = make_client(write_gate=fence.check)
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="gate", runner_group_id=1))
    assert scale_set.id is not None
    fence.arm()  # the Lease is lost: no renewal has proven it since
    gh.reset_calls()

    with pytest.raises(NotLeading, match="generatejitconfig not sent"):
        await client.generate_jit_runner_config(scale_set.id, "gate-runner-1")

    assert gh.calls("*generatejitconfig*") == 0
    assert not [r for r in gh.state.runners.values() if r.name == "gate-runner-1"]
    assert fence.refused == 1
    # Reads still go: a follower may look, it may not act.
    assert (await client.get_runner_scale_set_by_id(scale_set.id)) is not None


def _sender(
    fence: WriteFence, responses: list[httpx.Response], sent: list[httpx.Request]
) -> tuple[Sender, list[float]]:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return responses.pop(0)

    client = scripted_http_client(handler)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        fence.close()  # the Lease is lost during the backoff

    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.01)
    return Sender(client, policy=policy, sleep=sleep, write_gate=fence.check), slept


async def test_a_retry_after_the_lease_is_lost_is_not_sent() -> None:
    fence = _held_fence(10.0)
    sent: list[httpx.Request] = []
    sender, slept = _sender(fence, [httpx.Response(503), httpx.Response(200)], sent)

    with pytest.raises(NotLeading):
        await sender.send("POST", JIT_URL, endpoint=JIT)

    assert len(sent) == 1 and len(slept) == 1


async def test_a_gated_call_may_not_outlast_the_lease() -> None:
    fence = _held_fence(4.0)
    sent: list[httpx.Request] = []
    sender, _ = _sender(fence, [httpx.Response(200), httpx.Response(200)], sent)

    await sender.send("POST", JIT_URL, endpoint=JIT, timeout=30.0)
    await sender.send(
        "GET", JIT_URL.removesuffix("/generatejitconfig"), endpoint="/x", timeout=30.0
    )

    jit_timeout = sent[0].extensions["timeout"]
    assert 0 < jit_timeout["read"] <= 4.0 and jit_timeout["connect"] <= 4.0
    assert sent[1].extensions["timeout"]["read"] == 30.0
