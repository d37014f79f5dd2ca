"""Chaos case of legacy mode (``actions.summerwind.dev``): the webhook server dies mid-burst.

``legacy_webhook_restart``: a RunnerDeployment and its HRA scaled by ``workflow_job``
webhooks (``gharc controller`` and ``gharc webhook-server`` as processes, as the legacy
chart runs them), jobs arriving one every :data:`ARRIVAL_GAP` seconds. A third of the way
in, the webhook server is SIGKILLed and started again :data:`DOWN_S` seconds later. The
fake GitHub delivers as GitHub does: a delivery that fails is not retried, so every event
of the outage (``queued`` and ``completed`` alike) is lost, and only the server's
queued-job poll can find the jobs they announced. On top, some deliveries are redelivered
twice (GitHub's "Redeliver": the same ``X-GitHub-Delivery``), before the kill (the
server's delivery-ID window answers them), after the restart (the window is gone: the
reservation named after its job, or the job recorded as completed on the HRA, must stop
them), and ``completed`` ones too.

Measured from the outside: every job got a runner, the longest a job waited for one (and
the longest among the jobs whose ``queued`` delivery was lost), runners registered per
job with the idle ones left after the burst, and the REST calls the queued-job poll made,
its conditional requests answered 304 (free of quota) counted apart.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from kubernetes_asyncio import client

from testworld.chaos.cases import Sizes
from testworld.chaos.measure import JOBS_TIMEOUT
from testworld.chaos.report import CaseResult
from testworld.demo_legacy import GROUP, VERSION, LegacyWorld
from testworld.sim.github import FakeGitHubServer
from testworld.sim.github.state import Job
from testworld.sim.github.webhooks import GITHUB_RETRIES, Delivery
from testworld.worlds import REPO, WorldFactory, all_completed

__all__ = ["LEGACY_CASES", "LEGACY_RESTART", "legacy_webhook_restart"]

#: ``jobs`` in all, ``max_runners`` the HRA's maxReplicas (room for all at once, so a
#: job's wait is the time to find it and start a runner, not a queue behind others).
LEGACY_RESTART = Sizes(jobs=36, after=0, scale_sets=1, max_runners=40, durations=(2.0, 6.0))
#: Seconds between two jobs' arrivals, and how long the webhook server stays dead.
ARRIVAL_GAP = 0.5
DOWN_S = 5.0
#: Deliveries redelivered twice at each of the three moments (before the kill, after the
#: restart, after the burst).
REDELIVERED = 3
#: Deliveries in flight at once: GitHub sends each on its own, and gharc answers a
#: ``queued`` once its batch is stored (every 3 s), so one at a time would trickle.
HOOK_CONCURRENCY = 16
#: How long the idle runners may take to go once the burst is done: a reservation whose
#: ``completed`` delivery was lost is released by the poll once 30 s old, within a 20 s
#: interval; the runner scaled down then is removed at GitHub once the controller's runner
#: list (GitHub's max-age 60 s, as the fake's) shows it registered.
DRAIN_S = 150.0
DEPLOYMENT = "lwr"
RUNS = "*/repos/{owner}/{repo}/actions/runs"
RUN_JOBS = "*/repos/{owner}/{repo}/actions/runs/{run_id}/jobs"


def _redeliver_twice(world: LegacyWorld, chosen: list[Delivery]) -> int:
    assert world.hooks is not None
    for d in chosen:
        world.hooks.redeliver(d)
        world.hooks.redeliver(d)
    return 2 * len(chosen)


def _delivered(world: LegacyWorld, action: str, jobs: list[Job]) -> list[Delivery]:
    """The first deliveries of ``action`` for ``jobs`` that were answered 2xx."""
    assert world.hooks is not None
    ids = {j.numeric_id for j in jobs}
    return [d for d in world.hooks.of(action) if d.ok and not d.redelivery and d.job_id in ids]


async def _arrive(world: LegacyWorld, count: int, seed: int, sizes: Sizes) -> list[Job]:
    """``count`` jobs, one every :data:`ARRIVAL_GAP` seconds."""
    rng = random.Random(seed)
    jobs: list[Job] = []
    for _ in range(count):
        duration = round(rng.uniform(*sizes.durations), 3)
        jobs.append(world.github.enqueue_job(REPO, [DEPLOYMENT], duration=duration))
        await asyncio.sleep(ARRIVAL_GAP)
    return jobs


async def _wait_for_jobs(world: LegacyWorld, jobs: list[Job], timeout: float) -> None:
    """Until every job completed or ``timeout`` passed (the table shows what was missed);
    a process of the world dying fails at once."""
    deadline = time.monotonic() + timeout
    while not all_completed(jobs) and time.monotonic() < deadline:
        world.check_controller()
        await asyncio.sleep(0.25)


async def _runner_objects(world: LegacyWorld) -> dict[str, list[str]]:
    """Runner objects, and runner pods still running or owned by a Runner that is left.

    The test control plane runs no garbage collector: the pod of a deleted Runner stays
    (terminated) where a cluster would delete it with its owner, so such a pod is not
    counted."""
    listed: Any = await world.custom.list_namespaced_custom_object(
        GROUP, VERSION, world.namespace, "runners"
    )
    runners = [r["metadata"]["name"] for r in listed.get("items", [])]
    pods = await client.CoreV1Api(world.api).list_namespaced_pod(world.namespace)
    left = [
        p.metadata.name
        for p in pods.items
        if (p.status.phase not in ("Succeeded", "Failed"))
        or any(o.name in runners for o in p.metadata.owner_references or [])
    ]
    return {"runners": runners, "pods": left}


async def _reservations(world: LegacyWorld) -> list[str]:
    hra: Any = await world.custom.get_namespaced_custom_object(
        GROUP, VERSION, world.namespace, "horizontalrunnerautoscalers", DEPLOYMENT
    )
    return [str(r.get("name")) for r in (hra.get("spec") or {}).get("capacityReservations") or []]


async def _drain(world: LegacyWorld, timeout: float) -> dict[str, list[str]]:
    """Until no Runner or runner pod is left, or ``timeout``: what is left."""
    deadline = time.monotonic() + timeout
    while True:
        world.check_controller()
        left = await _runner_objects(world)
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.5)


def _waits(jobs: list[Job]) -> list[float]:
    return [j.runner_assign_time - j.queue_time for j in jobs if j.runner_assign_time is not None]


async def legacy_webhook_restart(
    factory: WorldFactory, namespace: str, sizes: Sizes = LEGACY_RESTART
) -> CaseResult:
    """The webhook server is SIGKILLed mid-burst and restarted; deliveries are lost and
    duplicated. See the module's docstring."""
    gh = FakeGitHubServer(rest_max_age=60)
    await gh.start()
    world = LegacyWorld(
        factory.kubeconfig,
        gh,
        log_dir=factory.log_dir / namespace,
        namespace=namespace,
        hook_retries=GITHUB_RETRIES,
        hook_concurrency=HOOK_CONCURRENCY,
        purge_on_exit=True,
    )
    try:
        async with world:
            return await _run(world, sizes)
    finally:
        await asyncio.wait_for(gh.stop(), 5)


