"""``gharc controller`` in legacy mode: flags, environment and their errors (no cluster)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gharc.controllers.main import (
    legacy_credentials,
    legacy_options,
    legacy_server_url,
    parse_args,
)
from gharc.github.auth import GitHubApp, PersonalAccessToken
from gharc.settings.declare import UsageError

TOKEN = {"GITHUB_TOKEN": "ghp_example"}


def _pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def test_without_the_scale_set_flag_the_controller_runs_legacy_mode_without_a_namespace() -> None:
    args = parse_args([], environ=TOKEN)
    assert args.legacy and not args.auto_scaling_runner_set_only
    assert args.controller_namespace == ""  # not needed in legacy mode
    assert isinstance(legacy_credentials(args), PersonalAccessToken)
    scaleset = parse_args(
        ["--auto-scaling-runner-set-only"], environ={"CONTROLLER_MANAGER_POD_NAMESPACE": "arc"}
    )
    assert not scaleset.legacy


def test_scale_set_mode_still_requires_its_namespace_even_with_github_credentials() -> None:
    with pytest.raises(UsageError, match="CONTROLLER_MANAGER_POD_NAMESPACE is not set"):
        parse_args(["--auto-scaling-runner-set-only"], environ=TOKEN)


def test_no_credentials_is_a_clear_error_naming_flags_env_and_the_scale_set_flag() -> None:
    with pytest.raises(UsageError) as err:
        parse_args([], environ={"CONTROLLER_MANAGER_POD_NAMESPACE": "arc"})
    text = str(err.value)
    assert "legacy mode needs GitHub credentials" in text
    for name in ("--github-token", "GITHUB_TOKEN", "--github-app-id", "GITHUB_APP_PRIVATE_KEY"):
        assert name in text
    with pytest.raises(UsageError, match="--auto-scaling-runner-set-only"):
        parse_args([], environ={})  # nothing at all: maybe scale set mode was meant


def test_an_incomplete_app_triple_names_what_is_missing() -> None:
    with pytest.raises(UsageError, match="incomplete GitHub App credentials") as err:
        parse_args(["--github-app-id=123"], environ={"GITHUB_APP_INSTALLATION_ID": "456"})
    assert "--github-app-private-key" in str(err.value)
    assert "--github-app-installation-id" not in str(err.value).split("not set")[0]


def test_app_key_from_a_file_or_pem_text_and_a_token_wins(tmp_path: Path) -> None:
    pem = _pem()
    key_file = tmp_path / "key.pem"
    key_file.write_text(pem)
    app_flags = ["--github-app-id=123", "--github-app-installation-id=456"]
    from_file = parse_args([*app_flags, f"--github-app-private-key={key_file}"], environ={})
    app = legacy_credentials(from_file)
    assert isinstance(app, GitHubApp) and app.installation_id == 456
    from_env = parse_args(app_flags, environ={"GITHUB_APP_PRIVATE_KEY": pem})
    assert legacy_credentials(from_env).identity == app.identity
    both = parse_args([*app_flags, "--github-token=ghp_flag"], environ={})
    assert isinstance(legacy_credentials(both), PersonalAccessToken)  # ARC's precedence
    with pytest.raises(UsageError, match="neither an existing file nor PEM text"):
        parse_args([*app_flags, f"--github-app-private-key={tmp_path / 'nope.pem'}"], {})


def test_flags_win_over_env_and_urls_become_the_server_url() -> None:
    args = parse_args(["--github-token=ghp_flag"], environ={"GITHUB_TOKEN": "ghp_env"})
    assert args.github_token == "ghp_flag"
    assert legacy_server_url(args) == "https://github.com"  # default API URL, web host
    ghes = parse_args([], environ={**TOKEN, "GITHUB_URL": "https://ghes.example.com/api/v3/"})
    assert legacy_server_url(ghes) == "https://ghes.example.com"
    ent = parse_args(
        ["--github-url=https://ignored.example.com/api/v3/"],
        environ={**TOKEN, "GITHUB_ENTERPRISE_URL": "https://ghe.example.com/"},
    )
    assert legacy_server_url(ent) == "https://ghe.example.com"
    with pytest.raises(UsageError, match="--github-url 'ftp://x' is not an http"):
        parse_args(["--github-url=ftp://x"], environ=TOKEN)


def test_arc_legacy_flags_reach_the_legacy_options() -> None:
    args = parse_args(
        [
            "--runner-image=me/runner:1",
            "--runner-image-pull-secret=a",
            "--runner-image-pull-secret=b",
            "--docker-image=docker:25-dind",
            "--docker-gid=121",
            "--docker-registry-mirror=https://mirror.example.com",
            "--runner-status-update-hook",
            "--common-runner-labels=linux,x64",
            "--common-runner-labels=gpu",
            "--default-scale-down-delay=5m30s",
            "--sync-period=30s",
            "--github-url=http://127.0.0.1:8080",
            "--runner-github-url=https://runners.example.com",
            "--watch-namespace=runners",
        ],
        environ=TOKEN,
    )
    assert (args.default_scale_down_delay, args.sync_period) == (330.0, 30.0)
    opts = legacy_options(args)
    assert opts.github_url == "http://127.0.0.1:8080"
    assert opts.runner_base_url == "https://runners.example.com/"
    assert opts.runner_image == "me/runner:1"
    assert opts.runner_image_pull_secrets == ("a", "b")
    assert (opts.docker_image, opts.docker_gid) == ("docker:25-dind", "121")
    assert opts.docker_registry_mirror == "https://mirror.example.com"
    assert opts.runner_status_update_hook is True
    assert opts.common_runner_labels == ("linux", "x64", "gpu")
    assert args.watch_namespace == "runners"


def test_defaults_are_arcs() -> None:
    opts = legacy_options(parse_args([], environ=TOKEN))
    assert opts.runner_image == "summerwind/actions-runner:latest"
    assert (opts.docker_image, opts.docker_gid) == ("docker:dind", "1001")
    assert opts.runner_base_url == "https://github.com/"
    args = parse_args([], environ=TOKEN)
    assert (args.sync_period, args.default_scale_down_delay) == (60.0, 600.0)


def test_the_statefulset_controller_is_never_emulated() -> None:
    """RunnerSet pods come from Kubernetes' StatefulSet controller and owned objects go with
    the garbage collector; the former test-cluster flag that stood in for both is gone, so
    a deployment still passing it fails at start instead of silently differing."""
    with pytest.raises((UsageError, SystemExit)):
        parse_args(["--emulate-statefulset-controller"], environ=TOKEN)
    assert not hasattr(
        legacy_options(parse_args([], environ=TOKEN)), "emulate_statefulset_controller"
    )


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--sync-period=soon", "--sync-period 'soon' is not a duration"),
        ("--sync-period=0s", "--sync-period must be positive"),
        ("--default-scale-down-delay=-1m", "must not be negative"),
        ("--enable-leader-election", "--leader-election-namespace"),
    ],
)
def test_bad_legacy_values_are_usage_errors(flag: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_args([flag], environ=TOKEN)


def test_leader_election_in_legacy_mode_defaults_to_the_pod_namespace() -> None:
    args = parse_args(
        ["--enable-leader-election"],
        environ={**TOKEN, "CONTROLLER_MANAGER_POD_NAMESPACE": "arc-system"},
    )
    assert args.leader_election_namespace == "arc-system"


def test_the_command_reports_missing_credentials_and_exits_2() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    proc = subprocess.run(
        [sys.executable, "-m", "gharc", "controller"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "legacy mode needs GitHub credentials" in proc.stderr
    assert "Traceback" not in proc.stderr
