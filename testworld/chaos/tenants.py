"""Chaos cases of the shared controller: one tenant's input, or a frozen leader, against
every other tenant's jobs (issue 26).

- ``hostile_schedule``: a tenant's scale set carries a Daily ``scheduledOverrides`` rule
  that starts in the year 1000 (walked from its start it cost 16 s of CPU per evaluation
  on the shared loop, and the leader lost its Lease). Another tenant's burst runs beside
  it; the Lease must not change hands.
- ``leader_freeze``: the leader is stopped (SIGSTOP: a VM pause, a node under memory
  pressure) for longer than the Lease; the standby takes over; the frozen leader is then
  resumed and must send nothing: its writes are refused by its fence and it exits.
"""

from __future__ import annotations

import asyncio
import signal
import time

from kubernetes_asyncio import client

from testworld.chaos.cases import (
    LEASE,
    SHORT_POLL,
    SMALL,
    Sizes,
    burst,
    start_scale_sets,
    under_way,
)
from testworld.chaos.measure import first_runner_of_reacquired, outcome, pickup_p50
from testworld.chaos.replicas import Replica, leader
from testworld.chaos.report import CaseResult
from testworld.sim.processes import signal_group
from testworld.world import World
from testworld.worlds import WorldFactory, wait_until

#: The Daily rule from the year 1000 (its window's minimum is 0, so it leaves no runner).
ANCIENT_SCHEDULE = {
    "scheduledOverrides": [
        {
            "startTime": "1000-01-01T00:00:00Z",
            "endTime": "1000-01-01T23:00:00Z",
            "recurrenceRule": {"frequency": "Daily"},
            "minRunners": 0,
        }
    ]
}
#: Longer than the controller's Lease (15 s): the standby must take over meanwhile.
FREEZE_S = 22.0
FENCED = "no longer holds the leader Lease"


async def _lease_transitions(world: World) -> int:
    assert world.api is not None
    lease = await client.CoordinationV1Api(world.api).read_namespaced_lease(
        LEASE, world.controller_namespace
    )
    return int(lease.spec.lease_transitions or 0)


async def hostile_schedule(
    factory: WorldFactory, namespace: str, sizes: Sizes = SMALL
) -> CaseResult:
    ns = namespace
    world = await factory.create(
        ns,
        poll_timeout=SHORT_POLL,
        controller_args=["--enable-leader-election", f"--leader-election-id={LEASE}"],
        controller_env={"POD_NAME": "replica-a"},
    )
    await world.apply_scale_set(
        ns, "ancient", max_runners=sizes.max_runners, spec_extra=ANCIENT_SCHEDULE
    )
    sets = [f"hs-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    await world.wait_for_listener("ancient", timeout=90)
    transitions = await _lease_transitions(world)
    jobs = burst(world, sets, sizes.jobs + sizes.after, 300, sizes)
    result = await outcome(world, "hostile-schedule", jobs, namespace=ns, scale_sets=sets)
    assert world.controller is not None
    result.extra.update(
        pickup_p50_s=pickup_p50(jobs),
        lease_transitions=await _lease_transitions(world) - transitions,
        controller_exited=world.controller.returncode is not None,
        leader=await leader(world, LEASE),
    )
    return result


async def leader_freeze(factory: WorldFactory, namespace: str, sizes: Sizes = SMALL) -> CaseResult:
    ns = namespace
    world = await factory.create(
        ns,
        poll_timeout=SHORT_POLL,
        controller_args=["--enable-leader-election", f"--leader-election-id={LEASE}"],
        controller_env={"POD_NAME": "replica-a"},
    )
    sets = [f"lf-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)

    async def leads(name: str) -> bool:
        return await leader(world, LEASE) == name

    await wait_until(lambda: leads("replica-a"), 30, "replica-a to hold the Lease", world=world)
    async with Replica(world, "replica-b") as standby:
        before = burst(world, sets, sizes.jobs, 400, sizes)
        await under_way(world, before)
        frozen = world.controller
        assert frozen is not None and standby.proc is not None
        t_freeze = time.time()
        signal_group(frozen.pid, signal.SIGSTOP)
        try:
            after = burst(world, sets, sizes.after, 500, sizes)
            await wait_until(
                lambda: leads("replica-b"), 60, "replica-b to take the Lease", world=world
            )
            t_lease = time.time()
            await asyncio.sleep(max(0.0, FREEZE_S - (time.time() - t_freeze)))
        finally:
            signal_group(frozen.pid, signal.SIGCONT)
        try:
            exit_code: int | None = await asyncio.wait_for(frozen.wait(), 60)
        except TimeoutError:
            exit_code = None
        world.controller = standby.proc  # the survivor is the World's controller now
        result = await outcome(
            world, "leader-freeze", before + after, namespace=ns, scale_sets=sets
        )
    log = world.controller_log_path.read_text(errors="replace") if world.controller_log_path else ""
    result.recover_seconds = first_runner_of_reacquired(before + after, t_freeze)
    result.extra.update(
        lease_taken_s=round(t_lease - t_freeze, 1),
        frozen_exit_code=exit_code,
        fenced_writes_logged=log.count(FENCED),
    )
    return result


TENANTS = {"hostile-schedule": hostile_schedule, "leader-freeze": leader_freeze}
