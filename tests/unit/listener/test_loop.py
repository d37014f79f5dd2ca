"""The main loop over fakes: batches, acquire, job info, 202 re-evaluation, errors, stop.

Time is virtual (looptime): the 50 s long polls, backoffs and conflict waits cost nothing.
"""

from __future__ import annotations

import asyncio

import pytest
from listener_fakes import FakeActions, FakePatcher, config, conflict, job, message, running, until
from prometheus_client.parser import text_string_to_metric_families

from gharc.github import errors as gherrors
from gharc.listener.app import Listener
from gharc.listener.metrics import ListenerMetrics
from gharc.listener.runnerset_writes import KubePatchError
from gharc.listener.session import FatalError

pytestmark = pytest.mark.looptime


async def test_startup_publishes_session_statistics_and_owner() -> None:
    api, patcher = FakeActions(initial_assigned=2), FakePatcher()
    listener = Listener(config(min_runners=1), api, patcher, owner="pod-x")
    async with running(listener):
        await until(lambda: bool(patcher.replicas))
        assert patcher.replicas == [(3, 0)]
        assert api.calls[0] == ("create", 7, "pod-x")


async def test_batch_acquires_in_one_call_and_scales_up() -> None:
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(max_runners=4), api, patcher)
    async with running(listener):
        await until(lambda: len(patcher.replicas) == 1)
        jobs = [job("JobAvailable", i) for i in (11, 12, 13, 14, 15)]
        api.queue.put_nowait(message(1, jobs, assigned=5))
        await until(lambda: len(patcher.replicas) == 2)
        assert api.acquired == [[11, 12, 13, 14, 15]]
        assert api.deleted_messages == [1]
        assert patcher.replicas[-1] == (4, 1)  # capped by max_runners
        # the next poll acknowledges the message id and offers max_runners capacity
        await until(lambda: api.calls[-1][0] == "get" and api.calls[-1][1] == 1)
        assert api.calls[-1][2] == 4


async def test_available_jobs_the_message_did_not_offer_are_acquired_too() -> None:
    """The service truncates a delivery at 50 job messages and never offers the rest: the
    statistics count them, so the listener lists the acquirable jobs and takes those."""
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(max_runners=10), api, patcher)
    async with running(listener):
        await until(lambda: len(patcher.replicas) == 1)
        api.acquirable = [31, 32, 33]
        offered = [job("JobAvailable", 31)]
        api.queue.put_nowait(message(1, offered, assigned=0, totalAvailableJobs=3))
        await until(lambda: api.deleted_messages == [1])
        assert api.acquired == [[31], [32, 33]]
        assert ("acquirable", 7) in api.calls


async def test_no_listing_when_the_message_offered_every_available_job() -> None:
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(max_runners=10), api, patcher)
    async with running(listener):
        await until(lambda: len(patcher.replicas) == 1)
        offered = [job("JobAvailable", i) for i in (41, 42)]
        api.queue.put_nowait(message(1, offered, assigned=0, totalAvailableJobs=2))
        await until(lambda: api.deleted_messages == [1])
        assert api.acquired == [[41, 42]]
        assert not [c for c in api.calls if c[0] == "acquirable"]


async def test_job_started_patches_runner_status_and_missing_runner_is_ignored() -> None:
    api, patcher = FakeActions(), FakePatcher(runners={"runner-a"})
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: len(patcher.replicas) == 1)
        started = [
            job("JobStarted", 21, runnerName="runner-a", runnerId=5),
            job("JobStarted", 22, runnerName="runner-gone", runnerId=6),
        ]
        api.queue.put_nowait(message(1, started, assigned=2))
        await until(lambda: api.deleted_messages == [1])
        assert patcher.runner_status["runner-a"] == {
            "jobRequestId": 21,
            "jobRepositoryName": "acme/app",
            "jobId": "job-21",
            "workflowRunId": 1021,
            "jobWorkflowRef": "acme/app/.github/workflows/ci.yml@refs/heads/main",
            "jobDisplayName": "build",
        }
        await until(lambda: len(patcher.replicas) == 2)
        assert patcher.replicas[-1] == (2, 1)


