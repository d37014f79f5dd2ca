"""The chaos cases: a fault in the middle of real work, and what the system did about it.

Each case builds its own confined World (controller, kubelet simulator, fake GitHub), runs a
burst of jobs, injects one fault mid-burst, keeps submitting, and returns a
:class:`~testworld.chaos.report.CaseResult` measured from the outside. Cases do not
assert: the test (``tests/chaos``) asserts on the result, the benchmark (``bench/chaos.py``)
prints it, and both run the same code at different :class:`Sizes`.

Times are on the fake GitHub's clock (``time.time``), the one its job timestamps use.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from gharc.api.scaleset.constants import LABEL_SCALE_SET_NAME
from testworld.chaos.measure import (
    first_acquired_after,
    first_runner_after,
    first_runner_of_reacquired,
    outcome,
    pickup_p50,
    wait_for_jobs,
)
from testworld.chaos.replicas import Replica, leader, sigkill
from testworld.chaos.report import CaseResult
from testworld.sim.github.state import Job
from testworld.world import World
from testworld.worlds import WorldFactory, enqueue_jobs, listener_pods, scale_set_id, wait_until

#: The fake's message long poll, seconds (as the e2e tests: a short one keeps runs short).
SHORT_POLL = 3.0
LEASE = "gharc-chaos"
#: How long after a SIGKILL a request the dead process already sent may still be served.
KILL_GRACE_S = 0.5
SESSION_CREATE = "*/runnerscalesets/{scale_set_id}/sessions"
PAT_EXCHANGE = "*/actions/runners/registration-token"


@dataclass(frozen=True)
class Sizes:
    """How big a case runs: ``jobs`` per scale set before the fault, ``after`` per scale
    set right after it (the jobs that only a recovered listener can hand out)."""

    jobs: int = 8
    after: int = 4
    scale_sets: int = 2
    max_runners: int = 4
    durations: tuple[float, float] = (0.3, 1.2)


SMALL = Sizes()
BIG = Sizes(jobs=60, after=20, scale_sets=3, max_runners=10)


def burst(world: World, sets: list[str], count: int, seed: int, sizes: Sizes) -> list[Job]:
    jobs: list[Job] = []
    for i, name in enumerate(sets):
        jobs += enqueue_jobs(world, [name], count, durations=sizes.durations, seed=seed + i)
    return jobs


async def under_way(world: World, jobs: list[Job]) -> None:
    """Until a third of ``jobs`` completed: the fault lands mid-burst."""
    await wait_until(
        lambda: sum(j.status == "completed" for j in jobs) * 3 >= len(jobs),
        120,
        "the burst to be under way",
        world=world,
    )


async def start_scale_sets(
    world: World, namespace: str, sets: list[str], sizes: Sizes, **options: Any
) -> None:
    """Install ``sets`` (``options`` as :meth:`World.apply_scale_set` takes them), then wait
    until each one's listener holds a message session: every case starts from there."""
    for name in sets:
        await world.apply_scale_set(namespace, name, max_runners=sizes.max_runners, **options)
    for name in sets:
        await world.wait_for_listener(name, timeout=90)


def _sessions(world: World, sets: list[str]) -> dict[int, str]:
    ids = {scale_set_id(world, name) for name in sets}
    return {
        s.scale_set_id: s.id for s in world.github.state.sessions.values() if s.scale_set_id in ids
    }


def _sessions_kept(before: dict[int, str], after: dict[int, str]) -> int:
    """Scale sets whose message session after the disruption is the one they had before it
    (:func:`_sessions` maps): a session kept means no listener had to start over."""
    return sum(1 for ss, sid in before.items() if after.get(ss) == sid)


def _session_conflicts(world: World) -> int:
    return world.github.calls(SESSION_CREATE, method="POST", status=409)