async def _run(world: LegacyWorld, sizes: Sizes) -> CaseResult:
    gh, hooks = world.github, world.hooks
    assert hooks is not None
    await world.apply_deployment(
        DEPLOYMENT, labels=[DEPLOYMENT], min_runners=0, max_runners=sizes.max_runners
    )
    await world.wait_for_hra(DEPLOYMENT, timeout=120)
    first = sizes.jobs // 3
    during = int(DOWN_S / ARRIVAL_GAP)
    last = sizes.jobs - first - during
    quota_before = _quota_used(world)

    before = await _arrive(world, first, 100, sizes)
    await hooks.drain(timeout=30)
    duplicates = _redeliver_twice(world, _delivered(world, "queued", before)[:REDELIVERED])
    await hooks.drain(timeout=30)

    t_kill = time.time()
    await world.kill_webhook_server()
    down = await _arrive(world, during, 200, sizes)
    await world.start_webhook_server()
    t_up = time.time()
    # After the restart the delivery-ID window is empty: only the HRA stops these.
    duplicates += _redeliver_twice(world, _delivered(world, "queued", before)[:REDELIVERED])
    duplicates += _redeliver_twice(world, _delivered(world, "completed", before)[:REDELIVERED])
    rest = await _arrive(world, last, 300, sizes)
    jobs = before + down + rest

    await _wait_for_jobs(world, jobs, JOBS_TIMEOUT)
    await hooks.drain(timeout=30)
    # Late duplicates: a queued and a completed event of jobs already done.
    duplicates += _redeliver_twice(world, _delivered(world, "queued", rest)[:REDELIVERED])
    duplicates += _redeliver_twice(world, _delivered(world, "completed", rest)[:REDELIVERED])
    await hooks.drain(timeout=30)
    reservations_after_burst = await _reservations(world)
    left = await _drain(world, DRAIN_S)

    lost = [
        d
        for d in hooks.deliveries
        if not d.ok and not d.redelivery and d.action in ("queued", "completed")
    ]
    lost_queued = {d.job_id for d in lost if d.action == "queued"}
    lost_jobs = [j for j in jobs if j.numeric_id in lost_queued]
    registrations = gh.calls("*/_runner/register", method="POST", status=200)
    ran = {j.runner_id for j in jobs if j.runner_id is not None}
    waits = _waits(jobs)
    lost_waits = _waits(lost_jobs)
    result = CaseResult(
        case="legacy-webhook-restart",
        submitted=len(jobs),
        done=sum(1 for j in jobs if j.status == "completed"),
        never_got_runner=sum(1 for j in jobs if j.runner_assign_time is None),
        runners_created=registrations,
        orphans=_registered(world),
        leftovers=sum(len(v) for v in left.values()),
        recover_seconds=_first_runner_after(down + rest, t_up),
    )
    # A lost delivery costs runners no job uses, which no poll can prevent: a lost
    # completed's reservation keeps the finished ephemeral runner's replacement (made at
    # once) until the poll releases it, and a lost queued one's job may be taken by that
    # idle runner before the poll reserves for it. One per lost delivery at most; none
    # may be left once the burst is done (leftovers, orphans).
    result.allowed_extra_runners = len(lost)
    result.max_runners_per_job = 1 + len(lost) / max(1, len(jobs))
    result.extra.update(
        deliveries_lost=len(lost),
        lost_queued=len(lost_jobs),
        lost_completed=sum(1 for d in lost if d.action == "completed"),
        duplicates_sent=duplicates,
        duplicates_ok=sum(1 for d in hooks.deliveries if d.redelivery and d.ok),
        max_wait_s=round(max(waits), 1) if waits else None,
        lost_max_wait_s=round(max(lost_waits), 1) if lost_waits else None,
        runners_without_job=max(0, registrations - len(ran)),
        reservations_after_burst=len(reservations_after_burst),
        down_s=round(t_up - t_kill, 1),
        **_poll_calls(world),
        quota_used=_quota_used(world) - quota_before,
    )
    if any(left.values()):
        result.extra["leftover"] = {k: v for k, v in left.items() if v}
    return result


