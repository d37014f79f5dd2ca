"""Chaos cases of GitHub's own incidents (issue 19 §6): the fake GitHub or the runner
misbehaves the way the real ones were seen to, and gharc must recover without a human.

Like :mod:`.cases`, each case builds its own World, injects its fault, and returns a
:class:`~testworld.chaos.report.CaseResult` measured from the outside (the fake GitHub
and the API server); the test asserts on it.
"""

from __future__ import annotations

import asyncio
import time

from gharc.api.scaleset import constants as c
from testworld.chaos.cases import (
    SHORT_POLL,
    SMALL,
    Sizes,
    burst,
    start_scale_sets,
    under_way,
)
from testworld.chaos.measure import first_acquired_after, outcome, wait_for_jobs
from testworld.chaos.report import CaseResult
from testworld.sim.github.state import Job, Runner
from testworld.world import GROUP, VERSION, World
from testworld.worlds import WorldFactory, enqueue_jobs, scale_set_id, wait_until


def _connected_idle(world: World, ss_id: int, name: str | None = None) -> Runner | None:
    """A runner of the scale set that redeemed its JIT config and holds no job."""
    for r in world.github.state.runners.values():
        if r.scale_set_id != ss_id or not r.redeemed or not r.online or r.job is not None:
            continue
        if name is None or r.name == name:
            return r
    return None


async def _set_min_runners(world: World, namespace: str, name: str, count: int) -> None:
    # A merge patch; the client takes ``_content_type`` through its kwargs (not typed).
    await world.custom.patch_namespaced_custom_object(  # type: ignore[call-arg]
        GROUP,
        VERSION,
        namespace,
        "autoscalingrunnersets",
        name,
        {"spec": {"minRunners": count}},
        _content_type="application/merge-patch+json",
    )


