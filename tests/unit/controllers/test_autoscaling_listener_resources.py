"""Builders and comparison helpers of the AutoscalingListener (no cluster)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset import listenerresources as lr
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube import objects
from gharc.listener.restart_ladder import LISTENER_RESTART_LADDER, restart_delay

OPTIONS = ScaleSetOptions(controller_namespace="arc-systems", listener_image="gharc:1")


def ars(**spec: Any) -> dict[str, Any]:
    body = {
        "githubConfigUrl": "https://github.com/octo-org/octo-repo",
        "githubConfigSecret": "gh",
        "template": {"spec": {"containers": [{"name": "runner", "image": "r"}]}},
        **spec,
    }
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_AUTOSCALING_RUNNER_SET,
        "metadata": {
            "name": "arc",
            "namespace": "runners",
            "uid": "u-ars",
            "labels": {"team": "a", "example.com/skip": "x", c.LABEL_VERSION: "0.14.2"},
            "annotations": {c.ANNOTATION_RUNNER_SCALE_SET_ID: "42"},
        },
        "spec": body,
    }


def listener(**spec: Any) -> dict[str, Any]:
    out = lr.desired_listener(ars(**spec), OPTIONS)
    out["metadata"]["uid"] = "u-listener"
    return out


def test_semantic_equality_ignores_empty_lists_maps_and_none() -> None:
    a = {"containers": [{"name": "runner", "env": [], "resources": {}}], "nodeSelector": None}
    b = {"containers": [{"name": "runner"}]}
    assert objects.semantically_equal(a, b)
    assert not objects.semantically_equal(a, {"containers": [{"name": "runner", "image": "x"}]})
    assert not objects.semantically_equal({"replicas": 0}, {})  # zero is a value


def test_merge_patch_removes_keys_that_are_no_longer_desired() -> None:
    live = {"spec": {"nodeSelector": {"a": "b"}, "containers": [{"name": "r"}]}, "keep": 1}
    desired = {"spec": {"containers": [{"name": "r", "image": "x"}]}, "keep": 1}
    patch = lr.merge_patch_for(live, desired)
    assert patch == {"spec": {"nodeSelector": None, "containers": [{"name": "r", "image": "x"}]}}
    assert lr.merge_patch_for(desired, desired) == {}


def test_desired_listener_spec_labels_and_no_owner() -> None:
    options = ScaleSetOptions(
        controller_namespace="arc-systems",
        listener_image="gharc:1",
        exclude_label_propagation_prefixes=("example.com/",),
        listener_image_pull_secrets=("regcred",),
    )
    out = lr.desired_listener(ars(maxRunners=5), options)
    meta, spec = out["metadata"], out["spec"]
    assert meta["namespace"] == "arc-systems"
    assert meta["name"] == c.listener_name("arc", "runners", "", ars()["spec"]["githubConfigUrl"])
    assert "ownerReferences" not in meta
    assert meta["labels"]["team"] == "a" and "example.com/skip" not in meta["labels"]
    assert meta["labels"][c.LABEL_COMPONENT] == c.COMPONENT_LISTENER
    assert meta["labels"][c.LABEL_GITHUB_REPOSITORY] == "octo-repo"
    assert meta["labels"][c.LABEL_VERSION] == "0.14.2"
    assert spec["runnerScaleSetId"] == 42
    assert (spec["minRunners"], spec["maxRunners"]) == (0, 5)
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert "template" not in spec  # the runner template is not the listener's business
    unlimited = lr.desired_listener(ars(), OPTIONS)["spec"]["maxRunners"]
    assert unlimited == c.MAX_RUNNERS_UNLIMITED


def test_listener_needs_rebuild_only_for_real_changes() -> None:
    live = listener(maxRunners=3)
    live["metadata"]["labels"]["added-by-someone"] = "x"  # foreign keys are not drift
    live["status"] = {"phase": "Running"}
    assert not lr.listener_needs_rebuild(live, listener(maxRunners=3))
    assert lr.listener_needs_rebuild(live, listener(maxRunners=4))
    assert lr.listener_needs_rebuild(
        live,
        listener(maxRunners=3, listenerTemplate={"spec": {}})
        | {"spec": {**listener(maxRunners=3)["spec"], "githubConfigSecret": "other"}},
    )


def test_role_only_allows_patching_its_own_runner_set_and_runners() -> None:
    role = lr.listener_role(listener(), OPTIONS)
    assert role["metadata"]["namespace"] == "runners"
    assert role["rules"] == c.listener_role_rules(["arc"])
    assert role["rules"][0]["resourceNames"] == ["arc"]
    # read access only to its own EphemeralRunnerSet (it watches the cleanup marker)
    assert role["rules"][0]["verbs"] == ["get", "list", "watch", "patch"]
    assert all(r["verbs"] == ["patch"] for r in role["rules"][1:])
    labels = role["metadata"]["labels"]
    assert labels[c.LABEL_LISTENER_NAME] == listener()["metadata"]["name"]
    assert labels[c.LABEL_LISTENER_NAMESPACE] == "arc-systems"
    binding = lr.listener_role_binding(listener(), OPTIONS)
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "namespace": "arc-systems",
            "name": listener()["metadata"]["name"],
        }
    ]


def test_config_json_has_arcs_keys() -> None:
    cfg = lr.listener_config(
        listener(minRunners=1, maxRunners=4), {"github_token": "t"}, OPTIONS, server_root_ca="PEM"
    )
    assert cfg == {
        "configure_url": "https://github.com/octo-org/octo-repo",
        "github_token": "t",
        "ephemeral_runner_set_namespace": "runners",
        "ephemeral_runner_set_name": "arc",
        "min_runners": 1,
        "max_runners": 4,
        "runner_scale_set_id": 42,
        "runner_scale_set_name": "arc",
        "server_root_ca": "PEM",
        "log_level": "debug",
        "log_format": "text",
        "metrics_addr": ":8080",
        "metrics_endpoint": "/metrics",
    }
    app = lr.listener_config(
        listener(),
        {"github_app_id": "1", "github_app_installation_id": "2", "github_app_private_key": "K"},
        OPTIONS,
    )
    assert (app["github_app_id"], app["github_app_installation_id"]) == ("1", 2)
    assert "github_token" not in app
    secret = lr.listener_config_secret(listener(), cfg, OPTIONS)
    assert secret["metadata"]["name"] == listener()["metadata"]["name"] + "-config"
    decoded = json.loads(base64.b64decode(secret["data"]["config.json"]))
    assert decoded == cfg


def test_listener_pod_defaults() -> None:
    pod = lr.listener_pod(listener(proxy={"http": {"url": "http://p:3128"}}), OPTIONS)
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["terminationGracePeriodSeconds"] == 60
    (container,) = spec["containers"]
    assert container["name"] == "listener"
    assert container["command"] == ["gharc", "listener"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    env = {e["name"]: e for e in container["env"]}
    assert env["LISTENER_CONFIG_PATH"]["value"] == "/etc/gha-listener/config.json"
    assert env["http_proxy"]["valueFrom"]["secretKeyRef"]["key"] == "http_proxy"
    assert "https_proxy" not in env
    assert spec["volumes"][0]["secret"]["secretName"].endswith("-config")
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-listener"


@pytest.mark.parametrize(
    ("node_selector", "expected"),
    [(None, {"kubernetes.io/os": "linux"}), ({"x": "y"}, {"x": "y"}), ({}, None)],
)
def test_template_node_selector(node_selector: Any, expected: Any) -> None:
    tspec: dict[str, Any] = {"tolerations": [{"key": "k", "operator": "Exists"}]}
    if node_selector is not None:
        tspec["nodeSelector"] = node_selector
    pod = lr.listener_pod(listener(listenerTemplate={"spec": tspec}), OPTIONS)
    assert pod["spec"].get("nodeSelector") == expected
    assert pod["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]


def test_unrestricted_template_merges_listener_container_and_appends_sidecars() -> None:
    """ARC's merge, kept behind ``--allow-unrestricted-listener-template``."""
    template = {
        "metadata": {"labels": {"extra": "1", c.LABEL_COMPONENT: "ignored"}},
        "spec": {
            "containers": [
                {
                    "name": "listener",
                    "imagePullPolicy": "Always",
                    "env": [{"name": "A", "value": "1"}],
                    "securityContext": {"runAsUser": 1000},
                },
                {"name": "sidecar", "image": "busybox"},
            ],
            "securityContext": {"runAsNonRoot": True},
        },
    }
    unrestricted = ScaleSetOptions(
        controller_namespace="arc-systems",
        listener_image="gharc:1",
        allow_unrestricted_listener_template=True,
    )
    pod = lr.listener_pod(listener(listenerTemplate=template), unrestricted)
    first, sidecar = pod["spec"]["containers"]
    assert first["image"] == "gharc:1" and first["imagePullPolicy"] == "Always"
    assert [e["name"] for e in first["env"]] == ["LISTENER_CONFIG_PATH", "A"]
    assert first["securityContext"] == {"runAsUser": 1000}
    assert sidecar["name"] == "sidecar"
    assert pod["spec"]["securityContext"] == {"runAsNonRoot": True}
    assert pod["metadata"]["labels"]["extra"] == "1"
    assert pod["metadata"]["labels"][c.LABEL_COMPONENT] == c.COMPONENT_LISTENER  # ours win
    assert "terminationGracePeriodSeconds" not in pod["spec"]  # ARC's sharp edge, kept


