"""Settings of the legacy controllers: ARC's controller-manager flags (legacy.md section 7)
plus the timings of section 9, which tests shorten instead of waiting out ten minutes.

Why the flag-fed fields default to ``ControllerSettings.<name>``: each flag's default is
written once, in its declaration (:mod:`gharc.controllers.settings`), and ``LegacyOptions()``
built directly (as tests do) behaves as the process started without flags.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from gharc.api.legacy import constants as c
from gharc.controllers.settings import ControllerSettings
from gharc.github.auth import Credentials
from gharc.github.config import server_url


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class LegacyOptions:
    """Flags of ARC's ``main.go`` that the legacy controllers read."""

    github_url: str = server_url()
    """Base of the config URLs the GitHub clients are keyed by (``--github-url`` host); by
    default the web host of the default API URL, converted where every reader converts it."""
    runner_github_url: str | None = None
    """``GITHUB_URL`` of runner pods; default ``github_url`` with a trailing slash."""
    credentials: Credentials | None = None
    """The controller-wide credentials (``--github-token`` / App flags)."""
    runner_image: str = ControllerSettings.runner_image
    runner_image_pull_secrets: tuple[str, ...] = ControllerSettings.runner_image_pull_secrets
    docker_image: str = ControllerSettings.docker_image
    docker_gid: str = ControllerSettings.docker_gid
    docker_registry_mirror: str = ControllerSettings.docker_registry_mirror
    runner_status_update_hook: bool = ControllerSettings.runner_status_update_hook
    common_runner_labels: tuple[str, ...] = ControllerSettings.common_runner_labels
    default_scale_down_delay: float = ControllerSettings.default_scale_down_delay
    """``--default-scale-down-delay``: the HorizontalRunnerAutoscaler's default."""
    sync_period: float = ControllerSettings.sync_period
    """``--sync-period``: how often a HorizontalRunnerAutoscaler is recomputed."""
    version: str = "gharc"
    """Reported in ``GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT``."""

    registration_timeout: dt.timedelta = c.REGISTRATION_TIMEOUT
    unregistration_retry_delay: dt.timedelta = c.UNREGISTRATION_RETRY_DELAY
    runner_id_retry_delay: dt.timedelta = c.RETRY_DELAY_WAITING_FOR_RUNNER_ID
    token_error_retry_delay: dt.timedelta = c.RETRY_DELAY_ON_CREATE_REGISTRATION_ERROR
    rate_limit_retry_delay: dt.timedelta = c.RETRY_DELAY_ON_RATE_LIMIT
    recreation_delay: dt.timedelta = c.POD_RECREATION_DELAY_AFTER_WEBHOOK_SCALE
    force_delete_after: dt.timedelta = c.FORCE_DELETE_AFTER
    short_requeue: dt.timedelta = dt.timedelta(seconds=5)
    """RunnerDeployment's requeue after creating or updating a replica set."""
    clock: Callable[[], dt.datetime] = utcnow

    @property
    def runner_base_url(self) -> str:
        url = self.runner_github_url or self.github_url
        return url if url.endswith("/") else url + "/"
