"""``python -m testworld bench --suite listeners``: what a scale set's listener costs,
in-process or as a pod.

For each listener mode and each number of scale sets N, a fresh world (real kube-apiserver
+ etcd, the fake GitHub, ``gharc controller --listener-mode MODE``, the kubelet simulator)
gets N scale sets, waits until every listener holds a message session, idles for a warm-up
and then plays the same fixed workload (``jobs`` jobs, round-robin over the N sets). It
prints, per (mode, N):

- the controller's RSS after the warm-up idle and its peak (``VmRSS`` / ``VmHWM``);
- in pod mode, the summed RSS of the listener processes (the kubelet simulator runs each
  listener pod's ``gharc listener`` as a child process of this one; they are found in
  /proc by parent pid and command line);
- RSS per extra scale set, ``(RSS_N - RSS_1) / (N - 1)`` over everything the mode runs;
- CPU seconds per 1,000 jobs during the workload: the controller's, the listeners' and the
  sum, plus the CPU burnt while idle (long polls, informers);
- pickup latency (queued -> started at the fake GitHub), p50 / p99.

Pod mode starts one Python process per scale set; 200 of them do not fit a small machine,
so pod sizes are a separate list (default 1, 10, 50) and the per-listener numbers are
extrapolated to the largest in-process size, labelled as such.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testworld.bench import (
    Bench,
    BenchOptions,
    proc_cpu_seconds,
    proc_peak_rss_mib,
    sampling_lag,
    slowest_line,
    stage_lines,
    steady_arrivals,
    watching,
)
from testworld.sim.report import github_calls, job_times, percentile

log = logging.getLogger("testworld.bench")

MODES = ("InProcess", "Pod")
CONTROLLER_NAMESPACE = "gharc-bench-system"


@dataclass
class ListenerBenchOptions:
    sizes: tuple[int, ...] = (1, 10, 50, 200)
    """Scale set counts run in-process."""
    pod_sizes: tuple[int, ...] = (1, 10, 50)
    """Scale set counts run in pod mode (one listener process each)."""
    modes: tuple[str, ...] = MODES
    jobs: int = 200
    rate: float = 5.0
    """Job arrivals per second, over all scale sets."""
    job_seconds: tuple[float, float] = (0.5, 1.0)
    max_runners: int = 10
    idle_seconds: float = 15.0
    """Warm-up idle after every listener is connected, before the RSS reading."""
    settle_seconds: float = 30.0
    """Wait before the idle CPU window: at 1,000 sets the set-up's last reconciles take
    ~10 s of CPU after the last session, which is not what an idle controller costs."""
    setup_timeout: float = 300.0
    """Seconds for every listener of a run to hold a session."""
    run_timeout: float = 240.0
    """Seconds for a run's workload to complete."""
    poll_timeout: float = 50.0
    limit_range: bool = False
    """Give every scale set's namespace a LimitRange (for PVCs: pods get nothing from it),
    as multi-tenant clusters often do. The API server's LimitRanger admission lists a
    namespace's LimitRanges afresh on a pod create when it caches none and has not looked
    in 30 s: in a thousand quiet namespaces, once per runner pod."""
    seed: int = 42
    out: Path | None = None
    progress: bool = True