def test_backoff_ladder_is_capped() -> None:
    ladder = LISTENER_RESTART_LADDER
    assert [restart_delay(n, ladder) for n in range(9)] == [
        0.0,
        5.0,
        10.0,
        20.0,
        40.0,
        80.0,
        ladder[-1],
        ladder[-1],
        ladder[-1],
    ]


def test_schedule_and_burst_travel_from_the_scale_set_to_the_listener_config() -> None:
    from gharc.listener.config import ListenerConfig

    window = {
        "startTime": "2026-01-05T08:00:00",
        "endTime": "2026-01-05T18:00:00",
        "timeZone": "Europe/Berlin",
        "minRunners": 4,
        "recurrenceRule": {"frequency": "Daily"},
    }
    source = ars(scheduledOverrides=[window], burst={"runners": 3, "decaySeconds": 120})
    source["metadata"].setdefault("annotations", {})[c.ANNOTATION_RUNNER_SCALE_SET_ID] = "42"
    desired = lr.desired_listener(source, OPTIONS)
    assert desired["spec"]["scheduledOverrides"] == [window]
    cfg = lr.listener_config(desired, {"github_token": "t"}, OPTIONS)
    assert cfg["scheduled_overrides"] == [window]
    assert (cfg["burst_runners"], cfg["burst_decay_seconds"]) == (3, 120.0)
    parsed = ListenerConfig.model_validate(cfg)
    parsed.validate_semantics()
    assert parsed.burst_runners == 3


