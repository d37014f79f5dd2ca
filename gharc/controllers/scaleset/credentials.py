"""From an object's ``githubConfigUrl`` + ``githubConfigSecret`` to a shared Actions client.

Every scale set object names its GitHub credentials by Secret name in its own namespace.
Secrets are read uncached (the controller does not watch Secrets, as ARC does not: a cache
of every Secret in the cluster would cost memory and RBAC for nothing), and the resulting
client comes from one :class:`~gharc.github.pool.ClientPool`, so all objects of one scope and
credential share an admin token, a connection pool and the REST cache.

The scale set's ``spec.proxy`` (with its credential Secrets) is part of the target: the
controller's own calls for a scale set go through the same proxy as its listener and
runners, as ARC's do, and a proxy URL that cannot work is a :class:`ConfigurationError`.

With ``spec.vaultConfig`` (ARC 0.12+) ``githubConfigSecret`` names an Azure Key Vault
secret instead (see :mod:`gharc.github.keyvault`), and so do the ``credentialSecretRef`` of
``spec.proxy``, as in ARC; the vault's own ``vaultConfig.proxy`` keeps its credentials in
Kubernetes Secrets. Every vault failure is a :class:`ConfigurationError` with a ``Vault*``
reason: the scale set reports it and retries slowly, whether it is a missing access policy
(fixed in Azure, not in the object) or an outage.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from gharc.github.actions import ActionsClient
from gharc.github.auth import (
    Credentials,
    CredentialsError,
    GitHubApp,
    credentials_from_secret_data,
)
from gharc.github.config import InvalidConfigUrl
from gharc.github.keyvault import (
    VAULT_TYPE_AZURE_KEY_VAULT,
    AzureKeyVault,
    AzureKeyVaultSettings,
    VaultError,
    app_config_from_secret_value,
)
from gharc.github.pool import ClientPool
from gharc.github.proxy import InvalidProxyUrl, ProxySettings, check_proxy_url
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.resources import CONFIG_MAPS, SECRETS

log = logging.getLogger(__name__)

#: How old a remembered Secret may be and still be answered while it is read afresh: a
#: quiet scale set's first job in this long gets its credentials without waiting for a GET.
SECRET_STALE_LIMIT = 600.0


class ConfigurationError(Exception):
    """The object's GitHub configuration cannot work as written.

    Retrying does not help until the user changes something, so reconcilers report it as
    a condition/event and wait for the next change instead of requeueing hot.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class GitHubTarget:
    """The GitHub-facing part of an AutoscalingRunnerSet/EphemeralRunner/listener spec."""

    namespace: str
    config_url: str
    secret_name: str
    tls_config_map: Mapping[str, Any] | None = None
    proxy: Mapping[str, Any] | None = None
    vault: Mapping[str, Any] | None = None
    """``spec.vaultConfig`` when it names a vault type (else the credentials are a Secret)."""

    @classmethod
    def from_spec(cls, namespace: str, spec: Mapping[str, Any]) -> GitHubTarget:
        tls = (spec.get("githubServerTLS") or {}).get("certificateFrom") or {}
        vault = spec.get("vaultConfig") or {}
        return cls(
            namespace=namespace,
            config_url=str(spec.get("githubConfigUrl") or ""),
            secret_name=str(spec.get("githubConfigSecret") or ""),
            tls_config_map=tls.get("configMapKeyRef"),
            proxy=spec.get("proxy") or None,
            vault=vault if vault.get("type") else None,
        )


def proxy_problems(proxy: Mapping[str, Any] | None, path: str = "spec.proxy") -> list[str]:
    """What is wrong with ``spec.proxy`` (empty when it can work), by field path."""
    problems = []
    for kind in ("http", "https"):
        server = (proxy or {}).get(kind)
        if not server:
            continue
        url = str(server.get("url") or "")
        try:
            check_proxy_url(url)
        except InvalidProxyUrl as err:
            problems.append(f"{path}.{kind}.url {err}")
    return problems


