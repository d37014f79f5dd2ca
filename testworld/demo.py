"""The local demo: the whole system on one machine, a workload, and a report.

What runs, each the way it would in a cluster:

- a real etcd + kube-apiserver (``testworld.controlplane``) with gharc's CRDs;
- the fake GitHub (``testworld.sim.github``) on 127.0.0.1, a GHES for the controller;
- ``gharc controller`` as a subprocess, exactly as its Deployment would start it;
- the kubelet simulator, which binds pods to a fake node and runs listener pods as real
  ``gharc listener`` processes and runner pods as simulated runners;
- an AutoscalingRunnerSet like the Helm chart would render, then the workload.

The report's numbers come from the fake GitHub (job times, API calls) and from the
controller's own metrics endpoint (Kubernetes API calls), so they measure what users see.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gharc.api import crds
from gharc.api.scaleset.views import EphemeralRunnerView
from testworld.controlplane import ControlPlane
from testworld.sim.github import FakeGitHubServer
from testworld.sim.report import Report, Sample, github_calls, job_times
from testworld.sim.workload import Workload
from testworld.world import CONTROLLER_NAMESPACE, World

log = logging.getLogger("testworld.demo")

RUNNER_NAMESPACE = "arc-runners"
DEFAULT_WORKLOAD = "burst=0:20,burst=40:30,trickle=30/60,jobs=2-8,failures=0.05"


@dataclass
class DemoOptions:
    workload: str = DEFAULT_WORKLOAD
    scale_set_name: str = "gharc-demo"
    min_runners: int = 0
    max_runners: int = 50
    faults: bool = False
    out_dir: Path = field(default_factory=lambda: Path("demo-output"))
    timeout: float = 600.0
    progress: bool = True
    controller_log: Path | None = None


class _Progress:
    """One status line per second: a live view when attached to a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stdout.isatty()
        self._last = 0.0

    def show(self, text: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < 1.0:
            return
        self._last = now
        if self.tty:
            sys.stdout.write("\r\x1b[2K" + text)
        else:
            sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def done(self) -> None:
        if self.enabled and self.tty:
            sys.stdout.write("\n")


class Demo:
    def __init__(self, opts: DemoOptions) -> None:
        self.opts = opts
        self.progress = _Progress(opts.progress)
        self.report = Report()
        self.t0 = 0.0

    async def run(self) -> int:
        opts = self.opts
        arrivals = Workload.parse(opts.workload).arrivals()
        print(f"gharc demo: {len(arrivals)} jobs, maxRunners {opts.max_runners}", flush=True)
        async with ControlPlane(crds=crds.load("scaleset")) as cp, FakeGitHubServer() as gh:
            if opts.faults:
                # An evicted busy runner takes its job down with it; the service fails such
                # a job once the runner stays silent (minutes on GitHub, 20 s here).
                gh.state.runner_lost_timeout = 20.0
            print(
                f"control plane {cp.server_url} (up in {cp.startup_seconds:.1f} s); "
                f"fake GitHub {gh.url}",
                flush=True,
            )
            async with World(cp.kubeconfig_path, gh, log_dir=opts.out_dir) as world:
                print(f"controller log: {world.controller_log_path}", flush=True)
                await world.apply_scale_set(
                    RUNNER_NAMESPACE,
                    opts.scale_set_name,
                    min_runners=opts.min_runners,
                    max_runners=opts.max_runners,
                )
                await world.wait_for_listener(opts.scale_set_name, timeout=120)
                print("listener connected: message session open", flush=True)
                self.t0 = time.monotonic()
                await self._play(world, arrivals)
                self.report.kube_calls = await world.kube_calls()
                self._collect(world)
        return self.finish()

    def finish(self) -> int:
        """Write and print the report; 1 when a job was never picked up."""
        paths = self.report.write(self.opts.out_dir)
        print()
        print(self.report.text())
        print(f"report: {paths['html']} (plot {paths['png']}, data {paths['json']})")
        unpicked = self.report.never_picked_up
        if unpicked:
            print(f"FAILED: {len(unpicked)} jobs were never picked up", file=sys.stderr)
            return 1
        return 0

    # -- the run ----------------------------------------------------------------------
    async def _play(self, world: World, arrivals: list[Any]) -> None:
        opts = self.opts
        gh, kubelet, custom = world.github, world.kubelet, world.custom
        assert kubelet is not None
        pending = list(arrivals)
        faults = self._fault_plan() if opts.faults else []
        last_arrival = arrivals[-1].at if arrivals else 0.0
        deadline = self.t0 + min(opts.timeout, last_arrival + 300)
        enqueued: dict[int, float] = {}
        while True:
            now = time.monotonic()
            t = now - self.t0
            while pending and pending[0].at <= t:
                a = pending.pop(0)
                job = gh.enqueue_job(
                    f"octo-org/{a.repository}",
                    [opts.scale_set_name],
                    duration=a.duration,
                    result=a.result,
                    workflow_name=a.workflow.removesuffix(".yml"),
                )
                enqueued[job.request_id] = t
            while faults and faults[0][0] <= t:
                _, action = faults.pop(0)
                with contextlib.suppress(Exception):
                    await action(world, custom)
            world.check_controller()
            sample = await self._sample(world, t)
            self.progress.show(
                f"t={t:6.1f}s  queued {sample.queued:3d}  running {sample.running:3d}  "
                f"done {sum(1 for j in gh.state.jobs.values() if j.status == 'completed'):4d}"
                f"/{len(arrivals)}  runners "
                + " ".join(f"{k}={v}" for k, v in sorted(sample.runners.items()))
            )
            all_done = not pending and all(gh.state.jobs[r].status == "completed" for r in enqueued)
            if all_done and sum(sample.runners.values()) <= opts.min_runners:
                break
            if now > deadline:
                print(f"\ntimeout after {t:.0f} s", flush=True)
                break
            await asyncio.sleep(0.5)
        self.progress.done()

    async def _sample(self, world: World, t: float) -> Sample:
        jobs = world.github.state.jobs.values()
        sample = Sample(
            t=round(t, 2),
            queued=sum(1 for j in jobs if j.status in ("queued", "acquired", "assigned")),
            running=sum(1 for j in jobs if j.status == "running"),
            runners=dict(await world.runner_phases(RUNNER_NAMESPACE)),
        )
        self.report.samples.append(sample)
        return sample

    def _fault_plan(self) -> list[tuple[float, Any]]:
        """Evict two busy runners and kill the listener once, early in the run.

        With listener pods the listener pod's process is crashed; with listeners in the
        controller (the default) the controller itself is SIGKILLed and started again, which
        kills every listener at once and leaves their sessions behind for it to resume.
        """

        async def evict_busy(world: World, custom: Any) -> None:
            kubelet = world.kubelet
            assert kubelet is not None
            listed = await custom.list_namespaced_custom_object(
                "actions.github.com", "v1alpha1", RUNNER_NAMESPACE, "ephemeralrunners"
            )
            busy = [er for er in listed["items"] if EphemeralRunnerView(er).has_job]
            if busy:
                name = busy[0]["metadata"]["name"]
                kubelet.evict(RUNNER_NAMESPACE, name)
                print(f"\nfault: evicted busy runner pod {name}", flush=True)

        async def crash_listener(world: World, custom: Any) -> None:
            assert world.kubelet is not None
            for pod in world.kubelet.running_pods():
                ns, name = pod.split("/", 1)
                if ns == CONTROLLER_NAMESPACE and name.endswith("-listener"):
                    world.kubelet.crash(ns, name, exit_code=1)
                    print(f"\nfault: crashed listener pod {name}", flush=True)
                    return
            proc = world.controller
            if proc is not None and proc.returncode is None:
                proc.kill()  # SIGKILL: in-process listeners die without deleting sessions
                await proc.wait()
                await world.stop_controller()
                await world.start_controller()
                print("\nfault: killed the controller and its in-process listeners", flush=True)

        return [(8.0, evict_busy), (15.0, crash_listener), (45.0, evict_busy)]

    def _collect(self, world: World) -> None:
        gh = world.github
        self.report.jobs.update(job_times(gh.state.jobs))
        self.report.github_calls = github_calls(gh.call_table())
        self.report.runners_created = world.runners_created()


def run(opts: DemoOptions) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return asyncio.run(Demo(opts).run())
