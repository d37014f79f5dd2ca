"""The legacy CRDs on the real kube-apiserver: ARC manifests apply, mistakes are rejected."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gharc.api.legacy import constants as c
from testworld import legacy

pytestmark = pytest.mark.cluster


def _rd(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_RUNNER_DEPLOYMENT,
        "metadata": {"name": name},
        "spec": {"replicas": 2, "template": {"spec": spec}},
    }


async def test_an_arc_runner_deployment_manifest_applies_unchanged(
    api_client: Any, namespace: str
) -> None:
    api = client.CustomObjectsApi(api_client)
    body = _rd(
        "example",
        {
            "organization": "my-org",
            "labels": ["gpu"],
            "group": "g",
            "dockerdWithinRunnerContainer": True,
            "image": "summerwind/actions-runner-dind",
            "env": [{"name": "FOO", "value": "bar"}],
            "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
            "dockerVarRunVolumeSizeLimit": "1M",
            "volumes": [{"name": "cache", "emptyDir": {}}],
            "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
        },
    )
    body["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
    out = await api.create_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, c.PLURAL_RUNNER_DEPLOYMENTS, body
    )
    assert out["spec"]["template"]["spec"]["resources"]["limits"]["memory"] == "4Gi"
    status = {"status": {"replicas": 2, "availableReplicas": 1}}
    patched = await api.patch_namespaced_custom_object_status(
        c.GROUP,
        c.VERSION,
        namespace,
        c.PLURAL_RUNNER_DEPLOYMENTS,
        "example",
        status,
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]
    )
    assert patched["status"]["availableReplicas"] == 1


@pytest.mark.parametrize(
    "spec",
    [
        {"labels": ["x"]},
        {"organization": "o", "repository": "o/r"},
        {"organization": "o", "containerMode": "kubernetes"},
    ],
)
async def test_what_arcs_crd_accepts_is_accepted(
    api_client: Any, namespace: str, spec: dict[str, Any]
) -> None:
    """ARC checked these in an optional webhook; the runner controllers report them."""
    api = client.CustomObjectsApi(api_client)
    runner = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_RUNNER,
        "metadata": {"name": "r"},
        "spec": spec,
    }
    for plural, body in ((c.PLURAL_RUNNERS, runner), (c.PLURAL_RUNNER_DEPLOYMENTS, _rd("d", spec))):
        await api.create_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, body)


async def test_a_repository_without_owner_is_rejected_as_by_arc(
    api_client: Any, namespace: str
) -> None:
    api = client.CustomObjectsApi(api_client)
    for plural, body in (
        (
            c.PLURAL_RUNNERS,
            {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND_RUNNER,
                "metadata": {"name": "r"},
                "spec": {"repository": "no-slash"},
            },
        ),
        (c.PLURAL_RUNNER_DEPLOYMENTS, _rd("d", {"repository": "no-slash"})),
    ):
        with pytest.raises(ApiException) as err:
            await api.create_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, body)
        assert err.value.status == 422
        assert "should match" in str(err.value.body)


async def test_a_runner_set_with_volume_claim_templates_applies(
    api_client: Any, namespace: str
) -> None:
    api = client.CustomObjectsApi(api_client)
    body = legacy.runner_set(
        None,
        1,
        [{"name": "runner", "image": "x"}],
        repository="o/r",
        ephemeral=False,
        volumeClaimTemplates=[legacy.volume_claim_template("var-lib-docker", "var-lib-docker")],
    )
    out = await api.create_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, c.PLURAL_RUNNER_SETS, body
    )
    assert out["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "var-lib-docker"
    body["metadata"]["name"] = "rs2"
    del body["spec"]["selector"]
    with pytest.raises(ApiException) as err:
        await api.create_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, c.PLURAL_RUNNER_SETS, body
        )
    assert err.value.status == 422
