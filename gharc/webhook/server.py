"""The ``workflow_job`` webhook endpoint (legacy.md 5.2, ARC ``Handle``).

Answers, so a GitHub delivery log tells the operator what happened:

* ``GET`` any path: 200 ``webhook server is running``.
* Missing signature: 401; wrong signature: 403 (ARC answers 500 for both). Nothing is
  applied and the rejection is logged with the delivery ID.
* Body that is not JSON, missing ``X-GitHub-Event``, unsupported content type: 400 (ARC: 500).
* ``ping``: 200 ``pong``.
* ``workflow_job`` ``queued``/``completed``: 200 ``scaled <hra> by <n>``, or 200 with the
  reason nothing was scaled; other actions (``in_progress``, ``waiting``): 200, empty body.
* Any other event type: 500, as ARC (so a wrongly subscribed hook shows failed deliveries).
* Lookup failure or a full queue: 500.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from gharc.webhook.batch import BatchScaler, ScaleOp
from gharc.webhook.lookup import TargetLookup, TargetLookupError
from gharc.webhook.signature import SignatureError, verify

log = logging.getLogger("gharc.webhook")

RUNNING = "webhook server is running\n"
NO_TARGET = "no horizontalrunnerautoscaler to scale for this github event"
MAX_BODY = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB


class WebhookMetrics:
    """gharc's webhook counters (ARC's webhook server exports none of its own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = registry if registry is not None else REGISTRY
        self.requests = Counter(
            "gharc_webhook_requests_total",
            "Webhook deliveries by event, action and HTTP status answered.",
            ("event", "action", "code"),
            registry=reg,
        )
        self.scale_ops = Counter(
            "gharc_webhook_scale_operations_total",
            "Scale operations enqueued, by HRA and direction (up/down).",
            ("namespace", "horizontalrunnerautoscaler", "direction"),
            registry=reg,
        )
        self.queue_length = Gauge(
            "gharc_webhook_queue_length",
            "Scale operations waiting for the batch scaler.",
            registry=reg,
        )


class WebhookHandler:
    def __init__(
        self,
        lookup: TargetLookup,
        scaler: BatchScaler,
        *,
        secret: str = "",
        metrics: WebhookMetrics | None = None,
    ) -> None:
        self.lookup = lookup
        self.scaler = scaler
        self.secret = secret
        self.metrics = metrics

    def _answer(self, event: str, action: str, status: int, text: str = "") -> web.Response:
        if self.metrics is not None:
            self.metrics.requests.labels(event or "-", action or "-", str(status)).inc()
            self.metrics.queue_length.set(self.scaler.queue.qsize())
        return web.Response(status=status, text=text)

    async def handle(self, request: web.Request) -> web.Response:
        if request.method.upper() == "GET":
            return web.Response(text=RUNNING)
        event = request.headers.get("X-GitHub-Event", "")
        delivery = request.headers.get("X-GitHub-Delivery", "")
        hook = request.headers.get("X-GitHub-Hook-ID", "-")
        ctx = f"event={event or '-'} delivery={delivery or '-'} hook={hook}"
        body = await request.read()
        if self.secret:
            try:
                verify(self.secret, body, request.headers)
            except SignatureError as err:
                log.warning("rejected webhook (%s): %s", ctx, err.message)
                return self._answer(event, "", err.status, err.message + "\n")
        try:
            payload = _decode(request.content_type, body)
        except ValueError as err:
            log.warning("bad webhook payload (%s): %s", ctx, err)
            return self._answer(event, "", 400, f"bad payload: {err}\n")
        if not event:
            return self._answer(event, "", 400, "missing X-GitHub-Event header\n")
        if event == "ping":
            log.info("received ping (%s)", ctx)
            return self._answer(event, "", 200, "pong")
        if event != "workflow_job":
            log.info("unknown event type %s (%s)", event, ctx)
            return self._answer(event, "", 500, "")
        return await self._workflow_job(payload, ctx)

    async def _workflow_job(self, payload: dict[str, Any], ctx: str) -> web.Response:
        event = "workflow_job"
        action = str(payload.get("action") or "")
        job = payload.get("workflow_job")
        repo = payload.get("repository")
        if action not in ("queued", "completed"):
            return self._answer(event, action, 200, "")
        if not isinstance(job, dict) or not isinstance(repo, dict):
            return self._answer(
                event, action, 400, "bad payload: workflow_job and repository required\n"
            )
        owner_obj = repo.get("owner") or {}
        owner = str(owner_obj.get("login") or "")
        repo_name = str(repo.get("name") or "")
        enterprise = str((payload.get("enterprise") or {}).get("slug") or "")
        labels = [str(x) for x in job.get("labels") or []]
        ctx = f"{ctx} action={action} repo={owner}/{repo_name} labels={labels} job={job.get('id')}"
        try:
            match = await self.lookup.find(
                owner=owner,
                repo=repo_name,
                owner_type=str(owner_obj.get("type") or ""),
                enterprise=enterprise,
                labels=labels,
            )
        except TargetLookupError as err:
            log.error("finding the HRA failed (%s): %s", ctx, err)
            return self._answer(event, action, 500, str(err))
        if match is None:
            log.info("no HRA for %s", ctx)
            return self._answer(event, action, 200, NO_TARGET)
        amount = 1
        if action == "completed":
            conclusion = job.get("conclusion")
            if conclusion == "skipped":
                log.info("ignored skipped job (%s)", ctx)
                return self._answer(event, action, 200, "")
            if conclusion == "success" and job.get("runner_id") is None:
                log.info("ignored completion unrelated to a self-hosted runner (%s)", ctx)
                return self._answer(event, action, 200, "")
            amount = -1
        op = ScaleOp(match.namespace, match.name, amount, match.duration)
        if not self.scaler.offer(op):
            log.error("scale queue full (%d); dropped %s", self.scaler.queue.maxsize, ctx)
            return self._answer(event, action, 500, "")
        if self.metrics is not None:
            self.metrics.scale_ops.labels(
                match.namespace, match.name, "up" if amount > 0 else "down"
            ).inc()
        msg = f"scaled {match.name} by {amount}"
        log.info("%s (%s)", msg, ctx)
        return self._answer(event, action, 200, msg)


def _decode(content_type: str, body: bytes) -> dict[str, Any]:
    """The JSON payload of a delivery, for GitHub's two content types."""
    if content_type == "application/x-www-form-urlencoded":
        form = parse_qs(body.decode("utf-8", "replace"))
        if "payload" not in form:
            raise ValueError("form body without a payload field")
        raw: Any = form["payload"][0]
    elif content_type in ("application/json", ""):
        raw = body
    else:
        raise ValueError(f"unsupported content type {content_type!r}")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"not JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError("payload is not a JSON object")
    return data


def make_app(handler: WebhookHandler) -> web.Application:
    """Every path and method goes to the handler, as in ARC."""
    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_route("*", "/{tail:.*}", handler.handle)
    return app
