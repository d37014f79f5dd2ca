"""``python -m testworld bench --suite shards``: a fleet of scale sets over sharded replicas.

``--scale-sets`` sets (default 3,000, ten per namespace) on ``--replicas`` controller
replicas (default 3) run with ``--shards`` (default 12). It prints how long until every
listener holds a message session and what each replica holds (shards, sessions, RSS). Then
it SIGKILLs the replica holding shard 0 (no shutdown, no Lease released) and prints how long
until the survivors hold its shards, how many message sessions were created anew (0: every
moved set resumed its session) and, for a job queued on each of up to ``--jobs`` of the
moved sets once they moved, their pickup (queued -> started at the fake GitHub) and how
many never started (the answer must be 0). Issue 26's targets: 3 replicas hold 3,000 sets,
a dead replica's shards move within 20 s, sessions are resumed, not waited out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testworld.sim.report import percentile

log = logging.getLogger("testworld.bench")

SESSION_CREATE = "*/runnerscalesets/{scale_set_id}/sessions"


@dataclass
class ShardBenchOptions:
    scale_sets: int = 3000
    per_namespace: int = 10
    replicas: int = 3
    shards: int = 12
    jobs: int = 100
    """Jobs queued after the kill, one each on as many of the moved sets."""
    poll_timeout: float = 20.0
    setup_timeout: float = 1200.0
    timeout: float = 300.0
    out: Path | None = None


@dataclass
class ShardBenchResult:
    sessions_seconds: float = float("nan")
    held: dict[str, dict[str, float]] = field(default_factory=dict)
    """Replica -> shards, sessions, RSS MiB before the kill."""
    victim: str = ""
    moved_shards: int = 0
    moved_sets: int = 0
    move_seconds: float = float("nan")
    session_creates_after_kill: int = 0
    pickups: list[float] = field(default_factory=list)
    never_started: int = 0


def _names(opts: ShardBenchOptions) -> list[tuple[str, str]]:
    """(namespace, scale set) pairs, ``per_namespace`` sets to a namespace."""
    return [(f"team-{i // opts.per_namespace:04d}", f"sh-{i:04d}") for i in range(opts.scale_sets)]


def _session_creates(gh: Any) -> int:
    posts: int = gh.calls(SESSION_CREATE, method="POST")
    return posts - gh.calls(SESSION_CREATE, method="POST", status=409)


def _with_sessions(gh: Any) -> int:
    state = gh.state
    return sum(1 for ss in state.scale_sets.values() if state.active_session(ss) is not None)


def _rss_mib(pid: int | None) -> float:
    from testworld.bench_listeners import proc_rss_mib

    return proc_rss_mib(pid) if pid else float("nan")


async def _until(check: Any, timeout: float, what: str) -> float:
    """Seconds until ``check()`` (a coroutine function) is true; raises after ``timeout``."""
    began = time.monotonic()
    while not await check():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(0.5)
    return time.monotonic() - began


async def run_shards(opts: ShardBenchOptions) -> ShardBenchResult:
    from gharc.api import crds
    from gharc.kube.shards import shard_of
    from testworld.chaos.cases import LEASE
    from testworld.chaos.replicas import replicas, sigkill
    from testworld.chaos.shards import holders
    from testworld.controlplane import ControlPlane
    from testworld.sim.github import FakeGitHubServer
    from testworld.sim.programs import RunnerProgram
    from testworld.world import World

    res = ShardBenchResult()
    log_dir = opts.out or Path(f"/tmp/gharc-bench-shards-{os.getpid()}")
    names = [f"replica-{chr(ord('a') + i)}" for i in range(opts.replicas)]
    pairs = _names(opts)
    async with (
        ControlPlane(crds=crds.load("scaleset")) as cp,
        FakeGitHubServer(poll_timeout=opts.poll_timeout) as gh,
        World(
            cp.kubeconfig_path,
            gh,
            log_dir=log_dir,
            runner=RunnerProgram(poll_seconds=5),
            controller_namespace="gharc-bench-system",
            controller_args=[f"--leader-election-id={LEASE}", f"--shards={opts.shards}"],
            controller_env={"POD_NAME": names[0]},
        ) as world,
        replicas(world, names[1:]) as others,
    ):
        pids = {names[0]: world.controller_pid} | {
            r.name: (r.proc.pid if r.proc else None) for r in others
        }
        procs = {names[0]: world.controller} | {r.name: r.proc for r in others}
        began = time.monotonic()
        for ns, name in pairs:
            await world.apply_scale_set(ns, name, max_runners=2)

        async def all_in_session() -> bool:
            world.check_controller()
            return _with_sessions(gh) >= len(pairs)

        await _until(all_in_session, opts.setup_timeout, "every listener in session")
        res.sessions_seconds = round(time.monotonic() - began, 1)
        print(f"{len(pairs)} listeners in session in {res.sessions_seconds} s", flush=True)
        await asyncio.sleep(10)

        held = await holders(world, opts.shards)
        owners: dict[str, int] = {}
        for session in gh.state.sessions.values():
            owners[session.owner] = owners.get(session.owner, 0) + 1
        for name in names:
            res.held[name] = {
                "shards": sum(1 for h in held.values() if h == name),
                "sessions": owners.get(name, 0),
                "rss_mib": _rss_mib(pids[name]),
            }
        res.victim = held.get(0) or names[0]
        lost = sorted(k for k, h in held.items() if h == res.victim)
        moved = [(ns, n) for ns, n in pairs if shard_of(ns, n, opts.shards) in lost]
        res.moved_shards, res.moved_sets = len(lost), len(moved)
        creates_before = _session_creates(gh)
        victim = procs[res.victim]
        assert victim is not None
        if res.victim == names[0]:
            world.controller = others[0].proc  # a survivor is the World's controller now
        t_kill = time.monotonic()
        await sigkill(victim)
        print(f"SIGKILLed {res.victim}, holder of {len(lost)} shards ({len(moved)} sets)")

        async def moved_away() -> bool:
            now = await holders(world, opts.shards)
            return all(now[k] not in (None, res.victim) for k in lost)

        await _until(moved_away, opts.timeout, "the killed replica's shards to move")
        res.move_seconds = round(time.monotonic() - t_kill, 1)

        sample = moved[: opts.jobs]
        jobs = [gh.enqueue_job(f"octo-org/{n}", [n], duration=0.5) for _, n in sample]

        async def started() -> bool:
            return all(j.start_time is not None for j in jobs)

        with contextlib.suppress(TimeoutError):
            await _until(started, opts.timeout, "the moved sets' jobs to start")
        res.pickups = [j.start_time - j.queue_time for j in jobs if j.start_time is not None]
        res.never_started = sum(1 for j in jobs if j.start_time is None)
        res.session_creates_after_kill = _session_creates(gh) - creates_before
    return res


def run(opts: ShardBenchOptions) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    print(
        f"bench --suite shards: {opts.scale_sets} scale sets ({opts.per_namespace} a namespace) "
        f"over {opts.replicas} replicas, --shards {opts.shards}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    res = asyncio.run(run_shards(opts))
    print(f"sessions: every listener in session {res.sessions_seconds} s after the first set")
    for name, held in res.held.items():
        print(
            f"  {name}: {held['shards']:.0f} shards, created {held['sessions']:.0f} sessions, "
            f"RSS {held['rss_mib']:.1f} MiB"
        )
    print(
        f"kill: {res.victim} held {res.moved_shards} shards ({res.moved_sets} sets); held by "
        f"survivors {res.move_seconds} s after SIGKILL; sessions created anew after it: "
        f"{res.session_creates_after_kill} (0: all resumed)"
    )
    pickups = res.pickups
    print(
        f"moved sets' jobs: {len(pickups)} started, {res.never_started} never started; pickup "
        f"p50 {percentile(pickups, 50):.3f} p99 {percentile(pickups, 99):.3f} s"
        if pickups
        else f"moved sets' jobs: none started, {res.never_started} never started"
    )
    return 0 if res.never_started == 0 else 1
