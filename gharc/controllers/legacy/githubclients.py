"""From a runner's scope (enterprise / organization / repository) to a pooled REST client.

ARC keeps one go-github client per credential and passes the scope on every call; gharc's
:class:`~gharc.github.rest.RestClient` is bound to one scope, so the pool key is
(scope URL, credential). That is what B6 needs: every runner of one organization shares one
client, hence one registration-token cache and one HTTP cache for List Runners.

Per-object credentials (``githubAPICredentialsFrom.secretRef.name``, legacy.md 6.5) are read
from the Secret uncached at each resolve; the pool reuses the client while the secret's
credential identity is unchanged, so a rotated secret gets a fresh client.

This is the one resolver of legacy mode (``LegacyDeps.github``): the runner controllers
call :meth:`LegacyGitHub.client` with a namespace, a scope and a secret name; the HRA
controller calls :meth:`LegacyGitHub.client_for` with the HRA itself. Both go through the
same secret handling and pool, so one organization's runners and its HRA share a client,
hence one HTTP cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gharc.github.auth import Credentials, CredentialsError, credentials_from_secret_data
from gharc.github.config import InvalidConfigUrl, server_url
from gharc.github.pool import ClientPool
from gharc.github.rest import RestClient
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import Reader
from gharc.kube.resources import SECRETS

NO_CREDENTIALS = (
    "no GitHub credentials: set the controller's --github-token/--github-app-* "
    "or the object's githubAPICredentialsFrom.secretRef"
)


class ScopeError(Exception):
    """The object names no usable scope or credentials; retrying will not help."""


@dataclass(frozen=True)
class RunnerScope:
    enterprise: str = ""
    organization: str = ""
    repository: str = ""

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RunnerScope:
        return cls(
            str(spec.get("enterprise") or ""),
            str(spec.get("organization") or ""),
            str(spec.get("repository") or ""),
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RunnerScope:
        return cls(
            env.get("RUNNER_ENTERPRISE", ""), env.get("RUNNER_ORG", ""), env.get("RUNNER_REPO", "")
        )

    def path(self) -> str:
        """ARC's precedence: repository, else organization, else enterprise."""
        if self.repository:
            if self.repository.count("/") != 1:
                raise ScopeError(f"repository {self.repository!r} is not owner/name")
            return self.repository
        if self.organization:
            return self.organization
        if self.enterprise:
            return f"enterprises/{self.enterprise}"
        raise ScopeError("spec needs enterprise, organization or repository")


class LegacyGitHub:
    """Resolves (namespace, scope, optional credentials secret) to a shared RestClient.

    ``github_url`` is the GitHub *server* URL config URLs start from (``https://github.com``
    or a GHES host); ``default`` the controller-wide credentials, or None when only
    per-object secrets are to be used.
    """

    def __init__(
        self, kube: Reader, pool: ClientPool, github_url: str, default: Credentials | None
    ) -> None:
        self._kube = kube
        self.pool = pool
        self._github_url = github_url.rstrip("/")
        self._default = default

    @property
    def server_url(self) -> str:
        return self._github_url

    @property
    def default_credentials(self) -> Credentials | None:
        return self._default

    async def _secret(self, namespace: str, name: str) -> dict[str, str]:
        try:
            secret = await self._kube.get(SECRETS, name, namespace=namespace)
        except kerrors.NotFound:
            raise ScopeError(f"GitHub credentials secret {namespace}/{name} not found") from None
        data = objects.decode_secret_data(secret)
        return data

    async def client(self, namespace: str, scope: RunnerScope, secret: str = "") -> RestClient:
        """The client of ``scope``, with ``secret``'s credentials (and its
        ``github_enterprise_url``/``github_url``) if named, else the controller's."""
        base, credentials = self._github_url, self._default
        if secret:
            data = await self._secret(namespace, secret)
            try:
                credentials = credentials_from_secret_data(data)
            except CredentialsError as err:
                raise ScopeError(f"secret {namespace}/{secret}: {err}") from None
            enterprise, api = data.get("github_enterprise_url", ""), data.get("github_url", "")
            if enterprise.strip() or api.strip():
                base = server_url(enterprise_url=enterprise, api_url=api)
        if credentials is None:
            raise ScopeError(NO_CREDENTIALS)
        try:
            return self.pool.get_rest(f"{base}/{scope.path()}", credentials)
        except InvalidConfigUrl as err:
            raise ScopeError(str(err)) from None

    async def client_for(
        self, hra: Mapping[str, Any], enterprise: str, organization: str, repository: str
    ) -> RestClient:
        """The HRA controller's call shape: the HRA's namespace and secretRef, the scale
        target's scope."""
        meta = objects.meta(hra)
        ref = (objects.spec_of(hra).get("githubAPICredentialsFrom") or {}).get("secretRef")
        secret = str(ref.get("name") or "") if isinstance(ref, Mapping) else ""
        scope = RunnerScope(enterprise, organization, repository)
        return await self.client(str(meta.get("namespace") or ""), scope, secret)