async def test_a_job_started_alone_writes_no_set_patch() -> None:
    """A JobStarted moves no count and finishes no runner: its runner's status write is the
    one write it needs, not a fresh patch ID on the set as well (ARC sends one)."""
    api, patcher = FakeActions(initial_assigned=1), FakePatcher(runners={"runner-a"})
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: patcher.replicas == [(1, 0)])
        before = list(patcher.replicas)
        started = [job("JobStarted", 21, runnerName="runner-a", runnerId=5)]
        api.queue.put_nowait(message(1, started, assigned=1))
        # the next poll (acknowledging message 1) starts after the message's publish
        await until(lambda: api.calls[-1][:2] == ("get", 1))
        assert patcher.runner_status["runner-a"]["jobRequestId"] == 21
        assert patcher.replicas == before
        # a completion still gets its fresh ID at once
        done = [job("JobCompleted", 21, result="succeeded", runnerName="runner-a")]
        api.queue.put_nowait(message(2, done, assigned=1))
        await until(lambda: len(patcher.replicas) == len(before) + 1)
        assert patcher.replicas[-1][0] == 1 and patcher.replicas[-1][1] > 0


async def test_completions_scale_down_then_idle_zero_then_quiet() -> None:
    api, patcher = FakeActions(initial_assigned=2), FakePatcher()
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: patcher.replicas == [(2, 0)])
        done = [job("JobCompleted", i, result="succeeded", runnerName="r") for i in (1, 2)]
        api.queue.put_nowait(message(1, done, assigned=0))
        await until(lambda: len(patcher.replicas) == 2)
        assert patcher.replicas[-1] == (0, 1)
        assert listener.handler.completed_by_result["succeeded"] == 2
        # next empty poll (202): nothing new, target unchanged and == min -> id 0
        await until(lambda: len(patcher.replicas) == 3)
        assert patcher.replicas[-1] == (0, 0)
        polls = listener.polls
        await until(lambda: listener.polls >= polls + 3)
        assert len(patcher.replicas) == 3  # idle: no identical patch per poll


async def test_202_re_evaluates_a_shortfall_with_fresh_ids() -> None:
    api, patcher = FakeActions(initial_assigned=3), FakePatcher()
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: len(patcher.replicas) >= 3)
        assert patcher.replicas[:3] == [(3, 0), (3, 1), (3, 2)]


async def test_queue_token_expiry_refreshes_session() -> None:
    api, patcher = FakeActions(), FakePatcher()
    api.expire_next_poll = True
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: ("refresh", "s1") in api.calls)
        api.queue.put_nowait(message(1, [job("JobAvailable", 1)], assigned=1))
        await until(lambda: api.acquired == [[1]])
        assert listener.sessions.refreshes == 1


async def test_transient_errors_never_exit() -> None:
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(), api, patcher)
    for err in (
        gherrors.ConnectionFailed("EOF"),
        gherrors.ServerError("boom", status=502),
        TimeoutError(),
        gherrors.ConnectionFailed("EOF"),
    ):
        api.queue.put_nowait(err)
    api.queue.put_nowait(message(1, [job("JobAvailable", 1)], assigned=1))
    api.acquire_errors.append(gherrors.ServerError("acquire 503", status=503))
    patcher.errors.append(KubePatchError("apiserver restarting", 503))
    async with running(listener) as task:
        await until(lambda: (1, 1) in patcher.replicas)
        assert not task.done()
        assert api.acquired == [[1]]


async def test_unhandled_message_is_not_acknowledged_and_is_redelivered() -> None:
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(), api, patcher, step_attempts=1)
    msg = message(1, [job("JobAvailable", 1)], assigned=1)
    api.acquire_errors.append(gherrors.ServerError("acquire 503", status=503))
    api.queue.put_nowait(msg)
    api.queue.put_nowait(msg)  # the service redelivers an unacknowledged message
    async with running(listener):
        await until(lambda: api.deleted_messages == [1])
        assert api.acquired == [[1]]


