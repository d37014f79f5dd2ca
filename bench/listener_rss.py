"""One pod-mode listener process under a job burst: its peak RSS, CPU and import cost.

Runs a real control plane (etcd + kube-apiserver), the fake GitHub in this process and
``python -m gharc listener`` as a subprocess, as a listener pod runs ``gharc listener`` (PAT
credentials, no controller: the EphemeralRunnerSet is created here and only the listener
touches it). After the session is up and an idle pause, ``--waves`` bursts of ``--burst`` jobs
are queued, each at once, and the listener's patches are awaited until ``spec.replicas``
covers every wave; then the
process's ``VmRSS`` (idle), ``VmHWM`` (peak) and CPU seconds are read from /proc.

It also prints what importing the listener costs on its own (a fresh interpreter importing
the CLI and ``gharc.listener.app``: wall time, RSS, and which heavy packages came along).
``--module`` runs ``python -m gharc.listener`` instead (no CLI). To compare with another
revision, check it out elsewhere (``git worktree add``) and pass ``--pythonpath DIR``: the
listener process and the import probe run that tree's ``gharc``. ``--metrics`` serves the
listener's metrics endpoint and scrapes it every ``--scrape`` seconds (a second thread in the
listener, prometheus_client's server); ``--env KEY=VALUE`` (repeatable) adds to the
listener's environment, e.g. ``MALLOC_ARENA_MAX=2``.

    .venv/bin/python bench/listener_rss.py [--burst 300] [--waves 5] [--idle 5] [--module]
        [--pythonpath DIR] [--metrics [--scrape 1]] [--env KEY=VALUE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _podlistener import ERS, SET, scale_set_world

from gharc.api import crds
from gharc.api.resources import EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset.constants import GROUP, VERSION
from gharc.kube.client import KubeClient
from gharc.kube.resources import NAMESPACES
from testworld.bench import proc_cpu_seconds, proc_peak_rss_mib
from testworld.bench_listeners import proc_rss_mib
from testworld.controlplane import install_crds_sync, running_control_plane
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer

NAMESPACE = "bench-rss"

_IMPORT_PROBE = """
import sys, time
t = time.perf_counter()
if CLI:
    import gharc.cli, gharc.listener.__main__
import gharc.listener.app
took = time.perf_counter() - t
rss = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS'))
heavy = ('jwt', 'cryptography', 'kubernetes_asyncio.client.models.v1_pod', 'rich', 'pygments')
heavy = [m for m in heavy if m in sys.modules]
print(f'{took:.3f} {rss / 1024:.1f} {",".join(heavy) or "-"}')
"""


def child_env(pythonpath: str | None, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def import_cost(cli: bool, pythonpath: str | None) -> str:
    """Wall time and RSS of importing the listener in a fresh interpreter."""
    probe = f"CLI = {cli}\n{_IMPORT_PROBE}"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env=child_env(pythonpath),
        cwd=pythonpath,  # python puts its working folder first on sys.path
    ).stdout.split()
    what = "gharc.cli + gharc.listener" if cli else "gharc.listener.app"
    return f"import {what}: {out[0]} s, RSS {out[1]} MiB, heavy modules: {out[2]}"


def mapped(pid: int, needle: str) -> bool:
    """Whether the process has a file mapped whose path contains ``needle`` (a loaded
    extension module shows so whatever imported it, at start or later)."""
    with open(f"/proc/{pid}/maps") as f:
        return any(needle in line for line in f)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def scrape(url: str, every: float) -> None:
    """GET the listener's metrics every ``every`` seconds, as Prometheus would (forever)."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                (await client.get(url)).raise_for_status()
            await asyncio.sleep(every)


async def replicas(kube: KubeClient) -> int:
    ers: dict[str, Any] = await kube.get(EPHEMERAL_RUNNER_SETS, ERS, namespace=NAMESPACE)
    return int(ers["spec"].get("replicas") or 0)