@dataclass
class RunResult:
    """One (mode, N) run; RSS in MiB, CPU in seconds."""

    mode: str
    scale_sets: int
    setup_seconds: float = 0.0
    controller_rss_idle: float = 0.0
    controller_rss_peak: float = 0.0
    listener_processes: int = 0
    listener_rss_idle: float = 0.0
    """Sum of the listener processes' VmRSS after the warm-up (pod mode)."""
    listener_rss_peak: float = 0.0
    """Sum of the listener processes' VmHWM at the end (pod mode)."""
    listener_rss_peak_max: float = 0.0
    """The largest single listener VmHWM (pod mode)."""
    controller_cpu_idle: float = 0.0
    listener_cpu_idle: float = 0.0
    controller_cpu_run: float = 0.0
    listener_cpu_run: float = 0.0
    jobs: int = 0
    jobs_started: int = 0
    pickup_p50: float = float("nan")
    pickup_p99: float = float("nan")
    idle_seconds: float = 0.0
    loop_lag_p99: float = float("nan")
    """The controller's event-loop lag, p99 over the workload (its own histogram)."""
    loop_lag_max_bucket: float = float("nan")
    """The upper bound of the bucket the workload's longest lag fell in."""
    harness_cpu_run: float = 0.0
    """CPU seconds of this process (fake GitHub, kubelet simulator, job player) in the run."""
    harness_lag_p99: float = float("nan")
    """This process's event-loop lag, p99 over the workload: the fake's share of a pickup."""
    control_plane_cpu_run: float = 0.0
    """CPU seconds of the API server and etcd in the run."""
    control_plane_cpu_idle: float = 0.0
    """CPU seconds of the API server and etcd in the idle window."""
    apiserver_time: dict[str, tuple[float, int]] = field(default_factory=dict)
    """The API server's time (handler seconds summed, requests) by verb and resource during
    the workload, largest first: which requests its CPU went to, whoever sent them."""
    stages: dict[str, dict[str, float]] = field(default_factory=dict)
    """Where the pickups went (the whole-system bench's breakdown, p50 / p99 per stage)."""
    slowest: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    """The three slowest pickups and their stages: what the p99 is made of."""
    calls_per_job: dict[str, float] = field(default_factory=dict)
    """GitHub (``GET /route``) and Kubernetes (``kube verb resource``) calls per job during the
    workload: a path that costs more per job at N sets than at 1 shows here."""
    notes: list[str] = field(default_factory=list)

    @property
    def rss_idle(self) -> float:
        """Everything the mode runs: the controller, plus the listener processes."""
        return self.controller_rss_idle + self.listener_rss_idle

    @property
    def rss_peak(self) -> float:
        return self.controller_rss_peak + self.listener_rss_peak

    def cpu_per_1000_jobs(self, cpu: float) -> float:
        return cpu / self.jobs_started * 1000 if self.jobs_started else float("nan")


# -- /proc readings -----------------------------------------------------------------------
def proc_rss_mib(pid: int) -> float:
    """The process's current resident set (VmRSS) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def listener_pids(parent: int) -> list[int]:
    """Children of ``parent`` running ``gharc listener`` (the simulated listener pods)."""
    pids: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
        if b"gharc" in argv and b"listener" in argv:
            pids.append(int(entry))
    return pids


#: A LimitRange that constrains PersistentVolumeClaims only (``--limit-range``).
PVC_LIMIT_RANGE: dict[str, Any] = {
    "metadata": {"name": "claims"},
    "spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "1Ti"}}]},
}


async def apiserver_time(world: Any) -> dict[str, tuple[float, int]]:
    """The API server's request handling so far: (seconds, requests) by ``verb resource``
    (with ``/subresource``), from its ``apiserver_request_duration_seconds``; watches are
    left out (their duration is how long they stayed open)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, tuple[float, int]] = {}
    for family in text_string_to_metric_families(await world.apiserver_metrics()):
        if family.name != "apiserver_request_duration_seconds":
            continue
        for sample in family.samples:
            kind = sample.name.rsplit("_", 1)[-1]
            verb = sample.labels.get("verb", "")
            if kind not in ("sum", "count") or verb in ("WATCH", "CONNECT"):
                continue
            sub = sample.labels.get("subresource", "")
            key = f"{verb.lower()} {sample.labels.get('resource', '')}" + (f"/{sub}" if sub else "")
            seconds, count = out.get(key, (0.0, 0))
            if kind == "sum":
                out[key] = (seconds + sample.value, count)
            else:
                out[key] = (seconds, count + int(sample.value))
    return out


def _time_delta(
    after: dict[str, tuple[float, int]], before: dict[str, tuple[float, int]]
) -> dict[str, tuple[float, int]]:
    delta = {
        key: (s - before.get(key, (0.0, 0))[0], n - before.get(key, (0.0, 0))[1])
        for key, (s, n) in after.items()
    }
    ranked = sorted(((k, v) for k, v in delta.items() if v[1] > 0), key=lambda kv: -kv[1][0])
    return {k: (round(s, 2), n) for k, (s, n) in ranked}


