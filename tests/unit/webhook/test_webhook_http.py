"""The webhook endpoint over real HTTP on 127.0.0.1, with HRAs kept in memory: what it
answers, when it answers (after the reservation is stored), what repeats and malformed or
hostile requests change (nothing), and the metric series they can create."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from gharc.webhook.app import WebhookServer
from gharc.webhook.body import BodyLimits
from gharc.webhook.lookup import TargetLookup
from gharc.webhook.server import NO_TARGET, WebhookMetrics
from gharc.webhook.signature import sign
from testworld.wait import eventually

sys.path.insert(0, str(Path(__file__).parent))
from _memkube import MemoryKube, world

SECRET = "s3cret"


def payload(action: str = "queued", job_id: int = 1, **job: Any) -> dict[str, Any]:
    return {
        "action": action,
        "workflow_job": {"id": job_id, "run_id": 2, "labels": ["self-hosted", "linux"], **job},
        "repository": {
            "name": "app",
            "full_name": "acme/app",
            "owner": {"login": "acme", "type": "Organization"},
        },
    }


class Env:
    def __init__(self, kube: MemoryKube, server: WebhookServer, registry: CollectorRegistry):
        self.kube, self.server, self.registry = kube, server, registry
        self.session = aiohttp.ClientSession()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/"

    async def post(
        self,
        body: Any,
        *,
        event: str = "workflow_job",
        delivery: str = "d-1",
        secret: str | None = SECRET,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"X-GitHub-Event": event, "Content-Type": "application/json"}
        if delivery:
            h["X-GitHub-Delivery"] = delivery
        if secret is not None:
            h["X-Hub-Signature-256"] = sign(secret, data)
        h.update(headers or {})
        async with self.session.post(self.url, data=data, headers=h) as resp:
            return resp.status, await resp.text()

    def series(self, name: str) -> list[dict[str, str]]:
        return [
            s.labels
            for metric in self.registry.collect()
            for s in metric.samples
            if s.name == name and s.value
        ]


async def start(kube: MemoryKube, **kw: Any) -> tuple[WebhookServer, asyncio.Task[None]]:
    registry = CollectorRegistry()
    kw.setdefault("batch_window", 0.05)
    server = WebhookServer(
        kube,  # type: ignore[arg-type]
        kube,  # type: ignore[arg-type]
        address="127.0.0.1:0",
        secret=SECRET,
        metrics=WebhookMetrics(registry),
        **kw,
    )
    server.registry = registry  # type: ignore[attr-defined]
    task = asyncio.create_task(server.start())
    await asyncio.wait_for(server.started.wait(), 10)
    return server, task


@pytest.fixture
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    kube = world()
    kw = getattr(request, "param", {})
    server, task = await start(kube, **kw)
    e = Env(kube, server, server.registry)  # type: ignore[attr-defined]
    yield e
    await e.session.close()
    await server.stop()
    await task


# ---- answers -----------------------------------------------------------------------------------


async def test_queued_and_completed_jobs_reserve_and_release_their_runner(env: Env) -> None:
    assert await env.post(payload("queued", 1), delivery="q1") == (200, "scaled hra by 1")
    assert [r["name"] for r in env.kube.reservations()] == ["job-1"]
    status, text = await env.post(payload("completed", 1, conclusion="failure"), delivery="c1")
    assert (status, text) == (200, "scaled hra by -1")
    assert env.kube.reservations() == []


async def test_ignored_events_answer_200_and_change_nothing(env: Env) -> None:
    assert await env.post(payload("in_progress"), delivery="a") == (200, "")
    assert await env.post(payload("completed", conclusion="skipped"), delivery="b") == (200, "")
    assert await env.post(payload("completed", conclusion="success"), delivery="c") == (200, "")
    job = payload()
    job["workflow_job"]["labels"] = ["windows"]
    assert await env.post(job, delivery="d") == (200, NO_TARGET)
    assert env.kube.patches == 0


async def test_bad_signatures_and_bodies_are_rejected_and_never_applied(env: Env) -> None:
    assert (await env.post(payload(), secret=None, delivery="a"))[0] == 401
    assert (await env.post(payload(), secret="wrong", delivery="b"))[0] == 403
    assert (await env.post(b"{not json", delivery="c"))[0] == 400
    assert (await env.post(payload(), event="", delivery="d"))[0] == 400
    assert env.kube.patches == 0


async def test_ping_get_and_unknown_events(env: Env) -> None:
    assert await env.post({"zen": "hi"}, event="ping", delivery="p") == (200, "pong")
    assert (await env.post({"action": "created"}, event="check_run", delivery="c"))[0] == 500
    async with env.session.get(env.url + "anything") as resp:
        assert resp.status == 200 and "running" in await resp.text()


@pytest.mark.parametrize(
    "body",
    [
        b'{"action": "queued", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        json.dumps(payload(labels="linux")).encode(),
        json.dumps(payload(labels=[1, 2])).encode(),
        json.dumps({"action": "queued", "workflow_job": [], "repository": {}}).encode(),
        json.dumps({"action": 5}).encode(),
    ],
    ids=["deep", "labels-str", "labels-int", "job-list", "action-int"],
)
async def test_signed_but_malformed_payloads_answer_400_with_the_reason(
    env: Env, body: bytes
) -> None:
    """Issue 20: these answered 500 (RecursionError, TypeError)."""
    status, text = await env.post(body, delivery="m")
    assert status == 400 and text.startswith("bad payload: ")
    assert env.kube.patches == 0


# ---- durable acknowledgement -------------------------------------------------------------------


@pytest.mark.parametrize("env", [{"batch_window": 0.5}], indirect=True)
async def test_a_200_means_the_reservation_is_stored(env: Env) -> None:
    """Issue 19: 200 came when the change was queued, up to a window before it was stored."""
    env.kube.gate = asyncio.Event()
    posts = [asyncio.create_task(env.post(payload(job_id=i), delivery=f"d{i}")) for i in range(10)]
    # The window has closed and its one patch waits for the gate: nothing is stored yet,
    # so no delivery may have its answer.
    await eventually(lambda: env.kube.at_gate == 1, message="the batch's patch at the gate")
    assert not any(p.done() for p in posts)
    env.kube.gate.set()
    answers = await asyncio.gather(*posts)
    assert answers == [(200, "scaled hra by 1")] * 10
    assert env.kube.patches == 1  # one batch, one patch
    assert len(env.kube.reservations()) == 10


@pytest.mark.parametrize("env", [{"ack_timeout": 0.5}], indirect=True)
async def test_a_reservation_not_stored_in_time_is_answered_503_and_a_redelivery_adds_one(
    env: Env,
) -> None:
    env.kube.fail = 1  # the first patch fails; the batch scaler retries after 1 s
    status, _ = await env.post(payload(job_id=4), delivery="x")
    assert status == 503  # GitHub shows a failed delivery
    await eventually(  # the retry stores it meanwhile
        lambda: [r["name"] for r in env.kube.reservations()] == ["job-4"], message="retry stored"
    )
    assert await env.post(payload(job_id=4), delivery="x") == (
        200,
        "hra: already reserved for job 4",
    )
    assert [r["name"] for r in env.kube.reservations()] == ["job-4"]


@pytest.mark.parametrize("env", [{"batch_window": 30.0}], indirect=True)
async def test_stopping_stores_and_answers_what_is_in_flight(env: Env) -> None:
    """Issue 19: stopping did not flush the queue, losing acknowledged scale-ups."""
    posts = [asyncio.create_task(env.post(payload(job_id=i), delivery=f"d{i}")) for i in range(5)]
    await eventually(lambda: env.server.scaler.backlog == 5)
    await env.server.stop()  # well inside the 30 s window
    assert [await p for p in posts] == [(200, "scaled hra by 1")] * 5
    assert len(env.kube.reservations()) == 5


# ---- repeated deliveries -----------------------------------------------------------------------


async def test_the_same_delivery_three_times_reserves_one_runner(env: Env) -> None:
    """Issue 20: the same signed delivery sent 3 times reserved 3 runners."""
    answers = [await env.post(payload(job_id=9), delivery="same") for _ in range(3)]
    answers += await asyncio.gather(
        *(env.post(payload(job_id=9), delivery="same") for _ in range(3))
    )
    assert {a for a in answers} == {(200, "scaled hra by 1")}
    assert len(env.kube.reservations()) == 1
    assert env.kube.patches == 1


async def test_a_redelivery_the_window_forgot_finds_the_job_reservation(env: Env) -> None:
    await env.post(payload(job_id=3), delivery="first")
    # a new process (empty window) or a new delivery ID for the same job event
    assert await env.post(payload(job_id=3), delivery="second") == (
        200,
        "hra: already reserved for job 3",
    )
    assert len(env.kube.reservations()) == 1
    await env.post(payload("completed", 3, conclusion="failure"), delivery="c")
    await env.post(payload("completed", 3, conclusion="failure"), delivery="c2")
    await env.post(payload("queued", 3), delivery="late")  # arrives after its completion
    assert env.kube.reservations() == []


async def test_a_late_queued_after_a_restart_reserves_nothing_for_a_completed_job() -> None:
    """A ``queued`` redelivered (new delivery ID) after its job completed, to a restarted
    server or another replica: it reserved a runner that stayed idle until the reservation
    expired, as only the process that saw the ``completed`` remembered it."""
    kube = world()
    first, task = await start(kube)
    env = Env(kube, first, first.registry)  # type: ignore[attr-defined]
    await env.post(payload(job_id=4), delivery="q")
    await env.post(payload("completed", 4, conclusion="failure"), delivery="c")
    assert kube.reservations() == []
    await first.stop()
    await task
    await env.session.close()
    for attempt in ("late-1", "late-2"):  # a restart, then another replica
        server, task = await start(kube)
        env = Env(kube, server, server.registry)  # type: ignore[attr-defined]
        assert await env.post(payload(job_id=4), delivery=attempt) == (
            200,
            "hra: job already completed for job 4",
        )
        assert await env.post(payload("completed", 4, conclusion="failure"), delivery="c2") == (
            200,
            "hra: nothing to release for job 4",
        )
        assert kube.reservations() == []
        await env.session.close()
        await server.stop()
        await task


# ---- hostile requests --------------------------------------------------------------------------


async def test_event_headers_of_unverified_requests_create_no_metric_series(env: Env) -> None:
    """Issue 20: every distinct X-GitHub-Event of an unsigned post became a label value."""
    for i in range(50):
        await env.post(payload(), event=f"evil-{i}", secret=None, delivery=f"u{i}")
        await env.post(payload(), event=f"evil-{i}", secret="wrong", delivery=f"w{i}")
    for i in range(5):
        await env.post({"action": f"act-{i}"}, event=f"signed-{i}", delivery=f"s{i}")
    await env.post({"action": "bogus"}, delivery="s-wj")
    events = {s["event"] for s in env.series("gharc_webhook_requests_total")}
    actions = {s["action"] for s in env.series("gharc_webhook_requests_total")}
    assert events == {"other", "workflow_job"}
    assert actions <= {"", "other"}
    rejected = {s["reason"] for s in env.series("gharc_webhook_rejected_total")}
    assert rejected == {"missing_signature", "bad_signature"}


@pytest.mark.parametrize("env", [{"body_limits": BodyLimits(limit=1024)}], indirect=True)
async def test_a_declared_body_over_the_limit_is_refused_unread(env: Env) -> None:
    status, _ = await env.post(b"x" * 2048, delivery="big")
    assert status == 413


def _raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    return s


async def _closed_within(sock: socket.socket, limit: float) -> bool:
    """True when the server closes ``sock`` within ``limit`` seconds."""
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    try:
        async with asyncio.timeout(limit):
            while True:
                data = await loop.sock_recv(sock, 4096)
                if not data:
                    return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    finally:
        sock.close()


@pytest.mark.parametrize("env", [{"body_limits": BodyLimits(timeout=0.5)}], indirect=True)
async def test_slow_connections_are_cut_after_the_read_timeout(env: Env) -> None:
    """Issue 20: a partial request never timed out (50 connections open after 100 s)."""
    port = env.server.port
    assert port is not None
    head_only = _raw(port)
    head_only.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: workflow_job\r\n")
    sig = sign(SECRET, b"{}")
    half_body = _raw(port)
    half_body.sendall(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"X-Hub-Signature-256: {sig}\r\nContent-Length: 1000\r\n\r\n".encode()
        + b'{"act'
    )
    assert await _closed_within(head_only, 20)
    assert await _closed_within(half_body, 20)


@pytest.mark.parametrize(
    "env", [{"body_limits": BodyLimits(timeout=2.0, slots=1, spool=1024)}], indirect=True
)
async def test_a_slow_large_body_makes_large_bodies_wait_and_small_ones_not(env: Env) -> None:
    port = env.server.port
    assert port is not None
    slow = _raw(port)
    slow.sendall(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: 3000\r\n\r\n".encode()
        + b"x" * 1500
    )
    await eventually(lambda: env.server.handler.body.spilled == 1)  # on disk, holding the slot
    assert await env.post(payload(job_id=1), delivery="small") == (200, "scaled hra by 1")
    big = payload(job_id=2, padding="p" * 2000)  # signed, longer than the spool size
    waiting = asyncio.create_task(env.post(big, delivery="big"))
    await eventually(lambda: env.server.handler.body.reading == 2, message="big body read")
    assert not waiting.done()  # waits for the disk slot the slow body holds
    assert env.server.handler.body.spilled == 1
    assert await _closed_within(slow, 20)  # cut at the read deadline
    assert await waiting == (200, "scaled hra by 1")
    assert env.server.handler.body.buffered == 0


# ---- poll + lookup sanity ----------------------------------------------------------------------


async def test_the_lookup_lists_workflow_job_targets() -> None:
    kube = world()
    targets = await TargetLookup(kube).workflow_job_targets()  # type: ignore[arg-type]
    assert [(h["metadata"]["name"], t.repository) for h, t in targets] == [("hra", "acme/app")]
