"""``gharc webhook-server``: ARC's ``github-webhook-server`` (legacy.md 5.1).

Every flag and env var is declared once, in :class:`~gharc.webhook.settings.WebhookSettings`
(ARC's names and defaults, so the chart's arguments work unchanged, and a few short aliases:
``--webhook-secret``, ``--addr``, ``--port``). The secret comes from
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
from typing import Any

from gharc.kube.logging import configure_logging
from gharc.kube.serving import serving_address
from gharc.settings import declare
from gharc.settings.credentials import github_credentials
from gharc.settings.declare import UsageError
from gharc.webhook.settings import WebhookSettings

__all__ = [
    "WebhookArgs",
    "build_parser",
    "credentials",
    "main",
    "parse_args",
    "run_webhook_server",
    "server_url",
]

log = logging.getLogger("gharc.webhook")

#: The name callers and tests have always used for the webhook server's settings.
WebhookArgs = WebhookSettings


def build_parser() -> argparse.ArgumentParser:
    """The ``gharc webhook-server`` parser, derived from :class:`WebhookSettings`."""
    return declare.build_parser(
        WebhookSettings,
        prog="gharc webhook-server",
        description="Scale legacy RunnerDeployments/RunnerSets on GitHub workflow_job webhooks.",
    )


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> WebhookSettings:
    """argv (without the program name) + environment -> :class:`WebhookSettings`."""
    env = os.environ if environ is None else environ
    ns = build_parser().parse_args(list(argv))
    args = WebhookSettings(**declare.read(WebhookSettings, ns, env))
    if not args.secret and not args.insecure_allow_unsigned:
        raise UsageError(
            "no webhook secret: set --github-webhook-secret-token or "
            "GITHUB_WEBHOOK_SECRET_TOKEN (or pass --insecure-allow-unsigned-deliveries)"
        )
    if args.metrics_only and serving_address(args.metrics_addr) is None:
        raise UsageError("--metrics-only serves nothing without --metrics-addr (e.g. :8080)")
    if args.port is not None:
        args.webhook_addr = f"0.0.0.0:{args.port}"
    args.workflow_job_metrics = args.workflow_job_metrics or args.metrics_only
    return args


def server_url(args: WebhookSettings) -> str:
    """The GitHub web URL config URLs start from (enterprise URL, else from the API URL),
    normalised as the controller does so both find an HRA's scope on the same host."""
    from gharc.github.config import server_url as normalised_server_url

    return normalised_server_url(args.github_enterprise_url, args.github_url)


def credentials(args: WebhookSettings) -> Any:
    """PAT or App credentials, or None (no visibility check) when none are configured."""
    return github_credentials(args, required=False)


async def run_webhook_server(
    args: WebhookSettings,
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
            metrics_address=serving_address(args.metrics_addr),
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
    configure_logging(args)
    try:
        asyncio.run(run_webhook_server(args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        log.exception("gharc webhook-server stopped with an error: %s", err)
        return 1
    return 0