def _cpu(pids: list[int]) -> dict[int, float]:
    out: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            out[pid] = proc_cpu_seconds(pid)
    return out


def _sum_over(pids: list[int], reading: Any) -> tuple[float, float]:
    """(sum, max) of ``reading(pid)`` over the live ``pids``."""
    values: list[float] = []
    for pid in pids:
        with contextlib.suppress(OSError):
            values.append(reading(pid))
    return sum(values), max(values, default=0.0)


LOOP_LAG = "gharc_event_loop_lag_seconds"


async def scrape_buckets(url: str, histogram: str) -> list[tuple[float, int]]:
    """A histogram's cumulative buckets on a metrics endpoint, as (upper bound, count)."""
    from testworld.world import scrape_samples

    samples = await scrape_samples(url, f"{histogram}_bucket")
    return sorted((float(labels.get("le", "inf")), value) for labels, value in samples)


def _bucket_delta(
    after: list[tuple[float, int]], before: list[tuple[float, int]]
) -> list[tuple[float, int]]:
    """Cumulative buckets of what was observed between the two readings."""
    earlier = dict(before)
    return [(le, n - earlier.get(le, 0)) for le, n in after]


def bucket_quantile(buckets: list[tuple[float, int]], q: float) -> float:
    """The upper bound of the bucket the ``q`` quantile falls in (Prometheus' buckets can
    say no more): ``nan`` when nothing was observed."""
    total = buckets[-1][1] if buckets else 0
    if not total:
        return float("nan")
    for le, n in buckets:
        if n >= q * total:
            return le
    return float("inf")


