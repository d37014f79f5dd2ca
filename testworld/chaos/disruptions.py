"""Chaos cases of the cluster's own making: pods evicted under pressure, and a scale set
uninstalled while its jobs run. Same shape as :mod:`testworld.chaos.cases`."""

from __future__ import annotations

import time

from gharc.api.scaleset.constants import GROUP, VERSION
from testworld.chaos.cases import (
    RUNNER_LOST_TIMEOUT,
    SHORT_POLL,
    Sizes,
    burst,
    start_scale_sets,
    under_way,
)
from testworld.chaos.measure import first_runner_after, outcome
from testworld.chaos.report import CaseResult
from testworld.sim.github.state import Job
from testworld.worlds import WorldFactory, scale_set_id, wait_until

__all__ = ["DISRUPTIONS", "EVICTIONS", "evictions", "scale_set_deleted"]

#: Enough jobs that the registrations the evictions spend stay within 5 % of them.
EVICTIONS = Sizes(jobs=16, after=8, durations=(1.0, 3.0))
EVICTED_PODS = 2


async def evictions(factory: WorldFactory, namespace: str, sizes: Sizes = EVICTIONS) -> CaseResult:
    """Runner pods evicted mid-burst, as a kubelet under memory pressure does (B2): an
    evicted pod is never counted as capacity, an idle runner gets a new pod and a fresh
    registration, a busy one (whose job GitHub fails) is replaced, and the jobs queued after
    the evictions run on the replacements."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL)
    # GitHub fails a lost runner's job after about 10 minutes; seconds here.
    world.github.state.runner_lost_timeout = RUNNER_LOST_TIMEOUT
    sets = [f"ev-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    before = burst(world, sets, sizes.jobs, 1400, sizes)
    await under_way(world, before)
    assert world.kubelet is not None
    evicted: list[str] = []
    for running in world.kubelet.running_pods():
        pod_ns, _, name = running.partition("/")
        if pod_ns != ns or len(evicted) == EVICTED_PODS:
            continue
        try:
            world.kubelet.evict(pod_ns, name)
        except KeyError:  # it finished in the meantime
            continue
        evicted.append(name)
    t_evict = time.time()
    after = burst(world, sets, sizes.after, 1500, sizes)
    result = await outcome(world, "evictions", before + after, namespace=ns, scale_sets=sets)
    result.allowed_extra_runners = len(evicted)
    result.recover_seconds = first_runner_after(after, t_evict)
    result.extra.update(
        evicted=len(evicted),
        jobs_failed_with_pod=sum(1 for j in before + after if j.conclusion == "failed"),
        scale_sets=len(sets),
    )
    return result


#: Jobs of the deleted scale set run long enough to be deleted under.
DELETION = Sizes(jobs=8, after=6, durations=(0.5, 1.5))
DELETED_JOB_SECONDS = (4.0, 6.0)


async def scale_set_deleted(
    factory: WorldFactory, namespace: str, sizes: Sizes = DELETION
) -> CaseResult:
    """One of two scale sets is deleted (``helm uninstall``) while its runners run jobs.

    The other keeps taking jobs as if nothing happened; the deleted one is finalized: its
    runners, pods and Secrets go, its registrations and the scale set itself are removed
    at GitHub, and the jobs it was running end (GitHub fails them, as for any lost
    runner). ``recover_seconds`` is the time from the delete to the object being gone."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL)
    world.github.state.runner_lost_timeout = RUNNER_LOST_TIMEOUT
    keep, gone = "sd-keep", "sd-gone"
    await start_scale_sets(world, ns, [keep, gone], sizes)
    gone_id = scale_set_id(world, gone)
    doomed = burst(world, [gone], sizes.max_runners, 1600, Sizes(durations=DELETED_JOB_SECONDS))
    before = burst(world, [keep], sizes.jobs, 1700, sizes)
    await wait_until(
        lambda: all(j.runner_assign_time is not None for j in doomed),
        120,
        "every job of the doomed scale set to run",
        world=world,
    )
    t_delete = time.time()
    await world.delete_scale_set(ns, gone)
    after = burst(world, [keep], sizes.after, 1800, sizes)

    async def finalized() -> bool:
        sets = await world.custom.list_namespaced_custom_object(
            GROUP, VERSION, ns, "autoscalingrunnersets"
        )
        return all(item["metadata"]["name"] != gone for item in sets["items"])

    await wait_until(finalized, 120, f"scale set {gone} to be finalized", world=world)
    t_gone = time.time()
    jobs: list[Job] = doomed + before + after
    result = await outcome(world, "scale-set-deleted", jobs, namespace=ns, scale_sets=[keep])
    result.orphans += sum(
        1 for r in world.github.state.runners.values() if r.scale_set_id == gone_id
    )
    result.recover_seconds = t_gone - t_delete
    result.extra.update(
        deleted_at_github=gone_id not in world.github.state.scale_sets,
        keep_jobs_after_delete_with_runner=sum(1 for j in after if j.runner_assign_time),
        doomed_jobs=len(doomed),
    )
    return result


DISRUPTIONS = {"evictions": evictions, "scale-set-deleted": scale_set_deleted}
