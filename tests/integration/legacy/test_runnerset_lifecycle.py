"""RunnerSet -> one-replica StatefulSets (legacy.md 4.3) on the real API server: what the
RunnerSet controller itself writes.

This control plane has no StatefulSet controller, so the StatefulSets get no pods and no
status; that the real one makes their pods and PVCs, that the RunnerSet status follows
them, that scale down drains a runner, and that deleting the RunnerSet takes everything
with it are checked on a real node (tests/realnode/test_realnode_legacy_runnerset.py)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_runner_world import World, until, world_fixture

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNER_SETS
from gharc.controllers.legacy.runnerset import PERSISTENT_VOLUME_CLAIMS, STATEFUL_SETS
from gharc.kube.resources import PODS, SECRETS
from testworld import legacy
from testworld.sim.github import DEFAULT_REPO

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str, api_client: Any) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace, api_client):
        yield w


def runner_set(namespace: str, replicas: int) -> dict[str, Any]:
    docker = {
        "name": "docker",
        "volumeMounts": [{"name": "var-lib-docker", "mountPath": "/var/lib/docker"}],
    }
    return legacy.runner_set(
        namespace,
        replicas,
        [docker],
        ephemeral=False,
        volumeClaimTemplates=[legacy.volume_claim_template("var-lib-docker", "var-lib-docker")],
    )


async def test_a_runner_set_creates_one_replica_statefulsets_with_its_template(
    world: World,
) -> None:
    await world.kube.create(RUNNER_SETS, runner_set(world.namespace, 2))
    sets = await until(
        lambda: _n_sets(world, 2), timeout=30, message="two StatefulSets for the RunnerSet"
    )
    rs = await world.kube.get(RUNNER_SETS, "rs", namespace=world.namespace)
    for sts in sets:
        name = sts["metadata"]["name"]
        assert name.startswith("rs-")
        assert sts["spec"]["replicas"] == 1
        assert sts["spec"]["serviceName"] == "rs"
        [owner] = sts["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            c.KIND_RUNNER_SET,
            rs["metadata"]["uid"],
            True,
        )
        # One PVC set per runner: the claim templates go to the StatefulSet controller.
        [claim] = sts["spec"]["volumeClaimTemplates"]
        assert claim["metadata"]["name"] == "var-lib-docker"
        assert claim["spec"]["storageClassName"] == "var-lib-docker"
        pod = sts["spec"]["template"]
        [ctr] = [x for x in pod["spec"]["containers"] if x["name"] == "runner"]
        env = {e["name"]: e for e in ctr["env"]}
        assert env["RUNNER_REPO"]["value"] == DEFAULT_REPO
        assert env["RUNNER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        # Issue 20 §4: the token is in a Secret the pod references, never a literal value.
        ref = env["RUNNER_TOKEN"]["valueFrom"]["secretKeyRef"]
        secret = await world.kube.get(SECRETS, ref["name"], namespace=world.namespace)
        token = base64.b64decode(secret["data"][ref["key"]]).decode()
        assert token in world.gh.state.registration_tokens
        assert all(t not in json.dumps(sts) for t in world.gh.state.registration_tokens)
        assert pod["metadata"]["labels"][c.LABEL_RUNNER_SET_NAME] == "rs"
        selector = sts["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items()
    # Pods, PVCs and the StatefulSet status are the StatefulSet controller's to write.
    assert await world.kube.list(PODS, namespace=world.namespace) == []
    assert await world.objects(PERSISTENT_VOLUME_CLAIMS) == []
    await asyncio.sleep(2)
    assert len(await world.stateful_sets()) == 2, "more StatefulSets than replicas"


async def _n_sets(world: World, n: int) -> list[dict[str, Any]] | None:
    sets = await world.kube.list(STATEFUL_SETS, namespace=world.namespace)
    return sets if len(sets) == n else None