# -- one run ------------------------------------------------------------------------------
class ListenerRun:
    def __init__(self, opts: ListenerBenchOptions, mode: str, n: int) -> None:
        self.opts = opts
        self.result = RunResult(mode=mode, scale_sets=n)
        self._player = Bench(BenchOptions(timeout=opts.run_timeout, progress=opts.progress))

    def _say(self, text: str) -> None:
        if self.opts.progress:
            print(f"[{self.result.mode} N={self.result.scale_sets}] {text}", flush=True)

    async def run(self) -> RunResult:
        from gharc.api import crds
        from testworld.controlplane import ControlPlane
        from testworld.sim.github import FakeGitHubServer
        from testworld.sim.programs import RunnerProgram
        from testworld.world import World

        opts, res = self.opts, self.result
        names = [f"ls-{i:03d}" for i in range(res.scale_sets)]
        log_dir = (opts.out or Path(f"/tmp/gharc-bench-{os.getpid()}")) / (
            f"{res.mode.lower()}-{res.scale_sets}"
        )
        async with (
            ControlPlane(crds=crds.load("scaleset")) as cp,
            FakeGitHubServer(poll_timeout=opts.poll_timeout) as gh,
            World(
                cp.kubeconfig_path,
                gh,
                log_dir=log_dir,
                runner=RunnerProgram(poll_seconds=30),
                controller_args=[f"--listener-mode={res.mode}"],
                controller_namespace=CONTROLLER_NAMESPACE,
            ) as world,
        ):
            pid = world.controller_pid
            assert pid is not None
            t0 = time.monotonic()
            for name in names:
                if opts.limit_range:
                    await world.ensure_namespace(name)
                    body: Any = PVC_LIMIT_RANGE
                    await world.core.create_namespaced_limit_range(name, body)
                await world.apply_scale_set(name, name, max_runners=opts.max_runners)
            deadline = t0 + opts.setup_timeout
            for name in names:
                await world.wait_for_listener(name, timeout=max(1.0, deadline - time.monotonic()))
            res.setup_seconds = round(time.monotonic() - t0, 1)
            self._say(f"{len(names)} listeners connected in {res.setup_seconds} s; idling")

            await asyncio.sleep(opts.settle_seconds)
            me = os.getpid()
            pids = listener_pids(me) if res.mode == "Pod" else []
            plane = list(cp.pids.values())
            ctl0, lst0 = proc_cpu_seconds(pid), _cpu(pids)
            plane0 = sum(_cpu(plane).values())
            idle_began = time.monotonic()
            await asyncio.sleep(opts.idle_seconds)
            res.idle_seconds = time.monotonic() - idle_began
            res.control_plane_cpu_idle = sum(_cpu(plane).values()) - plane0
            pids = listener_pids(me) if res.mode == "Pod" else []
            res.listener_processes = len(pids)
            res.controller_rss_idle = proc_rss_mib(pid)
            res.listener_rss_idle = _sum_over(pids, proc_rss_mib)[0]
            ctl1, lst1 = proc_cpu_seconds(pid), _cpu(pids)
            res.controller_cpu_idle = ctl1 - ctl0
            res.listener_cpu_idle = sum(v - lst0.get(p, v) for p, v in lst1.items())

            metrics_url = f"http://127.0.0.1:{world.metrics_port}/metrics"
            lag_before = await scrape_buckets(metrics_url, LOOP_LAG)
            calls_before = _calls(
                gh.call_table(), await world.kube_calls(), await reconciles(metrics_url)
            )
            served_before = await apiserver_time(world)
            harness0 = proc_cpu_seconds(me)
            plane0 = sum(_cpu(plane).values())
            harness_lag: list[float] = []
            async with sampling_lag(harness_lag):
                await self._play(world, names)
            res.harness_cpu_run = proc_cpu_seconds(me) - harness0
            res.control_plane_cpu_run = sum(_cpu(plane).values()) - plane0
            res.harness_lag_p99 = round(percentile(harness_lag, 99), 3)
            served = await apiserver_time(world)
            res.apiserver_time = _time_delta(served, served_before)
            lag = _bucket_delta(await scrape_buckets(metrics_url, LOOP_LAG), lag_before)
            calls = _calls(gh.call_table(), await world.kube_calls(), await reconciles(metrics_url))
            calls.subtract(calls_before)
            res.loop_lag_p99 = bucket_quantile(lag, 0.99)
            res.loop_lag_max_bucket = bucket_quantile(lag, 1.0)

            ctl2, lst2 = proc_cpu_seconds(pid), _cpu(pids)
            res.controller_cpu_run = ctl2 - ctl1
            res.listener_cpu_run = sum(v - lst1.get(p, v) for p, v in lst2.items())
            if res.mode == "Pod" and set(listener_pids(me)) != set(pids):
                res.notes.append("listener processes changed during the run (restarts?)")
            res.controller_rss_peak = proc_peak_rss_mib(pid)
            res.listener_rss_peak, res.listener_rss_peak_max = _sum_over(pids, proc_peak_rss_mib)
            times = job_times(gh.state.jobs)
            lat = [j.started_at - j.queued_at for j in times.values() if j.started_at is not None]
            pickups = sorted(
                ((j.start_time - j.queue_time, j) for j in gh.state.jobs.values() if j.start_time),
                key=lambda pair: -pair[0],
            )
            res.stages = self._player.breakdown(gh.state.jobs)
            res.slowest = [(round(p, 3), self._player.stages_of(j)) for p, j in pickups[:3]]
            _write_pickups(log_dir / "pickups.json", pickups, self._player.stages_of)
            res.jobs, res.jobs_started = len(times), len(lat)
            res.calls_per_job = {
                k: round(n / max(1, len(lat)), 2) for k, n in calls.most_common() if n > 0
            }
            res.pickup_p50 = round(percentile(lat, 50), 3)
            res.pickup_p99 = round(percentile(lat, 99), 3)
            self._say(
                f"controller RSS {res.controller_rss_idle:.1f} MiB idle, "
                f"{res.controller_rss_peak:.1f} peak; listeners {res.listener_rss_idle:.1f} MiB "
                f"in {res.listener_processes} processes; CPU "
                f"{res.controller_cpu_run:.1f} + {res.listener_cpu_run:.1f} s for "
                f"{res.jobs_started} jobs; pickup p50 {res.pickup_p50} p99 {res.pickup_p99} s"
            )
        return res

    async def _play(self, world: Any, names: list[str]) -> None:
        """The fixed workload, through the whole-system bench's job player, whose watches
        time each pickup's stages (they start after the idle window: its CPU is not theirs)."""
        opts = self.opts
        player = self._player
        arrivals = steady_arrivals(opts.jobs, opts.rate, opts.job_seconds, opts.seed)
        async with watching(world.api, player.timeline):
            await player._play(world, names, arrivals)


