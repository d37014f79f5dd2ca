"""GitHub credentials from :class:`~gharc.settings.common.GitHubSettings`, for the
controller (legacy mode) and the webhook server alike.

Why one function: both processes read the same flags with ARC's precedence (a token wins
over the App triple) and ARC's key rule (the path of an existing file, else PEM text); they
differ only in whether credentials are required. Messages name each flag with its env var,
taken from the declarations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gharc.settings.common import GitHubSettings
from gharc.settings.declare import UsageError, declared

__all__ = ["github_credentials", "private_key_text"]

_APP = ("github_app_id", "github_app_installation_id", "github_app_private_key")


def _named(name: str) -> str:
    spec = next(d.spec for d in declared(GitHubSettings) if d.name == name)
    return f"{spec.name} ({spec.env})"


def private_key_text(key: str, flag: str = "--github-app-private-key") -> str:
    """The PEM text of ``key``: the contents of the file it names if that file exists."""
    if "\n" in key or len(key) >= 4096:
        return key
    path = Path(key)
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else key
    except OSError as err:
        raise UsageError(f"{flag}: cannot read {key}: {err}") from None


def github_credentials(settings: GitHubSettings, *, required: bool) -> Any:
    """A ``PersonalAccessToken``, a ``GitHubApp``, or None (nothing, or an incomplete App
    triple, configured and ``required`` false).

    With ``required``, no credentials or a partial App triple is a :class:`UsageError`
    naming what is missing: ARC's legacy controllers cannot register a runner without
    them, so starting would only fail later.
    """
    from gharc.github.auth import CredentialsError, GitHubApp, PersonalAccessToken

    if settings.github_token:
        return PersonalAccessToken(settings.github_token)
    app = {name: getattr(settings, name) for name in _APP}
    given = [_named(k) for k, v in app.items() if v]
    missing = [_named(k) for k, v in app.items() if not v]
    if missing and not required:
        return None
    if not given:
        token = _named("github_token")
        raise UsageError(
            f"legacy mode needs GitHub credentials: set {token} or "
            f"{', '.join(missing[:-1])} and {missing[-1]}"
        )
    if missing:
        raise UsageError(
            f"incomplete GitHub App credentials: {', '.join(missing)} not set "
            f"({', '.join(given)} given)"
        )
    key = private_key_text(settings.github_app_private_key)
    try:
        return GitHubApp(settings.github_app_id, settings.github_app_installation_id, key)
    except CredentialsError as err:
        hint = "" if "PRIVATE KEY" in key else " (neither an existing file nor PEM text)"
        raise UsageError(f"GitHub App credentials: {err}{hint}") from None
