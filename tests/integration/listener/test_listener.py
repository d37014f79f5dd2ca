"""Listener end to end: fake GitHub -> listener -> EphemeralRunnerSet in a real API server."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import httpx
import pytest
from listener_world import World, in_process, spawn
from prometheus_client.parser import text_string_to_metric_families

from gharc.listener.app import EXIT_FATAL, run
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


def _patches_follow_the_rules(sent: list[tuple[int, int]], min_runners: int) -> None:
    """Non-zero IDs strictly increase; 0 only for the first patch or idle at min_runners."""
    last_nonzero = -1
    for i, (replicas, patch_id) in enumerate(sent):
        if patch_id == 0:
            assert i == 0 or replicas == min_runners, sent
        else:
            assert patch_id > last_nonzero, sent
            last_nonzero = patch_id


async def test_jobs_scale_up_capped_then_completions_scale_down(world: World) -> None:
    async with in_process(world, min_runners=1, max_runners=3) as listener:
        assert await eventually(lambda: _eq(world.spec(), (1, 0)), message="initial patch")
        world.enqueue(5)
        # 5 jobs, capped at max_runners=3: the service assigns 3 within the capacity the
        # listener sends, and holds 2 acquired until jobs of the set end
        await eventually(lambda: _first(world.spec(), 3), timeout=10, message="scale up to 3")
        stats = world.gh.state.statistics(world.scale_set)
        assert (stats["totalAssignedJobs"], stats["totalAcquiredJobs"]) == (3, 2)
        started = [world.start_runner(f"runner-{i}") for i in range(3)]
        assert all(started)
        for rid in started:
            assert rid is not None
            world.finish(rid)
        await eventually(lambda: _first(world.spec(), 3), timeout=10)  # 2 left + min 1
        started = [world.start_runner(f"runner-{i}") for i in range(3, 5)]
        assert all(started)
        for rid in started:
            assert rid is not None
            world.finish(rid, "failed")
        # all done: back to min_runners, then the idle patch ID 0 once nothing moves. The two
        # completions may come in separate messages with an idle cycle between (an idle
        # (1, 0), then a fresh ID for the second, then (1, 0) again), so the set showing
        # (1, 0) is not enough: wait until both are handled and two more polls have ended
        # (the cycle that handled the last one has published, then an idle one has).
        await eventually(
            lambda: _true(sum(listener.handler.completed_by_result.values()) == 5),
            timeout=10,
            message="both failed completions handled",
        )
        polls = listener.polls
        await eventually(lambda: _true(listener.polls >= polls + 2), timeout=10)
        await eventually(lambda: _eq(world.spec(), (1, 0)), timeout=10, message="idle at min")
        sent = list(listener.patcher.sent)  # type: ignore[attr-defined]
        _patches_follow_the_rules(sent, 1)
        assert sent[0] == (1, 0) and sent[-1] == (1, 0)
        assert max(r for r, _ in sent) == 3
        # idle: several long polls go by without another patch
        rv = (await world.ers())["metadata"]["resourceVersion"]
        polls = listener.polls
        await eventually(lambda: _true(listener.polls >= polls + 2), timeout=10)
        assert (await world.ers())["metadata"]["resourceVersion"] == rv
        assert listener.handler.completed_by_result == {"succeeded": 3, "failed": 2}


async def test_scale_up_lands_within_one_long_poll_round_trip(world: World) -> None:
    async with in_process(world, min_runners=0, max_runners=20) as listener:
        await eventually(lambda: _true(listener.polls >= 1), timeout=10)
        world.gh.reset_calls()
        world.enqueue(7)
        await eventually(lambda: _first(world.spec(), 7), timeout=10, interval=0.01)
        # Both messages (available, assigned) come on the polls held when they are queued:
        # no poll runs out empty in between (one may have been timing out at the enqueue).
        assert world.gh.calls("*/messages", method="GET", status=200) == 2, world.gh.call_table()
        assert world.gh.calls("*/messages", method="GET", status=202) <= 1, world.gh.call_table()
        assert world.gh.calls("*/acquirejobs", method="POST") == 1  # one acquire for the burst


async def test_job_started_writes_job_onto_the_runner(world: World) -> None:
    await world.create_runner("runner-a")
    async with in_process(world):
        (rid,) = world.enqueue(1)
        await eventually(lambda: _first(world.spec(), 1), timeout=10)
        assert world.start_runner("runner-a") == rid
        status = await eventually(lambda: world.runner_status("runner-a"), timeout=10)
        job = world.gh.state.job(rid)
        assert status == {
            "jobRequestId": rid,
            "jobRepositoryName": "octo-org/octo-repo",
            "jobId": job.job_id,
            "workflowRunId": job.run_id,
            "jobWorkflowRef": job.workflow_ref,
            "jobDisplayName": "build",
        }
        # a JobStarted for a runner that does not exist is ignored, the loop goes on
        world.enqueue(1)
        await eventually(lambda: _first(world.spec(), 2), timeout=10)
        assert world.start_runner("runner-missing") is not None
        world.enqueue(1)
        await eventually(lambda: _first(world.spec(), 3), timeout=10)


async def test_bad_token_at_startup_exits_nonzero_fast(world: World) -> None:
    """A rejected credential ends the process at its first answer: no retry, no backoff.

    "Fast" is counted in requests, not seconds, so that a loaded machine cannot fail it.
    """
    path = world.write_config(github_token="ghp_revoked")
    world.gh.reset_calls()
    proc = await spawn(world, path)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == EXIT_FATAL, err.decode()
    assert world.gh.calls(status=401) == 1, world.gh.call_table()
    assert world.gh.calls() == 1, world.gh.call_table()
    last = err.decode().strip().splitlines()[-1]
    assert last.startswith("gharc listener:") and "credentials" in last, err.decode()
    assert "Traceback" not in err.decode()
    assert world.gh.state.sessions == {}


async def test_deleted_scale_set_exits_nonzero(world: World) -> None:
    cfg = world.listener_config(runner_scale_set_id=world.scale_set.id + 100)
    code = await asyncio.wait_for(_run_with_patcher(world, cfg), timeout=10)
    assert code == EXIT_FATAL


async def test_session_conflict_is_retried_then_reported(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.gh.state.create_session(world.tenant, world.scale_set.id, "other-listener")
    world.gh.reset_calls()
    cfg = world.listener_config(session_conflict_attempts=4)
    code = await asyncio.wait_for(_run_with_patcher(world, cfg), timeout=20)
    assert code == EXIT_FATAL
    assert world.gh.calls("*/sessions", method="POST", status=409) == 4
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"runner scale set {world.scale_set.id}" in line
    assert "another listener" in line


async def test_session_conflict_clears_and_listener_starts(world: World) -> None:
    other = world.gh.state.create_session(world.tenant, world.scale_set.id, "old-pod")
    async with in_process(world, session_conflict_attempts=20, min_runners=2):
        await asyncio.sleep(0.5)
        assert world.active_session() is other
        world.gh.state.delete_session(world.tenant, world.scale_set.id, other.id)
        await eventually(lambda: _eq(world.spec(), (2, 0)), timeout=10)
        assert world.active_session().owner == "test-listener"


async def test_sigterm_deletes_the_session_and_exits_zero(world: World) -> None:
    proc = await spawn(world, world.write_config(min_runners=2))
    try:
        await eventually(lambda: _eq(world.spec(), (2, 0)), timeout=30, message="listener up")
        session = world.active_session()
        assert session is not None
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert world.active_session() is None
    assert world.gh.calls("*/sessions/{session_id}", method="DELETE", status=204) == 1


async def test_transient_github_errors_do_not_stop_the_listener(world: World) -> None:
    async with in_process(world) as listener:
        await eventually(lambda: _true(listener.polls >= 1), timeout=10)
        world.gh.add_fault("status", route="*/messages", method="GET", status=503, count=6)
        world.enqueue(2)
        await eventually(lambda: _first(world.spec(), 2), timeout=30)


async def test_metrics_endpoint_after_a_job_sequence(world: World, unused_port: int) -> None:
    addr = f"127.0.0.1:{unused_port}"
    async with in_process(world, min_runners=1, max_runners=4, metrics_addr=addr):
        ids = world.enqueue(3)
        await eventually(lambda: _first(world.spec(), 4), timeout=10)
        for i, _ in enumerate(ids):
            assert world.start_runner(f"r{i}") is not None
        world.finish(ids[0])
        world.finish(ids[1])
        world.finish(ids[2], "failed")
        await eventually(lambda: _eq(world.spec(), (1, 0)), timeout=10)
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://{addr}/metrics")).text
    samples = _samples(text)
    base = {"name": "lst-set-ers", "namespace": world.namespace, "organization": "octo-org"}
    assert _value(samples, "gha_min_runners", **base) == 1
    assert _value(samples, "gha_max_runners", **base) == 4
    assert _value(samples, "gha_desired_runners", **base) == 1
    assert _value(samples, "gha_assigned_jobs", **base) == 0
    assert _value(samples, "gha_started_jobs_total", repository="octo-repo") == 3
    assert _value(samples, "gha_completed_jobs_total", job_result="succeeded") == 2
    assert _value(samples, "gha_completed_jobs_total", job_result="failed") == 1
    assert _value(samples, "gha_job_execution_duration_seconds_count", job_result="failed") == 1
    assert _value(samples, "gha_job_startup_duration_seconds_count") == 3
    assert _value(samples, "gha_job_queue_duration_seconds_count") == 3


async def test_metrics_served_by_the_process(world: World, unused_port: int) -> None:
    """The subprocess serves ``metrics_addr`` + ``metrics_endpoint`` itself."""
    path = world.write_config(
        min_runners=1, metrics_addr=f"127.0.0.1:{unused_port}", metrics_endpoint="/m"
    )
    proc = await spawn(world, path)
    try:
        await eventually(lambda: _eq(world.spec(), (1, 0)), timeout=30)

        async def scrape() -> str:
            try:
                async with httpx.AsyncClient() as http:
                    r = await http.get(f"http://127.0.0.1:{unused_port}/m")
                    return r.text if r.status_code == 200 else ""
            except httpx.HTTPError:
                return ""

        text = await eventually(scrape, timeout=10)
        assert _value(_samples(text), "gha_desired_runners", name="lst-set-ers") == 1
        assert "gha_job_startup_duration_seconds" in text
        assert "gharc_github_api_requests_total" in text  # the client's calls, same registry
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), timeout=10)
    assert proc.returncode == 0


# -- helpers ---------------------------------------------------------------------------------


async def _run_with_patcher(world: World, cfg: Any) -> int:
    from gharc.kube.config import new_api_client
    from gharc.listener.runnerset_writes import KubePatcher

    patcher = KubePatcher(
        await new_api_client(kubeconfig=world.kubeconfig), world.namespace, "lst-set-ers"
    )
    return await run(cfg, patcher=patcher, install_signals=False)


async def _eq(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def _first(value: Any, expected: int) -> bool:
    return bool((await value)[0] == expected)


async def _true(value: bool) -> bool:
    return value


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value)
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def _value(samples: list[tuple[str, dict[str, str], float]], metric: str, **labels: str) -> float:
    total = None
    for n, lbls, v in samples:
        if n == metric and all(lbls.get(k) == val for k, val in labels.items()):
            total = (total or 0.0) + v
    if total is None:
        raise KeyError(f"{metric} {labels}")
    return total


@pytest.mark.relies_on("truncate-50")
async def test_a_truncated_backlog_scales_from_statistics_not_messages(world: World) -> None:
    """The service delivers 50 job messages of a 120-job backlog and never the rest; the
    listener scales from the statistics, which count all 120 (github.com: the service
    assigns without an acquire, so the statistics alone tell)."""
    world.gh.state.skip_acquire = True
    world.enqueue(120)
    async with in_process(world, min_runners=0, max_runners=200) as listener:
        await eventually(lambda: _first(world.spec(), 120), timeout=20, message="120 runners")
        assert world.gh.state.truncated == 70  # 50 JobAssigned delivered, 70 never
        assert listener.polls >= 1


@pytest.mark.relies_on("truncate-50")
async def test_a_truncated_backlog_is_acquired_in_full(world: World) -> None:
    """With an acquire step (GHES and older services), the 70 jobs the truncated delivery
    never offered are still acquired: the statistics count them as available, so the
    listener lists the acquirable jobs and takes those too; none is left queued."""
    world.enqueue(120)
    async with in_process(world, min_runners=0, max_runners=200):
        await eventually(lambda: _first(world.spec(), 120), timeout=30, message="120 runners")
        state = world.gh.state
        assert state.truncated > 0
        queued = [j for j in state.jobs.values() if j.status == "queued"]
        assert not queued, f"{len(queued)} jobs left queued"