async def leader_kill(factory: WorldFactory, namespace: str, sizes: Sizes = SMALL) -> CaseResult:
    """Two controller replicas, listeners in process; the leader is SIGKILLed mid-burst.

    The standby takes the Lease once it expires (15 s), starts every listener and resumes
    each one's message session: no 409, no job left without a runner, no runner twice."""
    ns = namespace
    world = await factory.create(
        ns,
        poll_timeout=SHORT_POLL,
        controller_args=["--enable-leader-election", f"--leader-election-id={LEASE}"],
        controller_env={"POD_NAME": "replica-a"},
    )
    sets = [f"lk-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)

    async def a_leads() -> bool:
        return await leader(world, LEASE) == "replica-a"

    await wait_until(a_leads, 30, "replica-a to hold the Lease", world=world)
    async with Replica(world, "replica-b") as standby:
        before = burst(world, sets, sizes.jobs, 100, sizes)
        await under_way(world, before)
        sessions_before = _sessions(world, sets)
        conflicts_before = _session_conflicts(world)
        victim = world.controller
        assert victim is not None and standby.proc is not None
        t_kill = time.time()
        await sigkill(victim)
        t_dead = time.time()
        world.controller = standby.proc  # the survivor is the World's controller now
        after = burst(world, sets, sizes.after, 200, sizes)

        async def b_leads() -> bool:
            return await leader(world, LEASE) == "replica-b"

        await wait_until(b_leads, 60, "replica-b to take the Lease", world=world)
        t_lease = time.time()
        result = await outcome(world, "leader-kill", before + after, namespace=ns, scale_sets=sets)
        sessions_after = _sessions(world, sets)
    result.recover_seconds = first_runner_of_reacquired(before + after, t_kill)
    lost = _registrations_lost_with(world, t_dead)
    result.allowed_replaced_registrations = len(lost)
    result.extra.update(
        registrations_lost_with_leader=lost,
        reacquired_s=first_acquired_after(before + after, t_kill),
        lease_taken_s=round(t_lease - t_kill, 1),
        session_409s=_session_conflicts(world) - conflicts_before,
        sessions_resumed=_sessions_kept(sessions_before, sessions_after),
        scale_sets=len(sets),
    )
    return result


def _registrations_lost_with(world: World, t_dead: float) -> list[str]:
    """Runners registered before the leader died and registered again after: the answer
    to the first registration died with the process that asked (a JIT config is handed out
    once), so its successor removes that registration and makes a new one. A request the
    dead process had already sent can be served a moment after its death, hence the grace."""
    return sorted(
        name
        for name, times in world.registrations_by_runner().items()
        if len(times) == 2 and times[0] < t_dead + KILL_GRACE_S and times[1] > t_dead
    )


async def listener_kill(factory: WorldFactory, namespace: str, sizes: Sizes = SMALL) -> CaseResult:
    """Listener pods (``--listener-mode=Pod``); a listener's process is SIGKILLed mid-burst.

    The AutoscalingListener controller recreates the pod after B1's first backoff (5 s);
    the new listener resumes the session recorded on the EphemeralRunnerSet."""
    ns = namespace
    world = await factory.create(
        ns, poll_timeout=SHORT_POLL, controller_args=["--listener-mode=Pod"]
    )
    sets = [f"pk-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    before = burst(world, sets, sizes.jobs, 300, sizes)
    await under_way(world, before)
    sessions_before = _sessions(world, sets)
    conflicts_before = _session_conflicts(world)
    victim = next(
        p["metadata"]["name"]
        for p in await listener_pods(world, ns)
        if (p["metadata"].get("labels") or {}).get(LABEL_SCALE_SET_NAME) == sets[0]
        and (p.get("status") or {}).get("phase") == "Running"
    )
    assert world.kubelet is not None
    t_kill = time.time()
    world.kubelet.crash(ns, victim, exit_code=137)  # SIGKILL of the container's processes
    after = burst(world, sets, sizes.after, 400, sizes)
    result = await outcome(world, "listener-kill", before + after, namespace=ns, scale_sets=sets)
    sessions_after = _sessions(world, sets)
    # Only the killed listener's scale set had to recover; the others never stopped.
    victims = [j for j in before + after if j.labels == [sets[0]]]
    result.recover_seconds = first_runner_of_reacquired(victims, t_kill)
    result.extra.update(
        reacquired_s=first_acquired_after(victims, t_kill),
        session_409s=_session_conflicts(world) - conflicts_before,
        sessions_resumed=_sessions_kept(sessions_before, sessions_after),
        scale_sets=len(sets),
    )
    return result


async def _listener_status(world: World, namespace: str, scale_set: str) -> dict[str, object]:
    for obj in await world.custom_objects(namespace, "autoscalinglisteners"):
        if (obj.get("spec") or {}).get("autoscalingRunnerSetName") == scale_set:
            return dict(obj.get("status") or {})
    return {}


async def revoked_credentials(
    factory: WorldFactory, namespace: str, sizes: Sizes = SMALL
) -> CaseResult:
    """Two in-process listeners with their own PATs; one PAT is revoked, then restored.

    The healthy scale set keeps its pickup latency; the other's listener backs off (phase
    BackOff, a growing failure count, a handful of credential calls, not a storm) and, once
    the PAT works again, comes back by itself and runs the jobs that queued meanwhile."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL)
    gh = world.github
    good_pat, bad_pat = gh.state.create_pat(), gh.state.create_pat()
    good, bad = "rc-good", "rc-bad"
    await world.apply_scale_set(
        ns, good, max_runners=sizes.max_runners, secret="pat-good", token=good_pat
    )
    await world.apply_scale_set(
        ns, bad, max_runners=sizes.max_runners, secret="pat-bad", token=bad_pat
    )
    await world.wait_for_listener(good, timeout=90)
    await world.wait_for_listener(bad, timeout=90)

    warm = burst(world, [good, bad], sizes.jobs, 500, sizes)
    await wait_for_jobs(world, warm)
    p50_before = pickup_p50(j for j in warm if j.labels == [good])

    # The PAT is revoked; the listener finds out when it next needs it (a new admin token
    # after its queue token stops working), as a listener whose credentials were rotated
    # away would.
    gh.state.revoke_token(bad_pat)
    gh.state.expire("admin")
    gh.state.expire("registration")  # else a cached one would stand in for the PAT
    bad_id = scale_set_id(world, bad)
    for s in list(gh.state.sessions.values()):
        if s.scale_set_id == bad_id:
            gh.state.revoke_token(s.queue_token)
    exchanges_before = gh.calls(PAT_EXCHANGE, method="POST", status=401)
    t_revoke = time.time()
    healthy = burst(world, [good], sizes.jobs, 600, sizes)
    queued = burst(world, [bad], sizes.after, 700, sizes)

    failures_seen: list[int] = []
    phases: set[str] = set()

    async def backing_off() -> bool:
        status = await _listener_status(world, ns, bad)
        phases.add(str(status.get("phase") or ""))
        failures = int(str(status.get("failures") or 0))
        if not failures_seen or failures != failures_seen[-1]:
            failures_seen.append(failures)
        return failures >= 3

    try:
        await wait_until(backing_off, 90, f"{bad}'s listener to fail three times", world=world)
    except AssertionError as err:  # the table still shows what the case saw
        result_error = str(err)
    else:
        result_error = ""
    window = time.time() - t_revoke
    exchanges = gh.calls(PAT_EXCHANGE, method="POST", status=401) - exchanges_before
    await wait_for_jobs(world, healthy)
    p50_during = pickup_p50(healthy)
    got_runner_while_revoked = sum(1 for j in queued if j.runner_assign_time is not None)

    gh.state.pats[bad_pat].revoked = False
    t_restore = time.time()
    result = await outcome(
        world, "revoked-credentials", warm + healthy + queued, namespace=ns, scale_sets=[good, bad]
    )
    result.recover_seconds = first_runner_after(queued, t_restore)
    result.extra.update(
        healthy_p50_before_s=p50_before,
        healthy_p50_during_s=p50_during,
        bad_failures=failures_seen,
        bad_phases=sorted(p for p in phases if p),
        bad_pat_401s=exchanges,
        window_s=round(window, 1),
        bad_jobs_run_while_revoked=got_runner_while_revoked,
    )
    if result_error:
        result.extra["error"] = result_error
    return result


POLL = "/_services/broker/{session_id}/messages"
#: How long each error window on the message poll lasts, seconds.
POLL_ERROR_WINDOW = 8.0


async def poll_errors(factory: WorldFactory, namespace: str, sizes: Sizes = SMALL) -> CaseResult:
    """The message poll fails mid-burst: 503s, then 429s (Retry-After 3 s), each for a few
    seconds.

    Transient errors are retried inside the listener (jittered backoff): the session is
    kept, no 409, and jobs queued during the windows get runners soon after they end."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL)
    gh = world.github
    sets = [f"pe-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    before = burst(world, sets, sizes.jobs, 800, sizes)
    await under_way(world, before)
    sessions_before = _sessions(world, sets)
    conflicts_before = _session_conflicts(world)
    gh.add_fault("status", route=POLL, method="GET", status=503, seconds=POLL_ERROR_WINDOW)
    after = burst(world, sets, sizes.after, 900, sizes)
    await asyncio.sleep(POLL_ERROR_WINDOW)
    # A 429 with Retry-After, as the service sends it (without one, GitHub's documented wait
    # is a minute, which the client honours).
    gh.add_fault(
        "secondary_rate_limit",
        route=POLL,
        method="GET",
        status=429,
        retry_after=3,
        seconds=POLL_ERROR_WINDOW,
    )
    await asyncio.sleep(POLL_ERROR_WINDOW)
    t_end = time.time()
    result = await outcome(world, "poll-5xx-429", before + after, namespace=ns, scale_sets=sets)
    sessions_after = _sessions(world, sets)
    result.recover_seconds = first_runner_after(
        [j for j in after if j.runner_assign_time is None or j.runner_assign_time >= t_end],
        t_end,
    )
    result.extra.update(
        poll_503s=gh.calls(POLL, method="GET", status=503),
        poll_429s=gh.calls(POLL, method="GET", status=429),
        got_runner_during_errors=sum(
            1 for j in after if j.runner_assign_time is not None and j.runner_assign_time < t_end
        ),
        session_409s=_session_conflicts(world) - conflicts_before,
        sessions_kept=_sessions_kept(sessions_before, sessions_after),
        scale_sets=len(sets),
    )
    return result


async def token_rotation(factory: WorldFactory, namespace: str, sizes: Sizes = SMALL) -> CaseResult:
    """The PAT in the credentials Secret is replaced mid-burst and the old one revoked, as a
    user rotating a leaked token does. Listener and runner registration pick up the new
    token from the Secret; no job waits for a restart of anything."""
    ns = namespace
    world = await factory.create(ns, poll_timeout=SHORT_POLL)
    gh = world.github
    old_pat = gh.state.create_pat()
    sets = [f"tr-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes, secret="pat", token=old_pat)
    before = burst(world, sets, sizes.jobs, 1000, sizes)
    await under_way(world, before)
    new_pat = gh.state.create_pat()
    await world.core.patch_namespaced_secret("pat", ns, {"stringData": {"github_token": new_pat}})
    t_rotate = time.time()
    gh.state.revoke_token(old_pat)
    gh.state.expire("admin")  # every cached credential must now come from the new PAT
    gh.state.expire("registration")
    gh.state.expire("queue")
    after = burst(world, sets, sizes.after, 1100, sizes)
    result = await outcome(world, "token-rotation", before + after, namespace=ns, scale_sets=sets)
    result.recover_seconds = first_runner_after(after, t_rotate)
    result.extra.update(
        old_pat_401s=gh.calls(PAT_EXCHANGE, method="POST", status=401),
        session_409s=_session_conflicts(world),
        scale_sets=len(sets),
    )
    return result


#: The node loss case's ``--node-loss-timeout`` and the fake's lost-runner timeout, seconds
#: (production: 60 and GitHub's ~600): short, so the case measures the mechanism.
NODE_LOSS_TIMEOUT = 3.0
RUNNER_LOST_TIMEOUT = 10.0
#: Jobs long enough that the node dies under mostly busy runners, and enough of them that
#: the registrations the fault spends stay within 5 % (each lost pod may cost one: an idle
#: runner's registration is replaced, and a busy runner's replacement is made while GitHub
#: still counts the lost job, so it may find no job once that job fails).
NODE_LOSS = Sizes(jobs=28, after=12, durations=(2.0, 4.0))


async def node_loss(factory: WorldFactory, namespace: str, sizes: Sizes = NODE_LOSS) -> CaseResult:
    """The node of every runner pod dies mid-burst: its Ready condition goes Unknown, its
    pods stay Running (or Terminating once deleted) and their runners stop talking to GitHub.

    After ``--node-loss-timeout`` the controller marks those pods Failed (NodeLost): idle
    runners get new pods on the live node, busy ones (their jobs fail at GitHub, as on a
    real lost node) are replaced, and the registrations left behind are removed by the
    registration check. Jobs queued after the loss run on the replacements."""
    ns = namespace
    world = await factory.create(
        ns,
        poll_timeout=SHORT_POLL,
        # Nodes are cluster-scoped: node loss is off in single-namespace mode.
        single_namespace=False,
        kubelet_namespaces=[ns],
        controller_args=[
            f"--node-loss-timeout={NODE_LOSS_TIMEOUT}",
            "--runner-registration-sync-interval=2",
            "--runner-registration-grace=5",
        ],
    )
    world.github.state.runner_lost_timeout = RUNNER_LOST_TIMEOUT
    sets = [f"nl-{i}" for i in range(sizes.scale_sets)]
    await start_scale_sets(world, ns, sets, sizes)
    before = burst(world, sets, sizes.jobs, 1200, sizes)
    await under_way(world, before)
    assert world.kubelet is not None
    t_loss = time.time()
    ids = {scale_set_id(world, name) for name in sets}
    idle = sum(
        1 for r in world.github.state.runners.values() if r.scale_set_id in ids and r.job is None
    )
    lost = await world.kubelet.lose_node()
    after = burst(world, sets, sizes.after, 1300, sizes)
    result = await outcome(world, "node-loss", before + after, namespace=ns, scale_sets=sets)
    result.allowed_extra_runners = len(lost)
    result.recover_seconds = first_runner_after(after, t_loss)
    result.extra.update(
        pods_lost=len(lost),
        idle_runners_lost=idle,
        jobs_failed_with_node=sum(1 for j in before + after if j.conclusion == "failed"),
        node_loss_timeout_s=NODE_LOSS_TIMEOUT,
        scale_sets=len(sets),
    )
    return result


CASES = {
    "leader-kill": leader_kill,
    "node-loss": node_loss,
    "listener-kill": listener_kill,
    "revoked-credentials": revoked_credentials,
    "poll-5xx-429": poll_errors,
    "token-rotation": token_rotation,
}
