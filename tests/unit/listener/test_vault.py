"""A listener reads its GitHub credentials from Azure Key Vault before its first GitHub call.

Against the fake Azure AD + Key Vault (TLS, real token exchange) for the answers the fake
gives, and a stub transport (``httpx.MockTransport``) for the ones it cannot be made to give
(a vault that keeps answering 401) and for counting token requests against a clock.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gharc.github.keyvault import REFRESH_MARGIN, AzureKeyVault
from gharc.github.proxy import ProxySettings
from gharc.listener.config import ConfigError, ListenerConfig, load_config
from gharc.listener.vault import proxy_from_listener_config, resolve_vault
from testworld.sim.keyvault import FakeKeyVault, self_signed_identity

TENANT = "11111111-2222-3333-4444-555555555555"
CLIENT = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
KEY = "gh-config"


def _config(tmp_path: Path, vault_url: str, cert_path: str, **extra: Any) -> ListenerConfig:
    """A listener config as ARC's controller writes it for a scale set with vaultConfig."""
    data: dict[str, Any] = {
        "configure_url": "https://github.com/acme",
        "ephemeral_runner_set_namespace": "arc-runners",
        "ephemeral_runner_set_name": "set-abc12",
        "min_runners": 0,
        "max_runners": 5,
        "runner_scale_set_id": 7,
        "vault_type": "azure_key_vault",
        "vault_lookup_key": KEY,
        "azure_key_vault": {
            "url": vault_url,
            "tenant_id": TENANT,
            "client_id": CLIENT,
            "certificate_path": cert_path,
        },
        **extra,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return load_config(str(path), env={})


@pytest.fixture
async def fake() -> AsyncIterator[FakeKeyVault]:
    async with FakeKeyVault() as server:
        yield server


def _reader(fake: FakeKeyVault) -> AzureKeyVault:
    verify = ssl.create_default_context(cafile=fake.ca_file)
    return AzureKeyVault(authority=fake.url, transport=httpx.AsyncHTTPTransport(verify=verify))


async def _resolve(cfg: ListenerConfig, vault: AzureKeyVault) -> ListenerConfig:
    try:
        return await resolve_vault(cfg, vault)
    finally:
        await vault.aclose()


# --- success ---------------------------------------------------------------------------


async def test_token_credentials_come_from_the_vault(fake: FakeKeyVault, tmp_path: Path) -> None:
    cert = fake.register(TENANT, CLIENT).write(str(tmp_path))
    fake.secrets[KEY] = json.dumps({"github_token": "ghp_from_vault"})
    cfg = _config(tmp_path, fake.url, cert)
    assert not cfg.has_credentials
    resolved = await _resolve(cfg, _reader(fake))
    assert resolved.github_token == "ghp_from_vault"
    assert resolved.runner_scale_set_id == 7  # the rest of the config is kept
    assert fake.calls[("token", 200)] == 1 and fake.calls[("secret", 200)] == 1


async def test_app_credentials_with_a_numeric_installation_id(
    fake: FakeKeyVault, tmp_path: Path
) -> None:
    cert = fake.register(TENANT, CLIENT).write(str(tmp_path))
    fake.secrets[KEY] = json.dumps(
        {
            "github_app_id": "Iv23liAbCdEf012345",
            "github_app_installation_id": 456,  # ARC writes a JSON number
            "github_app_private_key": "-----BEGIN RSA PRIVATE KEY-----",
        }
    )
    resolved = await _resolve(_config(tmp_path, fake.url, cert), _reader(fake))
    assert resolved.github_app_id == "Iv23liAbCdEf012345"
    assert resolved.github_app_installation_id == 456
    assert resolved.github_app_private_key.startswith("-----BEGIN")
    assert resolved.github_token == ""


async def test_config_with_credentials_does_not_call_the_vault(
    fake: FakeKeyVault, tmp_path: Path
) -> None:
    cert = fake.register(TENANT, CLIENT).write(str(tmp_path))
    cfg = _config(tmp_path, fake.url, cert, github_token="ghp_inline")
    resolved = await _resolve(cfg, _reader(fake))
    assert resolved is cfg
    assert sum(fake.calls.values()) == 0


# --- errors, each mapped to a ConfigError that names its reason --------------------------


async def test_no_access_policy_403_is_access_denied(fake: FakeKeyVault, tmp_path: Path) -> None:
    cert = fake.register(TENANT, CLIENT, reader=False).write(str(tmp_path))
    fake.secrets[KEY] = json.dumps({"github_token": "x"})
    with pytest.raises(ConfigError) as err:
        await _resolve(_config(tmp_path, fake.url, cert), _reader(fake))
    message = str(err.value)
    assert message.startswith("VaultAccessDenied: ")
    assert f"secret {KEY}: 403 Forbidden" in message
    assert fake.calls[("secret", 403)] == 1


async def test_missing_secret_404_is_secret_not_found(fake: FakeKeyVault, tmp_path: Path) -> None:
    cert = fake.register(TENANT, CLIENT).write(str(tmp_path))
    with pytest.raises(ConfigError) as err:
        await _resolve(_config(tmp_path, fake.url, cert), _reader(fake))
    assert str(err.value).startswith("VaultSecretNotFound: ")
    assert "404 SecretNotFound" in str(err.value)


async def test_certificate_azure_ad_does_not_know_is_authentication_failed(
    fake: FakeKeyVault, tmp_path: Path
) -> None:
    fake.register(TENANT, CLIENT)
    cert = self_signed_identity(TENANT, CLIENT).write(str(tmp_path))  # unregistered cert
    fake.secrets[KEY] = json.dumps({"github_token": "x"})
    with pytest.raises(ConfigError) as err:
        await _resolve(_config(tmp_path, fake.url, cert), _reader(fake))
    assert str(err.value).startswith("VaultAuthenticationFailed: ")
    assert "401 invalid_client" in str(err.value)
    assert fake.calls[("secret", 200)] == 0


async def test_secret_that_is_not_json(fake: FakeKeyVault, tmp_path: Path) -> None:
    cert = fake.register(TENANT, CLIENT).write(str(tmp_path))
    fake.secrets[KEY] = "ghp_plain_token"
    with pytest.raises(ConfigError) as err:
        await _resolve(_config(tmp_path, fake.url, cert), _reader(fake))
    assert str(err.value).startswith("InvalidGitHubConfigSecret: the vault secret is not JSON")
    assert "ghp_plain_token" not in str(err.value)


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": "abc",
                "github_app_private_key": "k",
            },
            f"vault secret {KEY}: github_app_installation_id must be a number",
        ),
        ({"github_app_id": "1"}, f"vault secret {KEY}: "),
        ({}, f"vault secret {KEY}: no credentials"),
        ({"github_token": None, "other": "x"}, f"vault secret {KEY}: no credentials"),
    ],
)
async def test_unusable_secret_content_names_the_secret(
    fake: FakeKeyVault, tmp_path: Path, secret: dict[str, Any], expected: str
) -> None:
    cert = fake.register(TENANT, CLIENT).write(str(tmp_path))
    fake.secrets[KEY] = json.dumps(secret)
    with pytest.raises(ConfigError) as err:
        await _resolve(_config(tmp_path, fake.url, cert), _reader(fake))
    assert str(err.value).startswith(expected)
    assert "github_" in str(err.value)


