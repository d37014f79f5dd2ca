"""The webhook server's memory and connections under two attacks that need no secret.

Runs a real control plane, one RunnerDeployment with its workflow_job HRA, and ``python -m
gharc webhook-server`` as a subprocess (secret set). Then:

1. ``--posts`` (8) parallel POSTs of ``--body-mb`` (25) MB each, with a well-formed but wrong
   ``X-Hub-Signature-256``: the server cannot refuse them before the last byte. The
   server's RSS is sampled from /proc every 20 ms; its peak above the idle RSS is printed,
   with the answers and how long the attack took.
2. ``--slow`` (50) connections that send half a request (head only, and head plus part of
   a body) and then a byte every 2 s; after ``--slow-seconds`` (30) how many are still open.

During both, a signed delivery is posted and its answer and latency printed (the server
must keep serving). ``--pythonpath DIR`` runs another tree's ``gharc`` (``git worktree add``
or ``git archive`` a revision there) to compare.

    KUBEBUILDER_ASSETS=$(scripts/testbins) .venv/bin/python bench/webhook_attack.py \\
        [--posts 8] [--body-mb 25] [--slow 50] [--slow-seconds 30] [--pythonpath DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from gharc.api import crds
from gharc.api.legacy import constants as lc
from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS
from gharc.kube.client import KubeClient
from gharc.kube.resources import NAMESPACES
from gharc.webhook.signature import sign
from testworld.controlplane import install_crds_sync, running_control_plane

NS = "bench-webhook"
SECRET = "bench-s3cret"


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def setup(kubeconfig: str) -> None:
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    try:
        await kube.create(NAMESPACES, {"metadata": {"name": NS}})
        await kube.create(
            RUNNER_DEPLOYMENTS,
            {
                "apiVersion": lc.API_VERSION,
                "kind": lc.KIND_RUNNER_DEPLOYMENT,
                "metadata": {"name": "rd", "namespace": NS},
                "spec": {"template": {"spec": {"repository": "acme/app", "labels": ["linux"]}}},
            },
        )
        await kube.create(
            HORIZONTAL_RUNNER_AUTOSCALERS,
            {
                "apiVersion": lc.API_VERSION,
                "kind": "HorizontalRunnerAutoscaler",
                "metadata": {"name": "hra", "namespace": NS},
                "spec": {
                    "scaleTargetRef": {"name": "rd"},
                    "minReplicas": 0,
                    "maxReplicas": 1000,
                    "scaleUpTriggers": [{"githubEvent": {"workflowJob": {}}, "duration": "5m"}],
                },
            },
        )
    finally:
        await kube.close()


async def signed_delivery(url: str, job_id: int) -> str:
    body = json.dumps(
        {
            "action": "queued",
            "workflow_job": {"id": job_id, "labels": ["self-hosted", "linux"]},
            "repository": {"name": "app", "owner": {"login": "acme", "type": "Organization"}},
        }
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "workflow_job",
        "X-GitHub-Delivery": f"bench-{job_id}",
        "X-Hub-Signature-256": sign(SECRET, body),
    }
    t = time.perf_counter()
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s,
            s.post(url, data=body, headers=headers) as resp,
        ):
            text = await resp.text()
            return f"{resp.status} {text.strip()!r} in {time.perf_counter() - t:.2f} s"
    except Exception as err:
        return f"failed after {time.perf_counter() - t:.2f} s: {type(err).__name__} {err}"


async def big_bad_post(port: int, size: int) -> str:
    """One POST of ``size`` bytes with a wrong signature, written as fast as the server reads."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        "POST / HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        "X-GitHub-Event: workflow_job\r\nX-GitHub-Delivery: bad\r\n"
        f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: {size}\r\n\r\n"
    )
    chunk = b"x" * (1 << 20)
    try:
        writer.write(head.encode())
        sent = 0
        while sent < size:
            n = min(len(chunk), size - sent)
            writer.write(chunk[:n])
            await writer.drain()
            sent += n
        line = await asyncio.wait_for(reader.readline(), 60)
        return line.decode().strip() or "closed"
    except (ConnectionError, TimeoutError) as err:
        return f"{type(err).__name__}"
    finally:
        writer.close()


async def sample_peak(pid: int, stop: asyncio.Event) -> float:
    peak = 0.0
    while not stop.is_set():
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(0.02)
    return max(peak, rss_mib(pid))


