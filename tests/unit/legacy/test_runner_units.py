"""Pure parts of the legacy controllers: CRD files, the pod builder, the sync's rules."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from gharc.api import crds
from gharc.api.generate import render_legacy_crd_files, stale_files
from gharc.api.legacy import constants as c
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.podowner import OwnerState, classify, skip_create
from gharc.controllers.legacy.resources import PodBuildError, new_runner_pod
from gharc.kube import objects

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def test_legacy_crd_yaml_on_disk_equals_generator_output() -> None:
    _, pod = crds.load_pod_template_schema()
    files = render_legacy_crd_files(pod)
    assert stale_files(files) == [], "run: python -m gharc.api.generate"
    kinds = {d["spec"]["names"]["kind"] for d in crds.load("legacy")}
    assert kinds == {"Runner", "RunnerReplicaSet", "RunnerDeployment", "RunnerSet",
                     "HorizontalRunnerAutoscaler"}  # fmt: skip


def test_every_printer_column_points_at_a_field_that_exists() -> None:
    for doc in crds.load("legacy"):
        version = doc["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        for col in version["additionalPrinterColumns"]:
            if col["jsonPath"].startswith(".metadata"):
                continue
            node: Any = schema
            for part in col["jsonPath"].strip(".").split("."):
                node = (node.get("properties") or {}).get(part)
                assert node is not None, (doc["spec"]["names"]["kind"], col["jsonPath"])


def _runner(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "Runner",
        "metadata": {"name": "r-1", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
        "spec": {"organization": "o", **spec},
        "status": {"registration": {"token": "TOKEN"}},
    }


def _env(pod: dict[str, Any], container: str = "runner") -> list[tuple[str, str]]:
    [ctr] = [x for x in pod["spec"]["containers"] if x["name"] == container]
    return [(e["name"], e.get("value", "")) for e in ctr.get("env", [])]


def test_the_runner_pod_env_follows_arcs_order_after_the_user_env() -> None:
    pod = new_runner_pod(
        _runner(env=[{"name": "MINE", "value": "1"}], labels=["a", "b"]), LegacyOptions()
    )
    names = [n for n, _ in _env(pod)]
    assert names == [
        "MINE", "RUNNER_ORG", "RUNNER_REPO", "RUNNER_ENTERPRISE", "RUNNER_LABELS",
        "RUNNER_GROUP", "DOCKER_ENABLED", "DOCKERD_IN_RUNNER", "GITHUB_URL", "RUNNER_WORKDIR",
        "RUNNER_EPHEMERAL", "RUNNER_STATUS_UPDATE_HOOK", "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT",
        "DOCKER_HOST", "RUNNER_NAME", "RUNNER_TOKEN",
    ]  # fmt: skip
    env = dict(_env(pod))
    assert env["RUNNER_LABELS"] == "a,b"
    assert env["RUNNER_EPHEMERAL"] == "true"
    assert env["GITHUB_URL"] == "https://github.com/"
    [ctr] = [x for x in pod["spec"]["containers"] if x["name"] == "runner"]
    [token] = [e for e in ctr["env"] if e["name"] == "RUNNER_TOKEN"]
    # Never a literal: whoever may read pods must not be able to register a runner.
    assert "value" not in token and '"TOKEN"' not in json.dumps(pod)
    assert token["valueFrom"] == {"secretKeyRef": {"name": "r-1-registration", "key": "token"}}
    docker = dict(_env(pod, "docker"))
    assert docker["DOCKER_GROUP_GID"] == "1001"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Runner"


def test_dockerd_within_the_runner_container_drops_the_sidecar_and_is_privileged() -> None:
    pod = new_runner_pod(
        _runner(dockerdWithinRunnerContainer=True, dockerMTU=1400), LegacyOptions()
    )
    assert [x["name"] for x in pod["spec"]["containers"]] == ["runner"]
    runner = pod["spec"]["containers"][0]
    assert runner["securityContext"]["privileged"] is True
    env = dict(_env(pod))
    assert env["DOCKERD_IN_RUNNER"] == "true" and env["MTU"] == "1400"
    assert "DOCKER_HOST" not in env


def test_kubernetes_mode_uses_an_ephemeral_work_volume_and_no_docker() -> None:
    wvct = {"accessModes": ["ReadWriteOnce"], "storageClassName": "s",
            "resources": {"requests": {"storage": "1Gi"}}}  # fmt: skip
    pod = new_runner_pod(
        _runner(containerMode="kubernetes", workVolumeClaimTemplate=wvct), LegacyOptions()
    )
    assert [x["name"] for x in pod["spec"]["containers"]] == ["runner"]
    [work] = [v for v in pod["spec"]["volumes"] if v["name"] == "work"]
    assert work["ephemeral"]["volumeClaimTemplate"]["spec"] == wvct
    assert dict(_env(pod))["ACTIONS_RUNNER_REQUIRE_SAME_NODE"] == "true"
    with pytest.raises(PodBuildError):
        new_runner_pod(
            _runner(
                containerMode="kubernetes",
                workVolumeClaimTemplate=wvct,
                volumes=[{"name": "work", "emptyDir": {}}],
            ),
            LegacyOptions(),
        )


def _pod(
    phase: str, *, ready_for: dt.timedelta | None = None, rid: bool = False, **extra: Any
) -> dict[str, Any]:
    conds = []
    if ready_for is not None:
        conds.append(
            {
                "type": "Ready",
                "status": "True",
                "lastTransitionTime": objects.format_time(NOW - ready_for),
            }
        )
    ann = {c.ANNOTATION_RUNNER_ID: "7"} if rid else {}
    return {
        "metadata": {"annotations": ann, **extra},
        "status": {"phase": phase, "conditions": conds},
    }


def test_pods_are_classified_like_arc() -> None:
    state = OwnerState({"metadata": {"name": "o"}}, [
        _pod("Succeeded"),
        _pod("Running", ready_for=11 * MIN),
        _pod("Running", ready_for=11 * MIN, rid=True),
        _pod("Running", ready_for=MIN),
        _pod("Pending"),
        _pod("Running", ready_for=MIN, deletionTimestamp="x"),  # no container status: stopped
    ])  # fmt: skip
    classify(state, NOW, 10 * MIN)
    got = (state.completed, state.reg_timeout, state.running, state.pending, state.terminating)
    assert got == (2, 1, 2, 1, 0)


@pytest.mark.parametrize(
    ("ephemeral", "effective", "last_sync", "now", "held"),
    [
        (True, NOW - MIN, NOW, NOW + MIN, True),  # created after the webhook scale: hold
        (True, NOW - MIN, NOW, NOW + 11 * MIN, False),  # safety timeout passed
        (True, NOW + MIN, NOW, NOW + MIN, False),  # a newer webhook scale: create at once
        (False, NOW - MIN, NOW, NOW + MIN, False),  # static runners are never held
        (True, None, NOW, NOW + MIN, False),
        (True, NOW - MIN, None, NOW + MIN, False),
    ],
)
def test_effective_time_holds_the_refill_only_until_the_autoscaler_had_its_chance(
    ephemeral: bool, effective: Any, last_sync: Any, now: dt.datetime, held: bool
) -> None:
    got = skip_create(
        ephemeral=ephemeral,
        effective_time=effective,
        last_sync_time=last_sync,
        now=now,
        delay=10 * MIN,
    )
    assert got is held
