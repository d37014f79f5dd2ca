"""Parse ``githubConfigUrl`` into a scope and the REST base URL that serves it.

Every other module (auth, REST, Actions service, the pool) keys off the parsed config, so
the rules for what a valid URL is live here once: enterprise, organization or repository,
on github.com / ghe.com (hosted) or on a GitHub Enterprise Server host.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

ACCEPTED_FORMS = (
    "https://<host>/enterprises/<enterprise>, https://<host>/<org> or https://<host>/<org>/<repo>"
)

_HOSTED_HOSTS = frozenset({"github.com", "www.github.com", "github.localhost"})


class InvalidConfigUrl(ValueError):
    """The GitHub config URL is not one of the accepted forms."""

    def __init__(self, url: str, reason: str) -> None:
        url = re.sub(r"://[^/@]*@", "://***@", url)  # never echo credentials
        super().__init__(f"invalid GitHub config URL {url!r}: {reason}; expected {ACCEPTED_FORMS}")
        self.url = url
        self.reason = reason


class Scope(enum.Enum):
    """Where runners register: the three levels GitHub supports."""

    ENTERPRISE = "enterprise"
    ORGANIZATION = "organization"
    REPOSITORY = "repository"


@dataclass(frozen=True)
class GitHubConfig:
    """A parsed config URL. ``config_url`` is normalised (no trailing slash)."""

    config_url: str
    scope: Scope
    host: str
    enterprise: str | None
    organization: str | None
    repository: str | None
    is_hosted: bool
    rest_base_url: str

    @property
    def scope_key(self) -> str:
        """A short stable label for metrics and cache keys (``org=acme``, ``repo=acme/app``...)."""
        if self.scope is Scope.ENTERPRISE:
            return f"enterprise={self.enterprise}"
        if self.scope is Scope.ORGANIZATION:
            return f"org={self.organization}"
        return f"repo={self.organization}/{self.repository}"


def _is_hosted(host: str) -> bool:
    host = host.lower()
    return host in _HOSTED_HOSTS or host.endswith(".ghe.com")


def _rest_base(scheme: str, netloc: str, host: str) -> str:
    host = host.lower()
    if host in _HOSTED_HOSTS:
        return "https://api.github.com"
    if host.endswith(".ghe.com"):
        return f"{scheme}://api.{netloc}"
    return f"{scheme}://{netloc}/api/v3"


def parse_config_url(url: str) -> GitHubConfig:
    """Parse ``url``; raise :class:`InvalidConfigUrl` naming the accepted forms otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidConfigUrl(str(url), "empty")
    raw = url.strip()
    try:
        parts = urlsplit(raw)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidConfigUrl(raw, f"cannot parse ({exc})") from None
    del port
    if parts.scheme not in ("http", "https"):
        raise InvalidConfigUrl(raw, "scheme must be http or https")
    if not parts.hostname:
        raise InvalidConfigUrl(raw, "no host")
    if parts.username or parts.password:
        raise InvalidConfigUrl(raw, "credentials in the URL are not allowed")
    if parts.query or parts.fragment:
        raise InvalidConfigUrl(raw, "query and fragment are not allowed")
    segments = [s for s in parts.path.split("/") if s]
    if len(parts.path.strip("/").split("/")) != len(segments) and segments:
        raise InvalidConfigUrl(raw, "empty path segment")
    host = parts.hostname
    netloc = parts.netloc
    enterprise = organization = repository = None
    if len(segments) == 1:
        if segments[0].lower() == "enterprises":
            raise InvalidConfigUrl(raw, "enterprise name missing")
        scope = Scope.ORGANIZATION
        organization = segments[0]
    elif len(segments) == 2:
        if segments[0].lower() == "enterprises":
            scope = Scope.ENTERPRISE
            enterprise = segments[1]
        else:
            scope = Scope.REPOSITORY
            organization, repository = segments
    elif not segments:
        raise InvalidConfigUrl(raw, "no enterprise, organization or repository in the path")
    else:
        raise InvalidConfigUrl(raw, "too many path segments")
    normalised = f"{parts.scheme}://{netloc}/{'/'.join(segments)}"
    return GitHubConfig(
        config_url=normalised,
        scope=scope,
        host=host,
        enterprise=enterprise,
        organization=organization,
        repository=repository,
        is_hosted=_is_hosted(host),
        rest_base_url=_rest_base(parts.scheme, netloc, host),
    )


#: ARC's default ``--github-url``: an API URL, not the web host config URLs start from.
DEFAULT_API_URL = "https://api.github.com/"


def server_url_from_api_url(url: str) -> str:
    """The web host of a GitHub API URL: ``https://api.github.com/`` -> ``https://github.com``,
    ``https://h/api/v3/`` -> ``https://h``; any other URL is taken as the web host already.

    ARC's legacy flags and Secrets name the API (``--github-url``, ``github_url``) while
    gharc's config URLs are web URLs (``https://h/org``), so every reader of those settings
    converts here, the one place that knows both spellings.
    """
    parts = urlsplit(url.strip().rstrip("/"))
    if parts.netloc.lower() == "api.github.com":
        return f"{parts.scheme}://github.com"
    path = parts.path.removesuffix("/api/v3")
    return f"{parts.scheme}://{parts.netloc}{path}"


def server_url(enterprise_url: str = "", api_url: str = "") -> str:
    """The GitHub web URL that legacy config URLs start from: the GitHub Enterprise Server
    URL when one is set (``--github-enterprise-url``, a Secret's ``github_enterprise_url``),
    else the web host of ``api_url`` (default ``https://api.github.com/``).

    The controller and the webhook server both take ARC's pair of settings; they must turn
    them into the same host, or an HRA would scale from one GitHub and register on another.
    An enterprise URL given with its ``/api/v3`` suffix is accepted too.
    """
    if enterprise_url.strip():
        return enterprise_url.strip().rstrip("/").removesuffix("/api/v3")
    return server_url_from_api_url(api_url or DEFAULT_API_URL)
