"""Running ``gharc webhook-server`` inside a test and signing deliveries for it.

Several test modules start the server in their own event loop and post signed
``workflow_job`` deliveries to it; each wrote the same start-up and headers. They live here
once so that a change to how the server is started (its hooks, its registry) is made once.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from prometheus_client import CollectorRegistry

from gharc.webhook.main import WebhookArgs, run_webhook_server
from gharc.webhook.signature import sign

__all__ = ["delivery_headers", "serve"]


def serve(args: WebhookArgs, holder: dict[str, Any]) -> Coroutine[Any, Any, None]:
    """``run_webhook_server`` as a test runs it: no signal handlers, a metrics registry of
    its own (tests share the process), and its manager and server put in ``holder`` under
    ``manager`` and ``server`` once they exist (the server's port is known from then on)."""
    return run_webhook_server(
        args,
        on_server=lambda m, s: holder.update(manager=m, server=s),
        handle_signals=False,
        registry=CollectorRegistry(),
    )


def delivery_headers(secret: str, body: bytes, delivery_id: str) -> dict[str, str]:
    """The headers GitHub sends with a ``workflow_job`` delivery of ``body``, signed with
    the hook's ``secret``."""
    return {
        "X-GitHub-Event": "workflow_job",
        "X-GitHub-Delivery": delivery_id,
        "Content-Type": "application/json",
        "X-Hub-Signature-256": sign(secret, body),
    }
