"""Config parsing: ARC's keys, validation errors that name the key, env overrides, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gharc.listener.config import ConfigError, backoff_schedule, load_config

VALID: dict[str, Any] = {
    "configure_url": "https://github.com/acme",
    "github_token": "ghp_secret",
    "ephemeral_runner_set_namespace": "arc-runners",
    "ephemeral_runner_set_name": "set-abc12",
    "min_runners": 1,
    "max_runners": 5,
    "runner_scale_set_id": 7,
    "runner_scale_set_name": "set",
    "log_level": "info",
    "log_format": "json",
    "metrics_addr": ":8080",
    "metrics_endpoint": "/metrics",
    "metrics": None,
}


def write(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_reads_arc_keys(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, VALID), env={})
    assert cfg.runner_scale_set_id == 7
    assert (cfg.min_runners, cfg.max_runners) == (1, 5)
    assert cfg.metrics_enabled and cfg.metrics_host_port == ("0.0.0.0", 8080)
    assert cfg.log_format == "json"
    assert "ghp_secret" not in repr(cfg)


def test_unknown_keys_are_ignored_like_arc(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {**VALID, "something_new": 1}), env={})
    assert cfg.runner_scale_set_id == 7


def test_github_app_config(tmp_path: Path) -> None:
    data = {**VALID, "github_token": ""}
    data.update(
        github_app_id=123, github_app_installation_id=456, github_app_private_key="-----BEGIN"
    )
    cfg = load_config(write(tmp_path, data), env={})
    assert cfg.github_app_id == "123"


def test_github_app_client_id_in_github_app_id(tmp_path: Path) -> None:
    # ARC takes an App's client id (GitHub's recommended JWT issuer) in github_app_id.
    data = {**VALID, "github_token": ""}
    data.update(
        github_app_id="Iv23liAbCdEf012345",
        github_app_installation_id=456,
        github_app_private_key="-----BEGIN",
    )
    cfg = load_config(write(tmp_path, data), env={})
    assert cfg.github_app_id == "Iv23liAbCdEf012345"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"configure_url": ""}, "configure_url"),
        ({"ephemeral_runner_set_namespace": ""}, "ephemeral_runner_set_namespace"),
        ({"ephemeral_runner_set_name": ""}, "ephemeral_runner_set_name"),
        ({"runner_scale_set_id": 0}, "runner_scale_set_id"),
        ({"min_runners": 6}, "min_runners"),
        ({"min_runners": -1}, "min_runners"),
        ({"max_runners": "many"}, "max_runners"),
        ({"github_token": ""}, "github_token"),
        ({"github_app_id": "1"}, "github_token and github_app_"),
        ({"log_level": "loud"}, "log_level"),
        ({"log_format": "xml"}, "log_format"),
        ({"metrics_addr": "localhost:http"}, "metrics_addr"),
        ({"vault_type": "azure_key_vault", "vault_lookup_key": "k"}, "vault_type"),
        ({"metrics": {"histograms": {"x": {"buckets": [2, 1]}}}}, "metrics.histograms.x.buckets"),
    ],
)
def test_validation_errors_name_the_key(tmp_path: Path, change: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, {**VALID, **change}), env={})
    message = str(info.value)
    assert key in message
    assert "\n" not in message
    assert "ghp_secret" not in message


def test_incomplete_app_credentials_list_missing_keys(tmp_path: Path) -> None:
    data = {**VALID, "github_token": "", "github_app_id": "1"}
    with pytest.raises(ConfigError, match="github_app_installation_id, github_app_private_key"):
        load_config(write(tmp_path, data), env={})


def test_env_overrides_win(tmp_path: Path) -> None:
    env = {
        "GHARC_LISTENER_MAX_RUNNERS": "9",
        "GHARC_LISTENER_GITHUB_TOKEN": "from-env",
        "GHARC_LISTENER_METRICS_ADDR": "0",
        "GHARC_LISTENER_METRICS": '{"gauges": {"gha_assigned_jobs": {"labels": ["name"]}}}',
    }
    cfg = load_config(write(tmp_path, VALID), env=env)
    assert cfg.max_runners == 9
    assert cfg.github_token == "from-env"
    assert not cfg.metrics_enabled
    assert cfg.metrics is not None and list(cfg.metrics.gauges) == ["gha_assigned_jobs"]


def test_env_only_when_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gharc.listener.config.DEFAULT_CONFIG_PATH", str(tmp_path / "absent"))
    env = {f"GHARC_LISTENER_{k.upper()}": str(v) for k, v in VALID.items() if v is not None}
    cfg = load_config(env=env)
    assert cfg.ephemeral_runner_set_name == "set-abc12"


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(env={"LISTENER_CONFIG_PATH": str(tmp_path / "nope.json")})


def test_bad_json_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(str(path), env={})


def test_conflict_backoff_schedule_defaults_is_a_few_minutes() -> None:
    waits = backoff_schedule(2.0, 30.0, 10)
    assert waits == [2, 4, 8, 16, 30, 30, 30, 30, 30]
    assert 120 < sum(waits) < 300


def test_invalid_config_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, {**VALID, "runner_scale_set_id": 0})
    proc = subprocess.run(
        [sys.executable, "-m", "gharc.listener"],
        env={"LISTENER_CONFIG_PATH": path, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "runner_scale_set_id" in lines[0], proc.stderr