@pytest.mark.parametrize(("given", "want"), [({}, c.MAX_RUNNERS_UNLIMITED), ({"maxRunners": 3}, 3)])
def test_unset_max_runners_means_unlimited_everywhere_it_is_read(
    given: dict[str, Any], want: int
) -> None:
    from gharc.api.scaleset.models import AutoscalingRunnerSetSpec
    from gharc.listener.config import ListenerConfig

    desired = lr.desired_listener(ars(**given), OPTIONS)
    assert desired["spec"]["maxRunners"] == want
    assert (
        AutoscalingRunnerSetSpec.model_validate(ars(**given)["spec"]).effective_max_runners == want
    )
    cfg = lr.listener_config(desired, {"github_token": "t"}, OPTIONS)
    assert cfg["max_runners"] == want
    # A listener spec written without maxRunners (by hand, or by an older controller).
    bare = {**desired, "spec": {k: v for k, v in desired["spec"].items() if k != "maxRunners"}}
    assert lr.listener_config(bare, {"github_token": "t"}, OPTIONS)["max_runners"] == (
        c.MAX_RUNNERS_UNLIMITED
    )
    listener_cfg = {k: v for k, v in cfg.items() if k != "max_runners" or given}
    assert ListenerConfig.model_validate(listener_cfg).max_runners == want
    assert ListenerConfig.model_validate({**cfg, "max_runners": None}).max_runners == (
        c.MAX_RUNNERS_UNLIMITED
    )


@pytest.mark.parametrize("level", ["debug", "info", "warn", "error", "bogus"])
def test_the_listener_log_level_comes_from_the_one_table(level: str) -> None:
    from gharc.kube.logging import LOG_LEVELS

    cfg = lr.listener_config(
        lr.desired_listener(ars(), OPTIONS),
        {"github_token": "t"},
        ScaleSetOptions(
            controller_namespace="arc-systems", listener_image="gharc:1", log_level=level
        ),
    )
    assert cfg["log_level"] == (level if level in LOG_LEVELS else c.DEFAULT_LISTENER_LOG_LEVEL)


def test_metric_bounds_travel_from_the_flags_to_the_listener_metrics() -> None:
    """The controller's --listener-metrics-max-* reach a listener of either mode through its
    config.json; the defaults are not written, so an unchanged config keeps its fingerprint."""
    import dataclasses

    from gharc.controllers.scaleset.inprocesslisteners import hosted_metrics

    plain = lr.listener_config(listener(), {"github_token": "t"}, OPTIONS)
    assert not any(k.startswith("metrics_max_") for k in plain)
    options = dataclasses.replace(
        OPTIONS,
        listener_metrics_max_buckets=8,
        listener_metrics_max_label_values=5,
        listener_metrics_max_series=500,
    )
    cfg = lr.listener_config(listener(), {"github_token": "t"}, options)
    assert (
        cfg["metrics_max_buckets"],
        cfg["metrics_max_label_values"],
        cfg["metrics_max_series"],
    ) == (8, 5, 500)
    limits = hosted_metrics(cfg).limits
    assert (limits.buckets, limits.label_values, limits.series) == (8, 5, 500)