async def bench(kubeconfig: str, args: argparse.Namespace) -> None:
    burst, waves, cli = args.burst, args.waves, not args.module
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    async with FakeGitHubServer(port=0, poll_timeout=50.0) as gh:
        ss, runner_spec, config = scale_set_world(gh, NAMESPACE, burst * waves + 10)
        metrics_url = None
        if args.metrics:
            port = free_port()
            config["metrics_addr"] = f"127.0.0.1:{port}"
            metrics_url = f"http://127.0.0.1:{port}/metrics"
        await kube.create(
            EPHEMERAL_RUNNER_SETS,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "EphemeralRunnerSet",
                "metadata": {"name": ERS, "namespace": NAMESPACE},
                "spec": {"replicas": 0, "patchID": 0, "ephemeralRunnerSpec": runner_spec},
            },
            namespace=NAMESPACE,
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.json"
            path.write_text(json.dumps(config))
            extra = dict(item.split("=", 1) for item in args.env)
            env = child_env(
                args.pythonpath, LISTENER_CONFIG_PATH=str(path), KUBECONFIG=kubeconfig, **extra
            )
            command = ["gharc", "listener"] if cli else ["gharc.listener"]
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", *command, env=env, cwd=args.pythonpath
            )
            scraper: asyncio.Task[None] | None = None
            try:
                deadline = time.monotonic() + 60
                while gh.state.active_session(ss) is None:
                    if time.monotonic() > deadline or proc.returncode is not None:
                        raise TimeoutError("listener did not start")
                    await asyncio.sleep(0.05)
                if metrics_url:
                    scraper = asyncio.create_task(scrape(metrics_url, args.scrape))
                await asyncio.sleep(args.idle)
                rss_idle = proc_rss_mib(proc.pid)
                cpu0 = proc_cpu_seconds(proc.pid)
                t0 = time.monotonic()
                for wave in range(1, waves + 1):
                    for _ in range(burst):
                        gh.enqueue_job(DEFAULT_REPO, [SET])
                    deadline = time.monotonic() + 120
                    while await replicas(kube) < burst * wave:
                        if time.monotonic() > deadline:
                            raise TimeoutError("the listener never asked for the whole burst")
                        await asyncio.sleep(0.1)
                took = time.monotonic() - t0
                cpu = proc_cpu_seconds(proc.pid) - cpu0
                peak = proc_peak_rss_mib(proc.pid)
                rss_after = proc_rss_mib(proc.pid)
                crypto = mapped(proc.pid, "/cryptography/")
            finally:
                if scraper is not None:
                    scraper.cancel()
                    await asyncio.gather(scraper, return_exceptions=True)
                proc.terminate()
                await proc.wait()
    await kube.close()
    served = f", metrics scraped every {args.scrape:g} s" if args.metrics else ""
    env = f", env {' '.join(args.env)}" if args.env else ""
    print(f"one listener process, {waves} bursts of {burst} jobs (PAT credentials{served}{env})")
    print(f"  RSS idle {rss_idle:.1f} MiB, after the bursts {rss_after:.1f} MiB")
    print(f"  peak RSS (VmHWM) {peak:.1f} MiB; cryptography loaded: {'yes' if crypto else 'no'}")
    print(f"  bursts -> replicas={burst * waves} in {took:.1f} s; listener CPU {cpu:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=300, help="Jobs queued at once.")
    parser.add_argument("--waves", type=int, default=5, help="Bursts, one after another.")
    parser.add_argument("--module", action="store_true", help="python -m gharc.listener.")
    parser.add_argument("--pythonpath", help="Run the listener from this source tree.")
    parser.add_argument("--idle", type=float, default=5.0, help="Idle seconds before the burst.")
    parser.add_argument("--metrics", action="store_true", help="Serve and scrape /metrics.")
    parser.add_argument("--scrape", type=float, default=1.0, help="Seconds between scrapes.")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="Listener env."
    )
    args = parser.parse_args()
    print(import_cost(not args.module, args.pythonpath), flush=True)
    with running_control_plane() as cp:
        install_crds_sync(cp.kubeconfig_path, crds.load("scaleset"))
        asyncio.run(bench(cp.kubeconfig_path, args))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
