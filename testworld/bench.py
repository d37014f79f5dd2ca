"""``python -m testworld bench``: the whole system under a fixed workload, and the numbers
users care about.

The set-up is the demo's (a real kube-apiserver + etcd, the fake GitHub, ``gharc
controller`` as a subprocess, the kubelet simulator with real listener processes), scaled
out to many scale sets, each in its own namespace, sharing one controller. Jobs arrive as
a steady Poisson stream spread round-robin over the scale sets; the same seed gives the
same arrivals, so runs (and commits) compare.

What it prints, all measured from the outside:

- pickup latency (queued -> started at the fake GitHub), p50 / p99;
- runners created per job (JIT configs handed out / jobs; 1.00 is ideal) and wasted runners;
- GitHub calls per job by endpoint (the fake's call counters);
- the controller's CPU seconds and peak RSS (``/proc/<pid>/stat`` and ``VmHWM``), and in
  pod listener mode the listener processes' CPU seconds and peak RSS, summed;
- the controller's Kubernetes API calls (its own metrics endpoint);
- where the pickup latency goes: each job is followed through the listener's patch, the
  EphemeralRunner's creation, its pod's creation and start, and the runner taking the job,
  using timestamps from watches on the API server and the fake's job record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gharc.api.scaleset.views import EphemeralRunnerSetView
from gharc.kube import objects
from testworld.sim.report import Report, github_calls, job_times, percentile
from testworld.sim.workload import Workload

log = logging.getLogger("testworld.bench")

GROUP, VERSION = "actions.github.com", "v1alpha1"
CONTROLLER_NAMESPACE = "gharc-bench-system"


@dataclass
class BenchOptions:
    jobs: int = 1000
    scale_sets: int = 20
    max_runners: int = 10
    """maxRunners of every scale set."""
    rate: float = 10.0
    """Job arrivals per second, over all scale sets."""
    job_seconds: tuple[float, float] = (0.5, 2.0)
    poll_timeout: float = 50.0
    """The fake GitHub's message long poll (GitHub's is about 50 s)."""
    seed: int = 42
    timeout: float = 900.0
    out: Path | None = None
    progress: bool = True
    listener_mode: str = "InProcess"
    """The controller's ``--listener-mode``: listeners in its process, or one pod each."""
    burst: int = 400
    """After the job stream: runner pods requested at once (0: skip; testworld.bench_controller)."""
    idle_samples: int = 10
    """After the job stream: single-replica patches on an idle set, timed to their pod."""


# -- process readings -------------------------------------------------------------------
def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (and its reaped children) from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # after the command: state is fields[0]; utime, stime, cutime, cstime are 11..14
    return sum(int(x) for x in fields[11:15]) / ticks


def proc_peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _listener_cpu() -> dict[int, float]:
    """CPU seconds of each listener process this process runs (the simulated listener pods)."""
    from testworld.bench_listeners import listener_pids

    out: dict[int, float] = {}
    for pid in listener_pids(os.getpid()):
        with contextlib.suppress(OSError):
            out[pid] = proc_cpu_seconds(pid)
    return out


