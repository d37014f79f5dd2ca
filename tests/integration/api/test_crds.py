"""gharc's scale set CRDs against the real kube-apiserver.

The session fixture installs ``gharc.api.crds.load("all")``; these tests check that what an
ARC user applies is accepted unchanged, that invalid objects are rejected with a message a
person can act on, and that the status subresource and printer columns work.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gharc.api import crds
from gharc.api.generate import fetch_openapi_v1, fetch_server_version
from gharc.api.podtemplate import pod_template_spec_schema
from gharc.api.scaleset import constants as c

pytestmark = pytest.mark.cluster

MERGE = "application/merge-patch+json"


def ars_manifest(name: str = "arc-runner-set") -> dict[str, Any]:
    """An AutoscalingRunnerSet shaped like ARC's Helm chart renders it (dind mode)."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/component": "autoscaling-runner-set",
                "app.kubernetes.io/name": name,
                "app.kubernetes.io/instance": name,
                "app.kubernetes.io/version": "0.14.2",
                "app.kubernetes.io/part-of": "gha-rs",
                "app.kubernetes.io/managed-by": "Helm",
                "helm.sh/chart": "gha-rs-0.14.2",
                "actions.github.com/scale-set-name": name,
            },
            "annotations": {
                "actions.github.com/values-hash": "0" * 63,
                "actions.github.com/cleanup-manager-role-binding": f"{name}-gha-rs-manager",
                "actions.github.com/cleanup-manager-role-name": f"{name}-gha-rs-manager",
                "actions.github.com/cleanup-no-permission-service-account-name": (
                    f"{name}-gha-rs-no-permission"
                ),
            },
        },
        "spec": {
            "githubConfigUrl": "https://github.com/my-org/my-repo",
            "githubConfigSecret": f"{name}-gha-rs-github-secret",
            "runnerGroup": "my-group",
            "runnerScaleSetName": "linux-x64",
            "runnerScaleSetLabels": ["gpu", "large"],
            "minRunners": 1,
            "maxRunners": 5,
            "proxy": {
                "http": {"url": "http://proxy.example.com:3128", "credentialSecretRef": "proxy"},
                "https": {"url": "http://proxy.example.com:3128"},
                "noProxy": ["example.internal", "10.0.0.0/8"],
            },
            "githubServerTLS": {
                "certificateFrom": {"configMapKeyRef": {"name": "ca-bundle", "key": "ca.crt"}}
            },
            "listenerMetrics": {
                "counters": {
                    "gha_started_jobs_total": {"labels": ["repository", "organization", "job_name"]}
                },
                "gauges": {"gha_assigned_jobs": {"labels": ["name", "namespace"]}},
                "histograms": {
                    "gha_job_startup_duration_seconds": {
                        "labels": ["repository", "job_name"],
                        "buckets": [0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0],
                    }
                },
            },
            "listenerTemplate": {
                "metadata": {"labels": {"team": "ci"}},
                "spec": {
                    "containers": [
                        {
                            "name": "listener",
                            "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
                            "securityContext": {"runAsUser": 1000},
                        },
                        {"name": "sidecar", "image": "busybox:1.36", "args": ["sleep", "infinity"]},
                    ],
                    "tolerations": [{"key": "ci", "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
            "autoscalingListener": {"labels": {"owner": "platform"}},
            "ephemeralRunnerSetMetadata": {"annotations": {"note": "ers"}},
            "ephemeralRunnerMetadata": {"labels": {"kind": "runner"}},
            "template": {
                "metadata": {
                    "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
                },
                "spec": {
                    "initContainers": [
                        {
                            "name": "init-dind-externals",
                            "image": "ghcr.io/actions/actions-runner:latest",
                            "command": ["cp"],
                            "args": ["-r", "/home/runner/externals/.", "/home/runner/tmpDir/"],
                            "volumeMounts": [
                                {"name": "dind-externals", "mountPath": "/home/runner/tmpDir"}
                            ],
                        },
                        {
                            "name": "dind",
                            "image": "docker:dind",
                            "args": [
                                "dockerd",
                                "--host=unix:///var/run/docker.sock",
                                "--group=$(DOCKER_GROUP_GID)",
                            ],
                            "env": [{"name": "DOCKER_GROUP_GID", "value": "123"}],
                            "restartPolicy": "Always",
                            "securityContext": {"privileged": True},
                            "startupProbe": {
                                "exec": {"command": ["docker", "info"]},
                                "initialDelaySeconds": 0,
                                "failureThreshold": 24,
                                "periodSeconds": 5,
                            },
                            "volumeMounts": [
                                {"name": "work", "mountPath": "/home/runner/_work"},
                                {"name": "dind-sock", "mountPath": "/var/run"},
                                {"name": "dind-externals", "mountPath": "/home/runner/externals"},
                            ],
                        },
                    ],
                    "containers": [
                        {
                            "name": "runner",
                            "image": "ghcr.io/actions/actions-runner:latest",
                            "command": ["/home/runner/run.sh"],
                            "env": [
                                {"name": "DOCKER_HOST", "value": "unix:///var/run/docker.sock"},
                                {"name": "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS", "value": "120"},
                            ],
                            "ports": [
                                {"name": "metrics", "containerPort": 8080, "protocol": "TCP"}
                            ],
                            "resources": {
                                "limits": {"cpu": "2", "memory": "4Gi"},
                                "requests": {"cpu": "500m", "memory": 1073741824},
                            },
                            "livenessProbe": {"tcpSocket": {"port": "metrics"}},
                            "volumeMounts": [
                                {"name": "work", "mountPath": "/home/runner/_work"},
                                {"name": "dind-sock", "mountPath": "/var/run"},
                            ],
                        }
                    ],
                    "restartPolicy": "Never",
                    "serviceAccountName": f"{name}-gha-rs-no-permission",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "volumes": [
                        {"name": "dind-sock", "emptyDir": {}},
                        {"name": "dind-externals", "emptyDir": {}},
                        {"name": "work", "emptyDir": {"sizeLimit": "10Gi"}},
                    ],
                },
            },
        },
    }


def _api(api_client: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


async def _create(
    api_client: Any, namespace: str, plural: str, body: dict[str, Any]
) -> dict[str, Any]:
    created: dict[str, Any] = await _api(api_client).create_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, plural, body, field_validation="Strict"
    )
    return created


async def _rejected(
    api_client: Any, namespace: str, plural: str, body: dict[str, Any], status: int = 422
) -> str:
    with pytest.raises(ApiException) as info:
        await _create(api_client, namespace, plural, body)
    assert info.value.status == status, info.value.body
    message: str = json.loads(info.value.body)["message"]
    return message


async def test_crds_are_established_as_shipped(api_client: Any) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    for doc in crds.load("scaleset"):
        got = await ext.read_custom_resource_definition(doc["metadata"]["name"])
        conditions = {cond.type: cond.status for cond in got.status.conditions}
        assert conditions.get("Established") == "True"
        assert "NonStructuralSchema" not in conditions
        # The server kept every printer column (it drops none it cannot parse).
        (version,) = got.spec.versions
        assert len(version.additional_printer_columns) == len(
            doc["spec"]["versions"][0]["additionalPrinterColumns"]
        )


async def test_arc_manifest_is_accepted_strictly_and_round_trips(
    api_client: Any, namespace: str
) -> None:
    body = ars_manifest()
    # Strict field validation: any field our schema lacks would be a 422, not a silent prune.
    created = await _create(api_client, namespace, c.PLURAL_AUTOSCALING_RUNNER_SETS, body)
    got = await _api(api_client).get_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, c.PLURAL_AUTOSCALING_RUNNER_SETS, body["metadata"]["name"]
    )
    assert created["spec"] == body["spec"]
    assert got["spec"] == body["spec"]
    assert got["metadata"]["labels"] == body["metadata"]["labels"]
    assert got["metadata"]["annotations"] == body["metadata"]["annotations"]


async def test_helm_vault_config_shape_is_accepted(api_client: Any, namespace: str) -> None:
    body = ars_manifest("vault")
    body["spec"]["vaultConfig"] = {
        "type": "azure_key_vault",
        "proxy": {"https": {"url": "http://proxy:3128"}},
        "azureKeyVault": {
            "url": "https://vault.example.com",
            "tenantId": "t",
            "clientId": "c",
            "certificatePath": "/etc/cert.pem",
            "secretKey": "github-app",
        },
    }
    got = await _create(api_client, namespace, c.PLURAL_AUTOSCALING_RUNNER_SETS, body)
    assert got["spec"]["vaultConfig"] == body["spec"]["vaultConfig"]


def _without(path: str) -> dict[str, Any]:
    body = ars_manifest()
    node = body
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    del node[last]
    return body


def _with(path: str, value: Any) -> dict[str, Any]:
    body = ars_manifest()
    node: Any = body
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return body


INVALID = [
    pytest.param(
        _with("spec.maxRunners", -1),
        "spec.maxRunners in body should be greater than or equal to 0",
        id="negative-max",
    ),
    pytest.param(
        _with("spec.minRunners", -1),
        "spec.minRunners in body should be greater than or equal to 0",
        id="negative-min",
    ),
    pytest.param(
        _with("spec.template.spec.containers.0.image", 123),
        "spec.template.spec.containers[0].image in body must be of type string",
        id="container-image-type",
    ),
    pytest.param(
        _with("spec.template.spec.containers.0.resources", {"limits": {"cpu": "lots"}}),
        "spec.template.spec.containers[0].resources.limits.cpu in body should match",
        id="quantity-pattern",
    ),
    pytest.param(
        _without("spec.template.spec.containers"),
        "spec.template.spec.containers: Required value",
        id="no-containers",
    ),
    pytest.param(
        _with("spec.listenerTemplate.spec.containers.0.ports", [{"name": "x"}]),
        "spec.listenerTemplate.spec.containers[0].ports[0].containerPort: Required value",
        id="listener-port",
    ),
    pytest.param(
        _with(
            "spec.scheduledOverrides",
            [{"startTime": "2026-01-01T08:00:00Z", "endTime": "2026-01-01T09:00:00Z"}] * 17,
        ),
        "spec.scheduledOverrides: Too many: 17: must have at most 16 items",
        id="too-many-scheduled-overrides",
    ),
]

#: Accepted by ARC's CRD, so accepted by ours (an object stored under ARC's CRDs must stay
#: writable); the ARS reconciler reports each as phase Failed with a message.
ACCEPTED_LIKE_ARC = [
    pytest.param(_without("spec.githubConfigUrl"), id="no-url"),
    pytest.param(_without("spec.githubConfigSecret"), id="no-secret"),
    pytest.param(_with("spec.minRunners", 6), id="min-gt-max"),
    pytest.param(_with("spec.githubConfigUrl", "my-org"), id="not-a-url"),
    pytest.param(_with("spec.runnerScaleSetLabels", ["ok", ""]), id="empty-scale-set-label"),
    pytest.param(_with("spec.vaultConfig", {"type": "hashicorp"}), id="vault-type"),
    pytest.param(_with("metadata.name", "n" * 47), id="name-too-long"),
]


@pytest.mark.parametrize("body", ACCEPTED_LIKE_ARC)
async def test_what_arcs_crd_accepts_is_accepted(
    api_client: Any, namespace: str, body: dict[str, Any]
) -> None:
    api = client.CustomObjectsApi(api_client)
    created = await api.create_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, c.PLURAL_AUTOSCALING_RUNNER_SETS, body
    )
    assert created["metadata"]["name"] == body["metadata"]["name"]


@pytest.mark.parametrize(("body", "expected"), INVALID)
async def test_invalid_ars_is_rejected_readably(
    api_client: Any, namespace: str, body: dict[str, Any], expected: str
) -> None:
    message = await _rejected(api_client, namespace, c.PLURAL_AUTOSCALING_RUNNER_SETS, body)
    assert expected in message, message


async def test_unknown_template_field_is_rejected_under_strict_validation(
    api_client: Any, namespace: str
) -> None:
    body = _with("spec.template.spec.containers.0.imagePullPolicyy", "Always")
    # Strict decoding failures are 400 Bad Request, not 422.
    message = await _rejected(api_client, namespace, c.PLURAL_AUTOSCALING_RUNNER_SETS, body, 400)
    assert 'unknown field "spec.template.spec.containers[0].imagePullPolicyy"' in message


async def test_status_subresource_separates_spec_and_status(
    api_client: Any, namespace: str
) -> None:
    api = _api(api_client)
    plural = c.PLURAL_AUTOSCALING_RUNNER_SETS
    body = ars_manifest()
    body["status"] = {"phase": "Running", "currentRunners": 9}
    created = await _create(api_client, namespace, plural, body)
    assert "status" not in created or created["status"].get("currentRunners") != 9
    name = body["metadata"]["name"]

    status = {
        "observedGeneration": created["metadata"]["generation"],
        "phase": "Running",
        "currentRunners": 3,
        "pendingEphemeralRunners": 1,
        "runningEphemeralRunners": 2,
        "failedEphemeralRunners": 0,
        "finishedEphemeralRunners": 4,
        "deletingEphemeralRunners": 1,
    }
    patched = await api.patch_namespaced_custom_object_status(
        c.GROUP,
        c.VERSION,
        namespace,
        plural,
        name,
        {"spec": {"maxRunners": 50}, "status": status},
        _content_type=MERGE,
    )
    assert patched["status"] == status
    assert patched["spec"]["maxRunners"] == 5
    assert patched["metadata"]["generation"] == created["metadata"]["generation"]

    # The main resource ignores status.
    again = await api.patch_namespaced_custom_object(
        c.GROUP,
        c.VERSION,
        namespace,
        plural,
        name,
        {"spec": {"maxRunners": 7}, "status": {"currentRunners": 99}},
        _content_type=MERGE,
    )
    assert again["spec"]["maxRunners"] == 7
    assert again["status"]["currentRunners"] == 3
    assert again["metadata"]["generation"] == created["metadata"]["generation"] + 1

    # Every printer column renders from a field that now exists.
    table = await _table(api_client, namespace, plural)
    names = [col["name"] for col in table["columnDefinitions"]]
    row = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert row["Minimum Runners"] == 1
    assert row["Maximum Runners"] == 7
    assert row["Current Runners"] == 3
    assert row["Finished Runners"] == 4
    assert row["Deleting Runners"] == 1
    assert row["Phase"] == "Running"


async def _table(api_client: Any, namespace: str, plural: str) -> dict[str, Any]:
    resp = await api_client.call_api(
        f"/apis/{c.GROUP}/{c.VERSION}/namespaces/{namespace}/{plural}",
        "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    try:
        table: dict[str, Any] = json.loads(await resp.read())
    finally:
        resp.release()
    return table


def _runner_spec() -> dict[str, Any]:
    template = ars_manifest()["spec"]["template"]
    return {
        "githubConfigUrl": "https://github.com/my-org/my-repo",
        "githubConfigSecret": "secret",
        "runnerScaleSetId": 42,
        "proxySecretRef": "arc-abcdefgh-runner-proxy",
        "metadata": template["metadata"],
        "spec": template["spec"],
    }


async def test_ephemeral_runner_set_partial_status_patches(api_client: Any, namespace: str) -> None:
    api = _api(api_client)
    plural = c.PLURAL_EPHEMERAL_RUNNER_SETS
    body = {
        "apiVersion": c.API_VERSION,
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": "arc"},
        "spec": {
            "replicas": 2,
            "patchID": 0,
            "actionableRevision": 1,
            "ephemeralRunnerSpec": _runner_spec(),
            "ephemeralRunnerMetadata": {"annotations": {"a": "b"}},
        },
    }
    created = await _create(api_client, namespace, plural, body)
    assert created["spec"] == body["spec"]
    # A lone marker write on a fresh object must not need currentReplicas.
    got = await api.patch_namespaced_custom_object_status(
        c.GROUP,
        c.VERSION,
        namespace,
        plural,
        "arc",
        {"status": {"finishedRunnerCleanupPatchID": 7}},
        _content_type=MERGE,
    )
    assert got["status"] == {"finishedRunnerCleanupPatchID": 7}
    got = await api.patch_namespaced_custom_object_status(
        c.GROUP,
        c.VERSION,
        namespace,
        plural,
        "arc",
        {"status": {"appliedActionableRevision": 1, "currentReplicas": 2, "phase": "Running"}},
        _content_type=MERGE,
    )
    assert got["status"]["appliedActionableRevision"] == 1
    assert got["status"]["finishedRunnerCleanupPatchID"] == 7

    missing = copy.deepcopy(body)
    missing["metadata"]["name"] = "no-patch-id"
    del missing["spec"]["patchID"]
    message = await _rejected(api_client, namespace, plural, missing)
    assert "spec.patchID: Required value" in message


async def test_ephemeral_runner_status_fields(api_client: Any, namespace: str) -> None:
    api = _api(api_client)
    plural = c.PLURAL_EPHEMERAL_RUNNERS
    body = {
        "apiVersion": c.API_VERSION,
        "kind": "EphemeralRunner",
        "metadata": {"name": "arc-runner-abcde", "finalizers": [c.FINALIZER_EPHEMERAL_RUNNER]},
        "spec": _runner_spec(),
    }
    created = await _create(api_client, namespace, plural, body)
    assert created["spec"] == body["spec"]
    status = {
        "phase": "Running",
        "ready": True,
        "reason": "",
        "message": "",
        "runnerId": 17,
        "runnerName": "arc-runner-abcde",
        "failures": {"0b9c6e0c-0000-4000-8000-000000000001": "2026-01-01T00:00:00Z"},
        "jobRequestId": 2**40,
        "jobId": "a1b2",
        "jobRepositoryName": "my-org/my-repo",
        "jobWorkflowRef": "my-org/my-repo/.github/workflows/ci.yaml@refs/heads/main",
        "workflowRunId": 2**41,
        "jobDisplayName": "build",
    }
    got = await api.patch_namespaced_custom_object_status(
        c.GROUP,
        c.VERSION,
        namespace,
        plural,
        body["metadata"]["name"],
        {"status": status},
        _content_type=MERGE,
    )
    assert got["status"] == status
    with pytest.raises(ApiException) as info:
        await api.patch_namespaced_custom_object_status(
            c.GROUP,
            c.VERSION,
            namespace,
            plural,
            body["metadata"]["name"],
            {"status": {"failures": {"uid": "yesterday"}}},
            _content_type=MERGE,
        )
    assert info.value.status == 422
    table = await _table(api_client, namespace, plural)
    names = [col["name"] for col in table["columnDefinitions"]]
    row = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert row["RunnerId"] == 17
    assert row["JobRepository"] == "my-org/my-repo"
    assert row["JobId"] == "a1b2"

    no_scale_set = copy.deepcopy(body)
    no_scale_set["metadata"] = {"name": "other"}
    del no_scale_set["spec"]["runnerScaleSetId"]
    message = await _rejected(api_client, namespace, plural, no_scale_set)
    assert "spec.runnerScaleSetId: Required value" in message


async def test_autoscaling_listener_failure_accounting(api_client: Any, namespace: str) -> None:
    api = _api(api_client)
    plural = c.PLURAL_AUTOSCALING_LISTENERS
    name = c.listener_name("arc", namespace, "", "https://github.com/my-org")
    body = {
        "apiVersion": c.API_VERSION,
        "kind": "AutoscalingListener",
        "metadata": {"name": name, "finalizers": [c.FINALIZER_AUTOSCALING_LISTENER]},
        "spec": {
            "githubConfigUrl": "https://github.com/my-org",
            "githubConfigSecret": "secret",
            "runnerScaleSetId": 42,
            "autoscalingRunnerSetNamespace": namespace,
            "autoscalingRunnerSetName": "arc",
            "ephemeralRunnerSetName": "arc",
            "maxRunners": 2147483647,
            "minRunners": 0,
            "image": "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2",
            "imagePullSecrets": [{"name": "regcred"}],
            "template": ars_manifest()["spec"]["listenerTemplate"],
        },
    }
    created = await _create(api_client, namespace, plural, body)
    assert created["spec"] == body["spec"]
    status = {
        "failures": 3,
        "lastFailureTime": "2026-01-01T00:00:05Z",
        "lastFailedPodUID": "0b9c6e0c-0000-4000-8000-000000000002",
        "phase": "BackingOff",
    }
    got = await api.patch_namespaced_custom_object_status(
        c.GROUP, c.VERSION, namespace, plural, name, {"status": status}, _content_type=MERGE
    )
    assert got["status"] == status
    table = await _table(api_client, namespace, plural)
    names = [col["name"] for col in table["columnDefinitions"]]
    row = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert row["Failures"] == 3
    assert row["AutoscalingRunnerSet Name"] == "arc"


async def test_stored_pod_template_schema_matches_this_api_server(api_client: Any) -> None:
    """Drift check: regenerate PodTemplateSpec from the test server and diff with the file."""
    stored_version, stored = crds.load_pod_template_schema()
    server_version = await fetch_server_version(api_client)
    if server_version != stored_version:
        pytest.skip(f"stored schema is from {stored_version}, test server is {server_version}")
    fresh = pod_template_spec_schema(await fetch_openapi_v1(api_client))
    assert fresh == stored, (
        "pod template schema drifted: run "
        "python -m gharc.api.generate --kubeconfig <test kubeconfig>"
    )
