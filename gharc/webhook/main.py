"""``gharc webhook-server``: ARC's ``github-webhook-server`` (legacy.md 5.1).

Flags keep ARC's names and defaults so the chart's arguments work unchanged; a few short
aliases (``--webhook-secret``, ``--addr``, ``--port``) are added. The secret comes from
``--github-webhook-secret-token``, else the env ``GITHUB_WEBHOOK_SECRET_TOKEN``; an empty
secret is refused (see below).
GitHub credentials (``--github-token`` or the ``--github-app-*`` triple, env ``GITHUB_*``)
are optional: with them, runner-group visibility is asked from GitHub and queued jobs
whose delivery was lost are found by polling (``--queued-job-poll-interval``); without,
every managed group is assumed visible and nothing is polled.

Unlike ARC, the server refuses to start without a webhook secret unless
``--insecure-allow-unsigned-deliveries`` says that unauthenticated deliveries are wanted
(a test cluster behind a trusted proxy): anyone who can reach the port could otherwise
reserve runners.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("gharc.webhook")


class UsageError(ValueError):
    """The server cannot start with these flags."""


@dataclass
class WebhookArgs:
    webhook_addr: str = ":8000"
    metrics_addr: str = "0"
    watch_namespace: str = ""
    log_level: str = "debug"
    log_format: str = "text"
    queue_limit: int = 100
    secret: str = ""
    github_token: str = ""
    github_app_id: str = ""
    github_app_installation_id: str = ""
    github_app_private_key: str = ""
    github_url: str = ""
    github_enterprise_url: str = ""
    batch_window: float = 3.0
    kubeconfig: str | None = None
    insecure_allow_unsigned: bool = False
    read_timeout: float = 10.0
    max_body_bytes: int = 25 * 1024 * 1024
    max_concurrent_reads: int = 4
    ack_timeout: float = 8.0
    queued_job_poll_interval: float = 60.0
    workflow_job_metrics: bool = False
    metrics_only: bool = False
    workflow_job_metrics_max_series: int = 1000


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gharc webhook-server",
        description="Scale legacy RunnerDeployments/RunnerSets on GitHub workflow_job webhooks.",
    )
    a = p.add_argument
    a("--webhook-addr", "--addr", default=":8000", help="host:port to serve webhooks on")
    a("--port", type=int, default=None, help="shorthand: serve on 0.0.0.0:PORT")
    a(
        "--metrics-addr",
        default="0",
        help='Prometheus /metrics host:port, e.g. ":8080" (default "0": off, as in ARC\'s chart)',
    )
    a("--watch-namespace", default="", help="only HRAs in this namespace (default: all)")
    a("--log-level", default="debug", help="debug, info, warn or error")
    a("--log-format", default="text", choices=("text", "json"))
    a("--queue-limit", type=int, default=100, help="scale operations waiting at most")
    a(
        "--github-webhook-secret-token",
        "--webhook-secret",
        dest="secret",
        default="",
        help="shared secret of the GitHub webhook (default: $GITHUB_WEBHOOK_SECRET_TOKEN)",
    )
    a("--github-token", default=env.get("GITHUB_TOKEN", ""))
    a("--github-app-id", default=env.get("GITHUB_APP_ID", ""))
    a("--github-app-installation-id", default=env.get("GITHUB_APP_INSTALLATION_ID", ""))
    a(
        "--github-app-private-key",
        default=env.get("GITHUB_APP_PRIVATE_KEY", ""),
        help="PEM text or the path of a PEM file",
    )
    a("--github-url", default=env.get("GITHUB_URL", ""), help="GitHub API URL")
    a("--github-enterprise-url", default=env.get("GITHUB_ENTERPRISE_URL", ""))
    a("--batch-window", type=float, default=3.0, help="seconds to batch operations (ARC: 3)")
    a("--kubeconfig", default=None)
    a(
        "--insecure-allow-unsigned-deliveries",
        action="store_true",
        help="start without a webhook secret and accept unsigned deliveries (never in production)",
    )
    a(
        "--read-timeout",
        type=float,
        default=10.0,
        help="seconds a connection has to send its request head, and then its body",
    )
    a("--max-body-bytes", type=int, default=25 * 1024 * 1024, help="largest body accepted")
    a("--max-concurrent-reads", type=int, default=4, help="request bodies read at once")
    a(
        "--ack-timeout",
        type=float,
        default=8.0,
        help="seconds to wait for a reservation to be stored before answering 503",
    )
    a(
        "--queued-job-poll-interval",
        type=float,
        default=60.0,
        help="seconds between polls for queued jobs no delivery reserved for (0: off)",
    )
    a(
        "--workflow-job-metrics",
        action="store_true",
        help="export ARC's github_workflow_job* metrics (actions-metrics-server) on "
        "--metrics-addr from verified deliveries",
    )
    a(
        "--metrics-only",
        action="store_true",
        help="count deliveries in the github_workflow_job* metrics and scale nothing "
        "(ARC's actions-metrics-server; implies --workflow-job-metrics)",
    )
    a(
        "--workflow-job-metrics-max-series",
        type=int,
        default=1000,
        help="distinct label sets kept per github_workflow_job* metric; later ones are "
        'counted under "other"',
    )
    return p


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> WebhookArgs:
    env = os.environ if environ is None else environ
    ns = build_parser(env).parse_args(list(argv))
    from gharc.kube.logging import LOG_LEVELS

    if ns.log_level not in LOG_LEVELS:
        raise UsageError(f"--log-level {ns.log_level!r}: use debug, info, warn or error")
    if ns.queue_limit <= 0:
        raise UsageError("--queue-limit must be positive")
    secret = ns.secret or env.get("GITHUB_WEBHOOK_SECRET_TOKEN", "")
    if not secret and not ns.insecure_allow_unsigned_deliveries:
        raise UsageError(
            "no webhook secret: set --github-webhook-secret-token or "
            "GITHUB_WEBHOOK_SECRET_TOKEN (or pass --insecure-allow-unsigned-deliveries)"
        )
    for flag, value in (
        ("--read-timeout", ns.read_timeout),
        ("--max-body-bytes", ns.max_body_bytes),
        ("--max-concurrent-reads", ns.max_concurrent_reads),
        ("--ack-timeout", ns.ack_timeout),
    ):
        if value <= 0:
            raise UsageError(f"{flag} must be positive")
    if ns.queued_job_poll_interval < 0:
        raise UsageError("--queued-job-poll-interval must be 0 (off) or positive")
    if ns.workflow_job_metrics_max_series <= 0:
        raise UsageError("--workflow-job-metrics-max-series must be positive")
    if ns.metrics_only and ns.metrics_addr in ("", "0"):
        raise UsageError("--metrics-only serves nothing without --metrics-addr (e.g. :8080)")
    addr = f"0.0.0.0:{ns.port}" if ns.port is not None else ns.webhook_addr
    return WebhookArgs(
        webhook_addr=addr,
        metrics_addr=ns.metrics_addr,
        watch_namespace=ns.watch_namespace,
        log_level=ns.log_level,
        log_format=ns.log_format,
        queue_limit=ns.queue_limit,
        secret=secret,
        github_token=ns.github_token,
        github_app_id=ns.github_app_id,
        github_app_installation_id=ns.github_app_installation_id,
        github_app_private_key=ns.github_app_private_key,
        github_url=ns.github_url,
        github_enterprise_url=ns.github_enterprise_url,
        batch_window=ns.batch_window,
        kubeconfig=ns.kubeconfig,
        insecure_allow_unsigned=ns.insecure_allow_unsigned_deliveries,
        read_timeout=ns.read_timeout,
        max_body_bytes=ns.max_body_bytes,
        max_concurrent_reads=ns.max_concurrent_reads,
        ack_timeout=ns.ack_timeout,
        queued_job_poll_interval=ns.queued_job_poll_interval,
        workflow_job_metrics=ns.workflow_job_metrics or ns.metrics_only,
        metrics_only=ns.metrics_only,
        workflow_job_metrics_max_series=ns.workflow_job_metrics_max_series,
    )


def server_url(args: WebhookArgs) -> str:
    """The GitHub web URL config URLs start from (enterprise URL, else from the API URL),
    normalised as the controller does so both find an HRA's scope on the same host."""
    from gharc.github.config import server_url as normalised_server_url

    return normalised_server_url(args.github_enterprise_url, args.github_url)