async def test_session_conflict_is_retried_then_reported() -> None:
    api, patcher = FakeActions(), FakePatcher()
    api.create_errors = [conflict() for _ in range(3)]
    listener = Listener(config(session_conflict_attempts=3), api, patcher)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(FatalError) as info:
        await listener.run()
    assert [c[0] for c in api.calls] == ["create"] * 3
    assert loop.time() - start == pytest.approx(2 + 4)  # waited 2 s, then 4 s
    text = str(info.value)
    assert "scale set 7" in text and "active message session" in text and "\n" not in text


async def test_session_conflict_then_success() -> None:
    api, patcher = FakeActions(), FakePatcher()
    api.create_errors = [conflict(), conflict()]
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: bool(patcher.replicas))
        assert api.sessions_created == 1


@pytest.mark.parametrize(
    ("err", "words"),
    [
        (gherrors.Unauthorized("Bad credentials", status=401), "credentials"),
        (gherrors.NotFound("RunnerScaleSetNotFoundException", status=404), "scale set 7 not found"),
        (gherrors.RateLimited("API rate limit exceeded", status=403, reset_at=2e9), "rate limit"),
    ],
)
async def test_deterministic_startup_failures_are_fatal_at_once(err: Exception, words: str) -> None:
    api, patcher = FakeActions(), FakePatcher()
    api.create_errors = [err]
    listener = Listener(config(), api, patcher)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(FatalError, match=words):
        await listener.run()
    assert loop.time() - start < 1
    assert patcher.replicas == []


async def test_transient_startup_failure_is_retried() -> None:
    api, patcher = FakeActions(), FakePatcher()
    api.create_errors = [
        gherrors.ConnectionFailed("EOF"),
        gherrors.ServerError("bad gateway", status=502),
    ]
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: bool(patcher.replicas))


async def test_stop_deletes_session_even_mid_poll() -> None:
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(), api, patcher)
    task = asyncio.create_task(listener.run())
    await until(lambda: bool(patcher.replicas) and api.calls[-1][0] == "get")
    loop = asyncio.get_running_loop()
    start = loop.time()
    listener.request_stop()
    await asyncio.wait_for(task, timeout=5)
    assert loop.time() - start < 1  # the 50 s long poll was abandoned
    assert api.deleted_sessions == ["s1"] and listener.session_deleted


async def test_stop_during_conflict_wait_returns_quietly() -> None:
    api, patcher = FakeActions(), FakePatcher()
    api.create_errors = [conflict() for _ in range(5)]
    listener = Listener(config(), api, patcher)
    task = asyncio.create_task(listener.run())
    await asyncio.sleep(3)
    listener.request_stop()
    await asyncio.wait_for(task, timeout=5)
    assert api.deleted_sessions == []


async def test_metrics_after_a_job_sequence() -> None:
    api, patcher = FakeActions(), FakePatcher(runners={"r1"})
    metrics = ListenerMetrics(name="ers", namespace="ns", organization="acme")
    listener = Listener(config(min_runners=1, max_runners=3), api, patcher, metrics=metrics)
    times = {
        "queueTime": "2024-01-01T00:00:00Z",
        "scaleSetAssignTime": "2024-01-01T00:00:02Z",
        "runnerAssignTime": "2024-01-01T00:00:07Z",
    }
    api.queue.put_nowait(message(1, [job("JobAvailable", 1)], assigned=1))
    api.queue.put_nowait(message(2, [job("JobStarted", 1, runnerName="r1", **times)], assigned=1))
    api.queue.put_nowait(
        message(
            3,
            [
                job(
                    "JobCompleted",
                    1,
                    runnerName="r1",
                    result="failed",
                    finishTime="2024-01-01T00:01:07Z",
                    **times,
                )
            ],
            assigned=0,
        )
    )
    async with running(listener):
        await until(lambda: api.deleted_messages == [1, 2, 3])
        await until(lambda: len(patcher.replicas) >= 4)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(metrics.exposition().decode())
        for s in fam.samples
    }

    def value(metric: str, **labels: str) -> float:
        for (n, lbls), v in samples.items():
            if n == metric and all((k, val) in lbls for k, val in labels.items()):
                return v
        raise KeyError(metric)

    assert value("gha_min_runners", name="ers", namespace="ns", organization="acme") == 1
    assert value("gha_max_runners") == 3
    assert value("gha_desired_runners") == 1
    assert value("gha_started_jobs_total", job_name="build", event_name="push") == 1
    assert value("gha_completed_jobs_total", job_result="failed", repository="app") == 1
    assert value("gha_job_startup_duration_seconds_sum") == 5
    assert value("gha_job_queue_duration_seconds_sum") == 7
    assert value("gha_job_execution_duration_seconds_sum", job_result="failed") == 60
    assert value("gha_job_execution_duration_seconds_bucket", le="60.0") == 1


