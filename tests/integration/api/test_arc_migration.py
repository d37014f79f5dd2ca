"""Switching a cluster from ARC's CRDs to gharc's (and back) strands no object.

The switch is a CRD replace: objects stay in etcd as they are and are validated against
the new schema on their next write. A rule ARC's schema lacked would then refuse every
write of an object ARC accepted, finalizer removal included, so the object could never
be deleted. This test runs the switch on a control plane of its own (the session one
keeps gharc's CRDs for the other tests): ARC's CRDs, objects as ARC users write them
(among them a 47-character AutoscalingRunnerSet carrying ARC's finalizer and the
HorizontalRunnerAutoscalers of ARC's documentation, which omit min/maxReplicas), then
gharc's CRDs; every object must be readable, updatable and deletable. Then the rollback:
objects written under gharc's CRDs survive the return to ARC's.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from gharc.api import crds
from gharc.api.legacy import constants as lc
from gharc.api.scaleset import constants as c
from testworld.arcdata import ArcDataMissing, arc_crds
from testworld.controlplane import ControlPlane, install_crds, running_control_plane

NAMESPACE = "arc-runners"
MERGE = "application/merge-patch+json"
LONG_NAME = "linux-x64-large-runners-for-the-platform-team-a"  # 47 characters
assert len(LONG_NAME) == 47

_TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/runner"}]}}


def _obj(group: str, kind: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE, **meta},
        "spec": spec,
    }


def arc_objects() -> list[tuple[str, str, dict[str, Any]]]:
    """(group, plural, object): what ARC's CRDs accept and ARC users have in their clusters."""
    ss, lg = c.GROUP, lc.GROUP
    return [
        (
            ss,
            c.PLURAL_AUTOSCALING_RUNNER_SETS,
            _obj(
                ss,
                c.KIND_AUTOSCALING_RUNNER_SET,
                LONG_NAME,
                {
                    "githubConfigUrl": "https://github.com/octo-org",
                    "githubConfigSecret": "github-app",
                    "minRunners": 1,
                    "maxRunners": 4,
                    "template": copy.deepcopy(_TEMPLATE),
                },
                finalizers=[c.FINALIZER_AUTOSCALING_RUNNER_SET],
            ),
        ),
        (
            ss,
            c.PLURAL_AUTOSCALING_RUNNER_SETS,
            # Invalid for the controller (no secret, min > max), valid for ARC's schema.
            _obj(
                ss,
                c.KIND_AUTOSCALING_RUNNER_SET,
                "half-written",
                {"githubConfigUrl": "octo-org", "minRunners": 5, "maxRunners": 2},
                finalizers=[c.FINALIZER_AUTOSCALING_RUNNER_SET],
            ),
        ),
        (
            ss,
            c.PLURAL_EPHEMERAL_RUNNER_SETS,
            _obj(
                ss,
                c.KIND_EPHEMERAL_RUNNER_SET,
                "ers",
                {
                    "patchID": 0,
                    "replicas": 1,
                    "ephemeralRunnerSpec": {
                        "githubConfigUrl": "https://github.com/octo-org",
                        "githubConfigSecret": "github-app",
                        "runnerScaleSetId": 7,
                        **copy.deepcopy(_TEMPLATE),
                    },
                },
                finalizers=[c.FINALIZER_EPHEMERAL_RUNNER_SET],
            ),
        ),
        (
            ss,
            c.PLURAL_EPHEMERAL_RUNNERS,
            _obj(
                ss,
                c.KIND_EPHEMERAL_RUNNER,
                "ers-runner-abcde",
                {
                    "githubConfigUrl": "https://github.com/octo-org",
                    "githubConfigSecret": "github-app",
                    "runnerScaleSetId": 7,
                    **copy.deepcopy(_TEMPLATE),
                },
                finalizers=[
                    c.FINALIZER_EPHEMERAL_RUNNER,
                    c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
                ],
            ),
        ),
        (
            ss,
            c.PLURAL_AUTOSCALING_LISTENERS,
            _obj(
                ss,
                c.KIND_AUTOSCALING_LISTENER,
                "arc-754b578d-listener",
                {
                    "autoscalingRunnerSetName": "arc",
                    "autoscalingRunnerSetNamespace": NAMESPACE,
                    "ephemeralRunnerSetName": "ers",
                    "githubConfigUrl": "https://github.com/octo-org",
                    "githubConfigSecret": "github-app",
                    "image": "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2",
                    "maxRunners": 4,
                    "minRunners": 1,
                    "runnerScaleSetId": 7,
                },
                finalizers=[c.FINALIZER_AUTOSCALING_LISTENER],
            ),
        ),
        (
            lg,
            lc.PLURAL_HORIZONTAL_RUNNER_AUTOSCALERS,
            # Webhook-driven scaling as ARC's documentation shows it: no replica bounds.
            _obj(
                lg,
                lc.KIND_HORIZONTAL_RUNNER_AUTOSCALER,
                "webhook-driven",
                {
                    "scaleTargetRef": {"kind": "RunnerDeployment", "name": "org-runners"},
                    "scaleUpTriggers": [
                        {"githubEvent": {"workflowJob": {}}, "duration": "30m"},
                    ],
                },
            ),
        ),
        (
            lg,
            lc.PLURAL_HORIZONTAL_RUNNER_AUTOSCALERS,
            # A weekly scheduled override, minReplicas only, as in ARC's documentation.
            _obj(
                lg,
                lc.KIND_HORIZONTAL_RUNNER_AUTOSCALER,
                "scheduled",
                {
                    "scaleTargetRef": {"name": "org-runners"},
                    "minReplicas": 1,
                    "scheduledOverrides": [
                        {
                            "startTime": "2026-05-02T00:00:00+09:00",
                            "endTime": "2026-05-04T00:00:00+09:00",
                            "recurrenceRule": {
                                "frequency": "Weekly",
                                "untilTime": "2027-05-01T00:00:00+09:00",
                            },
                            "minReplicas": 0,
                        }
                    ],
                },
            ),
        ),
        (
            lg,
            lc.PLURAL_RUNNER_DEPLOYMENTS,
            # Two env entries of one name: a plain list in ARC's RunnerPodSpec.
            _obj(
                lg,
                lc.KIND_RUNNER_DEPLOYMENT,
                "org-runners",
                {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "organization": "octo-org",
                            "env": [
                                {"name": "RUNNER_FEATURE", "value": "a"},
                                {"name": "RUNNER_FEATURE", "value": "b"},
                            ],
                        }
                    },
                },
            ),
        ),
        (
            lg,
            lc.PLURAL_RUNNERS,
            # Two scopes: ARC's optional webhook refused this, its CRD did not.
            _obj(
                lg,
                lc.KIND_RUNNER,
                "two-scopes",
                {"organization": "octo-org", "repository": "octo-org/app"},
                finalizers=[lc.FINALIZER_RUNNER],
            ),
        ),
    ]


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def arc_crd_docs() -> list[dict[str, Any]]:
    try:
        return arc_crds()
    except ArcDataMissing as err:
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def own_control_plane() -> Iterator[ControlPlane]:
    """A control plane for this module alone: the test replaces its CRDs."""
    with running_control_plane() as cp:
        yield cp