# --- a stub transport: a vault that answers 401 forever, and the token cache --------------


class _StubAzure:
    """Azure AD + Key Vault as an ``httpx.MockTransport`` handler, counting requests."""

    def __init__(self, *, secret_status: int = 200, expires_in: int = 3600) -> None:
        self.secret_status = secret_status
        self.expires_in = expires_in
        self.token_calls = 0
        self.secret_calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/oauth2/v2.0/token"):
            self.token_calls += 1
            return httpx.Response(
                200,
                json={
                    "token_type": "Bearer",
                    "expires_in": self.expires_in,
                    "access_token": f"tok-{self.token_calls}",
                },
            )
        self.secret_calls += 1
        if self.secret_status != 200:
            return httpx.Response(
                self.secret_status,
                json={"error": {"code": "Unauthorized", "message": "AKV10022: Invalid audience"}},
            )
        return httpx.Response(200, json={"value": json.dumps({"github_token": "ghp_stub"})})


def _stub_reader(stub: _StubAzure, clock: list[float]) -> AzureKeyVault:
    return AzureKeyVault(
        authority="https://login.example.test",
        transport=httpx.MockTransport(stub),
        clock=lambda: clock[0],
    )


async def test_vault_401_after_a_fresh_token_is_access_denied(tmp_path: Path) -> None:
    cert = self_signed_identity(TENANT, CLIENT).write(str(tmp_path))
    stub = _StubAzure(secret_status=401)
    cfg = _config(tmp_path, "https://acme.vault.azure.net", cert)
    with pytest.raises(ConfigError) as err:
        await _resolve(cfg, _stub_reader(stub, [1000.0]))
    assert str(err.value).startswith("VaultAccessDenied: ")
    assert "401 Unauthorized: AKV10022" in str(err.value)
    # The cached token is dropped and one fresh token tried once: no hot loop.
    assert (stub.token_calls, stub.secret_calls) == (2, 2)


async def test_token_is_cached_across_listeners_until_near_expiry(tmp_path: Path) -> None:
    cert = self_signed_identity(TENANT, CLIENT).write(str(tmp_path))
    stub = _StubAzure(expires_in=3600)
    clock = [1000.0]
    vault = _stub_reader(stub, clock)
    cfg = _config(tmp_path, "https://acme.vault.azure.net", cert)
    try:
        first = await resolve_vault(cfg, vault)
        clock[0] += 3600 - REFRESH_MARGIN - 1  # still inside the token's life less the margin
        second = await resolve_vault(cfg, vault)
        assert stub.token_calls == 1 and vault.token_requests == 1
        clock[0] += 2  # now within the refresh margin: a new token
        await resolve_vault(cfg, vault)
    finally:
        await vault.aclose()
    assert first.github_token == second.github_token == "ghp_stub"
    assert stub.token_calls == 2 and stub.secret_calls == 3


# --- the proxy the controller writes ---------------------------------------------------


def test_proxy_keys_as_arc_writes_them() -> None:
    proxy = proxy_from_listener_config(
        {
            "proxy": {
                "HTTPProxy": "http://proxy:3128",
                "HTTPSProxy": "http://sproxy:3128",
                "NoProxy": " .internal, 10.0.0.1 ,",
            }
        }
    )
    assert proxy == ProxySettings(
        http="http://proxy:3128", https="http://sproxy:3128", no_proxy=(".internal", "10.0.0.1")
    )
    assert proxy_from_listener_config({}) is None
    assert proxy_from_listener_config({"proxy": {"HTTPProxy": "", "NoProxy": ""}}) is None
