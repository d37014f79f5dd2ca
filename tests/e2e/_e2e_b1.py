"""The B1 scenario, run in the background of the e2e session (see conftest.py).

A listener whose start-up fails deterministically (its PAT revoked: 401) must be restarted
with growing gaps (5, 10, 20, 40, 80, 160 s), not in a storm. Over a three-minute window
the number of distinct listener pods is counted by polling (an Error pod is kept until its
backoff has elapsed, so a 0.5 s poll sees every one); then the token is restored and the
listener must come back by itself and pick up jobs.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

from _e2e import WorldFactory, all_completed, enqueue_jobs, listener_pods, wait_until

WINDOW_SECONDS = 180.0
MAX_PODS_IN_WINDOW = 8
SCALE_SET = "b1-revoked"


@dataclass
class B1Result:
    namespace: str = ""
    pod_first_seen: dict[str, float] = field(default_factory=dict)
    """Listener pod UID -> seconds after the revocation when it was first seen."""
    pods_in_window: int = 0
    failed_pods: int = 0
    recovered_after: float | None = None
    """Seconds after the token was restored until the listener had a session again."""
    jobs_completed: int = 0
    jobs: int = 0
    notes: list[str] = field(default_factory=list)


async def run_b1_scenario(factory: WorldFactory) -> B1Result:
    ns = f"e2e-b1-{uuid.uuid4().hex[:5]}"
    res = B1Result(namespace=ns)
    # Listener pods are what B1 paces; in-process listeners have their own test.
    world = await factory.create(ns, controller_args=["--listener-mode=Pod"])
    gh = world.github
    token = gh.state.create_pat()  # its own PAT: revoking it touches nothing else
    await world.apply_scale_set(ns, SCALE_SET, max_runners=2, token=token)
    await world.wait_for_listener(SCALE_SET, timeout=90)
    first = await listener_pods(world, ns)
    assert len(first) == 1, f"expected one listener pod, found {len(first)}"

    gh.state.revoke_token(token)
    gh.state.expire("admin")  # the listener must start from the PAT, as a new pod does
    t0 = time.monotonic()
    assert world.kubelet is not None
    world.kubelet.crash(ns, first[0]["metadata"]["name"], exit_code=1)
    failed: set[str] = set()
    while time.monotonic() - t0 < WINDOW_SECONDS:
        world.check_controller()
        for pod in await listener_pods(world, ns):
            uid = pod["metadata"]["uid"]
            res.pod_first_seen.setdefault(uid, round(time.monotonic() - t0, 1))
            if (pod.get("status") or {}).get("phase") == "Failed":
                failed.add(uid)
        await asyncio.sleep(0.5)
    res.pods_in_window = len(res.pod_first_seen) + 0
    res.failed_pods = len(failed)

    gh.state.pats[token].revoked = False
    t1 = time.monotonic()
    await wait_until(
        lambda: any(s.scale_set_id for s in gh.state.sessions.values()),
        240,
        "the listener to come back after the token was restored",
        world=world,
        interval=0.5,
    )
    res.recovered_after = round(time.monotonic() - t1, 1)
    jobs = enqueue_jobs(world, [SCALE_SET], 3, durations=(0.2, 0.5))
    res.jobs = len(jobs)
    await wait_until(lambda: all_completed(jobs), 120, "jobs after recovery", world=world)
    res.jobs_completed = sum(1 for j in jobs if j.status == "completed")
    return res
