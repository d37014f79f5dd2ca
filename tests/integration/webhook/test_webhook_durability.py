"""What an acknowledged delivery is worth against the real API server: ``gharc
webhook-server`` runs as a subprocess, is SIGKILLed in the middle of a stream of signed
deliveries and restarted; every delivery that got a 200 must have its reservation stored,
and redelivering everything after the restart must leave exactly one reservation per job.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS
from gharc.kube.client import KubeClient
from testworld import legacy, webhook
from testworld.wait import eventually

pytestmark = pytest.mark.cluster
SECRET = "kill-9-s3cret"
JOBS = 40


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def create_world(kube: KubeClient, ns: str) -> None:
    await kube.create(RUNNER_DEPLOYMENTS, legacy.runner_deployment(ns, repository="acme/app"))
    await kube.create(
        HORIZONTAL_RUNNER_AUTOSCALERS,
        legacy.horizontal_runner_autoscaler(ns, 100, duration="30m"),
    )


async def reservation_names(kube: KubeClient, ns: str) -> list[str]:
    hra = await kube.get(HORIZONTAL_RUNNER_AUTOSCALERS, "hra", namespace=ns)
    return [str(r.get("name")) for r in hra["spec"].get("capacityReservations") or []]


class Server:
    """One ``gharc webhook-server`` process."""

    def __init__(self, kubeconfig: str, ns: str, port: int, log: Path) -> None:
        self.args = [
            sys.executable,
            "-m",
            "gharc",
            "webhook-server",
            f"--webhook-addr=127.0.0.1:{port}",
            "--metrics-addr=0",
            f"--watch-namespace={ns}",
            f"--kubeconfig={kubeconfig}",
            "--batch-window=0.5",
            "--log-level=info",
        ]
        self.url = f"http://127.0.0.1:{port}/"
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, session: aiohttp.ClientSession) -> None:
        env = {**os.environ, "GITHUB_WEBHOOK_SECRET_TOKEN": SECRET}
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.args, stdout=out, stderr=out, env=env, cwd=self.log.parent
            )

        async def up() -> bool:
            assert self.proc is not None
            if self.proc.returncode is not None:
                raise AssertionError(f"webhook server exited: {self.log.read_text()[-2000:]}")
            try:
                async with session.get(self.url) as resp:
                    return resp.status == 200
            except aiohttp.ClientError:
                return False

        await eventually(up, timeout=60, interval=0.1, message="webhook server answering")

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def terminate(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), 30)


def delivery(job_id: int) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(
        {
            "action": "queued",
            "workflow_job": {"id": job_id, "run_id": job_id, "labels": ["self-hosted", "linux"]},
            "repository": {"name": "app", "owner": {"login": "acme", "type": "Organization"}},
        }
    ).encode()
    headers = webhook.delivery_headers(
        SECRET, body, str(uuid.uuid5(uuid.NAMESPACE_URL, f"job-{job_id}"))
    )
    return body, headers


async def post(session: aiohttp.ClientSession, url: str, job_id: int) -> tuple[int | None, str]:
    body, headers = delivery(job_id)
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            return resp.status, await resp.text()
    except (aiohttp.ClientError, TimeoutError) as err:
        return None, type(err).__name__


async def test_kill_9_mid_burst_loses_no_acknowledged_delivery(
    api_client: Any, namespace: str, kubeconfig: str, tmp_path: Path
) -> None:
    """Issue 19: killed 1 s into a 40-job burst, 30 acknowledged scale-ups were gone."""
    kube = KubeClient(api_client)
    await create_world(kube, namespace)
    server = Server(kubeconfig, namespace, free_port(), tmp_path / "webhook.log")
    timeout = aiohttp.ClientTimeout(total=15)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await server.start(session)
        answers: dict[int, tuple[int | None, str]] = {}

        async def send(job_id: int) -> None:
            await asyncio.sleep(job_id * 0.05)  # a 2 s stream of deliveries
            answers[job_id] = await post(session, server.url, job_id)

        senders = [asyncio.create_task(send(i)) for i in range(1, JOBS + 1)]
        await asyncio.sleep(1.2)
        await server.kill()
        await asyncio.gather(*senders)
        names = await reservation_names(kube, namespace)
        stored = set(names)
        acked = {i for i, (status, _) in answers.items() if status == 200}
        assert all(text == "scaled hra by 1" for s, text in answers.values() if s == 200)
        lost = sorted(i for i in acked if f"job-{i}" not in stored)
        print(f"kill -9: {len(acked)} acknowledged, {len(names)} reservations stored")
        assert acked and len(names) >= len(acked) and not lost
        assert len(acked) < JOBS  # the kill did land mid-stream

        # GitHub redelivers what failed; redeliver everything to check repeats as well.
        await server.start(session)
        again = await asyncio.gather(*(post(session, server.url, i) for i in range(1, JOBS + 1)))
        assert {status for status, _ in again} == {200}
        names = await reservation_names(kube, namespace)
        assert sorted(names) == sorted(f"job-{i}" for i in range(1, JOBS + 1))
        assert await server.terminate() == 0


async def test_sigterm_answers_and_stores_what_is_in_flight(
    api_client: Any, namespace: str, kubeconfig: str, tmp_path: Path
) -> None:
    kube = KubeClient(api_client)
    await create_world(kube, namespace)
    server = Server(kubeconfig, namespace, free_port(), tmp_path / "webhook.log")
    server.args[server.args.index("--batch-window=0.5")] = "--batch-window=20"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        await server.start(session)
        posts = [asyncio.create_task(post(session, server.url, i)) for i in range(1, 11)]
        await asyncio.sleep(1.0)  # all ten are waiting for the 20 s window
        assert not any(p.done() for p in posts)
        assert await server.terminate() == 0
        answers = await asyncio.gather(*posts)
    assert answers == [(200, "scaled hra by 1")] * 10
    assert len(await reservation_names(kube, namespace)) == 10
