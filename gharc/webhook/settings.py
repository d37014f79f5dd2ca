"""Every setting of ``gharc webhook-server``, each declared once: flag, env var, default, help.

Flags keep the names and defaults of ARC's ``github-webhook-server`` so the legacy chart's
arguments work unchanged; ``--addr``, ``--webhook-secret`` and ``--port`` are gharc's short
aliases. The parser and the environment fallback are derived from these fields
(:mod:`gharc.settings.declare`); the rules across settings (a secret or an explicit
``--insecure-allow-unsigned-deliveries``, ``--metrics-only`` needing an address) are in
:func:`gharc.webhook.main.parse_args`. The server's modules take their defaults from here
(``BATCH_WINDOW = WebhookSettings.batch_window``...), so a default is written once and a
server built directly, as tests do, behaves as the process started without flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from gharc.settings import common
from gharc.settings.common import GitHubSettings
from gharc.settings.declare import number, setting

__all__ = ["WebhookSettings"]


@dataclass(kw_only=True)
class WebhookSettings(GitHubSettings):
    """Everything ``gharc webhook-server`` was told, after defaults and the environment.

    The GitHub credentials are optional here: with them runner-group visibility is asked
    from GitHub and lost deliveries are found by polling; without, neither happens.
    """

    webhook_addr: str = setting(
        ":8000", flag="--webhook-addr", aliases=("--addr",), help="host:port to serve webhooks on."
    )
    port: int | None = setting(
        None,
        flag="--port",
        parse=number(int, minimum=0),
        help="Shorthand: serve on 0.0.0.0:PORT (wins over --webhook-addr).",
    )
    metrics_addr: str = common.metrics_addr()
    watch_namespace: str = setting(
        "", flag="--watch-namespace", help="Only HRAs of this namespace (default: all)."
    )
    log_level: str = common.log_level()
    log_format: str = common.log_format()
    queue_limit: int = setting(
        100,
        flag="--queue-limit",
        parse=number(int, positive=True),
        help="Scale operations waiting at most.",
    )
    secret: str = setting(
        "",
        flag="--github-webhook-secret-token",
        aliases=("--webhook-secret",),
        env="GITHUB_WEBHOOK_SECRET_TOKEN",
        help="Shared secret of the GitHub webhook; required unless "
        "--insecure-allow-unsigned-deliveries.",
    )
    batch_window: float = setting(
        3.0,
        flag="--batch-window",
        help="Seconds to batch scale operations (ARC: 3).",
    )
    kubeconfig: str | None = common.kubeconfig()
    insecure_allow_unsigned: bool = setting(
        False,
        flag="--insecure-allow-unsigned-deliveries",
        help="Start without a webhook secret and accept unsigned deliveries (never in production).",
    )
    read_timeout: float = setting(
        10.0,  # GitHub itself gives up on a delivery after 10 s
        flag="--read-timeout",
        parse=number(float, positive=True),
        help="Seconds a connection has to send its request head, and then its body.",
    )
    max_body_bytes: int = setting(
        25 * 1024 * 1024,  # GitHub caps payloads at 25 MB
        flag="--max-body-bytes",
        parse=number(int, positive=True),
        help="Largest body accepted (25 MiB).",
    )
    max_concurrent_reads: int = setting(
        4,
        flag="--max-concurrent-reads",
        parse=number(int, positive=True),
        help="Request bodies read at once.",
    )
    ack_timeout: float = setting(
        8.0,  # GitHub waits 10 s for an answer
        flag="--ack-timeout",
        parse=number(float, positive=True),
        help="Seconds to wait for a reservation to be stored before answering 503.",
    )
    queued_job_poll_interval: float = setting(
        # Each round revalidates its listings (an unchanged one is a 304, free of quota),
        # so 20 s finds a lost delivery's job three times sooner than ARC's sync period.
        20.0,
        flag="--queued-job-poll-interval",
        parse=number(float, minimum=0),
        help="Seconds between polls for queued jobs no delivery reserved for; 0 turns it off.",
    )
    workflow_job_metrics: bool = setting(
        False,
        flag="--workflow-job-metrics",
        help="Export ARC's github_workflow_job* metrics (actions-metrics-server) on "
        "--metrics-addr from verified deliveries.",
    )
    metrics_only: bool = setting(
        False,
        flag="--metrics-only",
        help="Count deliveries in the github_workflow_job* metrics and scale nothing (ARC's "
        "actions-metrics-server; implies --workflow-job-metrics).",
    )
    workflow_job_metrics_max_series: int = setting(
        1000,
        flag="--workflow-job-metrics-max-series",
        parse=number(int, positive=True),
        help="Distinct label sets kept per github_workflow_job* metric; later ones are "
        'counted under "other".',
    )
