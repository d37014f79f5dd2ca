"""``gharc controller`` flags and environment (no cluster)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gharc.controllers.main import parse_args, scaleset_options
from gharc.settings.declare import UsageError


def test_missing_controller_namespace_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match="CONTROLLER_MANAGER_POD_NAMESPACE is not set"):
        parse_args([], environ={})


def test_command_exits_non_zero_with_the_reason() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CONTROLLER_MANAGER_POD_NAMESPACE"}
    proc = subprocess.run(
        [sys.executable, "-m", "gharc", "controller", "--auto-scaling-runner-set-only"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "CONTROLLER_MANAGER_POD_NAMESPACE is not set" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_arc_flags_and_env() -> None:
    args = parse_args(
        [
            "--auto-scaling-runner-set-only",
            "--metrics-addr=:9090",
            "--health-probe-bind-address=:8081",
            "--enable-leader-election",
            "--leader-election-id=my-arc",
            "--log-level=info",
            "--log-format=json",
            "--watch-single-namespace=runners",
            "--exclude-label-propagation-prefix=argocd.argoproj.io/",
            "--exclude-label-propagation-prefix=example.com/",
            "--auto-scaler-image-pull-secrets=a,b",
            "--auto-scaler-image-pull-secrets=c",
            "--runner-max-concurrent-reconciles=4",
            "--listener-metrics-addr=0",
            "--listener-metrics-endpoint=/m",
            "--k8s-client-rate-limiter-qps=50",
            "--k8s-client-rate-limiter-burst=60",
            "--update-strategy=eventual",  # ARC chart flags are accepted
        ],
        environ={
            "CONTROLLER_MANAGER_POD_NAMESPACE": "arc-systems",
            "CONTROLLER_MANAGER_CONTAINER_IMAGE": "ghcr.io/me/gharc:1",
            "LISTENER_ENTRYPOINT": "/bin/gharc listener",
        },
    )
    assert args.leader_election_namespace == "arc-systems"
    assert args.watch_namespace == "runners"
    assert args.auto_scaler_image_pull_secrets == ("a", "b", "c")
    opts = scaleset_options(args)
    assert opts.controller_namespace == "arc-systems"
    assert opts.listener_image == "ghcr.io/me/gharc:1"
    assert opts.listener_command == ("/bin/gharc", "listener")
    assert opts.exclude_label_propagation_prefixes == ("argocd.argoproj.io/", "example.com/")
    assert opts.listener_metrics_addr == "0"
    assert (opts.log_level, opts.log_format) == ("info", "json")
    assert opts.runner_max_concurrent_reconciles == 4
    assert opts.build_version == "dev"


def test_metrics_are_off_unless_an_address_is_given() -> None:
    """As ARC's chart: nothing listens on the pod's address for metrics by default."""
    from gharc.controllers.main import ControllerArgs, parse_args

    env = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-systems"}
    args = parse_args(["--auto-scaling-runner-set-only"], env)
    assert args.metrics_addr == "0" and args.health_probe_bind_address == ""
    assert ControllerArgs(controller_namespace="x").metrics_addr == "0"


def test_shards_default_to_one_and_must_be_positive() -> None:
    env = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc"}
    assert parse_args(["--auto-scaling-runner-set-only"], environ=env).shards == 1
    assert parse_args(["--auto-scaling-runner-set-only", "--shards=8"], environ=env).shards == 8
    with pytest.raises((UsageError, SystemExit)):
        parse_args(["--auto-scaling-runner-set-only", "--shards=0"], environ=env)


def test_shards_in_legacy_mode_is_a_clear_error() -> None:
    env = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc", "GITHUB_TOKEN": "t"}
    with pytest.raises(UsageError, match="--shards applies to scale set mode"):
        parse_args(["--shards=4"], environ=env)