# -- a timeline of the API server's objects ----------------------------------------------
@dataclass
class Timeline:
    """First-seen wall-clock times of objects and transitions, from watches."""

    patches: dict[str, list[tuple[float, int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    """ERS namespace -> [(time, replicas, patchID)] as the listener published them."""
    er_created: dict[str, float] = field(default_factory=dict)
    pod_created: dict[str, float] = field(default_factory=dict)
    pod_running: dict[str, float] = field(default_factory=dict)
    """Keyed by ``namespace/name`` (a runner pod is named like its EphemeralRunner)."""


async def _watch(
    api: Any, timeline: Timeline, kind: str, stop: asyncio.Event, namespace: str | None = None
) -> None:
    """Record when objects of ``kind`` appear (in ``namespace``, or everywhere)."""
    from kubernetes_asyncio import client, watch

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    seen_patch: dict[str, tuple[int, int]] = {}
    rv: str | None = None
    while not stop.is_set():
        try:
            func: Any
            args: tuple[Any, ...]
            if kind == "pods" and namespace:
                func, args = core.list_namespaced_pod, (namespace,)
            elif kind == "pods":
                func, args = core.list_pod_for_all_namespaces, ()
            elif namespace:
                func = custom.list_namespaced_custom_object
                args = (GROUP, VERSION, namespace, kind)
            else:
                func, args = custom.list_cluster_custom_object, (GROUP, VERSION, kind)
            kwargs: dict[str, Any] = {"timeout_seconds": 30}
            if rv:
                kwargs["resource_version"] = rv
            # NB: "object" keeps events as dicts: building V1Pod models was a third of the
            # harness's CPU in a 400-pod burst, taken from what the bench measures.
            async with watch.Watch(return_type="object").stream(func, *args, **kwargs) as stream:
                async for event in stream:
                    now = time.time()
                    obj = event["object"]
                    if not isinstance(obj, dict):
                        obj = api.sanitize_for_serialization(obj)
                    if event["type"] == "ERROR":
                        rv = None
                        break
                    meta = obj.get("metadata", {})
                    rv = meta.get("resourceVersion") or rv
                    key = f"{meta.get('namespace')}/{meta.get('name')}"
                    if kind == "ephemeralrunnersets":
                        ers = EphemeralRunnerSetView(obj)
                        value = (ers.replicas, ers.patch_id)
                        if seen_patch.get(key) != value:
                            seen_patch[key] = value
                            timeline.patches[str(meta.get("namespace"))].append((now, *value))
                    elif kind == "ephemeralrunners":
                        timeline.er_created.setdefault(key, now)
                    else:
                        timeline.pod_created.setdefault(key, now)
                        if objects.status_of(obj).get("phase") == "Running":
                            timeline.pod_running.setdefault(key, now)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            if stop.is_set():
                return
            log.debug("bench watch %s: %r; rewatching", kind, err)
            rv = None
            await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def watching(api: Any, timeline: Timeline) -> AsyncIterator[None]:
    """The runner sets, runners and pods watched into ``timeline`` while the block runs."""
    stop = asyncio.Event()
    watches = [
        asyncio.create_task(_watch(api, timeline, kind, stop))
        for kind in ("ephemeralrunnersets", "ephemeralrunners", "pods")
    ]
    try:
        yield
    finally:
        stop.set()
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)


@contextlib.asynccontextmanager
async def sampling_lag(into: list[float], every: float = 0.01) -> AsyncIterator[None]:
    """This process's event-loop lag (how late a short sleep wakes) sampled into ``into``
    while the block runs. The fake GitHub and the kubelet simulator answer late by as much,
    and every pickup stage they take part in shows it, though the controller is not why."""
    loop = asyncio.get_running_loop()

    async def sample() -> None:
        while True:
            began = loop.time()
            await asyncio.sleep(every)
            into.append(max(0.0, loop.time() - began - every))

    task = asyncio.create_task(sample())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def stage_lines(stages: dict[str, dict[str, float]]) -> list[str]:
    """One line per pickup stage: its p50 and p99 (:meth:`Bench.breakdown`'s numbers)."""
    return [f"  {stage:<30} {v['p50']:7.3f} {v['p99']:7.3f}" for stage, v in stages.items()]


def slowest_line(pickup: float, stages: dict[str, float]) -> str:
    """One slow pickup, stage by stage (:meth:`Bench.stages_of`), without the sums (the
    queue -> patch stage when its two halves are known)."""
    sums = {"queued->ER created"}
    if "  queued->acquired" in stages:
        sums.add("queued->listener patch")
    parts = ", ".join(
        f"{stage.split('->')[1]} +{seconds:.3f}"
        for stage, seconds in stages.items()
        if stage not in sums
    )
    return f"  {pickup:.3f}: {parts}"


def steady_arrivals(
    jobs: int, rate: float, job_seconds: tuple[float, float], seed: int
) -> list[Any]:
    """The first ``jobs`` arrivals of a steady stream of ``rate`` jobs a second, none failing:
    the fixed workload both benchmarks play, so their numbers stay comparable."""
    workload = Workload(
        bursts=[],
        trickle_per_minute=rate * 60,
        # long enough for ``jobs`` arrivals with room to spare; cut to ``jobs`` below
        trickle_seconds=jobs / rate * 1.5 + 30,
        job_seconds=job_seconds,
        failure_rate=0.0,
        seed=seed,
    )
    out = workload.arrivals()[:jobs]
    if len(out) < jobs:  # pragma: no cover - 1.5x the expected span is plenty
        raise ValueError(f"the workload gave {len(out)} jobs, not {jobs}")
    return out


# -- the run ------------------------------------------------------------------------------
class Bench:
    def __init__(self, opts: BenchOptions) -> None:
        self.opts = opts
        self.report = Report()
        self.timeline = Timeline()
        self.extra: dict[str, Any] = {}

    def _say(self, text: str) -> None:
        if self.opts.progress:
            print(text, flush=True)

    async def run(self) -> dict[str, Any]:
        from gharc.api import crds
        from testworld.controlplane import ControlPlane
        from testworld.sim.github import FakeGitHubServer
        from testworld.sim.programs import RunnerProgram
        from testworld.world import World

        opts = self.opts
        names = [f"bench-{i:02d}" for i in range(opts.scale_sets)]
        arrivals = steady_arrivals(opts.jobs, opts.rate, opts.job_seconds, opts.seed)
        self._say(
            f"python -m testworld bench: {opts.jobs} jobs over {opts.scale_sets} scale sets "
            f"(maxRunners {opts.max_runners}), {opts.rate}/s, jobs "
            f"{opts.job_seconds[0]}-{opts.job_seconds[1]} s"
        )
        async with (
            ControlPlane(crds=crds.load("scaleset")) as cp,
            FakeGitHubServer(poll_timeout=opts.poll_timeout) as gh,
        ):
            log_dir = opts.out or Path(f"/tmp/gharc-bench-{os.getpid()}")
            async with World(
                cp.kubeconfig_path,
                gh,
                log_dir=log_dir,
                runner=RunnerProgram(poll_seconds=30),
                controller_args=[f"--listener-mode={opts.listener_mode}"],
                controller_namespace=CONTROLLER_NAMESPACE,
                kubelet_namespaces=[CONTROLLER_NAMESPACE, *names],
            ) as world:
                self._say(f"control plane up in {cp.startup_seconds:.1f} s; logs in {log_dir}")
                t_setup = time.monotonic()
                for name in names:
                    await world.apply_scale_set(name, name, max_runners=opts.max_runners)
                for name in names:
                    await world.wait_for_listener(name, timeout=300)
                self.extra["setup_seconds"] = round(time.monotonic() - t_setup, 1)
                self._say(f"{len(names)} listeners connected in {self.extra['setup_seconds']} s")
                pid = world.controller_pid
                assert pid is not None
                cpu0 = proc_cpu_seconds(pid)
                listeners = _listener_cpu()
                kube0 = await world.kube_calls()
                callers0 = await self._caller_calls(world)
                failed0 = await self._failed_calls(world)
                gh.reset_calls()
                assert world.api is not None
                async with watching(world.api, self.timeline):
                    t_run = time.monotonic()
                    await self._play(world, names, arrivals)
                    self.extra["run_seconds"] = round(time.monotonic() - t_run, 1)
                self.extra["controller_cpu_seconds"] = round(proc_cpu_seconds(pid) - cpu0, 2)
                self.extra["controller_peak_rss_mib"] = round(proc_peak_rss_mib(pid), 1)
                if opts.listener_mode == "Pod":
                    self._listener_readings(listeners)
                kube1 = await world.kube_calls()
                self.report.kube_calls = {
                    k: v - kube0.get(k, 0) for k, v in kube1.items() if v - kube0.get(k, 0)
                }
                self._listener_calls(callers0, await self._caller_calls(world))
                failed1 = await self._failed_calls(world)
                self.extra["kube_calls_failed"] = {
                    k: v - failed0.get(k, 0)
                    for k, v in sorted(failed1.items())
                    if v - failed0.get(k, 0)
                }
                self._collect(world)
                await self._controller_phases(world, names[0])
        summary = self.summary()
        if opts.out is not None:
            opts.out.mkdir(parents=True, exist_ok=True)
            (opts.out / "bench.json").write_text(json.dumps(summary, indent=1))
        return summary

    @staticmethod
    async def _caller_calls(world: Any) -> dict[str, dict[str, int]]:
        from testworld.bench_controller import caller_calls

        return await caller_calls(f"http://127.0.0.1:{world.metrics_port}/metrics")

    @staticmethod
    async def _failed_calls(world: Any) -> dict[str, int]:
        """Calls answered 4xx/5xx (409 conflicts, 404s) by verb, resource and code."""
        from testworld.bench_controller import failed_calls

        return await failed_calls(f"http://127.0.0.1:{world.metrics_port}/metrics")

    def _listener_calls(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        """The in-process listeners' share of the controller's calls (by verb/resource)."""
        b, a = before.get("listener", {}), after.get("listener", {})
        self.extra["listener_kube_calls"] = {
            k: v - b.get(k, 0) for k, v in sorted(a.items()) if v - b.get(k, 0)
        }

    async def _controller_phases(self, world: Any, namespace: str) -> None:
        """Idle patch -> pod latency, then the 0 -> N burst (testworld.bench_controller)."""
        from gharc.kube.client import KubeClient
        from testworld import bench_controller as bc

        opts = self.opts
        if not (opts.burst or opts.idle_samples):
            return
        kube = KubeClient(world.api)
        timeline, stop = Timeline(), asyncio.Event()
        watches = [
            asyncio.create_task(_watch(world.api, timeline, kind, stop))
            for kind in ("ephemeralrunners", "pods")
        ]
        try:
            await bc.make_runner_set(kube, namespace, namespace)
            await asyncio.sleep(2)  # the watch is up, the new set reconciled
            if opts.idle_samples:
                self._say(f"idle: {opts.idle_samples} single-replica patches")
                idle = await bc.idle_latency(kube, timeline, namespace, samples=opts.idle_samples)
                self.extra["idle_patch_to_pod_s"] = idle
            if opts.burst:
                self._say(f"burst: 0 -> {opts.burst} runner pods at once")
                pid = world.controller_pid
                cpu0 = proc_cpu_seconds(pid) if pid else 0.0
                out = await bc.burst(kube, timeline, namespace, count=opts.burst)
                if pid:
                    out["controller_cpu_s"] = round(proc_cpu_seconds(pid) - cpu0, 2)
                    out["controller_peak_rss_mib"] = round(proc_peak_rss_mib(pid), 1)
                self.extra["burst"] = out
        finally:
            stop.set()
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)

    def _listener_readings(self, before: dict[int, float]) -> None:
        """CPU and peak RSS of the listener processes (pod mode), summed."""
        after = _listener_cpu()
        self.extra["listener_processes"] = len(after)
        self.extra["listener_cpu_seconds"] = round(
            sum(v - before.get(p, v) for p, v in after.items()), 2
        )
        peaks = []
        for p in after:
            with contextlib.suppress(OSError):
                peaks.append(proc_peak_rss_mib(p))
        self.extra["listener_peak_rss_mib_sum"] = round(sum(peaks), 1)
        self.extra["listener_peak_rss_mib_max"] = round(max(peaks, default=0.0), 1)

    async def _play(self, world: Any, names: list[str], arrivals: list[Any]) -> None:
        gh = world.github
        opts = self.opts
        t0 = time.monotonic()
        deadline = t0 + opts.timeout
        pending = list(enumerate(arrivals))
        jobs: list[Any] = []
        last_print = 0.0
        while True:
            t = time.monotonic() - t0
            while pending and pending[0][1].at <= t:
                i, a = pending.pop(0)
                name = names[i % len(names)]
                jobs.append(
                    gh.enqueue_job(
                        f"octo-org/{a.repository}", [name], duration=a.duration, result=a.result
                    )
                )
            world.check_controller()
            done = sum(1 for j in jobs if j.status == "completed")
            if t - last_print >= 5:
                last_print = t
                running = sum(1 for j in jobs if j.status == "running")
                self._say(
                    f"t={t:6.1f}s  enqueued {len(jobs):5d}  running {running:4d}  done {done:5d}"
                )
            if not pending and done == len(jobs):
                return
            if time.monotonic() > deadline:
                self._say(f"timeout after {t:.0f} s: {done}/{len(jobs)} jobs done")
                return
            await asyncio.sleep(0.2)

    def _collect(self, world: Any) -> None:
        gh = world.github
        self.report.jobs = job_times(gh.state.jobs)
        self.report.github_calls = github_calls(gh.call_table())
        self.report.runners_created = world.runners_created()
        self.extra["latency_breakdown_s"] = self.breakdown(gh.state.jobs)

    def stages_of(self, job: Any) -> dict[str, float]:
        """One job's stages (see :meth:`breakdown`), those the timeline saw both ends of."""
        tl = self.timeline
        if not job.start_time or not job.runner_name:
            return {}
        ns = next(
            (k.split("/", 1)[0] for k in tl.er_created if k.endswith("/" + job.runner_name)),
            None,
        )
        if ns is None:
            return {}
        key = f"{ns}/{job.runner_name}"
        patch = next((p[0] for p in tl.patches.get(ns, []) if p[0] >= job.queue_time), None)
        acquired = getattr(job, "scale_set_assign_time", None)
        marks = [
            ("queued->listener patch", job.queue_time, patch),
            ("  queued->acquired", job.queue_time, acquired),
            ("  acquired->listener patch", acquired, patch),
            ("listener patch->ER created", patch, tl.er_created.get(key)),
            ("ER created->pod created", tl.er_created.get(key), tl.pod_created.get(key)),
            ("pod created->pod Running", tl.pod_created.get(key), tl.pod_running.get(key)),
            ("pod Running->runner took job", tl.pod_running.get(key), job.runner_assign_time),
            ("runner took job->started", job.runner_assign_time, job.start_time),
            ("queued->ER created", job.queue_time, tl.er_created.get(key)),
        ]
        return {name: b - a for name, a, b in marks if a is not None and b is not None}

    def breakdown(self, jobs: dict[int, Any]) -> dict[str, dict[str, float]]:
        """Per job: queued -> first listener patch after it (split at the job's acquisition)
        -> its runner's EphemeralRunner created -> pod created -> pod Running -> runner took
        the job -> job started.

        A runner takes the oldest job assigned to its set, not "its" job, so a stage can be
        negative for one job (its runner existed before it was queued: a warm runner); the
        medians say where the time goes."""
        stages: dict[str, list[float]] = defaultdict(list)
        for job in jobs.values():
            for name, seconds in self.stages_of(job).items():
                stages[name].append(seconds)
        return {
            name: {
                "p50": round(statistics.median(v), 3),
                "p99": round(percentile(v, 99), 3),
                "n": len(v),
            }
            for name, v in stages.items()
        }

    def summary(self) -> dict[str, Any]:
        s = self.report.summary()
        n = max(1, len(self.report.jobs))
        s["kube_calls_per_job"] = round(sum(self.report.kube_calls.values()) / n, 2)
        listener = self.extra.get("listener_kube_calls") or {}
        s["kube_calls_per_job_without_listeners"] = round(
            (sum(self.report.kube_calls.values()) - sum(listener.values())) / n, 2
        )
        s["github_calls_per_job_total"] = round(sum(self.report.github_calls.values()) / n, 3)
        s.update(self.extra)
        return s

    def text(self) -> str:
        s = self.summary()
        lines = [self.report.text()]
        lines.append(f"Kubernetes API calls per job: {s['kube_calls_per_job']}")
        n = max(1, s.get("jobs") or 0)
        listener = s.get("listener_kube_calls") or {}
        if listener:
            lines.append(
                "  of which the in-process listeners': "
                + ", ".join(f"{k} {v / n:.2f}" for k, v in listener.items())
            )
        lines.append(
            "Kubernetes API calls per job without the listeners' calls: "
            f"{s['kube_calls_per_job_without_listeners']}"
        )
        lines.append(f"GitHub calls per job (all endpoints): {s['github_calls_per_job_total']}")
        for key in ("setup_seconds", "run_seconds", "controller_cpu_seconds"):
            lines.append(f"{key}: {s.get(key)}")
        lines.append(f"controller peak RSS: {s.get('controller_peak_rss_mib')} MiB")
        lines.append(f"Kubernetes calls answered 4xx/5xx: {s.get('kube_calls_failed') or 'none'}")
        if "idle_patch_to_pod_s" in s:
            lines.append(f"idle: listener patch -> pod created (s): {s['idle_patch_to_pod_s']}")
        if "burst" in s:
            lines.append(f"burst: 0 -> N runner pods requested at once: {s['burst']}")
        if "listener_processes" in s:
            lines.append(
                f"listener processes: {s['listener_processes']}, CPU "
                f"{s['listener_cpu_seconds']} s, peak RSS {s['listener_peak_rss_mib_sum']} MiB "
                f"summed ({s['listener_peak_rss_mib_max']} MiB the largest)"
            )
        lines.append("where the pickup latency goes (seconds, p50 / p99, jobs):")
        for name, v in s.get("latency_breakdown_s", {}).items():
            lines.append(f"  {name:<32} {v['p50']:>7.3f} / {v['p99']:>7.3f}  (n={v['n']})")
        return "\n".join(lines)


def run(opts: BenchOptions) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    bench = Bench(opts)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(bench.run())
    print()
    print(bench.text())
    unpicked = bench.report.never_picked_up
    if unpicked:
        print(f"FAILED: {len(unpicked)} jobs were never picked up", file=sys.stderr)
        return 1
    return 0
