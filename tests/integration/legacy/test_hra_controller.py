"""The HRA controller against the real API server and the fake GitHub: each metric type
writes the replica count ARC's formula gives; overrides, the scale-down hold, rejection."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _hraworld import HRAWorld, iso, utcnow

from gharc.kube.client import KubeClient
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(api_client: Any, namespace: str) -> AsyncIterator[HRAWorld]:
    async with FakeGitHubServer(port=0, rest_max_age=0) as gh:
        w = HRAWorld(KubeClient(api_client), gh, namespace)
        await w.start()
        try:
            yield w
        finally:
            await w.stop()


async def test_queued_and_in_progress_jobs_set_the_deployments_replicas(world: HRAWorld) -> None:
    await world.create_rd(replicas=1, labels=["linux"])
    for _ in range(3):
        world.gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"])
    world.gh.enqueue_job(DEFAULT_REPO, ["gpu"])  # another target's job: not counted
    await world.create_hra(
        minReplicas=1,
        maxReplicas=10,
        metrics=[{"type": "TotalNumberOfQueuedAndInProgressWorkflowRuns"}],
    )
    await world.wait_replicas(3)

    async def status() -> dict[str, Any] | None:
        """The HRA writes its target's replicas first and its own status after: reading the
        status the moment the replicas show raced that second write."""
        st = (await world.hra()).get("status") or {}
        return st if st.get("desiredReplicas") == 3 else None

    st = await eventually(status, timeout=10, message="hra status.desiredReplicas == 3")
    assert st["lastSuccessfulScaleOutTime"]


async def test_an_hra_created_before_its_target_acts_when_the_target_appears(
    world: HRAWorld,
) -> None:
    """No resync here: the RunnerDeployment's own creation must wake its HRA."""
    for _ in range(2):
        world.gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"])
    await world.create_hra(
        minReplicas=1,
        maxReplicas=10,
        metrics=[{"type": "TotalNumberOfQueuedAndInProgressWorkflowRuns"}],
    )
    await asyncio.sleep(1)  # the HRA has been reconciled without a target by now
    await world.create_rd(replicas=1, labels=["linux"])
    await world.wait_replicas(2, timeout=10)  # well inside the 30 s sync period


async def test_percentage_runners_busy_scales_up_by_the_factor(world: HRAWorld) -> None:
    await world.create_rd(replicas=4)
    tenant = world.gh.state.tenant_for("repo", DEFAULT_REPO)
    for i in range(4):
        await world.create_runner(f"rd-r{i}")
        r = world.gh.state.register_static_runner(tenant, f"rd-r{i}", ["linux"])
        if i < 4:
            r.job = 1000 + i  # busy
    world.gh.state.register_static_runner(tenant, "someone-else", ["linux"]).job = 9
    await world.create_hra(
        minReplicas=1, maxReplicas=10, metrics=[{"type": "PercentageRunnersBusy"}]
    )
    await world.wait_replicas(6)  # 4/4 busy >= 0.8 -> ceil(4 * 1.3) = 6


async def test_an_active_scheduled_override_raises_min_and_the_summary_names_its_end(
    world: HRAWorld,
) -> None:
    now = utcnow().replace(microsecond=0)
    end = now + dt.timedelta(hours=1)
    await world.create_rd(replicas=1)
    await world.create_hra(
        minReplicas=1,
        maxReplicas=10,
        scheduledOverrides=[
            {"startTime": iso(now - dt.timedelta(hours=1)), "endTime": iso(end), "minReplicas": 4},
            {
                "startTime": iso(now + dt.timedelta(hours=2)),
                "endTime": iso(now + dt.timedelta(hours=3)),
                "minReplicas": 6,
            },
        ],
    )
    await world.wait_replicas(4)

    async def summary() -> Any:
        # the target's replicas are written before the HRA's status
        return ((await world.hra()).get("status") or {}).get("scheduledOverridesSummary")

    assert await eventually(summary, timeout=10) == (
        f"min=1 time={end.strftime('%Y-%m-%d %H:%M:%S')} +0000 UTC"
    )


async def test_an_upcoming_override_is_summarised_and_takes_effect_when_it_starts(
    world: HRAWorld,
) -> None:
    start = utcnow().replace(microsecond=0) + dt.timedelta(seconds=3)
    await world.create_rd(replicas=1)
    await world.create_hra(
        minReplicas=1,
        maxReplicas=10,
        scheduledOverrides=[
            {
                "startTime": iso(start),
                "endTime": iso(start + dt.timedelta(hours=1)),
                "minReplicas": 3,
                "recurrenceRule": {"frequency": "Daily"},
            }
        ],
    )

    async def summary() -> str | None:
        return ((await world.hra()).get("status") or {}).get("scheduledOverridesSummary")

    text = await eventually(summary, message="summary written")
    assert text == f"min=3 time={start.strftime('%Y-%m-%d %H:%M:%S')} +0000 UTC"
    assert (await world.rd())["spec"]["replicas"] == 1
    await world.wait_replicas(3, timeout=15)  # requeued for the start, no resync needed


async def test_scale_down_waits_for_the_delay_after_a_scale_out(world: HRAWorld) -> None:
    now = utcnow()
    expire = iso(now + dt.timedelta(seconds=2))
    await world.create_rd(replicas=1)
    await world.create_hra(
        minReplicas=1,
        maxReplicas=10,
        scaleDownDelaySecondsAfterScaleOut=8,
        capacityReservations=[
            {"effectiveTime": iso(now), "expirationTime": expire, "replicas": 1} for _ in range(3)
        ],
    )
    await world.wait_replicas(4)
    scaled_out = utcnow()
    # The reservations expire after ~2 s; without the hold the HRA would drop to 1 at once.
    await asyncio.sleep(max(0.0, 5 - (utcnow() - scaled_out).total_seconds()))
    assert (await world.rd())["spec"]["replicas"] == 4
    await world.wait_replicas(1, timeout=20)


async def test_an_ephemeral_target_gets_the_newest_reservations_effective_time(
    world: HRAWorld,
) -> None:
    now = utcnow().replace(microsecond=0)
    await world.create_rd(replicas=1)
    newest = iso(now - dt.timedelta(seconds=5))
    await world.create_hra(
        minReplicas=1,
        maxReplicas=10,
        capacityReservations=[
            {
                "effectiveTime": iso(now - dt.timedelta(seconds=60)),
                "expirationTime": iso(now + dt.timedelta(minutes=5)),
                "replicas": 1,
            },
            {
                "effectiveTime": newest,
                "expirationTime": iso(now - dt.timedelta(seconds=1)),
                "replicas": 1,
            },
        ],
    )
    rd = await world.wait_replicas(2)
    assert rd["spec"]["effectiveTime"] == newest


async def test_an_hra_without_min_replicas_is_reported_and_changes_nothing(
    world: HRAWorld,
) -> None:
    """ARC's CRD accepts it (so gharc's does, issue 13); the controller refuses it visibly."""
    await world.create_rd(replicas=1)
    await world.create_hra(maxReplicas=3)

    async def reported() -> bool:
        return any(
            kind == "Warning" and "missing minReplicas" in message
            for _name, kind, _reason, message in world.recorder.events
        )

    await eventually(reported, timeout=20, message="a Warning event naming minReplicas")
    assert (await world.rd())["spec"]["replicas"] == 1
