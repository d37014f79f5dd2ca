"""RunnerSet -> one-replica StatefulSets -> pods, with volume claim templates honoured
(legacy.md 4.3), on the real API server with the StatefulSet controller stand-in."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_runner_world import World, until, world_fixture

from gharc.api.legacy import constants as c
from gharc.controllers.legacy.runnerset import PERSISTENT_VOLUME_CLAIMS
from gharc.kube.resources import RUNNER_SETS, SECRETS
from gharc.sim.github import DEFAULT_REPO

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str, api_client: Any) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace, api_client):
        yield w


def runner_set(namespace: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_RUNNER_SET,
        "metadata": {"name": "rs", "namespace": namespace},
        "spec": {
            "repository": DEFAULT_REPO,
            "ephemeral": False,
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "rs"}},
            "serviceName": "rs",
            "template": {
                "metadata": {"labels": {"app": "rs"}},
                "spec": {
                    "containers": [
                        {
                            "name": "docker",
                            "volumeMounts": [
                                {"name": "var-lib-docker", "mountPath": "/var/lib/docker"}
                            ],
                        }
                    ]
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "var-lib-docker"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "10Mi"}},
                        "storageClassName": "var-lib-docker",
                    },
                }
            ],
        },
    }


async def test_a_runner_set_creates_its_pods_with_volume_claim_templates(world: World) -> None:
    await world.kube.create(RUNNER_SETS, runner_set(world.namespace, 2))
    pods = await world.wait_registered(2)
    sets = await world.stateful_sets()
    assert len(sets) == 2
    assert all(s["spec"]["replicas"] == 1 for s in sets)
    pvcs = {p["metadata"]["name"] for p in await world.objects(PERSISTENT_VOLUME_CLAIMS)}
    for sts in sets:
        name = sts["metadata"]["name"]
        assert name.startswith("rs-")
        [pod] = [x for x in pods if x["metadata"]["name"] == f"{name}-0"]
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        }
        assert claims == {"var-lib-docker": f"var-lib-docker-{name}-0"}
        assert f"var-lib-docker-{name}-0" in pvcs
        [ctr] = [x for x in pod["spec"]["containers"] if x["name"] == "runner"]
        env = {e["name"]: e for e in ctr["env"]}
        assert env["RUNNER_REPO"]["value"] == DEFAULT_REPO
        assert env["RUNNER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        # Issue 20 §4: the token is in a Secret the pod references, never a literal value.
        ref = env["RUNNER_TOKEN"]["valueFrom"]["secretKeyRef"]
        secret = await world.kube.get(SECRETS, ref["name"], namespace=world.namespace)
        token = base64.b64decode(secret["data"][ref["key"]]).decode()
        assert token in world.gh.state.registration_tokens
        assert all(t not in json.dumps(pod) for t in world.gh.state.registration_tokens)
        assert pod["metadata"]["labels"][c.LABEL_RUNNER_SET_NAME] == "rs"

    async def status() -> dict[str, Any] | None:
        rs = await world.kube.get(RUNNER_SETS, "rs", namespace=world.namespace)
        st = rs.get("status") or {}
        return rs if st.get("readyReplicas") == 2 and st.get("desiredReplicas") == 2 else None

    await until(status, timeout=30, message="runnerset status")

    await world.kube.merge_patch(
        RUNNER_SETS, "rs", {"spec": {"replicas": 1}}, namespace=world.namespace
    )

    async def one() -> bool:
        return len(await world.stateful_sets()) == 1 and len(await world.pods(live_only=False)) == 1

    await until(one, timeout=30, message="scale down to one statefulset")
    assert world.remove_calls(status=204) == 1
