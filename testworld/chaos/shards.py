"""Chaos cases of a sharded controller (``--shards``): replicas share the scale sets out.

- ``shard_spread``: two replicas, six scale sets, a burst: every job gets a runner, each
  scale set is served by exactly one replica (one message session created, by the replica
  that holds the set's shard), and both replicas serve some.
- ``shard_kill``: three replicas, many scale sets; one replica is SIGKILLed mid-burst. Its
  shards move to the survivors once their Leases expire; the survivors resume the message
  sessions; no job is left without a runner and no runner is made twice.
"""

from __future__ import annotations

import time

from gharc.kube.shards import shard_of
from testworld.chaos.cases import (
    LEASE,
    SHORT_POLL,
    Sizes,
    burst,
    start_scale_sets,
    under_way,
)
from testworld.chaos.measure import first_runner_of_reacquired, outcome
from testworld.chaos.replicas import leader, replicas, sigkill
from testworld.chaos.report import CaseResult
from testworld.world import World
from testworld.worlds import WorldFactory, scale_set_id, wait_until

__all__ = ["SHARDED", "SPREAD", "shard_kill", "shard_spread"]

SPREAD = Sizes(jobs=4, after=2, scale_sets=6, max_runners=3)
SHARDED = Sizes(jobs=2, after=1, scale_sets=30, max_runners=2, durations=(0.3, 1.0))
SESSION_CREATE = "*/runnerscalesets/{scale_set_id}/sessions"


async def holders(world: World, shards: int) -> dict[int, str | None]:
    """Shard -> the ``POD_NAME`` of the replica holding its Lease (None: nobody)."""
    return {k: await leader(world, f"{LEASE}-shard-{k}") for k in range(shards)}


def _served_by(world: World, namespace: str, sets: list[str]) -> dict[str, list[str]]:
    """Scale set -> the owners of the message sessions the fake GitHub holds for it."""
    owners: dict[str, list[str]] = {}
    for name in sets:
        ss = scale_set_id(world, name)
        owners[name] = sorted(
            s.owner for s in world.github.state.sessions.values() if s.scale_set_id == ss
        )
    return owners


def _session_creates(world: World) -> int:
    """Message sessions created (a 409 creates none)."""
    posts = world.github.calls(SESSION_CREATE, method="POST")
    return posts - world.github.calls(SESSION_CREATE, method="POST", status=409)


async def _balanced(world: World, shards: int, names: set[str]) -> None:
    share = -(-shards // len(names))

    async def fair() -> bool:
        held = await holders(world, shards)
        counts = [sum(1 for h in held.values() if h == n) for n in names]
        return all(h in names for h in held.values()) and max(counts) <= share

    await wait_until(fair, 90, f"the shards to be shared out among {sorted(names)}", world=world)


async def shard_spread(
    factory: WorldFactory, namespace: str, sizes: Sizes = SPREAD, shards: int = 4
) -> CaseResult:
    """Two replicas, ``--shards 4``, six scale sets: each set served by one replica."""
    ns = namespace
    args = [f"--leader-election-id={LEASE}", f"--shards={shards}"]
    world = await factory.create(
        ns, poll_timeout=SHORT_POLL, controller_args=args, controller_env={"POD_NAME": "shard-a"}
    )
    async with replicas(world, ["shard-b"]):
        await _balanced(world, shards, {"shard-a", "shard-b"})
        sets = [f"sp-{i}" for i in range(sizes.scale_sets)]
        await start_scale_sets(world, ns, sets, sizes)
        jobs = burst(world, sets, sizes.jobs, 300, sizes)
        result = await outcome(world, "shard-spread", jobs, namespace=ns, scale_sets=sets)
        held = await holders(world, shards)
    served = _served_by(world, ns, sets)
    expected = {name: [held[shard_of(ns, name, shards)] or ""] for name in sets}
    result.extra.update(
        scale_sets=len(sets),
        served_by=served,
        served_as_sharded=sum(1 for n in sets if served[n] == expected[n]),
        replicas_serving=len({o for owners in served.values() for o in owners}),
        session_creates=_session_creates(world),
    )
    return result


async def shard_kill(
    factory: WorldFactory, namespace: str, sizes: Sizes = SHARDED, shards: int = 6
) -> CaseResult:
    """Three replicas, ``--shards 6``; the one holding shard 0 is SIGKILLed mid-burst."""
    ns = namespace
    args = [f"--leader-election-id={LEASE}", f"--shards={shards}"]
    world = await factory.create(
        ns, poll_timeout=SHORT_POLL, controller_args=args, controller_env={"POD_NAME": "shard-a"}
    )
    async with replicas(world, ["shard-b", "shard-c"]) as others:
        names = {"shard-a", "shard-b", "shard-c"}
        await _balanced(world, shards, names)
        sets = [f"sk-{i}" for i in range(sizes.scale_sets)]
        await start_scale_sets(world, ns, sets, sizes)
        before = burst(world, sets, sizes.jobs, 400, sizes)
        await under_way(world, before)
        held = await holders(world, shards)
        victim = world.controller
        assert victim is not None
        lost = sorted(k for k, h in held.items() if h == "shard-a")
        t_kill = time.time()
        await sigkill(victim)
        world.controller = others[0].proc  # a survivor is the World's controller now
        after = burst(world, sets, sizes.after, 500, sizes)

        async def moved() -> bool:
            now = await holders(world, shards)
            return all(now[k] in ("shard-b", "shard-c") for k in lost)

        await wait_until(moved, 90, "the killed replica's shards to move", world=world)
        t_moved = time.time()
        result = await outcome(world, "shard-kill", before + after, namespace=ns, scale_sets=sets)
    result.recover_seconds = first_runner_of_reacquired(before + after, t_kill)
    result.extra.update(
        scale_sets=len(sets),
        shards_moved=len(lost),
        shards_moved_s=round(t_moved - t_kill, 1),
        session_creates=_session_creates(world),
    )
    return result


SHARD_CASES = {"shard-spread": shard_spread, "shard-kill": shard_kill}