# -- the suite ----------------------------------------------------------------------------
def per_extra(results: list[RunResult], attr: str) -> dict[tuple[str, int], float]:
    """``(RSS_N - RSS_1) / (N - 1)`` of ``attr`` per (mode, N), where a run with N=1 exists."""
    base = {r.mode: getattr(r, attr) for r in results if r.scale_sets == 1}
    return {
        (r.mode, r.scale_sets): (getattr(r, attr) - base[r.mode]) / (r.scale_sets - 1)
        for r in results
        if r.scale_sets > 1 and r.mode in base
    }


def table(results: list[RunResult], largest: int) -> str:
    idle_extra = per_extra(results, "rss_idle")
    peak_extra = per_extra(results, "rss_peak")
    head = (
        f"{'mode':<10}{'N':>4} {'ctl RSS idle':>12} {'ctl peak':>9} {'lst RSS':>9} "
        f"{'total idle':>10} {'MiB/extra':>9} {'(peak)':>7} {'ctl s/1k':>9} {'lst s/1k':>9} "
        f"{'sum s/1k':>9} {'idle cpu':>8} {'p50 s':>7} {'p99 s':>7} {'setup s':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        key = (r.mode, r.scale_sets)
        extra = f"{idle_extra[key]:9.2f}" if key in idle_extra else f"{'-':>9}"
        extra_peak = f"{peak_extra[key]:7.2f}" if key in peak_extra else f"{'-':>7}"
        lines.append(
            f"{r.mode:<10}{r.scale_sets:>4} {r.controller_rss_idle:12.1f} "
            f"{r.controller_rss_peak:9.1f} {r.listener_rss_idle:9.1f} {r.rss_idle:10.1f} "
            f"{extra} {extra_peak} {r.cpu_per_1000_jobs(r.controller_cpu_run):9.1f} "
            f"{r.cpu_per_1000_jobs(r.listener_cpu_run):9.1f} "
            f"{r.cpu_per_1000_jobs(r.controller_cpu_run + r.listener_cpu_run):9.1f} "
            f"{r.controller_cpu_idle + r.listener_cpu_idle:8.2f} {r.pickup_p50:7.3f} "
            f"{r.pickup_p99:7.3f} {r.setup_seconds:8.1f}"
        )
        for note in r.notes:
            lines.append(f"    note: {note}")
    lines.append(
        "RSS in MiB (total = controller + listener processes); CPU: seconds per 1,000 jobs "
        "started, during the workload; idle cpu: seconds over the warm-up idle."
    )
    lines += _extrapolation(results, largest)
    lines += _listener_cpu(results)
    return "\n".join(lines)


def _extrapolation(results: list[RunResult], largest: int) -> list[str]:
    """Pod mode at ``largest`` scale sets, from its largest measured run (labelled)."""
    pods = sorted((r for r in results if r.mode == "Pod"), key=lambda r: r.scale_sets)
    extra = per_extra(results, "rss_idle")
    if not pods or pods[-1].scale_sets >= largest or ("Pod", pods[-1].scale_sets) not in extra:
        return []
    top = pods[-1]
    slope = extra[("Pod", top.scale_sets)]
    per_listener = top.listener_rss_idle / max(1, top.listener_processes)
    total = top.rss_idle + slope * (largest - top.scale_sets)
    return [
        f"EXTRAPOLATED (not measured): pod mode at N={largest}: about {total:.0f} MiB in all "
        f"({per_listener:.1f} MiB per listener process at N={top.scale_sets}, "
        f"{slope:.2f} MiB per extra scale set)."
    ]


def _listener_cpu(results: list[RunResult]) -> list[str]:
    """Listener CPU per job in each mode, where the same N ran in both modes.

    In-process, the listeners' CPU is inside the controller's; it is estimated as the
    in-process controller's CPU minus the pod-mode controller's (which runs no listener)."""
    runs = {(r.mode, r.scale_sets): r for r in results}
    lines: list[str] = []
    for (mode, n), pod in sorted(runs.items()):
        inproc = runs.get(("InProcess", n))
        if mode != "Pod" or inproc is None or not pod.jobs_started or not inproc.jobs_started:
            continue
        pod_ms = pod.listener_cpu_run / pod.jobs_started * 1000
        in_ms = (
            inproc.controller_cpu_run / inproc.jobs_started
            - pod.controller_cpu_run / pod.jobs_started
        ) * 1000
        ratio = f"{pod_ms / in_ms:.1f}" if in_ms > 0 else "not measurable (estimate <= 0)"
        lines.append(
            f"listener CPU per job at N={n}: pod mode {pod_ms:.1f} ms (listener processes); "
            f"in-process {in_ms:.1f} ms (estimate: controller InProcess - controller Pod): "
            f"pod / in-process = {ratio}"
        )
    return lines


def scale_table(results: list[RunResult]) -> str:
    """``--suite scale``: what one controller costs as the number of scale sets grows."""
    head = (
        f"{'N':>5} {'sessions s':>10} {'RSS idle':>9} {'RSS peak':>9} {'idle CPU %':>10} "
        f"{'lag p99 s':>9} {'lag max s':>9} {'p50 s':>7} {'p99 s':>7} {'jobs':>5} "
        f"{'harness CPU %':>13} {'harness lag p99':>15} {'kube idle %':>11} {'kube CPU s':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        idle_pct = 100 * r.controller_cpu_idle / r.idle_seconds if r.idle_seconds else float("nan")
        measured = r.controller_cpu_run + r.harness_cpu_run
        harness = 100 * r.harness_cpu_run / measured if measured else float("nan")
        kube_idle = (
            100 * r.control_plane_cpu_idle / r.idle_seconds if r.idle_seconds else float("nan")
        )
        lines.append(
            f"{r.scale_sets:>5} {r.setup_seconds:10.1f} {r.controller_rss_idle:9.1f} "
            f"{r.controller_rss_peak:9.1f} {idle_pct:10.2f} {r.loop_lag_p99:9.3f} "
            f"{r.loop_lag_max_bucket:9.3f} {r.pickup_p50:7.3f} {r.pickup_p99:7.3f} "
            f"{r.jobs_started:>5} {harness:13.1f} {r.harness_lag_p99:15.3f} "
            f"{kube_idle:11.2f} {r.control_plane_cpu_run:10.1f}"
        )
        for note in r.notes:
            lines.append(f"    note: {note}")
    for r in results:
        lines.extend(_stage_lines(r))
    lines.append(
        "sessions s: from the first scale set's creation until every listener holds a message "
        "session; RSS in MiB (controller process); idle CPU: the controller's, % of one core, "
        "over the idle window after a settle (--settle-seconds); lag: the controller's "
        "gharc_event_loop_lag_seconds over the workload (bucket upper bounds); pickup: "
        "queued -> started at the fake GitHub; "
        "harness CPU %: this process (fake GitHub, kubelet simulator, job player) as a share "
        "of harness + controller CPU during the workload (the API server is not counted); "
        "harness lag: how late this process's event loop woke a 10 ms sleep, p99 over the "
        "workload (the fake GitHub and kubelet answer that much late); kube idle: the API "
        "server's and etcd's CPU over the idle window, % of one core; kube CPU: theirs "
        "during the workload, seconds."
    )
    return "\n".join(lines)


def _calls(call_table: Any, kube: dict[str, int], reconciled: dict[str, int]) -> Counter[str]:
    """GitHub and Kubernetes calls and reconciles so far, keyed as
    :attr:`RunResult.calls_per_job` is."""
    out: Counter[str] = Counter(github_calls(call_table))
    out.update({f"kube {key}": n for key, n in kube.items()})
    out.update({f"reconcile {name}": n for name, n in reconciled.items()})
    return out


async def reconciles(url: str) -> Counter[str]:
    """Reconciles so far by controller, from the controller's own
    ``controller_runtime_reconcile_total`` (every result)."""
    from testworld.world import scrape_samples

    out: Counter[str] = Counter()
    for labels, n in await scrape_samples(url, "controller_runtime_reconcile_total"):
        out[labels.get("controller", "")] += n
    return out


def _write_pickups(
    path: Path, pickups: list[tuple[float, Any]], stages_of: Callable[[Any], dict[str, float]]
) -> None:
    """Every pickup with its stages and when its job was queued (seconds into the stream),
    slowest first: to find what else the machine did when the slowest were slow."""
    if not pickups:
        return
    start = min(j.queue_time for _, j in pickups)
    rows = [
        {
            "queued_at": round(j.queue_time - start, 3),
            "queue_time": j.queue_time,
            "pickup": round(p, 3),
            **stages_of(j),
        }
        for p, j in pickups
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=0))


def _stage_lines(r: RunResult) -> list[str]:
    """Where N's pickups went, and what its slowest three were made of."""
    if not r.stages:
        return []
    lines = [f"N={r.scale_sets}: where the pickup goes (s, p50 / p99)", *stage_lines(r.stages)]
    lines.append(f"N={r.scale_sets}: the slowest pickups, stage by stage (s)")
    lines.extend(slowest_line(pickup, stages) for pickup, stages in r.slowest)
    if r.calls_per_job:
        lines.append(f"N={r.scale_sets}: calls and reconciles per job during the workload")
        lines.extend(f"  {key:<60} {n:6.2f}" for key, n in r.calls_per_job.items())
    if r.apiserver_time:
        total = sum(s for s, _ in r.apiserver_time.values())
        lines.append(
            f"N={r.scale_sets}: the API server's request time during the workload, every "
            f"client ({total:.1f} s in all; top 12: s, requests, ms each)"
        )
        lines.extend(
            f"  {key:<60} {sec:6.2f} {n:6d} {1000 * sec / n:7.2f}"
            for key, (sec, n) in list(r.apiserver_time.items())[:12]
        )
    return lines


async def run_suite(opts: ListenerBenchOptions) -> list[RunResult]:
    results: list[RunResult] = []
    for mode in opts.modes:
        sizes = opts.pod_sizes if mode == "Pod" else opts.sizes
        for n in sizes:
            t = time.monotonic()
            try:
                results.append(await ListenerRun(opts, mode, n).run())
            except Exception as err:  # one failed size must not lose the others' numbers
                print(f"[{mode} N={n}] FAILED: {err!r}", flush=True)
                results.append(RunResult(mode=mode, scale_sets=n, notes=[f"failed: {err!r}"]))
            print(f"[{mode} N={n}] {time.monotonic() - t:.0f} s", flush=True)
    return results


def run(opts: ListenerBenchOptions, *, suite: str = "listeners") -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    print(
        f"bench --suite {suite}: {opts.jobs} jobs at {opts.rate}/s, jobs "
        f"{opts.job_seconds[0]}-{opts.job_seconds[1]} s; in-process N={list(opts.sizes)}"
        + (f", pod N={list(opts.pod_sizes)}" if "Pod" in opts.modes else "")
        + ("; a LimitRange in every namespace" if opts.limit_range else "")
        + f"; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    results: list[RunResult] = []
    with contextlib.suppress(KeyboardInterrupt):
        results = asyncio.run(run_suite(opts))
    largest = max([*opts.sizes, *opts.pod_sizes], default=1)
    print()
    print(scale_table(results) if suite == "scale" else table(results, largest))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if opts.out is not None:
        opts.out.mkdir(parents=True, exist_ok=True)
        rows = [{**asdict(r), "rss_idle": r.rss_idle, "rss_peak": r.rss_peak} for r in results]
        (opts.out / "listeners.json").write_text(json.dumps(rows, indent=1))
    failed = [r for r in results if r.notes and r.notes[0].startswith("failed")]
    return 1 if failed or not results else 0
