"""From an object's ``githubConfigUrl`` + ``githubConfigSecret`` to a shared Actions client.

Every scale set object names its GitHub credentials by Secret name in its own namespace.
Secrets are read uncached (the controller does not watch Secrets, as ARC does not: a cache
of every Secret in the cluster would cost memory and RBAC for nothing), and the resulting
client comes from one :class:`~gharc.github.pool.ClientPool`, so all objects of one scope and
credential share an admin token, a connection pool and the REST cache.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gharc.github.actions import ActionsClient
from gharc.github.auth import CredentialsError, credentials_from_secret_data
from gharc.github.config import InvalidConfigUrl
from gharc.github.pool import ClientPool
from gharc.kube.client import KubeClient
from gharc.kube.errors import NotFound
from gharc.kube.resources import CONFIG_MAPS, SECRETS


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

    @classmethod
    def from_spec(cls, namespace: str, spec: Mapping[str, Any]) -> GitHubTarget:
        tls = (spec.get("githubServerTLS") or {}).get("certificateFrom") or {}
        return cls(
            namespace=namespace,
            config_url=str(spec.get("githubConfigUrl") or ""),
            secret_name=str(spec.get("githubConfigSecret") or ""),
            tls_config_map=tls.get("configMapKeyRef"),
        )


class ClientResolver:
    """Resolves :class:`GitHubTarget` to a pooled :class:`ActionsClient`.

    Secret reads are remembered for ``secret_ttl`` seconds: every EphemeralRunner reconcile
    needs the credentials, and an uncached GET each time was the controller's most frequent
    Kubernetes call (several per job). A rotated token is picked up within the TTL.
    """

    def __init__(
        self,
        kube: KubeClient,
        pool: ClientPool,
        *,
        secret_ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self.pool = pool
        self.secret_ttl = secret_ttl
        self._clock = clock
        self._secrets: dict[tuple[str, str], tuple[float, dict[str, str]]] = {}

    async def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """Decoded data of a Secret, read from the API server at most once per TTL."""
        key = (namespace, name)
        now = self._clock()
        hit = self._secrets.get(key)
        if hit is not None and now - hit[0] < self.secret_ttl:
            return hit[1]
        secret = await self._kube.get(SECRETS, name, namespace=namespace)
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        data.update(secret.get("stringData") or {})
        self._secrets[key] = (now, data)
        return data

    def forget(self, namespace: str, name: str) -> None:
        """Drop a remembered Secret, so the next read sees a rotated or restored value."""
        self._secrets.pop((namespace, name), None)

    async def ca_bundle(self, target: GitHubTarget) -> str | None:
        ref = target.tls_config_map
        if not ref:
            return None
        name, key = ref.get("name"), ref.get("key")
        try:
            cm = await self._kube.get(CONFIG_MAPS, str(name), namespace=target.namespace)
        except NotFound:
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

    async def client_for(self, target: GitHubTarget) -> ActionsClient:
        """The shared client for ``target``; :class:`ConfigurationError` when it cannot be."""
        if not target.config_url:
            raise ConfigurationError("InvalidConfiguration", "spec.githubConfigUrl is not set")
        if not target.secret_name:
            raise ConfigurationError("InvalidConfiguration", "spec.githubConfigSecret is not set")
        try:
            data = await self.secret_data(target.namespace, target.secret_name)
        except NotFound:
            raise ConfigurationError(
                "MissingGitHubConfigSecret",
                f"githubConfigSecret {target.namespace}/{target.secret_name} does not exist",
            ) from None
        try:
            credentials = credentials_from_secret_data(data)
        except CredentialsError as err:
            raise ConfigurationError(
                "InvalidGitHubConfigSecret",
                f"githubConfigSecret {target.namespace}/{target.secret_name}: {err}",
            ) from None
        ca = await self.ca_bundle(target)
        try:
            return self.pool.get(target.config_url, credentials, ca_bundle=ca)
        except InvalidConfigUrl as err:
            raise ConfigurationError("InvalidGitHubConfigUrl", str(err)) from None
