"""Listener latency: a job enqueued at the fake GitHub -> the EphemeralRunnerSet patch landing.

Runs a real control plane (etcd + kube-apiserver), the fake GitHub in this process, and the
listener as a subprocess (``python -m gharc.listener``), exactly as a pod would run it. Jobs
are enqueued one at a time; for job ``k`` the clock stops when a watch on the
EphemeralRunnerSet first shows ``spec.replicas >= k``. That path is: the fake wakes the long
poll (JobAvailable) -> acquire -> delete -> the next poll returns JobAssigned with the new
statistics -> merge patch -> watch event. Prints p50/p90/p99/max over ``--jobs`` (500).

    .venv/bin/python bench/listener_latency.py [--jobs 500] [--pythonpath DIR]
        [--mode pod|in-process] [--profile N]

It also prints the listener process's CPU seconds per 1,000 jobs: one job per message is the
costliest case per job (a burst shares one poll, acquire and patch among many jobs).
``--pythonpath`` runs the listener from another checkout (``git worktree add``) to compare.
``--mode in-process`` runs the listener as ``gharc controller`` hosts it (its Kubernetes
client over aiohttp, ``bench/_listener_proc.py``) instead of as a pod (httpx). ``--profile N``
profiles the listener over the jobs (cProfile, so the CPU figure is inflated) and prints its
N costliest functions in ms per job, by own time and by cumulative time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _podlistener import ERS, SET, scale_set_world
from kubernetes_asyncio import client, watch

from gharc.api import crds
from gharc.api.scaleset.constants import GROUP, PLURAL_EPHEMERAL_RUNNER_SETS, VERSION
from gharc.kube.config import new_api_client
from testworld.bench import proc_cpu_seconds
from testworld.controlplane import install_crds_sync, running_control_plane
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer

NAMESPACE = "bench"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def watch_replicas(api: Any, seen: list[tuple[float, int]], ready: asyncio.Event) -> None:
    """Append (monotonic time, replicas) for every event on the EphemeralRunnerSet."""
    custom = client.CustomObjectsApi(api)
    w = watch.Watch()
    ready.set()
    async with w.stream(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        NAMESPACE,
        PLURAL_EPHEMERAL_RUNNER_SETS,
        field_selector=f"metadata.name={ERS}",
        timeout_seconds=600,
    ) as stream:
        async for event in stream:
            obj = event["object"]
            seen.append((time.monotonic(), int(obj["spec"].get("replicas", 0))))


async def wait_for(
    seen: list[tuple[float, int]], replicas: int, since: int, timeout: float
) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for t, r in seen[since:]:
            if r >= replicas:
                return t
        await asyncio.sleep(0.001)
    raise TimeoutError(f"replicas never reached {replicas}")


def listener_command(mode: str, profile: str | None) -> list[str]:
    """The listener's command line: as a pod runs it, or through ``_listener_proc.py``."""
    if mode == "pod" and profile is None:
        return [sys.executable, "-m", "gharc.listener"]
    driver = str(Path(__file__).resolve().parent / "_listener_proc.py")
    return [sys.executable, driver, mode, *(["--profile", profile] if profile else [])]


def print_profile(path: Path, jobs: int, top: int) -> None:
    """The ``top`` functions by own time and by cumulative time, in ms per job."""
    stats = pstats.Stats(str(path))
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _cc, _nc, tt, _ct, _callers in rows.values())
    print(f"  profile: {total / jobs * 1000:.2f} ms per job profiled (cProfile overhead included)")
    for title, column in (("own time", 2), ("cumulative", 3)):
        print(f"  top {top} by {title} (ms per job, calls per job, function)")
        ranked = sorted(rows.items(), key=lambda kv: kv[1][column], reverse=True)[:top]
        for (file, line, func), (_cc, nc, tt, ct, _callers) in ranked:
            where = f"{Path(file).name}:{line}({func})" if line else func
            value = tt if column == 2 else ct
            print(f"    {value / jobs * 1000:7.3f}  {nc / jobs:6.2f}  {where}")


