"""GitHub REST and Actions service client: config URLs, credentials, typed errors, retries,
an RFC 9111 REST cache and per-endpoint metrics. Imports nothing else of gharc."""

from gharc.github.actions import ActionsClient, AdminConnection
from gharc.github.auth import (
    CredentialsError,
    GitHubApp,
    PersonalAccessToken,
    credentials_from_secret_data,
)
from gharc.github.config import GitHubConfig, InvalidConfigUrl, Scope, parse_config_url
from gharc.github.errors import *  # noqa: F403
from gharc.github.metrics import GitHubMetrics
from gharc.github.pool import ClientPool
from gharc.github.rest import RestClient
from gharc.github.transport import RetryPolicy

__all__ = [
    "ActionsClient",
    "AdminConnection",
    "ClientPool",
    "CredentialsError",
    "GitHubApp",
    "GitHubConfig",
    "GitHubMetrics",
    "InvalidConfigUrl",
    "PersonalAccessToken",
    "RestClient",
    "RetryPolicy",
    "Scope",
    "credentials_from_secret_data",
    "parse_config_url",
]