def credentials(args: WebhookArgs) -> Any:
    """PAT or App credentials, or None (no visibility check) when none are configured."""
    from gharc.github.auth import GitHubApp, PersonalAccessToken

    if args.github_token:
        return PersonalAccessToken(args.github_token)
    if args.github_app_id and args.github_app_installation_id and args.github_app_private_key:
        key = args.github_app_private_key
        path = Path(key)
        if len(key) < 4096 and "\n" not in key and path.is_file():
            key = path.read_text(encoding="utf-8")
        return GitHubApp(args.github_app_id, args.github_app_installation_id, key)
    return None


async def run_webhook_server(
    args: WebhookArgs,
    *,
    on_server: Callable[[Any, Any], None] | None = None,
    handle_signals: bool = True,
    registry: Any = None,
) -> None:
    """Run until SIGTERM/SIGINT or ``manager.stop()``; ``on_server(manager, server)`` is
    called before the manager runs (tests read ``server.port`` after ``server.started``)."""
    from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNER_SETS
    from gharc.kube.client import KubeClient
    from gharc.kube.manager import Manager
    from gharc.webhook.app import WebhookServer, github_visibility
    from gharc.webhook.body import BodyLimits
    from gharc.webhook.clients import OwnerClients
    from gharc.webhook.jobmetrics import WorkflowJobMetrics
    from gharc.webhook.server import WebhookMetrics

    if not args.secret:
        log.warning(
            "--insecure-allow-unsigned-deliveries: deliveries are NOT authenticated; "
            "anyone who can reach %s can reserve runners",
            args.webhook_addr,
        )
    creds = None if args.metrics_only else credentials(args)
    if creds is None and args.queued_job_poll_interval > 0 and not args.metrics_only:
        log.warning(
            "no GitHub credentials: queued jobs whose delivery is lost are not found "
            "(the queued-job poll needs --github-token or the --github-app-* flags)"
        )
    kube = await KubeClient.from_config(kubeconfig=args.kubeconfig, field_manager="gharc-webhook")
    github = OwnerClients(server_url(args), creds) if creds else None
    try:
        manager_kw: dict[str, Any] = {}
        if registry is not None:
            manager_kw["registry"] = registry
        manager = Manager(
            kube,
            namespace=args.watch_namespace or None,
            metrics_address=None if args.metrics_addr in ("", "0") else args.metrics_addr,
            handle_signals=handle_signals,
            **manager_kw,
        )
        if not args.metrics_only:  # a metrics-only server reads nothing from Kubernetes
            for resource in (HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNER_SETS):
                manager.cache.informer(resource)
        job_metrics = None
        if args.workflow_job_metrics:
            job_metrics = WorkflowJobMetrics(
                manager.registry, max_series=args.workflow_job_metrics_max_series
            )
        server = WebhookServer(
            kube,
            manager.cache,
            address=args.webhook_addr,
            secret=args.secret,
            namespace=args.watch_namespace or None,
            queue_limit=args.queue_limit,
            batch_window=args.batch_window,
            visible_groups=github_visibility(github) if github else None,
            metrics=WebhookMetrics(manager.registry),
            body_limits=BodyLimits(
                limit=args.max_body_bytes,
                timeout=args.read_timeout,
                slots=args.max_concurrent_reads,
            ),
            ack_timeout=args.ack_timeout,
            github=github,
            poll_interval=args.queued_job_poll_interval,
            job_metrics=job_metrics,
            scaling=not args.metrics_only,
        )
        manager.add(server)
        if on_server is not None:
            on_server(manager, server)
        await manager.run()
    finally:
        if github is not None:
            await github.aclose()
        await kube.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gharc webhook-server``; returns the exit code."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        print(f"gharc webhook-server: error: {err}", file=sys.stderr)
        return 2
    from gharc.kube.logging import LOG_LEVELS, setup_logging

    setup_logging(
        level=LOG_LEVELS[args.log_level],
        format="json" if args.log_format == "json" else "console",
    )
    try:
        asyncio.run(run_webhook_server(args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        log.exception("gharc webhook-server stopped with an error: %s", err)
        return 1
    return 0
