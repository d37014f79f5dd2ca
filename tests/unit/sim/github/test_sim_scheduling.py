"""How the fake Actions service hands jobs to a scale set: within the capacity its listener
sends, taking back an assignment no runner took, and truncating a large delivery.

Time is moved by back-dating ``assigned_at``/``reassign_at`` and running the timers
(``state.sweep``) at once, so nothing here waits out the real timings.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sim_helpers import Raw

from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer
from testworld.sim.github.state import REASSIGN_AFTER, REASSIGN_LIMIT, Job


async def _drain(
    raw: Raw, s: dict[str, Any], last: int = 0, *, capacity: int = 10
) -> tuple[list[dict[str, Any]], int, dict[str, int] | None]:
    """Every message until a 202: (job messages, last id, the last statistics)."""
    seen: list[dict[str, Any]] = []
    stats = None
    while True:
        r = await raw.poll(s, last, capacity=capacity)
        if r.status_code == 202:
            return seen, last, stats
        msg = r.json()
        seen.extend(json.loads(msg["body"]))
        stats, last = msg["statistics"], msg["messageId"]


def _kinds(seen: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(j["messageType"], j.get("result")) for j in seen]


def _time_passes(gh: FakeGitHubServer, job: Job, seconds: float) -> None:
    """Move the job's timers ``seconds`` into the past and run the service's timers."""
    if job.assigned_at is not None:
        job.assigned_at -= seconds
    if job.reassign_at is not None:
        job.reassign_at -= seconds
    gh.state.sweep()


# ---- capacity -------------------------------------------------------------------------------


@pytest.mark.pins("capacity")
async def test_capacity_zero_assigns_nothing_until_it_is_raised(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    seen, last, _ = await _drain(raw, s, capacity=0)
    assert _kinds(seen) == [("JobAvailable", None)]
    acquire = await raw.http.post(
        f"{raw.service}_apis/runtime/runnerscalesets/{ss['id']}/acquirejobs",
        params={"api-version": "6.0-preview"},
        headers={"Authorization": f"Bearer {s['messageQueueAccessToken']}"},
        json=[job.request_id],
    )
    assert acquire.json()["value"] == [job.request_id]
    seen, last, stats = await _drain(raw, s, last, capacity=0)
    assert seen == [] and job.status == "acquired"  # no room: acquired, never assigned
    assert gh.state.statistics(gh.state.scale_sets[ss["id"]])["totalAssignedJobs"] == 0

    seen, _, stats = await _drain(raw, s, last, capacity=1)
    assert _kinds(seen) == [("JobAssigned", None)] and job.status == "assigned"
    assert stats is not None and stats["totalAssignedJobs"] == 1


@pytest.mark.pins("capacity")
async def test_jobs_past_the_capacity_wait_for_a_job_of_the_set_to_end(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    await raw.poll(s, capacity=2)
    jobs = [gh.enqueue_job(DEFAULT_REPO, ["arc"]) for _ in range(5)]
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [j.request_id for j in jobs])
    assert [j.status for j in jobs] == ["assigned"] * 2 + ["acquired"] * 3
    stats = gh.state.statistics(gh.state.scale_sets[ss["id"]])
    assert (stats["totalAssignedJobs"], stats["totalAcquiredJobs"]) == (2, 3)

    gh.cancel_job(jobs[0].request_id)  # a job of the set ends: its room goes to the oldest
    assert [j.status for j in jobs[1:]] == ["assigned", "assigned", "acquired", "acquired"]


@pytest.mark.pins("capacity")
async def test_github_com_flow_also_assigns_within_capacity(raw: Raw, gh: FakeGitHubServer) -> None:
    gh.state.skip_acquire = True
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    await raw.poll(s, capacity=1)
    jobs = [gh.enqueue_job(DEFAULT_REPO, ["arc"]) for _ in range(3)]
    assert [j.status for j in jobs] == ["assigned", "acquired", "acquired"]


# ---- reassignment ---------------------------------------------------------------------------


def test_reassignment_is_on_with_the_modelled_timings() -> None:
    state = FakeGitHubServer().state
    assert state.reassign_after == REASSIGN_AFTER == 300.0
    assert state.reassign_limit == REASSIGN_LIMIT == 3


@pytest.mark.pins("reassign")
async def test_an_assignment_no_runner_takes_is_canceled_then_assigned_again(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # ARC #4602: JobAssigned, then minutes later JobCompleted "canceled", then JobAssigned.
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    seen, last, _ = await _drain(raw, s)
    assert _kinds(seen) == [("JobAvailable", None), ("JobAssigned", None)]

    _time_passes(gh, job, REASSIGN_AFTER - 5)
    assert (await _drain(raw, s, last))[0] == []  # not yet

    _time_passes(gh, job, 5)
    seen, last, stats = await _drain(raw, s, last)
    assert _kinds(seen) == [("JobCompleted", "canceled")]
    assert stats is not None and stats["totalAssignedJobs"] == 0  # the count dips
    assert stats["totalAcquiredJobs"] == 1 and job.status == "acquired"

    _time_passes(gh, job, gh.state.reassign_gap)
    seen, last, stats = await _drain(raw, s, last)
    assert _kinds(seen) == [("JobAssigned", None)]
    assert stats is not None and stats["totalAssignedJobs"] == 1

    for _ in range(REASSIGN_LIMIT + 2):  # up to three times, then the assignment holds
        _time_passes(gh, job, REASSIGN_AFTER)
        _time_passes(gh, job, gh.state.reassign_gap)
    assert job.reassignments == REASSIGN_LIMIT and job.status == "assigned"


async def test_a_job_a_runner_took_is_not_reassigned(raw: Raw, gh: FakeGitHubServer) -> None:
    ss = await raw.scale_set()
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    tenant = next(iter(gh.state.tenants.values()))
    runner, _ = gh.state.generate_jit_config(tenant, ss["id"], "r1", "_work")
    assert gh.state.take_job(runner) is job
    _time_passes(gh, job, REASSIGN_AFTER * 2)
    assert job.reassignments == 0 and job.runner_id == runner.id


async def test_reassignment_switched_off(raw: Raw, gh: FakeGitHubServer) -> None:
    r = await raw.http.post(f"{gh.url}/_fake/config", json={"reassignAfter": None})
    assert r.json()["reassignAfter"] is None
    ss = await raw.scale_set()
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    _time_passes(gh, job, REASSIGN_AFTER * 10)
    assert job.reassignments == 0 and job.status == "assigned"


async def test_forced_reassignments_hold_the_job_from_runners(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    gh.state.reassign_times = 2
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    tenant = next(iter(gh.state.tenants.values()))
    runner, _ = gh.state.generate_jit_config(tenant, ss["id"], "r1", "_work")
    assert gh.state.take_job(runner) is None  # held for the first two assignments
    seen: list[dict[str, Any]] = []
    last = 0
    for _ in range(2):
        _time_passes(gh, job, REASSIGN_AFTER)
        _time_passes(gh, job, gh.state.reassign_gap)
    more, last, _ = await _drain(raw, s, last)
    seen += more
    assert _kinds(seen) == [
        ("JobAvailable", None),
        ("JobAssigned", None),
        ("JobCompleted", "canceled"),
        ("JobAssigned", None),
        ("JobCompleted", "canceled"),
        ("JobAssigned", None),
    ]
    assert gh.state.take_job(runner) is job


@pytest.mark.pins("reassign")
async def test_lagging_statistics_stall_recovers_through_reassignment(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    # ARC #3420: the last message's statistics lag its body, so a listener scaling from
    # them sees no assigned job and waits for a message that never comes; the service's
    # reassignment sends more messages, and the next statistics show the job.
    gh.state.lagging_statistics = True
    ss = await raw.scale_set()
    s = await raw.session(ss["id"])
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    _, last, _ = await _drain(raw, s)
    gh.state.acquire_jobs(gh.state.scale_sets[ss["id"]], [job.request_id])
    seen, last, stats = await _drain(raw, s, last)
    assert _kinds(seen) == [("JobAssigned", None)]
    assert stats is not None and stats["totalAssignedJobs"] == 0  # the stall
    assert (await _drain(raw, s, last))[0] == []  # nothing more comes on its own

    _time_passes(gh, job, REASSIGN_AFTER)
    seen, last, stats = await _drain(raw, s, last)
    assert _kinds(seen) == [("JobCompleted", "canceled")]
    assert stats is not None and stats["totalAssignedJobs"] == 1  # a runner is wanted


# ---- truncation -----------------------------------------------------------------------------


@pytest.mark.pins("truncate-50")
async def test_a_backlog_is_truncated_at_50_and_counted_in_statistics(
    raw: Raw, gh: FakeGitHubServer
) -> None:
    ss = await raw.scale_set()
    for _ in range(120):
        gh.enqueue_job(DEFAULT_REPO, ["arc"])
    s = await raw.session(ss["id"])
    seen, _, stats = await _drain(raw, s)
    assert _kinds(seen) == [("JobAvailable", None)] * 50  # the other 70 are never delivered
    assert stats is not None and stats["totalAvailableJobs"] == 120
    assert gh.state.truncated == 70
