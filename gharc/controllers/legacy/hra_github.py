"""GitHub clients for HRAs (legacy.md 6.5), now served by the legacy runners' resolver.

Legacy objects name their scope by ``enterprise``/``organization``/``repository`` instead of
a config URL, so the scope's config URL is built from the controller's GitHub server URL.
An HRA with ``githubAPICredentialsFrom.secretRef`` uses that Secret's credentials (and its
``github_enterprise_url``/``github_url`` if set); otherwise the controller-wide ones. The
Secret is read from the API server each time (never cached, as ARC does not watch
Secrets); the pool keys clients by credential identity, so a changed Secret gets a fresh
client while an unchanged one keeps its HTTP cache (B6).

The resolver is :class:`~gharc.controllers.legacy.githubclients.LegacyGitHub`, the one of
the runner controllers (``LegacyDeps.github``), so runners and HRAs of one scope share
clients, and there is one place that reads credential Secrets.
"""

from __future__ import annotations

from gharc.controllers.legacy.githubclients import ScopeError

__all__ = ["CredentialsUnavailable", "scope_config_url"]

CredentialsUnavailable = ScopeError
"""No usable GitHub credentials or scope for this HRA (the user must fix a Secret, a flag or
the target's spec). The same exception the runner controllers see."""


def scope_config_url(server_url: str, enterprise: str, organization: str, repository: str) -> str:
    """The config URL of the scope a legacy target registers in (repo > org > enterprise)."""
    base = server_url.rstrip("/")
    if repository:
        return f"{base}/{repository}"
    if organization:
        return f"{base}/{organization}"
    if enterprise:
        return f"{base}/enterprises/{enterprise}"
    raise CredentialsUnavailable("the target has no enterprise, organization or repository")
