"""The ``workflow_job`` webhook endpoint (legacy.md 5.2, ARC ``Handle``).

Answers, so a GitHub delivery log tells the operator what happened:

* ``GET`` any path: 200 ``webhook server is running``.
* Missing ``X-Hub-Signature-256``: 401; wrong, SHA-1 only or malformed signature: 403 (ARC
  answers 500 for both). Checked from the headers before the body is read, and over the
  body before it is parsed; nothing is applied and the rejection is logged.
* Body too large: 413; too slow: 408; every body-read slot busy for the whole read timeout:
  503 (:mod:`gharc.webhook.body`).
* Body that is not JSON or not a well-formed payload, missing ``X-GitHub-Event``,
  unsupported content type: 400 with the reason (ARC: 500).
* ``ping``: 200 ``pong``.
* ``workflow_job`` ``queued``/``completed``: 200 ``scaled <hra> by <n>`` once the
  reservation change is **stored** in the HRA, or 200 with the reason nothing was scaled;
  other actions (``in_progress``, ``waiting``): 200, empty body. A repeated
  ``X-GitHub-Delivery`` gets the first answer and changes nothing (:mod:`gharc.webhook.dedup`).
* Any other event type: 500, as ARC (so a wrongly subscribed hook shows failed deliveries).
* Lookup failure, a full queue, or a reservation not stored within ``ack_timeout``: 503, so
  the delivery shows as failed and a redelivery applies it (at most once, by its job's
  reservation name).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from gharc.webhook.batch import (
    ADDED,
    FINISHED,
    GONE,
    NOTHING,
    RESERVED,
    BatchScaler,
    QueueFull,
    ScaleOp,
)
from gharc.webhook.batch import job_key as reservation_name
from gharc.webhook.body import BodyError, BodyReader
from gharc.webhook.dedup import Answer, DeliveryWindow
from gharc.webhook.jobmetrics import WorkflowJobMetrics
from gharc.webhook.lookup import TargetLookup, TargetLookupError
from gharc.webhook.payload import JobEvent, PayloadError, action_of, decode, workflow_job
from gharc.webhook.settings import WebhookSettings
from gharc.webhook.signature import SignatureError, Verifier

log = logging.getLogger("gharc.webhook")

RUNNING = "webhook server is running\n"
NO_TARGET = "no horizontalrunnerautoscaler to scale for this github event"
ACK_TIMEOUT = WebhookSettings.ack_timeout

#: Metric label values: anything else is counted as "other", so senders cannot mint series.
EVENTS = ("workflow_job", "ping")
ACTIONS = ("queued", "in_progress", "waiting", "completed")
REJECTIONS = ("missing_signature", "bad_signature", "too_large", "too_slow", "busy")


def _label(value: str, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else ("" if not value else "other")


class WebhookMetrics:
    """gharc's webhook counters (ARC's webhook server exports none of its own). Every
    label value comes from a fixed set; requests are counted only once verified."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = registry if registry is not None else REGISTRY
        self.requests = Counter(
            "gharc_webhook_requests_total",
            "Verified webhook deliveries by event, action and HTTP status answered.",
            ("event", "action", "code"),
            registry=reg,
        )
        self.rejected = Counter(
            "gharc_webhook_rejected_total",
            "Requests refused before their signature was verified, by reason.",
            ("reason",),
            registry=reg,
        )
        self.duplicates = Counter(
            "gharc_webhook_duplicate_deliveries_total",
            "Deliveries answered from the delivery-ID window or found already reserved.",
            registry=reg,
        )
        self.poll_reservations = Counter(
            "gharc_webhook_poll_reservations_total",
            "Reservations the queued-job poll made for jobs no delivery had reserved for.",
            registry=reg,
        )
        self.scale_ops = Counter(
            "gharc_webhook_scale_operations_total",
            "Scale operations stored, by HRA and direction (up/down).",
            ("namespace", "horizontalrunnerautoscaler", "direction"),
            registry=reg,
        )
        self.queue_length = Gauge(
            "gharc_webhook_queue_length",
            "Scale operations waiting to be stored by the batch scaler.",
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
        body: BodyReader | None = None,
        deliveries: DeliveryWindow | None = None,
        ack_timeout: float = ACK_TIMEOUT,
        on_job: Callable[[JobEvent], None] | None = None,
        job_metrics: WorkflowJobMetrics | None = None,
        scaling: bool = True,
    ) -> None:
        self.lookup = lookup
        self.job_metrics = job_metrics
        self.scaling = scaling
        self.scaler = scaler
        self.secret = secret
        self.metrics = metrics
        self.body = body or BodyReader()
        self.deliveries = deliveries or DeliveryWindow()
        self.ack_timeout = ack_timeout
        self.on_job = on_job

    # ---- answers ---------------------------------------------------------------------

    def _reject(self, reason: str, status: int, text: str) -> web.Response:
        """An answer to a request that was never verified (its headers are not counted)."""
        if self.metrics is not None:
            self.metrics.rejected.labels(reason).inc()
        resp = web.Response(status=status, text=text)
        resp.force_close()  # do not read (or wait for) the rest of an unwanted body
        return resp

    def _count(self, event: str, action: str, status: int) -> None:
        if self.metrics is not None:
            self.metrics.requests.labels(
                _label(event, EVENTS), _label(action, ACTIONS), str(status)
            ).inc()
            self.metrics.queue_length.set(self.scaler.backlog)

    # ---- handling --------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        if request.method.upper() == "GET":
            return web.Response(text=RUNNING)
        event = request.headers.get("X-GitHub-Event", "")
        delivery = request.headers.get("X-GitHub-Delivery", "")
        hook = request.headers.get("X-GitHub-Hook-ID", "-")
        ctx = f"event={event[:64] or '-'} delivery={delivery[:64] or '-'} hook={hook[:32]}"
        verifier: Verifier | None = None
        if self.secret:
            try:
                verifier = Verifier(self.secret, request.headers)
            except SignatureError as err:
                log.warning("rejected webhook (%s): %s", ctx, err.message)
                reason = "missing_signature" if err.status == 401 else "bad_signature"
                return self._reject(reason, err.status, err.message + "\n")
        check = verifier.verify if verifier is not None else _accept
        try:
            body = await self.body.read(
                request, verifier.update if verifier is not None else _ignore, check
            )
        except BodyError as err:
            log.warning("rejected webhook (%s): %s", ctx, err.message)
            reason = {408: "too_slow", 413: "too_large"}.get(err.status, "busy")
            return self._reject(reason, err.status, err.message + "\n")
        except SignatureError as err:
            log.warning("rejected webhook (%s): %s", ctx, err.message)
            return self._reject("bad_signature", err.status, err.message + "\n")
        # From here on the request is authentic: its headers may be counted and acted on.
        if not delivery:
            answer = await self._verified(request.content_type, body, event, ctx)
            return web.Response(status=answer.status, text=answer.text)
        first, pending = self.deliveries.claim(delivery)
        if not first:
            answer = await asyncio.shield(pending)
            if self.metrics is not None:
                self.metrics.duplicates.inc()
            log.info("repeated delivery answered from the window (%s)", ctx)
            return web.Response(status=answer.status, text=answer.text)
        answer = Answer(500, "")
        try:
            answer = await self._verified(request.content_type, body, event, ctx)
        finally:
            self.deliveries.settle(delivery, pending, answer)
        return web.Response(status=answer.status, text=answer.text)

    async def _verified(self, content_type: str, body: bytes, event: str, ctx: str) -> Answer:
        action = ""
        try:
            payload = decode(content_type, body)
            if event == "workflow_job":
                action = action_of(payload)
                if self.scaling:
                    answer = await self._workflow_job(payload, action, ctx)
                else:
                    answer = Answer(200, "")
                # Counted once per job event: a delivery that failed (5xx) is redelivered.
                if self.job_metrics is not None and answer.status < 500:
                    self.job_metrics.record(payload, action)
            elif not event:
                answer = Answer(400, "missing X-GitHub-Event header\n")
            elif event == "ping":
                log.info("received ping (%s)", ctx)
                answer = Answer(200, "pong")
            else:
                log.info("unknown event type (%s)", ctx)
                answer = Answer(500, "")
        except PayloadError as err:
            log.warning("bad webhook payload (%s): %s", ctx, err)
            answer = Answer(400, f"bad payload: {err}\n")
        self._count(event, action, answer.status)
        return answer

    async def _workflow_job(self, payload: dict[str, object], action: str, ctx: str) -> Answer:
        if action not in ("queued", "completed"):
            return Answer(200, "")
        job = workflow_job(payload)
        if self.on_job is not None:
            self.on_job(job)
        ctx = f"{ctx} action={action} repo={job.owner}/{job.repo} labels={list(job.labels)}"
        ctx += f" job={job.job_id}"
        try:
            match = await self.lookup.find(
                owner=job.owner,
                repo=job.repo,
                owner_type=job.owner_type,
                enterprise=job.enterprise,
                labels=job.labels,
            )
        except TargetLookupError as err:
            log.error("finding the HRA failed (%s): %s", ctx, err)
            return Answer(503, str(err))
        if match is None:
            log.info("no HRA for %s", ctx)
            return Answer(200, NO_TARGET)
        amount = 1
        if action == "completed":
            if job.conclusion == "skipped":
                log.info("ignored skipped job (%s)", ctx)
                return Answer(200, "")
            if job.conclusion == "success" and job.runner_id is None:
                log.info("ignored completion unrelated to a self-hosted runner (%s)", ctx)
                return Answer(200, "")
            amount = -1
        key = reservation_name(job.job_id)
        op = ScaleOp(
            match.namespace, match.name, amount, match.duration, key, f"{job.owner}/{job.repo}"
        )
        try:
            stored = self.scaler.submit(op)
        except QueueFull as err:
            log.error("scale queue full; not acknowledged (%s): %s", ctx, err)
            return Answer(503, "scale queue full\n")
        try:
            outcome = await asyncio.wait_for(asyncio.shield(stored), self.ack_timeout)
        except TimeoutError:
            log.error("reservation not stored within %gs (%s)", self.ack_timeout, ctx)
            return Answer(503, "reservation not stored yet; redeliver\n")
        if outcome == GONE:
            return Answer(200, NO_TARGET)
        if outcome == NOTHING:
            msg = f"{match.name}: {outcome} for job {job.job_id}"
        elif outcome in (RESERVED, FINISHED):
            if self.metrics is not None:
                self.metrics.duplicates.inc()
            msg = f"{match.name}: {outcome} for job {job.job_id}"
        else:
            msg = f"scaled {match.name} by {amount}"
            if self.metrics is not None:
                direction = "up" if outcome == ADDED else "down"
                self.metrics.scale_ops.labels(match.namespace, match.name, direction).inc()
        log.info("%s (%s)", msg, ctx)
        return Answer(200, msg)


def _accept() -> None:
    return None


def _ignore(chunk: bytes) -> None:
    return None


def make_app(handler: WebhookHandler) -> web.Application:
    """Every path and method goes to the handler, as in ARC."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler.handle)
    return app
