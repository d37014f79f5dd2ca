"""Two scale sets with different labels in two namespaces share one controller; jobs for
one set only ever run on that set's runners."""

from __future__ import annotations

import pytest
from _e2e import (
    WorldFactory,
    all_completed,
    enqueue_jobs,
    job_state,
    scale_set_id,
    unique_namespace,
    wait_until,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.exclusive
async def test_two_scale_sets_two_namespaces_do_not_cross(
    worlds: WorldFactory, request: pytest.FixtureRequest
) -> None:
    system = unique_namespace(request, "e2e-sys")
    ns_a, ns_b = unique_namespace(request, "e2e-a"), unique_namespace(request, "e2e-b")
    world = await worlds.create(
        system, single_namespace=False, kubelet_namespaces=[system, ns_a, ns_b], poll_timeout=3
    )
    await world.apply_scale_set(ns_a, "alpha", max_runners=4, labels=["linux-alpha"])
    await world.apply_scale_set(ns_b, "bravo", max_runners=4, labels=["linux-bravo"])
    await world.wait_for_listener("alpha")
    await world.wait_for_listener("bravo")
    id_a, id_b = scale_set_id(world, "alpha"), scale_set_id(world, "bravo")
    jobs_a = enqueue_jobs(world, ["linux-alpha"], 8, durations=(0.2, 1.0), seed=1)
    jobs_b = enqueue_jobs(world, ["linux-bravo"], 8, durations=(0.2, 1.0), seed=2)
    seen_a: set[str] = set()
    seen_b: set[str] = set()

    async def done() -> bool:
        seen_a.update(er["metadata"]["name"] for er in await world.ephemeral_runners(ns_a))
        seen_b.update(er["metadata"]["name"] for er in await world.ephemeral_runners(ns_b))
        return all_completed(jobs_a + jobs_b)

    await wait_until(done, 120, "both sets' jobs", world=world)
    assert job_state(jobs_a + jobs_b) == "completed=16"
    for j in jobs_a:
        assert j.scale_set_id == id_a, f"alpha job ran in scale set {j.scale_set_id}"
        assert j.runner_name in seen_a, f"alpha job ran on {j.runner_name}"
    for j in jobs_b:
        assert j.scale_set_id == id_b, f"bravo job ran in scale set {j.scale_set_id}"
        assert j.runner_name in seen_b, f"bravo job ran on {j.runner_name}"
    assert not seen_a & seen_b
    assert world.runners_created() == 16
