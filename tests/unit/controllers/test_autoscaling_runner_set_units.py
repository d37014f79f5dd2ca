"""Pure parts of the AutoscalingRunnerSet reconciler (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import AutoscalingRunnerSetView
from gharc.controllers.scaleset import autoscalingrunnerset as m
from gharc.controllers.scaleset.options import ScaleSetOptions

OPTIONS = ScaleSetOptions(controller_namespace="arc-systems")


def ars(env: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "runner", "image": "r:1"}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_AUTOSCALING_RUNNER_SET,
        "metadata": {
            "name": "arc",
            "namespace": "runners",
            "uid": "u1",
            "labels": {"team": "a"},
            "annotations": {
                c.ANNOTATION_RUNNER_SCALE_SET_ID: "7",
                c.ANNOTATION_RUNNER_GROUP_NAME: "Default",
                c.ANNOTATION_RUNNER_SCALE_SET_NAME: "arc",
            },
        },
        "spec": {
            "githubConfigUrl": "https://github.com/octo-org",
            "githubConfigSecret": "gh",
            "template": {"spec": {"containers": [container]}},
            **spec,
        },
    }


@pytest.mark.parametrize(
    ("resource", "build", "allowed"),
    [
        ("0.11.1", "0.11.0", True),
        ("0.11.0", "0.10.0", False),
        ("dev", "0.11.0", False),
        ("0.1.0", "NA", False),
        ("abc", "abc", True),
        ("0.1.0", "dev", True),
        ("0.1.0", "canary-abc", True),
    ],
)
def test_version_gate(resource: str, build: str, allowed: bool) -> None:
    assert m.is_version_allowed(resource, build) is allowed


def test_scale_set_labels_are_deduplicated_and_start_with_the_name() -> None:
    labels = m.scale_set_labels(ars(runnerScaleSetLabels=["linux", "arc", "linux"]))
    assert [(x.name, x.type) for x in labels] == [("arc", "System"), ("linux", "System")]


def test_desired_runner_set() -> None:
    ers = m.desired_ephemeral_runner_set(ars(proxy={"noProxy": ["a"]}), OPTIONS)
    assert ers["metadata"]["name"] == "arc"
    assert ers["metadata"]["ownerReferences"][0]["controller"] is True
    assert (ers["spec"]["replicas"], ers["spec"]["patchID"]) == (0, 0)
    runner = ers["spec"]["ephemeralRunnerSpec"]
    assert runner["runnerScaleSetId"] == 7
    assert runner["proxy"] == {"noProxy": ["a"]}
    assert runner["spec"]["containers"][0]["image"] == "r:1"
    labels = ers["metadata"]["labels"]
    assert labels[c.LABEL_COMPONENT] == c.COMPONENT_RUNNER_SET
    assert labels[c.LABEL_GITHUB_ORGANIZATION] == "octo-org"
    assert labels["team"] == "a"
    assert ers["metadata"]["annotations"][c.ANNOTATION_RUNNER_GROUP_NAME] == "Default"


def _live(desired: dict[str, Any], **spec: Any) -> dict[str, Any]:
    live = {"metadata": dict(desired["metadata"]), "spec": {**desired["spec"], **spec}}
    live["spec"]["replicas"] = 3  # the listener's; never touched
    return live


def test_runner_set_patch_bumps_revision_once_for_a_template_change() -> None:
    live = _live(m.desired_ephemeral_runner_set(ars(), OPTIONS), actionableRevision=4)
    changed = m.desired_ephemeral_runner_set(ars(), OPTIONS)
    changed["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"] = "r:2"
    patch = m.runner_set_patch(live, changed)
    assert patch["spec"]["actionableRevision"] == 5
    assert "replicas" not in patch["spec"] and "patchID" not in patch["spec"]
    assert patch["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"] == "r:2"


def test_empty_env_and_foreign_keys_are_not_drift() -> None:
    desired = m.desired_ephemeral_runner_set(ars(), OPTIONS)
    live = _live(desired)
    live["spec"]["ephemeralRunnerSpec"] = {
        **desired["spec"]["ephemeralRunnerSpec"],
        "proxySecretRef": "set-by-the-ERS-reconciler",
    }
    live["metadata"]["labels"] = {**desired["metadata"]["labels"], "added": "by-someone"}
    assert m.runner_set_patch(live, m.desired_ephemeral_runner_set(ars(env=[]), OPTIONS)) == {}


def test_scale_set_id_annotation() -> None:
    assert AutoscalingRunnerSetView(ars()).scale_set_id == 7
    broken = ars()
    broken["metadata"]["annotations"][c.ANNOTATION_RUNNER_SCALE_SET_ID] = "x"
    assert AutoscalingRunnerSetView(broken).scale_set_id is None
