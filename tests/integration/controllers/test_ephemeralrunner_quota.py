"""Runner pods refused by a ResourceQuota (real API server): waited for, never failed.

The API server's ResourceQuota admission refuses a pod over ``pods: N`` with a 403 whose
message says ``exceeded quota:``. That is a capacity limit, not a bad pod: the runner gets
a QuotaExceeded event and its pod is tried again, it is not marked Failed, and once the
quota allows it the same runner gets its pod. There is no kube-controller-manager here, so
the test plays the quota controller once (the quota's first ``status``); from then on the
admission plugin keeps ``status.used`` itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _erworld import World, world_fixture

from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset import ephemeralrunner
from gharc.kube.resources import Resource
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

RESOURCE_QUOTAS = Resource("", "v1", "ResourceQuota", "resourcequotas", True, frozenset({"status"}))
#: The retry period under test, shortened from 30 s so the test runs in seconds.
FAST_QUOTA_REQUEUE = 0.5


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


async def _set_pod_quota(world: World, pods: int, *, create: bool = False) -> None:
    hard = {"pods": str(pods)}
    if create:
        quota = await world.kube.create(
            RESOURCE_QUOTAS,
            {"metadata": {"name": "pods", "namespace": world.namespace}, "spec": {"hard": hard}},
        )
        # What the quota controller would write first; admission counts from here on.
        await world.kube.patch_status(
            RESOURCE_QUOTAS, quota, {"status": {"hard": hard, "used": {"pods": "0"}}}
        )
        return
    quota = await world.kube.merge_patch(
        RESOURCE_QUOTAS, "pods", {"spec": {"hard": hard}}, namespace=world.namespace
    )
    await world.kube.patch_status(RESOURCE_QUOTAS, quota, {"status": {"hard": hard}})


async def _pod_names(world: World) -> set[str]:
    return {p["metadata"]["name"] for p in await world.pods()}


def _failed(runner: dict[str, object]) -> bool:
    status = runner.get("status") or {}
    assert isinstance(status, dict)
    return status.get("phase") == "Failed" or bool(status.get("failures"))


async def test_pods_over_quota_wait_for_room_and_are_not_failed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ephemeralrunner, "QUOTA_REQUEUE", FAST_QUOTA_REQUEUE)
    await _set_pod_quota(world, 2, create=True)
    await world.create_ers(replicas=4)

    async def two_pods_four_runners() -> list[dict[str, object]] | None:
        runners = await world.runners()
        pods = await _pod_names(world)
        return runners if len(runners) == 4 and len(pods) == 2 else None

    runners = await eventually(two_pods_four_runners, timeout=30, message="2 pods of 4 runners")
    names = {str(r["metadata"]["name"]) for r in runners}  # type: ignore[index]
    waiting = names - await _pod_names(world)
    assert len(waiting) == 2

    # Each refused runner hears why, and is tried again (more than one refusal each).
    for name in waiting:
        await world.recorder.seen("QuotaExceeded", name, timeout=15)

    async def retried() -> bool:
        return all(world.recorder.reasons(n).count("QuotaExceeded") >= 2 for n in waiting)

    await eventually(retried, timeout=15, message="refused pods tried again")
    message = next(m for n, _, r, m in world.recorder.events if r == "QuotaExceeded")
    assert "exceeded quota: pods" in message
    assert not [r for r in await world.runners() if _failed(r)], "a runner was marked Failed"
    assert await _pod_names(world) <= names  # still two pods, no replacements

    # Room is made: the same runners get their pods; none was failed or replaced.
    await _set_pod_quota(world, 4)

    async def all_pods() -> bool:
        return await _pod_names(world) == names

    await eventually(all_pods, timeout=30, message="a pod for every runner once quota allows")
    after = await world.runners()
    assert {r["metadata"]["name"] for r in after} == names
    assert not [r for r in after if _failed(r)]
    assert c.REASON_INVALID_POD not in world.recorder.reasons()