async def used_jit_config(
    factory: WorldFactory, namespace: str, sizes: Sizes = SMALL
) -> CaseResult:
    """ARC #4588: an idle runner's pod is lost (deleted outright, as when its spot VM goes)
    after its runner redeemed the JIT config. A pod re-created from the same Secret would be
    refused (409, single-use config) and sit idle; gharc registers the runner afresh.

    One scale set with a warm runner (``minRunners: 1``); its pod is deleted with grace 0;
    then a burst. Recovery: from the loss to the re-registered runner connecting. The lost
    registration is the one extra JIT config the fault costs."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL)
    name = "uj-0"
    await world.apply_scale_set(ns, name, min_runners=1, max_runners=sizes.max_runners)
    await world.wait_for_listener(name, timeout=90)
    ss_id = scale_set_id(world, name)
    await wait_until(
        lambda: _connected_idle(world, ss_id) is not None, 90, "a warm runner", world=world
    )
    victim = _connected_idle(world, ss_id)
    assert victim is not None
    t_loss = time.time()
    await world.core.delete_namespaced_pod(
        c.runner_pod_name(victim.name), ns, grace_period_seconds=0
    )

    def reconnected() -> bool:
        r = _connected_idle(world, ss_id, victim.name)
        return r is not None and r.id != victim.id

    error = ""
    try:
        await wait_until(reconnected, 120, f"{victim.name} to connect again", world=world)
    except AssertionError as err:  # the table still shows what the case saw
        error = str(err)
    t_back = time.time()
    count = (sizes.jobs + sizes.after) * sizes.scale_sets
    jobs: list[Job] = enqueue_jobs(world, [name], count, durations=sizes.durations, seed=1300)

    def victim_busy() -> bool:
        return any(j.runner_name == victim.name for j in jobs)

    try:
        await wait_until(victim_busy, 60, f"{victim.name} to take a job", world=world)
    except AssertionError as err:
        error = error or str(err)
    # No warm runner at the tail of the burst (while maxRunners caps the set, minRunners
    # adds none), so the runners created are the jobs plus the one lost registration.
    await _set_min_runners(world, ns, name, 0)
    await wait_for_jobs(world, jobs)
    result = await outcome(world, "used-jit-config", jobs, namespace=ns, scale_sets=[name])
    result.allowed_extra_runners = 1
    result.recover_seconds = None if error else round(t_back - t_loss, 2)
    result.extra.update(
        connect_409s=world.github.calls("/_runner/connect", method="POST", status=409),
        victim_jobs=sum(1 for j in jobs if j.runner_name == victim.name),
    )
    if error:
        result.extra["error"] = error
    return result


#: The hung-runner case's timers: the registration check every 2 s, a hang finished 5 s
#: after it is first seen (production: 60 s and 300 s).
HANG_ARGS = ["--runner-registration-sync-interval=2", "--runner-hang-timeout=5"]


async def _gone(world: World, namespace: str, pod: str) -> bool:
    names = {p["metadata"]["name"] for p in await world.pods(namespace)}
    return pod not in names


async def hung_runner(factory: WorldFactory, namespace: str, sizes: Sizes = SMALL) -> CaseResult:
    """ARC #4603: runner processes that report their job done and then never exit hold
    their slots (there for 7 hours). Two runners hang mid-burst; the registration check
    sees each one's registration gone after its job and finishes it after the hang timeout
    (Succeeded, pod deleted), so the set's slots come back. Recovery: from the last hang to
    the last hung pod gone."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL, controller_args=HANG_ARGS)
    program = world.runner_program
    sets = [f"hr-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    jobs: list[Job] = burst(world, sets, sizes.jobs, 1400, sizes)
    await under_way(world, jobs)
    program.hang_after_jobs = 2
    jobs += burst(world, sets, sizes.after, 1500, sizes)
    error = ""
    try:
        await wait_until(lambda: program.hung >= 2, 120, "two runners to hang", world=world)

        async def freed() -> bool:
            return all([await _gone(world, ns, pod) for pod in program.hung_pods])

        await wait_until(freed, 120, "the hung runners' pods deleted", world=world)
    except AssertionError as err:  # the table still shows what the case saw
        error = str(err)
    t_freed = time.time()
    result = await outcome(world, "hung-runner", jobs, namespace=ns, scale_sets=sets)
    if not error and program.hung_pods:
        result.recover_seconds = round(t_freed - max(program.hung_pods.values()), 2)
    result.extra.update(
        hung=program.hung,
        hung_pods=sorted(program.hung_pods),
    )
    if error:
        result.extra["error"] = error
    return result


#: How long session creation answers 404 RunnerScaleSetNotFound in the case below (ARC
#: #3942 saw minutes; the listener's restart ladder is 5, 10, 20, 40 s over 30 s of it).
NOT_FOUND_SECONDS = 30.0
SESSION_CREATE = "*/runnerscalesets/{scale_set_id}/sessions"


async def _listener_statuses(world: World, namespace: str) -> list[dict[str, object]]:
    return [
        dict(obj.get("status") or {})
        for obj in await world.custom_objects(namespace, "autoscalinglisteners")
    ]


async def scale_set_not_found(
    factory: WorldFactory, namespace: str, sizes: Sizes = SMALL, *, pods: bool = False
) -> CaseResult:
    """ARC #3942: the service drops the message sessions and, for a while, answers their
    re-creation with 404 ``RunnerScaleSetNotFoundException`` although the scale set exists
    (its GET by id works). The listeners back off (AutoscalingListener phase BackOff, no
    crash loop), and once the fault clears they come back and hand out the jobs queued in
    the meantime. Recovery: from the fault clearing to the first job acquired after it.
    ``pods``: listener pods (``--listener-mode=Pod``, paced by behaviours B1) instead of
    in-process listeners."""
    ns = namespace
    args = ["--listener-mode=Pod"] if pods else []
    world = await factory.create(ns, poll_timeout=SHORT_POLL, controller_args=args)
    gh = world.github
    sets = [f"nf-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    jobs: list[Job] = burst(world, sets, sizes.jobs, 1600, sizes)
    await under_way(world, jobs)
    gh.add_fault(
        "status",
        route=SESSION_CREATE,
        method="POST",
        status=404,
        exception="RunnerScaleSetNotFoundException",
        seconds=NOT_FOUND_SECONDS,
    )
    t_fault = time.time()
    gh.state.drop_sessions()
    after = burst(world, sets, sizes.after, 1700, sizes)
    phases: set[str] = set()
    failures = 0
    while time.time() < t_fault + NOT_FOUND_SECONDS:
        world.check_controller()
        for status in await _listener_statuses(world, ns):
            phases.add(str(status.get("phase") or ""))
            failures = max(failures, int(str(status.get("failures") or 0)))
        await asyncio.sleep(0.5)
    t_clear = time.time()
    case = "scale-set-not-found-pods" if pods else "scale-set-not-found"
    result = await outcome(world, case, jobs + after, namespace=ns, scale_sets=sets)
    # A listener that lost its session starts over (its patch IDs from 0, its view of the
    # runners from the statistics): one runner may be made for a gap a finished runner
    # left, once per scale set (seen: 25 runners for 24 jobs in one of two runs).
    result.allowed_extra_runners = len(sets)
    result.recover_seconds = first_acquired_after(after, t_clear)
    starts = [j.start_time for j in after if j.start_time is not None]
    result.extra.update(
        session_404s=gh.calls(SESSION_CREATE, method="POST", status=404),
        listener_phases=sorted(p for p in phases if p),
        listener_failures=failures,
        acquired_during_fault=sum(
            1
            for j in after
            if j.scale_set_assign_time is not None and j.scale_set_assign_time < t_clear
        ),
        last_start_after_clear_s=round(max(starts) - t_clear, 1) if starts else None,
    )
    return result


async def scale_set_not_found_pods(
    factory: WorldFactory, namespace: str, sizes: Sizes = SMALL
) -> CaseResult:
    """:func:`scale_set_not_found` with listener pods."""
    return await scale_set_not_found(factory, namespace, sizes, pods=True)


INCIDENTS = {
    "scale-set-not-found-pods": scale_set_not_found_pods,
    "scale-set-not-found": scale_set_not_found,
    "used-jit-config": used_jit_config,
    "hung-runner": hung_runner,
}
