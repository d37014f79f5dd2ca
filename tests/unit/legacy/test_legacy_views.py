"""The legacy views: ARC's defaults (one replica, ephemeral runners with a docker sidecar,
no upper bound without maxReplicas) and bad values read as those defaults."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.api.legacy import constants as c
from gharc.api.legacy.views import HorizontalRunnerAutoscalerView, ReplicatedView, RunnerConfigView


def test_runner_config_defaults() -> None:
    view = RunnerConfigView({})
    assert view.ephemeral and view.docker_enabled
    assert not view.dockerd_within_runner_container and not view.kubernetes_mode


@pytest.mark.parametrize(
    ("config", "docker", "dind"),
    [
        ({"dockerEnabled": False}, False, False),
        ({"dockerdWithinRunnerContainer": True}, True, True),
        # kubernetes mode: no docker at all, whatever else is set
        (
            {
                "containerMode": c.CONTAINER_MODE_KUBERNETES,
                "dockerEnabled": True,
                "dockerdWithinRunnerContainer": True,
            },
            False,
            False,
        ),
    ],
)
def test_runner_config_docker(config: dict[str, Any], docker: bool, dind: bool) -> None:
    view = RunnerConfigView(config)
    assert (view.docker_enabled, view.dockerd_within_runner_container) == (docker, dind)


def test_runner_config_ephemeral_only_when_not_turned_off() -> None:
    assert RunnerConfigView({"ephemeral": None}).ephemeral
    assert RunnerConfigView({"ephemeral": True}).ephemeral
    assert not RunnerConfigView({"ephemeral": False}).ephemeral


def test_replicated_defaults_and_bad_values() -> None:
    assert ReplicatedView({}).replicas == 1  # unset is one replica, not zero
    assert ReplicatedView({"spec": {"replicas": 0}}).replicas == 0
    assert ReplicatedView({"spec": {"replicas": "3"}}).replicas == 3
    assert ReplicatedView({"spec": {"replicas": "many"}}).replicas == 1
    view = ReplicatedView({"status": {"readyReplicas": 2, "replicas": None, "bad": "x"}})
    assert view.count("readyReplicas") == 2
    assert view.count("replicas") == 0 and view.count("missing") == 0 and view.count("bad") == 0


def test_hra_bounds_and_last_decision() -> None:
    view = HorizontalRunnerAutoscalerView({})
    assert view.min_replicas is None and view.max_replicas is None
    assert view.desired_replicas is None
    hra = {
        "spec": {"minReplicas": 0, "maxReplicas": "5"},
        "status": {"desiredReplicas": 3},
    }
    view = HorizontalRunnerAutoscalerView(hra)
    assert (view.min_replicas, view.max_replicas, view.desired_replicas) == (0, 5, 3)
    bad = HorizontalRunnerAutoscalerView({"spec": {"maxReplicas": "lots"}})
    assert bad.max_replicas is None  # read as unset, reported as missing by the controller
