"""Scale sets whose GitHub credentials live in Azure Key Vault (``spec.vaultConfig``).

The real API server, the fake GitHub and a fake Azure AD + Key Vault (HTTPS, trusted through
``SSL_CERT_FILE``, its token endpoint through ``AZURE_AUTHORITY_HOST`` as the Azure SDKs
read them). No Kubernetes Secret holds the credentials: the vault secret named by
``githubConfigSecret`` does, as JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _arsworld import SECRET_NAME, World, running_world

from gharc.kube.resources import SECRETS
from testworld.sim.keyvault import FakeKeyVault
from testworld.wait import eventually

TENANT = "72f988bf-0000-0000-0000-000000000001"
CLIENT = "0b1c2d3e-0000-0000-0000-000000000002"


@pytest.fixture
async def vault(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeKeyVault]:
    async with FakeKeyVault() as server:
        monkeypatch.setenv("AZURE_AUTHORITY_HOST", server.url)
        monkeypatch.setenv("SSL_CERT_FILE", server.ca_file)
        yield server


def vault_config(vault: FakeKeyVault, certificate_path: str) -> dict[str, Any]:
    return {
        "type": "azure_key_vault",
        "azureKeyVault": {
            "url": vault.url,
            "tenantId": TENANT,
            "clientId": CLIENT,
            "certificatePath": certificate_path,
        },
    }


async def _ready_reason(w: World) -> str | None:
    status = (await w.ars()).get("status") or {}
    found = [x for x in status.get("conditions") or [] if x["type"] == "ScaleSetReady"]
    return str(found[0]["reason"]) if found and found[0]["status"] == "False" else None


async def test_listener_runs_with_credentials_from_the_vault(
    kubeconfig: str, namespace: str, vault: FakeKeyVault, tmp_path: Path
) -> None:
    path = vault.register(TENANT, CLIENT).write(str(tmp_path))
    async with running_world(
        kubeconfig, namespace, listener_mode="InProcess", with_secret=False
    ) as w:
        vault.secrets[SECRET_NAME] = json.dumps({"github_token": w.gh.token})
        ars = await w.create_ars(vaultConfig=vault_config(vault, path))

        async def running() -> dict[str, Any] | None:
            listener = await w.listener(ars)
            status = (listener or {}).get("status") or {}
            return status if status.get("phase") == "Running" and status.get("sessionId") else None

        status = await eventually(running, timeout=30, message="listener running")
        assert w.gh.state.sessions.get(status["sessionId"]) is not None
        assert (await w.ars()).get("status", {}).get("phase") != "Failed"
        assert await w.get_or_none(SECRETS, SECRET_NAME) is None  # no Secret was needed
        assert vault.calls[("secret", 200)] >= 1
        # One identity, one vault: Azure AD is asked once, however many objects read.
        assert vault.calls[("token", 200)] == 1


async def test_vault_errors_are_reported_on_the_scale_set_until_fixed(
    kubeconfig: str, namespace: str, vault: FakeKeyVault, tmp_path: Path
) -> None:
    path = vault.register(TENANT, CLIENT, reader=False).write(str(tmp_path))
    async with running_world(kubeconfig, namespace, with_secret=False) as w:
        ars = await w.create_ars(vaultConfig=vault_config(vault, path))

        async def reason_is(expected: str) -> Any:
            async def probe() -> str | None:
                reason = await _ready_reason(w)
                return reason if reason == expected else None

            return await eventually(probe, timeout=20, message=f"ScaleSetReady {expected}")

        # No access policy: Key Vault's 403, as a condition and an event, not a crash.
        await reason_is("VaultAccessDenied")
        event = await w.wait_event("VaultAccessDenied")
        assert "does not have secrets get permission" in event["message"]
        assert (await w.ars())["status"]["phase"] == "Failed"

        # Access granted, the secret still missing: Key Vault's 404.
        vault.readers.add((TENANT, CLIENT))
        await _touch(w, "1")
        await reason_is("VaultSecretNotFound")

        # The secret written: the scale set is created, and the listener pod's config names
        # the vault instead of carrying the token.
        vault.secrets[SECRET_NAME] = json.dumps({"github_token": w.gh.token})
        await _touch(w, "2")
        await w.wait_listener_pod(ars)
        config = await w.config_json(await w.ars())
        assert "github_token" not in config
        assert config["vault_type"] == "azure_key_vault"
        assert config["vault_lookup_key"] == SECRET_NAME
        assert config["azure_key_vault"] == {
            "url": vault.url,
            "tenant_id": TENANT,
            "client_id": CLIENT,
            "certificate_path": path,
        }
        assert vault.calls[("secret", 403)] >= 1 and vault.calls[("secret", 404)] >= 1


async def _touch(w: World, value: str) -> None:
    """Change the ARS so it is reconciled now (the vault is not watched)."""
    ars = await w.ars()
    from gharc.api.resources import AUTOSCALING_RUNNER_SETS

    await w.kube.merge_patch(
        AUTOSCALING_RUNNER_SETS, ars, {"metadata": {"annotations": {"test/touch": value}}}
    )