def _first_runner_after(jobs: list[Job], t0: float) -> float | None:
    """Seconds from the restart to the first runner of a job queued while the server was
    down or after it: the webhook side is working again."""
    times = [j.runner_assign_time for j in jobs if j.runner_assign_time is not None]
    later = [t for t in times if t >= t0]
    return round(min(later) - t0, 2) if later else None


def _registered(world: LegacyWorld) -> int:
    """Runners GitHub still holds for the deployment's labels after the drain."""
    return sum(1 for r in world.github.state.runners.values() if DEPLOYMENT in r.labels)


def _quota_used(world: LegacyWorld) -> int:
    """Core quota the one PAT of both processes has spent (the fake's bucket)."""
    return sum(p.bucket.used for p in world.github.state.pats.values())


def _poll_calls(world: LegacyWorld) -> dict[str, int]:
    """The queued-job poll's REST calls (only it lists workflow runs and their jobs here):
    answered 200 (quota spent) and 304 (a revalidated listing, free)."""
    gh = world.github
    full = gh.calls(RUNS, method="GET", status=200) + gh.calls(RUN_JOBS, method="GET", status=200)
    free = gh.calls(RUNS, method="GET", status=304) + gh.calls(RUN_JOBS, method="GET", status=304)
    return {"poll_rest_200": full, "poll_rest_304": free}


LEGACY_CASES = {"legacy-webhook-restart": legacy_webhook_restart}