def _vault_error(err: VaultError, target: GitHubTarget) -> ConfigurationError:
    return ConfigurationError(err.reason, f"vaultConfig ({target.namespace}): {err.message}")


def _with_credentials(url: str, auth: tuple[str, str] | None) -> str:
    """``url`` with ``user:password@`` (quoted), as ARC's ``ProxyServerConfig`` builds it."""
    if auth is None:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{quote(auth[0], safe='')}:{quote(auth[1], safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


class ClientResolver:
    """Resolves :class:`GitHubTarget` to a pooled :class:`ActionsClient`.

    Secret reads are remembered for ``secret_ttl`` seconds: every EphemeralRunner reconcile
    needs the credentials, and an uncached GET each time was the controller's most frequent
    Kubernetes call (several per job). A rotated token is picked up within the TTL.

    A read older than the TTL but younger than ``secret_stale_limit`` is still answered at
    once, and read afresh beside the caller (stale-while-revalidate): with many quiet scale
    sets nearly every job found its set's Secret expired, and the GET sat between the
    EphemeralRunner and its pod (1.27 Secret reads per job at 1,000 sets against 0.15 at
    one). A rotated token costs at most the one call made with the old value: the read
    started beside it has the new one before that call's retry, and a caller told 401 by
    GitHub drops the value (:meth:`forget`). A deleted Secret is forgotten when the
    background read finds it gone.
    """

    def __init__(
        self,
        kube: KubeClient,
        pool: ClientPool,
        *,
        secret_ttl: float = 30.0,
        secret_stale_limit: float = SECRET_STALE_LIMIT,
        clock: Callable[[], float] = time.monotonic,
        vault: AzureKeyVault | None = None,
    ) -> None:
        self._kube = kube
        self.pool = pool
        self.secret_ttl = secret_ttl
        self.secret_stale_limit = secret_stale_limit
        self._refreshing: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._clock = clock
        self._secrets: dict[tuple[str, str], tuple[float, dict[str, str]]] = {}
        self._vault_values: dict[tuple[str, str], tuple[float, str]] = {}
        self._vault = vault
        self._signing_keys_ok: set[str] = set()

    @property
    def vault(self) -> AzureKeyVault:
        """The Key Vault reader, made at the first scale set that has a ``vaultConfig``."""
        if self._vault is None:
            self._vault = AzureKeyVault()
        return self._vault

    async def aclose(self) -> None:
        for task in self._refreshing.values():
            task.cancel()
        if self._refreshing:
            await asyncio.wait(list(self._refreshing.values()))
        if self._vault is not None:
            await self._vault.aclose()

    async def secret_data(
        self, namespace: str, name: str, *, max_age: float | None = None
    ) -> dict[str, str]:
        """Decoded data of a Secret, read from the API server at most once per TTL (or per
        ``max_age`` seconds, for a caller that can wait longer for a rotation)."""
        key = (namespace, name)
        now = self._clock()
        hit = self._secrets.get(key)
        ttl = self.secret_ttl if max_age is None else max_age
        if hit is not None:
            age = now - hit[0]
            if age < ttl:
                return hit[1]
            if age < self.secret_stale_limit:
                self._refresh_beside(key)
                return hit[1]
        return await self._read_secret(key)

    async def _read_secret(self, key: tuple[str, str]) -> dict[str, str]:
        now = self._clock()
        secret = await self._kube.get(SECRETS, key[1], namespace=key[0])
        data = objects.decode_secret_data(secret)
        self._secrets[key] = (now, data)
        return data

    def _refresh_beside(self, key: tuple[str, str]) -> None:
        """Read ``key`` afresh in a task of its own, once at a time."""
        if key in self._refreshing:
            return
        task = asyncio.create_task(self._refresh(key), name=f"secret-refresh {key[0]}/{key[1]}")
        self._refreshing[key] = task
        task.add_done_callback(lambda _: self._refreshing.pop(key, None))

    async def _refresh(self, key: tuple[str, str]) -> None:
        try:
            await self._read_secret(key)
        except kerrors.NotFound:
            log.info("Secret %s/%s is gone; it is no longer remembered", *key)
            self._secrets.pop(key, None)
        except Exception as err:  # the next use past the TTL reads again
            log.info("re-reading Secret %s/%s failed (%s); the last read stays", *key, err)

    async def settled(self) -> None:
        """Wait for the Secret reads running beside their callers (tests, shutdown)."""
        while self._refreshing:
            await asyncio.wait(list(self._refreshing.values()))

    def forget_credentials(self, target: GitHubTarget) -> None:
        """Drop what is remembered of ``target``'s credentials: GitHub rejected them, and
        the next use must read a rotated or restored value."""
        self.forget(target.namespace, target.secret_name)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a remembered Secret, so the next read sees a rotated or restored value."""
        self._secrets.pop((namespace, name), None)
        for key in [k for k in self._vault_values if k[1] == name]:
            self._vault_values.pop(key, None)

    async def vault_value(self, target: GitHubTarget, name: str) -> str:
        """Secret ``name`` of the target's vault, read at most once per TTL.

        Any failure is a :class:`ConfigurationError` naming Azure's answer."""
        vault = target.vault or {}
        if vault.get("type") != VAULT_TYPE_AZURE_KEY_VAULT:
            raise ConfigurationError(
                "InvalidVaultConfig",
                f"vaultConfig.type {vault.get('type')!r} is not supported "
                f"(supported: {VAULT_TYPE_AZURE_KEY_VAULT})",
            )
        settings = AzureKeyVaultSettings.from_spec(vault.get("azureKeyVault") or {})
        key = (settings.url, name)
        now = self._clock()
        hit = self._vault_values.get(key)
        if hit is not None and now - hit[0] < self.secret_ttl:
            return hit[1]
        proxy = await self.vault_proxy(target)
        try:
            value = await self.vault.get_secret(settings, name, proxy)
        except VaultError as err:
            raise _vault_error(err, target) from None
        self._vault_values[key] = (now, value)
        return value

    async def vault_proxy(self, target: GitHubTarget) -> ProxySettings | None:
        """``vaultConfig.proxy`` with the passwords of its credential Secrets, or None."""
        proxy = (target.vault or {}).get("proxy")
        return await self._proxy_settings(target, proxy, "vaultConfig.proxy", from_vault=False)

    async def github_config_data(
        self, target: GitHubTarget, *, max_age: float | None = None
    ) -> dict[str, str]:
        """The GitHub credentials as Secret data: from the Secret or the vault secret."""
        if target.vault is not None:
            value = await self.vault_value(target, target.secret_name)
            try:
                return app_config_from_secret_value(value)
            except VaultError as err:
                raise ConfigurationError(
                    err.reason, f"vault secret {target.secret_name}: {err.message}"
                ) from None
        try:
            return await self.secret_data(target.namespace, target.secret_name, max_age=max_age)
        except kerrors.NotFound:
            raise ConfigurationError(
                "MissingGitHubConfigSecret",
                f"githubConfigSecret {target.namespace}/{target.secret_name} does not exist",
            ) from None

    async def ca_bundle(self, target: GitHubTarget) -> str | None:
        ref = target.tls_config_map
        if not ref:
            return None
        name, key = ref.get("name"), ref.get("key")
        try:
            cm = await self._kube.get(CONFIG_MAPS, str(name), namespace=target.namespace)
        except kerrors.NotFound:
            raise ConfigurationError(
                "InvalidGitHubServerTLS",
                f"githubServerTLS ConfigMap {target.namespace}/{name} does not exist",
            ) from None
        pem = (cm.get("data") or {}).get(str(key))
        if not pem:
            raise ConfigurationError(
                "InvalidGitHubServerTLS",
                f"githubServerTLS ConfigMap {target.namespace}/{name} has no key {key!r}",
            )
        return str(pem)

    async def proxy_for(self, target: GitHubTarget) -> ProxySettings | None:
        """``spec.proxy`` with the passwords of its credential Secrets, or None.

        Secrets come from the target's namespace (never one the spec names), as for the
        listener's and the runners' proxy Secrets.
        """
        return await self._proxy_settings(
            target, target.proxy, "spec.proxy", from_vault=target.vault is not None
        )

    async def _proxy_settings(
        self,
        target: GitHubTarget,
        proxy: Mapping[str, Any] | None,
        path: str,
        *,
        from_vault: bool,
    ) -> ProxySettings | None:
        """``proxy`` with credentials from Secrets, or from the vault when ``from_vault``
        (ARC reads ``spec.proxy``'s credentials from the vault when one is configured)."""
        if not proxy:
            return None
        problems = proxy_problems(proxy, path)
        if problems:
            raise ConfigurationError("InvalidProxy", "; ".join(problems))
        urls: dict[str, str | None] = {}
        for kind in ("http", "https"):
            server = proxy.get(kind) or {}
            if not server.get("url"):
                urls[kind] = None
                continue
            auth = (
                await self._vault_proxy_auth(target, server)
                if from_vault
                else await self._proxy_auth(target, server)
            )
            urls[kind] = _with_credentials(str(server["url"]), auth)
        return ProxySettings(
            http=urls["http"],
            https=urls["https"],
            no_proxy=tuple(str(x) for x in proxy.get("noProxy") or ()),
        )

    async def _proxy_auth(
        self, target: GitHubTarget, server: Mapping[str, Any]
    ) -> tuple[str, str] | None:
        ref = server.get("credentialSecretRef")
        if not ref:
            return None
        try:
            data = await self.secret_data(target.namespace, str(ref))
        except kerrors.NotFound:
            raise ConfigurationError(
                "InvalidProxy",
                f"proxy credentialSecretRef {target.namespace}/{ref} does not exist",
            ) from None
        return data.get("username", ""), data.get("password", "")

    async def _vault_proxy_auth(
        self, target: GitHubTarget, server: Mapping[str, Any]
    ) -> tuple[str, str] | None:
        """A proxy credential kept in the vault: a secret holding ``{"username", "password"}``."""
        ref = server.get("credentialSecretRef")
        if not ref:
            return None
        value = await self.vault_value(target, str(ref))
        try:
            info = json.loads(value)
        except json.JSONDecodeError:
            info = None
        if not isinstance(info, dict):
            raise ConfigurationError(
                "InvalidProxy",
                f'proxy credentialSecretRef {ref}: the vault secret must hold {{"username": '
                '..., "password": ...}',
            )
        return str(info.get("username") or ""), str(info.get("password") or "")

    def _check_signing_key(self, credentials: Credentials) -> None:
        """Sign one JWT with a GitHub App key, once per key: a malformed key must show as
        the scale set's configuration error, not as a traceback at the first GitHub call."""
        if not isinstance(credentials, GitHubApp):
            return
        if credentials.identity in self._signing_keys_ok:
            return
        credentials.make_jwt(time.time())
        self._signing_keys_ok.add(credentials.identity)

    async def client_for(
        self, target: GitHubTarget, *, max_age: float | None = None
    ) -> ActionsClient:
        """The shared client for ``target``; :class:`ConfigurationError` when it cannot be.
        ``max_age``: how old a remembered Secret may be (default: the TTL)."""
        if not target.config_url:
            raise ConfigurationError("InvalidConfiguration", "spec.githubConfigUrl is not set")
        if not target.secret_name:
            raise ConfigurationError("InvalidConfiguration", "spec.githubConfigSecret is not set")
        data = await self.github_config_data(target, max_age=max_age)
        try:
            credentials = credentials_from_secret_data(data)
            self._check_signing_key(credentials)
        except CredentialsError as err:
            where = "vault secret" if target.vault is not None else "githubConfigSecret"
            raise ConfigurationError(
                "InvalidGitHubConfigSecret",
                f"{where} {target.namespace}/{target.secret_name}: {err}",
            ) from None
        ca = await self.ca_bundle(target)
        proxy = await self.proxy_for(target)
        try:
            return self.pool.get(target.config_url, credentials, ca_bundle=ca, proxy=proxy)
        except InvalidConfigUrl as err:
            raise ConfigurationError("InvalidGitHubConfigUrl", str(err)) from None