@pytest.fixture
async def api(own_control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=own_control_plane.kubeconfig_path, client_configuration=cfg
    )
    async with client.ApiClient(cfg) as api_client:
        yield api_client


# --- steps -------------------------------------------------------------------------------


async def _ensure_namespace(api: client.ApiClient) -> None:
    try:
        await client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as err:
        if err.status != 409:
            raise


async def create_all(api: client.ApiClient, objects: list[tuple[str, str, dict[str, Any]]]) -> None:
    custom = client.CustomObjectsApi(api)
    for group, plural, body in objects:
        await custom.create_namespaced_custom_object(group, "v1alpha1", NAMESPACE, plural, body)


async def update_and_delete_all(
    api: client.ApiClient, objects: list[tuple[str, str, dict[str, Any]]]
) -> list[str]:
    """Label, change a spec field, drop finalizers, delete; the failures, as text."""
    custom = client.CustomObjectsApi(api)
    failures: list[str] = []
    for group, plural, body in objects:
        name = body["metadata"]["name"]
        where = f"{plural}/{name}"
        try:
            await custom.patch_namespaced_custom_object(
                group,
                "v1alpha1",
                NAMESPACE,
                plural,
                name,
                {"metadata": {"labels": {"migrated": "true"}}, "spec": _spec_change(plural)},
                _content_type=MERGE,
            )
            await custom.patch_namespaced_custom_object(
                group,
                "v1alpha1",
                NAMESPACE,
                plural,
                name,
                {"metadata": {"finalizers": None}},
                _content_type=MERGE,
            )
            await custom.delete_namespaced_custom_object(group, "v1alpha1", NAMESPACE, plural, name)
        except ApiException as err:
            failures.append(f"{where}: {err.status} {err.body}")
            continue
        if not await _gone(custom, group, plural, name):
            failures.append(f"{where}: still there after delete")
    return failures


