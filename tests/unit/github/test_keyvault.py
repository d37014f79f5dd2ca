"""The Key Vault client against the fake Azure AD + Key Vault: token exchange and secret read."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gharc.github.keyvault import (
    ASSERTION_TYPE,
    AzureKeyVault,
    AzureKeyVaultSettings,
    ClientCertificate,
    VaultError,
    app_config_from_secret_value,
    authority_host,
    client_assertion,
    token_endpoint,
    vault_scope,
)
from testworld.sim.keyvault import FakeKeyVault, self_signed_identity

TENANT = "11111111-2222-3333-4444-555555555555"
CLIENT = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


@pytest.fixture
async def fake() -> AsyncIterator[FakeKeyVault]:
    async with FakeKeyVault() as server:
        yield server


def _client(fake: FakeKeyVault) -> AzureKeyVault:
    verify = ssl.create_default_context(cafile=fake.ca_file)
    return AzureKeyVault(authority=fake.url, transport=httpx.AsyncHTTPTransport(verify=verify))


def _settings(fake: FakeKeyVault, path: str, client_id: str = CLIENT) -> AzureKeyVaultSettings:
    return AzureKeyVaultSettings(
        url=fake.url, tenant_id=TENANT, client_id=client_id, certificate_path=path
    )


async def test_reads_a_secret_with_a_certificate_token(fake: FakeKeyVault, tmp_path: Path) -> None:
    path = fake.register(TENANT, CLIENT).write(str(tmp_path))
    fake.secrets["gh-config"] = json.dumps({"github_token": "ghp_x"})
    vault = _client(fake)
    try:
        value = await vault.get_secret(_settings(fake, path), "gh-config")
        again = await vault.get_secret(_settings(fake, path), "gh-config")
    finally:
        await vault.aclose()
    assert json.loads(value) == {"github_token": "ghp_x"} == json.loads(again)
    # One token for both reads: Azure AD is not asked per read.
    assert fake.calls[("token", 200)] == 1 == vault.token_requests
    assert fake.calls[("secret", 200)] == 2


async def test_expired_token_is_renewed_once(fake: FakeKeyVault, tmp_path: Path) -> None:
    path = fake.register(TENANT, CLIENT).write(str(tmp_path))
    fake.secrets["gh-config"] = "{}"
    vault = _client(fake)
    try:
        await vault.get_secret(_settings(fake, path), "gh-config")
        fake.expire_tokens()  # the vault now refuses the cached token with a 401
        await vault.get_secret(_settings(fake, path), "gh-config")
    finally:
        await vault.aclose()
    assert fake.calls[("secret", 401)] == 1
    assert fake.calls[("token", 200)] == 2


async def test_certificate_azure_ad_does_not_know_is_401(
    fake: FakeKeyVault, tmp_path: Path
) -> None:
    fake.register(TENANT, CLIENT)
    other = self_signed_identity(TENANT, CLIENT)  # same app id, unregistered certificate
    path = other.write(str(tmp_path))
    vault = _client(fake)
    with pytest.raises(VaultError) as err:
        try:
            await vault.get_secret(_settings(fake, path), "gh-config")
        finally:
            await vault.aclose()
    assert err.value.status == 401 and err.value.code == "invalid_client"
    assert err.value.permanent and "AADSTS700027" in err.value.message
    assert err.value.reason == "VaultAuthenticationFailed"


async def test_assertion_for_another_audience_is_refused(
    fake: FakeKeyVault, tmp_path: Path
) -> None:
    path = fake.register(TENANT, CLIENT).write(str(tmp_path))
    cert = ClientCertificate.load(path)
    # Addressed to the public cloud's endpoint, sent to this one: Azure AD refuses it.
    other = token_endpoint("https://login.microsoftonline.com", TENANT)
    form = {
        "grant_type": "client_credentials",
        "client_id": CLIENT,
        "scope": vault_scope(fake.url),
        "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": client_assertion(cert, client_id=CLIENT, audience=other),
    }
    verify = ssl.create_default_context(cafile=fake.ca_file)
    async with httpx.AsyncClient(verify=verify) as http:
        refused = await http.post(token_endpoint(fake.url, TENANT), data=form)
        form["client_assertion"] = client_assertion(
            cert, client_id=CLIENT, audience=token_endpoint(fake.url, TENANT)
        )
        accepted = await http.post(token_endpoint(fake.url, TENANT), data=form)
        replayed = await http.post(token_endpoint(fake.url, TENANT), data=form)
    assert refused.status_code == 401 and refused.json()["error_codes"] == [700024]
    assert accepted.status_code == 200 and accepted.json()["token_type"] == "Bearer"
    assert replayed.status_code == 401 and replayed.json()["error_codes"] == [700025]


async def test_no_access_policy_is_403(fake: FakeKeyVault, tmp_path: Path) -> None:
    path = fake.register(TENANT, CLIENT, reader=False).write(str(tmp_path))
    fake.secrets["gh-config"] = "{}"
    vault = _client(fake)
    with pytest.raises(VaultError) as err:
        try:
            await vault.get_secret(_settings(fake, path), "gh-config")
        finally:
            await vault.aclose()
    assert (err.value.status, err.value.code, err.value.reason) == (
        403,
        "Forbidden",
        "VaultAccessDenied",
    )
    assert err.value.permanent


async def test_missing_secret_is_404(fake: FakeKeyVault, tmp_path: Path) -> None:
    path = fake.register(TENANT, CLIENT).write(str(tmp_path))
    vault = _client(fake)
    with pytest.raises(VaultError) as err:
        try:
            await vault.get_secret(_settings(fake, path), "gh-config")
        finally:
            await vault.aclose()
    assert (err.value.status, err.value.code, err.value.reason) == (
        404,
        "SecretNotFound",
        "VaultSecretNotFound",
    )


async def test_unknown_tenant_and_application_are_400(fake: FakeKeyVault, tmp_path: Path) -> None:
    path = fake.register(TENANT, CLIENT).write(str(tmp_path))
    vault = _client(fake)
    try:
        with pytest.raises(VaultError) as app:
            await vault.get_secret(_settings(fake, path, client_id="other-app"), "gh-config")
        settings = AzureKeyVaultSettings(fake.url, "no-such-tenant", CLIENT, path)
        with pytest.raises(VaultError) as tenant:
            await vault.get_secret(settings, "gh-config")
    finally:
        await vault.aclose()
    assert app.value.status == 400 and "AADSTS700016" in app.value.message
    assert tenant.value.status == 400 and "AADSTS90002" in tenant.value.message


async def test_unreachable_vault_is_transient(tmp_path: Path) -> None:
    identity = self_signed_identity(TENANT, CLIENT)
    path = identity.write(str(tmp_path))
    vault = AzureKeyVault(authority="https://127.0.0.1:1")
    settings = AzureKeyVaultSettings("https://127.0.0.1:1", TENANT, CLIENT, path)
    with pytest.raises(VaultError) as err:
        try:
            await vault.get_secret(settings, "gh-config")
        finally:
            await vault.aclose()
    assert not err.value.permanent and err.value.reason == "VaultUnavailable"


async def test_settings_and_names_are_checked_before_any_call(tmp_path: Path) -> None:
    vault = AzureKeyVault(authority="https://127.0.0.1:1")
    try:
        with pytest.raises(VaultError, match="not an https:// URL"):
            await vault.get_secret(AzureKeyVaultSettings("http://vault", TENANT, CLIENT, "/x"), "a")
        with pytest.raises(VaultError, match="not a Key Vault secret name"):
            await vault.get_secret(
                AzureKeyVaultSettings("https://v.vault.azure.net", TENANT, CLIENT, "/x"),
                "github.config",
            )
    finally:
        await vault.aclose()
    assert vault.token_requests == 0


def test_certificate_file_problems_are_clear(tmp_path: Path) -> None:
    missing = tmp_path / "none.pem"
    with pytest.raises(VaultError, match="cannot read"):
        ClientCertificate.load(str(missing))
    only_cert = tmp_path / "cert.pem"
    pem = self_signed_identity(TENANT, CLIENT).pem
    only_cert.write_bytes(pem.split(b"-----BEGIN PRIVATE KEY")[0])
    with pytest.raises(VaultError, match="no private key") as err:
        ClientCertificate.load(str(only_cert))
    assert err.value.permanent and err.value.reason == "InvalidVaultCertificate"


def test_app_config_json() -> None:
    app = app_config_from_secret_value(
        json.dumps(
            {
                "github_app_id": "123",
                "github_app_installation_id": 456,
                "github_app_private_key": "KEY",
            }
        )
    )
    assert app == {
        "github_app_id": "123",
        "github_app_installation_id": "456",
        "github_app_private_key": "KEY",
    }
    with pytest.raises(VaultError, match="not JSON"):
        app_config_from_secret_value("ghp_plain_token")


def test_scope_and_authority() -> None:
    assert vault_scope("https://x.vault.azure.net") == "https://vault.azure.net/.default"
    assert vault_scope("https://x.vault.azure.cn/") == "https://vault.azure.cn/.default"
    assert authority_host({}) == "https://login.microsoftonline.com"
    assert authority_host({"AZURE_AUTHORITY_HOST": "https://login.chinacloudapi.cn/"}) == (
        "https://login.chinacloudapi.cn"
    )
