"""The scale-set views: each field's default, and a bad value read as that default."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import (
    ANNOTATION_ACTIONABLE_REVISION,
    AutoscalingListenerView,
    AutoscalingRunnerSetView,
    EphemeralRunnerSetView,
    EphemeralRunnerView,
)


def obj(
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": "n", "namespace": "ns", **metadata}}
    if spec is not None:
        out["spec"] = spec
    if status is not None:
        out["status"] = status
    return out


def test_views_are_frozen_and_do_not_copy() -> None:
    er = obj()
    view = EphemeralRunnerView(er)
    assert view.obj is er
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.obj = {}  # type: ignore[misc]
    assert (view.name, view.namespace, view.uid) == ("n", "ns", "")


def test_ephemeral_runner_defaults() -> None:
    view = EphemeralRunnerView({})
    assert view.phase == "" and not view.is_running and not view.is_done
    assert not view.ready and view.job_id == "" and not view.has_job
    assert view.reason == "" and dict(view.failures) == {}
    assert view.runner_id == 0 and view.scale_set_id == 0 and view.revision == 0


def test_ephemeral_runner_state() -> None:
    er = obj(
        {"runnerScaleSetId": 3},
        {"phase": c.PHASE_RUNNING, "ready": True, "jobId": "j1", "runnerId": 11},
        annotations={ANNOTATION_ACTIONABLE_REVISION: "2"},
    )
    view = EphemeralRunnerView(er)
    assert view.is_running and not view.is_done and view.ready
    assert view.has_job and view.job_id == "j1"
    assert (view.runner_id, view.scale_set_id, view.revision) == (11, 3, 2)
    for phase in (c.PHASE_SUCCEEDED, c.PHASE_FAILED, c.PHASE_OUTDATED):
        assert EphemeralRunnerView(obj(status={"phase": phase})).is_done


def test_ephemeral_runner_bad_values() -> None:
    er = obj(
        {"runnerScaleSetId": "x"},
        {"runnerId": "not-a-number", "failures": "not-a-map"},
        annotations={ANNOTATION_ACTIONABLE_REVISION: "v2"},
    )
    view = EphemeralRunnerView(er)
    assert (view.runner_id, view.scale_set_id, view.revision) == (0, 0, 0)
    assert dict(view.failures) == {}


def test_ephemeral_runner_set_defaults() -> None:
    view = EphemeralRunnerSetView(obj())
    assert (view.replicas, view.patch_id, view.actionable_revision) == (0, 0, 0)
    assert view.applied_revision == 0 and not view.revision_pending
    assert view.cleanup_marker is None and view.phase == ""
    assert dict(view.runner_spec) == {} and view.scale_set_id == 0
    assert view.github_config_url == ""
    # without the scale set labels, the set's own name and namespace
    assert (view.scale_set_name, view.scale_set_namespace) == ("n", "ns")


def test_ephemeral_runner_set_fields() -> None:
    ers = obj(
        {
            "replicas": 4,
            "patchID": 9,
            "actionableRevision": 3,
            "ephemeralRunnerSpec": {"runnerScaleSetId": 5, "githubConfigUrl": "https://g/o"},
        },
        {"appliedActionableRevision": 2, "finishedRunnerCleanupPatchID": 8, "phase": "Running"},
        labels={c.LABEL_SCALE_SET_NAME: "arc", c.LABEL_SCALE_SET_NAMESPACE: "runners"},
    )
    view = EphemeralRunnerSetView(ers)
    assert (view.replicas, view.patch_id, view.actionable_revision) == (4, 9, 3)
    assert view.applied_revision == 2 and view.revision_pending
    assert view.cleanup_marker == 8 and view.phase == "Running"
    assert view.scale_set_id == 5 and view.github_config_url == "https://g/o"
    assert (view.scale_set_name, view.scale_set_namespace) == ("arc", "runners")


def test_ephemeral_runner_set_bad_values() -> None:
    ers = obj(
        {"replicas": "many", "patchID": None, "ephemeralRunnerSpec": None},
        {"finishedRunnerCleanupPatchID": "x"},
    )
    view = EphemeralRunnerSetView(ers)
    assert (view.replicas, view.patch_id, view.scale_set_id) == (0, 0, 0)
    assert view.cleanup_marker is None
    # a marker of 0 is a marker, not "none"
    assert (
        EphemeralRunnerSetView(obj(status={"finishedRunnerCleanupPatchID": 0})).cleanup_marker == 0
    )


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [("42", 42), (None, None), ("", None), ("abc", None), ("0", None), ("-3", None)],
)
def test_autoscaling_runner_set_scale_set_id(annotation: str | None, expected: int | None) -> None:
    annotations = {} if annotation is None else {c.ANNOTATION_RUNNER_SCALE_SET_ID: annotation}
    assert AutoscalingRunnerSetView(obj(annotations=annotations)).scale_set_id == expected


def test_autoscaling_runner_set_defaults() -> None:
    view = AutoscalingRunnerSetView(obj({}))
    assert view.scale_set_name == "n" and view.runner_group == ""
    assert view.github_config_url == "" and view.min_runners == 0
    named = AutoscalingRunnerSetView(
        obj({"runnerScaleSetName": "big", "runnerGroup": "g", "minRunners": 2})
    )
    assert (named.scale_set_name, named.runner_group, named.min_runners) == ("big", "g", 2)


def test_autoscaling_listener_defaults_and_values() -> None:
    view = AutoscalingListenerView(obj({"minRunners": None}, {"failures": "x"}))
    assert view.scale_set_id == 0 and view.min_runners == 0 and view.failures == 0
    assert view.max_runners == c.MAX_RUNNERS_UNLIMITED
    assert (view.ars_namespace, view.ars_name, view.ers_name, view.github_config_url) == (
        "",
        "",
        "",
        "",
    )
    view = AutoscalingListenerView(
        obj(
            {
                "runnerScaleSetId": 7,
                "minRunners": 1,
                "maxRunners": 0,
                "autoscalingRunnerSetNamespace": "runners",
                "autoscalingRunnerSetName": "arc",
                "ephemeralRunnerSetName": "arc-ers",
                "githubConfigUrl": "https://g/o",
            }
        )
    )
    assert (view.scale_set_id, view.min_runners, view.max_runners) == (7, 1, 0)
    assert (view.ars_namespace, view.ars_name, view.ers_name) == ("runners", "arc", "arc-ers")
    assert view.github_config_url == "https://g/o"
    assert AutoscalingListenerView(obj(status={"failures": 3})).failures == 3