async def slow_connection(port: int, with_body: bool, seconds: float) -> float | None:
    """Half a request, then a byte every 2 s; the time the server closed it (None: open)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    t0 = time.monotonic()
    head = "POST / HTTP/1.1\r\nHost: bench\r\nX-GitHub-Event: workflow_job\r\n"
    if with_body:
        head += f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: 100000\r\n\r\n{{"
    try:
        writer.write(head.encode())
        while time.monotonic() - t0 < seconds:
            try:
                data = await asyncio.wait_for(reader.read(4096), 2.0)
                if not data:
                    return time.monotonic() - t0
                continue  # an answer (408); the close follows
            except TimeoutError:
                pass
            writer.write(b"x" if with_body else b"X-Slow: 1\r\n")
            await writer.drain()
        return None
    except ConnectionError:
        return time.monotonic() - t0
    finally:
        writer.close()


async def attack(args: argparse.Namespace, pid: int, port: int) -> None:
    url = f"http://127.0.0.1:{port}/"
    print(f"signed delivery before: {await signed_delivery(url, 1)}")
    await asyncio.sleep(2)
    idle = rss_mib(pid)
    print(f"idle RSS: {idle:.1f} MiB")

    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_peak(pid, stop))
    t = time.perf_counter()
    size = args.body_mb * 1024 * 1024
    posts = [asyncio.create_task(big_bad_post(port, size)) for _ in range(args.posts)]
    during = await signed_delivery(url, 2)
    answers = await asyncio.gather(*posts)
    stop.set()
    peak = await sampler
    print(
        f"{args.posts} parallel {args.body_mb} MB bad-signature posts: "
        f"peak RSS {peak:.1f} MiB (+{peak - idle:.1f} over idle) "
        f"in {time.perf_counter() - t:.1f} s; answers {sorted(set(answers))}"
    )
    print(f"signed delivery during the big posts: {during}")
    await asyncio.sleep(1)
    print(f"RSS after: {rss_mib(pid):.1f} MiB")

    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_peak(pid, stop))
    slow = [
        asyncio.create_task(slow_connection(port, i % 2 == 1, args.slow_seconds))
        for i in range(args.slow)
    ]
    await asyncio.sleep(1)
    during = await signed_delivery(url, 3)
    closed = await asyncio.gather(*slow)
    stop.set()
    peak = await sampler
    still_open = sum(1 for c in closed if c is None)
    times = sorted(c for c in closed if c is not None)
    worst = f"{times[-1]:.1f} s" if times else "-"
    print(
        f"{args.slow} slow connections: {still_open} still open after {args.slow_seconds:g} s; "
        f"the slowest closed after {worst}; peak RSS {peak:.1f} MiB"
    )
    print(f"signed delivery during the slow connections: {during}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posts", type=int, default=8)
    p.add_argument("--body-mb", type=int, default=25)
    p.add_argument("--slow", type=int, default=50)
    p.add_argument("--slow-seconds", type=float, default=30.0)
    p.add_argument("--pythonpath", default="")
    args = p.parse_args()
    with running_control_plane() as cp:
        install_crds_sync(cp.kubeconfig_path, crds.load("legacy"))
        asyncio.run(setup(cp.kubeconfig_path))
        port = free_port()
        env = {**os.environ, "GITHUB_WEBHOOK_SECRET_TOKEN": SECRET}
        if args.pythonpath:
            env["PYTHONPATH"] = args.pythonpath
        log = Path(tempfile.mkdtemp(prefix="bench-webhook-")) / "webhook.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gharc",
                    "webhook-server",
                    f"--webhook-addr=127.0.0.1:{port}",
                    "--metrics-addr=0",
                    f"--watch-namespace={NS}",
                    f"--kubeconfig={cp.kubeconfig_path}",
                    "--batch-window=0.2",
                    "--log-level=warn",
                ],
                stdout=out,
                stderr=out,
                env=env,
                cwd=log.parent,  # not the checkout: -m puts the cwd first on sys.path
            )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"webhook server did not start; see {log}") from None
                    time.sleep(0.2)
            time.sleep(2)  # informers synced
            print(f"webhook server pid {proc.pid}, log {log}")
            asyncio.run(attack(args, proc.pid, port))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
