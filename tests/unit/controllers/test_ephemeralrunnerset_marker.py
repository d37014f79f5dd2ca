"""Behaviour B3: the finished-runner cleanup marker is read uncached, compared with ``==``."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset.ephemeralrunnerset import EphemeralRunnerSetReconciler
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube.reconcile import Request


def _ers(patch_id: int, replicas: int, marker: int | None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running"}
    if marker is not None:
        status["finishedRunnerCleanupPatchID"] = marker
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_EPHEMERAL_RUNNER_SET,
        "metadata": {
            "name": "set",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "1",
            "finalizers": [c.FINALIZER_EPHEMERAL_RUNNER_SET],
        },
        "spec": {
            "replicas": replicas,
            "patchID": patch_id,
            "ephemeralRunnerSpec": {"runnerScaleSetId": 1},
        },
        "status": status,
    }


class FakeCache:
    """Serves a deliberately stale ERS: the cleanup marker's status write is not in it."""

    def __init__(self, ers: dict[str, Any]) -> None:
        self.ers = ers

    async def get(self, resource: Any, name: str, **_: Any) -> dict[str, Any]:
        return copy.deepcopy(self.ers)

    async def list(self, resource: Any, **_: Any) -> list[dict[str, Any]]:
        return []


class FakeKube:
    """The API server's view: knows the marker."""

    def __init__(self, ers: dict[str, Any]) -> None:
        self.ers = ers
        self.created: list[dict[str, Any]] = []
        self.gets = 0

    async def get(self, resource: Any, name: str, **_: Any) -> dict[str, Any]:
        self.gets += 1
        return copy.deepcopy(self.ers)

    async def create(self, resource: Any, obj: dict[str, Any]) -> dict[str, Any]:
        made = copy.deepcopy(obj)
        made["metadata"]["name"] = f"set-runner-{len(self.created)}"
        self.created.append(made)
        return made

    async def patch_status(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(self.ers)


def _reconciler(cached: dict[str, Any], live: dict[str, Any]) -> tuple[Any, FakeKube]:
    kube = FakeKube(live)
    rec = EphemeralRunnerSetReconciler(
        kube,  # type: ignore[arg-type]
        FakeCache(cached),  # type: ignore[arg-type]
        ScaleSetOptions(controller_namespace="ns"),
        resolver=None,  # type: ignore[arg-type]
    )
    return rec, kube


async def test_marker_is_read_from_the_api_server_not_the_cache() -> None:
    rec, kube = _reconciler(_ers(5, 1, None), _ers(5, 1, 5))
    await rec.reconcile(Request("ns", "set"))
    assert kube.gets >= 1
    assert kube.created == []


@pytest.mark.parametrize(
    ("patch_id", "marker", "created"),
    [
        (5, 5, 0),  # the gap is the one the cleanup opened
        (6, 5, 1),  # a newer patch: real demand
        (4, 5, 1),  # patch IDs go down (listener restart): `==`, never `>=`
        (0, 0, 1),  # patch 0 (idle at minRunners) is never suppressed
    ],
)
async def test_marker_compared_with_equality(patch_id: int, marker: int, created: int) -> None:
    rec, kube = _reconciler(_ers(patch_id, 1, marker), _ers(patch_id, 1, marker))
    await rec.reconcile(Request("ns", "set"))
    assert len(kube.created) == created


class InFlightKube:
    """Counts EphemeralRunner creates in flight per namespace; each takes a moment."""

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.done: list[str] = []

    async def create(self, resource: Any, body: dict[str, Any]) -> dict[str, Any]:
        ns = body["metadata"]["namespace"]
        self.in_flight[ns] = self.in_flight.get(ns, 0) + 1
        self.most[ns] = max(self.most.get(ns, 0), self.in_flight[ns])
        await asyncio.sleep(0.01)
        self.in_flight[ns] -= 1
        self.done.append(ns)
        return {**body, "metadata": {**body["metadata"], "name": f"r{len(self.done)}", "uid": "x"}}


async def test_one_tenants_burst_of_creates_leaves_room_for_another() -> None:
    """400 runners of one namespace go out at most CREATES_IN_FLIGHT_PER_NAMESPACE at a
    time, and another namespace's runner is not queued behind them."""
    from gharc.controllers.scaleset import ephemeralrunnerset as ersmod

    kube = InFlightKube()
    reconciler = EphemeralRunnerSetReconciler(
        kube,  # type: ignore[arg-type]
        FakeCache(_ers(0, 0, None)),  # type: ignore[arg-type]
        ScaleSetOptions(controller_namespace="ns"),
        None,  # type: ignore[arg-type]
    )
    burst = _ers(1, 400, None)
    burst["metadata"]["namespace"] = "team-a"
    trickle = _ers(1, 1, None)
    trickle["metadata"].update(namespace="team-b", uid="v")
    big = asyncio.create_task(reconciler._create_runners(burst, 400))
    await asyncio.sleep(0.02)
    await reconciler._create_runners(trickle, 1)
    assert kube.done.count("team-a") < 100, "team-b's runner waited for team-a's burst"
    await big
    assert kube.done.count("team-a") == 400
    assert kube.most["team-a"] == ersmod.CREATES_IN_FLIGHT_PER_NAMESPACE


class _Controller:
    def __init__(self, reconciler: Any) -> None:
        self.reconciler = reconciler

    def enqueue_existing(self, keep: Any) -> int:
        return 0


async def test_a_shard_gained_again_reads_its_markers_afresh() -> None:
    """This process wrote marker 3 while it held the set's shard; another replica held it
    since and wrote 5 (the gap its cleanup opened). Taken back, the set must not act on 3."""
    from gharc.controllers.scaleset.sharding import ScaleSetRouter, Sharding

    rec, kube = _reconciler(_ers(5, 1, None), _ers(5, 1, 5))
    rec._markers["u"] = 3
    sharding = Sharding(owns=lambda shard: True, count=2)
    router = ScaleSetRouter(lambda shard: True, 2, lambda request: ("ns", "set"))
    sharding.routers["ephemeralrunnerset"] = (_Controller(rec), router)  # type: ignore[assignment]
    sharding.gained(router.shard(Request("ns", "set")) or 0)
    await rec.reconcile(Request("ns", "set"))
    assert kube.created == [], "a runner was created on a marker from an earlier tenure"
    assert kube.gets >= 1