def _spec_change(plural: str) -> dict[str, Any]:
    if plural == c.PLURAL_AUTOSCALING_RUNNER_SETS:
        return {"runnerGroup": "migrated"}
    if plural == lc.PLURAL_HORIZONTAL_RUNNER_AUTOSCALERS:
        return {"scaleDownDelaySecondsAfterScaleOut": 300}
    if plural == c.PLURAL_EPHEMERAL_RUNNER_SETS:
        return {"replicas": 2}
    return {}


async def _gone(custom: client.CustomObjectsApi, group: str, plural: str, name: str) -> bool:
    for _ in range(100):
        try:
            await custom.get_namespaced_custom_object(group, "v1alpha1", NAMESPACE, plural, name)
        except ApiException as err:
            if err.status == 404:
                return True
            raise
        await asyncio.sleep(0.05)
    return False


# --- the tests ---------------------------------------------------------------------------


async def test_objects_created_under_arcs_crds_survive_the_switch(
    own_control_plane: ControlPlane, api: client.ApiClient, arc_crd_docs: list[dict[str, Any]]
) -> None:
    kubeconfig = own_control_plane.kubeconfig_path
    await install_crds(kubeconfig, arc_crd_docs)
    await _ensure_namespace(api)
    objects = arc_objects()
    await create_all(api, objects)

    await install_crds(kubeconfig, crds.load("all"))
    custom = client.CustomObjectsApi(api)
    for group, plural, body in objects:  # readable as stored, finalizers intact
        got = await custom.get_namespaced_custom_object(
            group, "v1alpha1", NAMESPACE, plural, body["metadata"]["name"]
        )
        assert got["metadata"].get("finalizers") == body["metadata"].get("finalizers")
    assert await update_and_delete_all(api, objects) == []


async def test_rollback_to_arcs_crds_strands_nothing(
    own_control_plane: ControlPlane, api: client.ApiClient, arc_crd_docs: list[dict[str, Any]]
) -> None:
    kubeconfig = own_control_plane.kubeconfig_path
    await install_crds(kubeconfig, crds.load("all"))
    await _ensure_namespace(api)
    objects = arc_objects()
    await create_all(api, objects)
    custom = client.CustomObjectsApi(api)
    # Status written by gharc's controller, with fields ARC's schema does not have.
    await custom.patch_namespaced_custom_object_status(
        c.GROUP,
        "v1alpha1",
        NAMESPACE,
        c.PLURAL_AUTOSCALING_RUNNER_SETS,
        LONG_NAME,
        {
            "status": {
                "phase": "Failed",
                "message": "InvalidName: too long",
                "observedGeneration": 1,
            }
        },
        _content_type=MERGE,
    )

    await install_crds(kubeconfig, arc_crd_docs)
    assert await update_and_delete_all(api, objects) == []
