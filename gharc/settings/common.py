"""Settings the controller and the webhook server share, declared once for both.

Why: both processes take ARC's ``--log-level``, ``--log-format``, ``--metrics-addr``,
``--kubeconfig`` and the ``--github-*`` credential flags (env ``GITHUB_*``). Each used to
declare them itself, with its own help, stripping and validation. The declarations here
are field factories (the chart value that renders a flag differs between the charts) and
one mixin dataclass for the credentials; logging and the metrics address are set up from
them the same way in both, by :func:`gharc.kube.logging.configure_logging` and
:func:`gharc.kube.serving.serving_address`, which live in gharc.kube so that the listener,
which may not import this package, shares them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gharc.kube.logging import LOG_LEVELS
from gharc.settings.declare import setting

__all__ = [
    "DEFAULT_GITHUB_API_URL",
    "GITHUB",
    "GitHubSettings",
    "kubeconfig",
    "log_format",
    "log_level",
    "metrics_addr",
]

DEFAULT_GITHUB_API_URL = "https://api.github.com/"
#: The ``--help`` section of the credential flags (the controller reads them in legacy mode
#: only and skips the section otherwise).
GITHUB = "GitHub credentials"


def log_level(*, chart: str | None = None, help: str = "") -> Any:
    """``--log-level``: ARC's names and default (``debug``), one table for all processes."""
    return setting(
        "debug",
        flag="--log-level",
        choices=tuple(LOG_LEVELS),
        chart=chart,
        help=("Log level. " + help).strip(),
    )


def log_format(*, chart: str | None = None, help: str = "") -> Any:
    """``--log-format``: ``text`` (readable lines) or ``json`` (one object per line)."""
    return setting(
        "text",
        flag="--log-format",
        choices=("text", "json"),
        chart=chart,
        help=("Log format. " + help).strip(),
    )


def metrics_addr(*, chart: str | None = None) -> Any:
    """``--metrics-addr``: off (``"0"``) unless an address is given, as ARC's charts."""
    return setting(
        "0",
        flag="--metrics-addr",
        chart=chart,
        help='Where /metrics is served, e.g. ":8080"; "0" or "" turns it off.',
    )


def kubeconfig() -> Any:
    """``--kubeconfig``: a kubeconfig path; in-cluster config or ``~/.kube`` without it."""
    return setting(
        None, flag="--kubeconfig", help="Kubeconfig path (default: in-cluster or ~/.kube)."
    )


def _stripped(text: str) -> str:
    return text.strip()


@dataclass(kw_only=True)
class GitHubSettings:
    """ARC's controller-wide GitHub credentials: ``--github-token`` or the App triple, and
    the GitHub URLs (flags win over the ``GITHUB_*`` env vars, as ARC's envconfig)."""

    github_token: str = setting(
        "",
        flag="--github-token",
        env="GITHUB_TOKEN",
        parse=_stripped,
        group=GITHUB,
        help="Personal access token.",
    )
    github_app_id: str = setting(
        "",
        flag="--github-app-id",
        env="GITHUB_APP_ID",
        parse=_stripped,
        group=GITHUB,
        help="GitHub App ID (or client ID).",
    )
    github_app_installation_id: str = setting(
        "",
        flag="--github-app-installation-id",
        env="GITHUB_APP_INSTALLATION_ID",
        parse=_stripped,
        group=GITHUB,
        help="GitHub App installation ID.",
    )
    github_app_private_key: str = setting(
        "",
        flag="--github-app-private-key",
        env="GITHUB_APP_PRIVATE_KEY",
        group=GITHUB,
        help="GitHub App private key: the path of a PEM file if that file exists, else the "
        "PEM text.",
    )
    github_url: str = setting(
        "",
        flag="--github-url",
        env="GITHUB_URL",
        parse=_stripped,
        group=GITHUB,
        shown_default=DEFAULT_GITHUB_API_URL,
        help="GitHub API URL (https://ghes.example.com/api/v3/ for GitHub Enterprise Server).",
    )
    github_enterprise_url: str = setting(
        "",
        flag="--github-enterprise-url",
        env="GITHUB_ENTERPRISE_URL",
        parse=_stripped,
        group=GITHUB,
        help="GitHub Enterprise Server URL, e.g. https://ghes.example.com; wins over --github-url.",
    )
