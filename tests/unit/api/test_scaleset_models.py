"""Typed ARS spec: defaults ARC applies, and the checks the CRD also makes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gharc.api.scaleset.models import AutoscalingRunnerSetSpec, ProxyConfig

BASE = {"githubConfigUrl": "https://github.com/o", "githubConfigSecret": "s"}


def test_defaults() -> None:
    spec = AutoscalingRunnerSetSpec.parse({**BASE, "template": {"spec": {"containers": []}}})
    assert spec.runner_group == ""
    assert spec.effective_min_runners == 0
    assert spec.effective_max_runners == 2147483647
    assert spec.template == {"spec": {"containers": []}}
    assert spec.listener_template is None


def test_explicit_zero_max_is_not_unlimited() -> None:
    spec = AutoscalingRunnerSetSpec.parse({**BASE, "minRunners": 0, "maxRunners": 0})
    assert spec.effective_max_runners == 0


@pytest.mark.parametrize(
    "extra",
    [{"minRunners": 3, "maxRunners": 2}, {"maxRunners": -1}, {"minRunners": -1}],
)
def test_invalid_counts(extra: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        AutoscalingRunnerSetSpec.parse({**BASE, **extra})


def test_required_fields() -> None:
    with pytest.raises(ValidationError, match="githubConfigSecret"):
        AutoscalingRunnerSetSpec.parse({"githubConfigUrl": "https://github.com/o"})
    with pytest.raises(ValidationError, match="githubConfigUrl"):
        AutoscalingRunnerSetSpec.parse({"githubConfigUrl": "", "githubConfigSecret": "s"})


def test_unknown_fields_are_ignored_and_nested_types_parse() -> None:
    spec = AutoscalingRunnerSetSpec.parse(
        {
            **BASE,
            "someFutureField": 1,
            "githubServerTLS": {"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "k"}}},
            "vaultConfig": {
                "type": "azure_key_vault",
                "azureKeyVault": {
                    "url": "u",
                    "tenantId": "t",
                    "clientId": "c",
                    "certificatePath": "p",
                },
            },
            "listenerMetrics": {"histograms": {"h": {"labels": ["a"], "buckets": [0.5, 1]}}},
            "ephemeralRunnerMetadata": {"labels": {"a": "b"}},
        }
    )
    assert spec.github_server_tls is not None
    assert spec.github_server_tls.certificate_from is not None
    assert spec.github_server_tls.certificate_from.config_map_key_ref is not None
    assert spec.github_server_tls.certificate_from.config_map_key_ref.key == "k"
    assert spec.vault_config is not None and spec.vault_config.azure_key_vault is not None
    assert spec.vault_config.azure_key_vault.tenant_id == "t"
    assert spec.listener_metrics is not None and spec.listener_metrics.histograms is not None
    assert spec.listener_metrics.histograms["h"].buckets == [0.5, 1.0]
    assert spec.ephemeral_runner_metadata is not None
    assert spec.ephemeral_runner_metadata.labels == {"a": "b"}


def test_proxy_secret_data() -> None:
    proxy = ProxyConfig.model_validate(
        {
            "http": {"url": "http://proxy.example.com:3128", "credentialSecretRef": "creds"},
            "https": {"url": "https://proxy.example.com"},
            "noProxy": ["a.internal", "10.0.0.0/8"],
        }
    )
    assert proxy.credential_secret_names() == ["creds"]
    data = proxy.to_secret_data(http_auth=("test", "p@ss:w/rd"))
    assert data == {
        "http_proxy": "http://test:p%40ss%3Aw%2Frd@proxy.example.com:3128",
        "https_proxy": "https://proxy.example.com",
        "no_proxy": "a.internal,10.0.0.0/8",
    }


def test_proxy_secret_data_keys_always_present() -> None:
    assert ProxyConfig().to_secret_data() == {"http_proxy": "", "https_proxy": "", "no_proxy": ""}


@pytest.mark.parametrize(
    "extra",
    [
        {"runnerScaleSetLabels": ["ok", ""]},
        {"runnerScaleSetLabels": ["x" * 256]},
        {"vaultConfig": {"type": "hashicorp"}},
    ],
    ids=["empty-label", "long-label", "vault-type"],
)
def test_what_the_crd_leaves_to_the_controller(extra: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        AutoscalingRunnerSetSpec.parse({**BASE, **extra})


def test_known_vault_type_and_labels_parse() -> None:
    spec = AutoscalingRunnerSetSpec.parse(
        {**BASE, "runnerScaleSetLabels": ["x" * 255], "vaultConfig": {"type": "azure_key_vault"}}
    )
    assert spec.vault_config is not None and spec.vault_config.type == "azure_key_vault"