async def bench(
    pythonpath: str | None,
    kubeconfig: str,
    jobs: int,
    mode: str = "pod",
    profile_top: int = 0,
) -> None:
    api = await new_api_client(kubeconfig=kubeconfig)
    core: Any = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    await core.create_namespace({"metadata": {"name": NAMESPACE}})
    async with FakeGitHubServer(port=0, poll_timeout=50.0) as gh:
        ss, runner_spec, config = scale_set_world(gh, NAMESPACE, jobs + 10)
        await custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            NAMESPACE,
            PLURAL_EPHEMERAL_RUNNER_SETS,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "EphemeralRunnerSet",
                "metadata": {"name": ERS},
                "spec": {"replicas": 0, "patchID": 0, "ephemeralRunnerSpec": runner_spec},
            },
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.json"
            path.write_text(json.dumps(config))
            profile = Path(tmp) / "listener.prof" if profile_top else None
            proc = await asyncio.create_subprocess_exec(
                *listener_command(mode, str(profile) if profile else None),
                env={
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "LISTENER_CONFIG_PATH": str(path),
                    "KUBECONFIG": kubeconfig,
                    **{k: v for k, v in os.environ.items() if k.startswith("GHARC_")},
                    **({"PYTHONPATH": pythonpath} if pythonpath else {}),
                },
                cwd=pythonpath,
            )
            seen: list[tuple[float, int]] = []
            ready = asyncio.Event()
            watcher = asyncio.create_task(watch_replicas(api, seen, ready))
            await ready.wait()
            try:
                deadline = time.monotonic() + 30
                while gh.state.active_session(ss) is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError("listener did not start")
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)  # let the initial patch and first poll settle
                if profile is not None:
                    proc.send_signal(signal.SIGUSR1)
                cpu0 = proc_cpu_seconds(proc.pid)
                latencies: list[float] = []
                started = time.monotonic()
                for k in range(1, jobs + 1):
                    mark = len(seen)
                    t0 = time.monotonic()
                    gh.enqueue_job(DEFAULT_REPO, [SET])
                    t1 = await wait_for(seen, k, mark, timeout=30)
                    latencies.append(max(0.0, t1 - t0))
                total = time.monotonic() - started
                cpu = proc_cpu_seconds(proc.pid) - cpu0
                if profile is not None:
                    proc.send_signal(signal.SIGUSR2)
                    await asyncio.sleep(1.0)  # the dump takes a few ms
                    print_profile(profile, jobs, profile_top)
            finally:
                watcher.cancel()
                proc.terminate()
                await proc.wait()
    await api.close()
    ms = [x * 1000 for x in latencies]
    print(
        f"listener latency ({mode}), enqueue -> ERS patch seen by a watch ({jobs} jobs, sequential)"
    )
    print(
        f"  p50 {percentile(ms, 50):.1f} ms  p90 {percentile(ms, 90):.1f} ms  "
        f"p99 {percentile(ms, 99):.1f} ms  max {max(ms):.1f} ms  mean {statistics.mean(ms):.1f} ms"
    )
    print(f"  {jobs} jobs in {total:.1f} s; listener exit code {proc.returncode}")
    print(f"  listener CPU {cpu:.2f} s = {cpu / jobs * 1000:.1f} s per 1,000 jobs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--pythonpath", default=None, help="run the listener from this checkout")
    parser.add_argument("--mode", choices=("pod", "in-process"), default="pod")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the N costliest functions"
    )
    args = parser.parse_args()
    with running_control_plane() as cp:
        install_crds_sync(cp.kubeconfig_path, crds.load("all"))
        asyncio.run(bench(args.pythonpath, cp.kubeconfig_path, args.jobs, args.mode, args.profile))


if __name__ == "__main__":
    main()