async def test_a_message_that_changes_nothing_is_not_published_but_the_next_202_is() -> None:
    """As ARC's listener: after a message, no patch when the target equals the last one and
    no job started or completed; a poll cycle still re-evaluates with a fresh ID."""
    api, patcher = FakeActions(initial_assigned=1), FakePatcher()
    listener = Listener(config(), api, patcher)
    async with running(listener):
        await until(lambda: patcher.replicas == [(1, 0)])
        api.queue.put_nowait(message(1, [job("JobAvailable", 31)], assigned=1))
        await until(lambda: api.deleted_messages == [1])
        api.queue.put_nowait(message(2, [job("JobAssigned", 31)], assigned=2))
        await until(lambda: api.deleted_messages == [1, 2])
        await until(lambda: len(patcher.replicas) == 2)
        assert patcher.replicas == [(1, 0), (2, 1)]  # message 1 moved nothing: not sent
        await until(lambda: len(patcher.replicas) == 3)  # the next 202
        assert patcher.replicas[-1] == (2, 2)


async def test_the_patch_a_message_leads_to_does_not_wait_for_its_delete() -> None:
    """The patch is what the job's runner waits for; the message's delete goes beside it."""
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(max_runners=4), api, patcher)
    async with running(listener):
        await until(lambda: len(patcher.replicas) == 1)
        api.delete_gate = asyncio.Event()
        api.queue.put_nowait(message(1, [job("JobAssigned", 11)], assigned=1))
        await until(lambda: len(patcher.replicas) == 2)
        assert patcher.replicas[-1] == (1, 1)
        assert api.deleted_messages == [], "the delete was not in flight beside the patch"
        polls = len([c for c in api.calls if c[0] == "get"])
        await asyncio.sleep(5)
        assert len([c for c in api.calls if c[0] == "get"]) == polls, "polled before the delete"
        api.delete_gate.set()
        await until(lambda: api.deleted_messages == [1])
        await until(lambda: api.calls[-1][0] == "get" and api.calls[-1][1] == 1)


async def test_a_message_whose_delete_fails_is_delivered_again_and_patched_once() -> None:
    api, patcher = FakeActions(), FakePatcher()
    listener = Listener(config(max_runners=4), api, patcher, step_attempts=2)
    async with running(listener):
        await until(lambda: len(patcher.replicas) == 1)
        api.delete_errors = [gherrors.ServerError("down", status=503)] * 2
        msg = message(1, [job("JobAssigned", 11)], assigned=1)
        api.queue.put_nowait(msg)
        await until(lambda: len(patcher.replicas) == 2)
        # Not acknowledged: the next poll still asks for what follows message 0.
        await until(lambda: [c[1] for c in api.calls if c[0] == "get"][-1:] == [0])
        api.queue.put_nowait(msg)  # the service delivers it again
        await until(lambda: api.deleted_messages == [1])
        await until(lambda: api.calls[-1][0] == "get" and api.calls[-1][1] == 1)
        assert patcher.replicas == [(0, 0), (1, 1)], "the same count was patched twice"
