"""A listener pod's GitHub credentials from Azure Key Vault (``vault_type: azure_key_vault``).

ARC's controller writes no credentials into the config of a scale set with ``vaultConfig``:
the listener reads the secret ``vault_lookup_key`` itself, with the certificate at
``azure_key_vault.certificate_path`` in its own pod, before its first call to GitHub. The
vault is reached through ``azure_key_vault.proxy`` (Go's ``httpproxy.Config`` keys:
``HTTPProxy``, ``HTTPSProxy``, ``NoProxy``) when the controller wrote one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gharc.github.keyvault import (
    AzureKeyVault,
    AzureKeyVaultSettings,
    VaultError,
    app_config_from_secret_value,
)
from gharc.github.proxy import ProxySettings
from gharc.listener.config import ConfigError, ListenerConfig

__all__ = ["proxy_from_listener_config", "resolve_vault"]


def proxy_from_listener_config(azure: Mapping[str, Any]) -> ProxySettings | None:
    """``azure_key_vault.proxy`` as :class:`ProxySettings` (None when unset)."""
    raw = azure.get("proxy") or {}
    if not isinstance(raw, Mapping) or not any(raw.values()):
        return None
    no_proxy = tuple(h.strip() for h in str(raw.get("NoProxy") or "").split(",") if h.strip())
    return ProxySettings(
        http=str(raw.get("HTTPProxy") or "") or None,
        https=str(raw.get("HTTPSProxy") or "") or None,
        no_proxy=no_proxy,
    )


async def resolve_vault(cfg: ListenerConfig, vault: AzureKeyVault | None = None) -> ListenerConfig:
    """``cfg`` with the credentials of its vault secret; :class:`ConfigError` if unreadable."""
    if not cfg.vault_type or cfg.has_credentials:
        return cfg
    azure = cfg.azure_key_vault or {}
    settings = AzureKeyVaultSettings.from_listener_config(azure)
    own = vault is None
    reader = vault or AzureKeyVault()
    try:
        value = await reader.get_secret(
            settings, cfg.vault_lookup_key, proxy_from_listener_config(azure)
        )
        data = app_config_from_secret_value(value)
    except VaultError as err:
        raise ConfigError(f"{err.reason}: {err.message}") from None
    finally:
        if own:
            await reader.aclose()
    installation = data.get("github_app_installation_id", "0").strip() or "0"
    if not installation.isdigit():
        raise ConfigError(
            f"vault secret {cfg.vault_lookup_key}: github_app_installation_id must be a number"
        )
    resolved = dataclasses.replace(
        cfg,
        github_token=data.get("github_token", ""),
        github_app_id=data.get("github_app_id", ""),
        github_app_installation_id=int(installation),
        github_app_private_key=data.get("github_app_private_key", ""),
    )
    try:
        resolved.validate_semantics()
        if not resolved.has_credentials:
            # validate_semantics lets a vault config without credentials pass (they are
            # read here); after the read, none at all must not start a listener.
            raise ConfigError(
                "no credentials: the secret holds neither github_token nor github_app_id, "
                "github_app_installation_id and github_app_private_key"
            )
    except ConfigError as err:
        raise ConfigError(f"vault secret {cfg.vault_lookup_key}: {err}") from None
    return resolved
