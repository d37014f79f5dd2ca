"""``python -m testworld demo --mode legacy``: the legacy (``actions.summerwind.dev``)
system on one machine.

What runs, each the way an ARC legacy-mode install runs it:

- a real etcd + kube-apiserver with the legacy CRDs;
- the fake GitHub on 127.0.0.1 (a GHES for the controller and the webhook server), which
  delivers signed ``workflow_job`` webhooks (``testworld.sim.github.webhooks``) as a GitHub
  organization webhook would;
- ``gharc controller`` (legacy mode: no ``--auto-scaling-runner-set-only``) and
  ``gharc webhook-server`` as subprocesses, with ``GITHUB_TOKEN`` in their environment;
- the kubelet simulator, running each runner pod's ``runner`` container as
  :class:`~testworld.sim.programs.LegacyRunnerProgram` (registers with the pod's registration
  token, takes one job for its labels, runs it, reports, exits: ephemeral);
- a RunnerDeployment and a HorizontalRunnerAutoscaler scaled by webhook-driven capacity
  reservations (legacy.md 8), as ARC's docs recommend, then the workload.

The run loop and the report are the scale set demo's (:class:`testworld.demo.Demo`): this
module only provides a :class:`LegacyWorld` with the same observation methods, so the
numbers of both modes mean the same. "Runners" in the report are Runner objects (by
``status.phase``); "runners created" counts runner registrations at the fake GitHub.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from kubernetes_asyncio import client, config

from gharc.api import crds
from gharc.api.legacy import constants as lc
from gharc.kube import objects
from testworld.controlplane import ControlPlane, free_port
from testworld.demo import Demo, DemoOptions
from testworld.sim.github import DEFAULT_ORG, FakeGitHubServer
from testworld.sim.github.webhooks import RETRY_DELAYS, WebhookDeliverer
from testworld.sim.kubelet import KubeletSimulator
from testworld.sim.processes import child_options, signal_group
from testworld.sim.programs import LegacyRunnerProgram, legacy_programs
from testworld.world import phase_counts, scrape_kube_calls

RUNNER_NAMESPACE = "arc-runners"
GROUP, VERSION = "actions.summerwind.dev", "v1alpha1"
LEGACY_PLURALS = (
    "horizontalrunnerautoscalers",
    "runnerdeployments",
    "runnerreplicasets",
    "runnersets",
    "runners",
)
RESERVATION = "30m"
"""How long a ``queued`` event's reservation lasts if its ``completed`` never arrives."""


class LegacyWorld:
    """Controller + webhook server + kubelet + webhook deliveries around a control plane.

    Offers what :class:`testworld.demo.Demo` observes (``github``, ``kubelet``, ``custom``,
    ``check_controller``, ``runner_phases``, ``kube_calls``, ``runners_created``).
    """

    def __init__(
        self,
        kubeconfig: str,
        github: FakeGitHubServer,
        *,
        log_dir: Path,
        namespace: str = RUNNER_NAMESPACE,
        hook_retries: Sequence[float] = RETRY_DELAYS,
        webhook_args: Sequence[str] = (),
        hook_concurrency: int = 1,
        purge_on_exit: bool = False,
    ) -> None:
        """``hook_retries``: the deliverer's ``retry_delays`` (``()`` as GitHub, which retries
        nothing); ``hook_concurrency``: deliveries in flight at once
        (1: in order); ``webhook_args``: more ``gharc webhook-server``
        flags; ``purge_on_exit``: delete every legacy object and pod of ``namespace`` on
        the way out (a shared control plane)."""
        self.purge_on_exit = purge_on_exit
        self.hook_concurrency = hook_concurrency
        self.kubeconfig = kubeconfig
        self.hook_retries = hook_retries
        self.webhook_args = list(webhook_args)
        self.github = github
        self.log_dir = log_dir
        self.namespace = namespace
        self.metrics_port = free_port()
        self.webhook_port = free_port()
        self.webhook_secret = secrets.token_hex(16)
        self.api: client.ApiClient | None = None
        self.kubelet: KubeletSimulator | None = None
        self.hooks: WebhookDeliverer | None = None
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self._logs: list[IO[bytes]] = []

    @property
    def controller_log_path(self) -> Path:
        return self.log_dir / "controller.log"

    @property
    def webhook_log_path(self) -> Path:
        return self.log_dir / "webhook-server.log"

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> LegacyWorld:
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        self.api = client.ApiClient(cfg)
        body: Any = {"metadata": {"name": self.namespace}}
        with contextlib.suppress(client.ApiException):
            await client.CoreV1Api(self.api).create_namespace(body)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        await self._spawn(
            "controller",
            self.controller_log_path,
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--watch-namespace={self.namespace}",
                "--log-level=info",
                f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                "--sync-period=10s",
            ],
            self._env(),
        )
        await self.start_webhook_server()
        self.kubelet = KubeletSimulator(
            self.api,
            programs=legacy_programs(LegacyRunnerProgram(poll_seconds=20)),
            namespaces=[self.namespace],
        )
        await self.kubelet.start()
        self.hooks = WebhookDeliverer(
            self.github.state,
            concurrency=self.hook_concurrency,
            retry_delays=self.hook_retries,
        )
        self.hooks.add_hook(f"http://127.0.0.1:{self.webhook_port}/", self.webhook_secret)
        await self.hooks.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.hooks is not None:
            await self.hooks.stop()
        for proc in self.procs.values():
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for f in self._logs:
            f.close()
        if self.kubelet is not None:
            await self.kubelet.stop()
        if self.api is not None:
            if self.purge_on_exit:
                await self.purge()
            await self.api.close()

    async def purge(self) -> None:
        """Leave no legacy object or pod in the namespace (finalizers stripped), for a world
        that shares its control plane with later tests; called once the processes stopped,
        or the controller would make again what goes."""
        core = client.CoreV1Api(self.api)
        for plural in LEGACY_PLURALS:
            listed: Any = await self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural
            )
            for obj in listed.get("items", []):
                name = obj["metadata"]["name"]
                with contextlib.suppress(client.ApiException):
                    if obj["metadata"].get("finalizers"):
                        await self.custom.patch_namespaced_custom_object(
                            GROUP,
                            VERSION,
                            self.namespace,
                            plural,
                            name,
                            {"metadata": {"finalizers": None}},
                        )
                    await self.custom.delete_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, plural, name
                    )
        for pod in (await core.list_namespaced_pod(self.namespace)).items:
            name = pod.metadata.name
            with contextlib.suppress(client.ApiException):
                if pod.metadata.finalizers:
                    body: Any = {"metadata": {"finalizers": None}}
                    await core.patch_namespaced_pod(name, self.namespace, body)
                await core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "GITHUB_TOKEN": self.github.token, "GITHUB_URL": self.github.url}

    async def start_webhook_server(self) -> None:
        """Start ``gharc webhook-server`` on :attr:`webhook_port` (again, after
        :meth:`kill_webhook_server`) and wait until it accepts connections."""
        await self._spawn(
            "webhook-server",
            self.webhook_log_path,
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--watch-namespace={self.namespace}",
                "--log-level=info",
                f"--webhook-addr=127.0.0.1:{self.webhook_port}",
                "--metrics-addr=0",
                *self.webhook_args,
            ],
            {**self._env(), "GITHUB_WEBHOOK_SECRET_TOKEN": self.webhook_secret},
        )
        await self._wait_port(self.webhook_port, timeout=60)

    async def kill_webhook_server(self) -> None:
        """SIGKILL the webhook server (its whole process group) and reap it: no shutdown,
        nothing queued is written. Deliveries fail until :meth:`start_webhook_server`."""
        proc = self.procs.pop("webhook-server")
        signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()

    async def _spawn(self, command: str, log: Path, args: list[str], env: dict[str, str]) -> None:
        out = log.open("ab")
        self._logs.append(out)
        self.procs[command] = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gharc",
            command,
            *args,
            env=env,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            **child_options(),  # its own process group, and it dies with the test process
        )

    async def _wait_port(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_controller()
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.2)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return
        raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")

    # -- set-up ------------------------------------------------------------------------
    @property
    def custom(self) -> client.CustomObjectsApi:
        assert self.api is not None
        return client.CustomObjectsApi(self.api)

    async def apply_deployment(
        self, name: str, *, labels: list[str], min_runners: int, max_runners: int
    ) -> None:
        """A RunnerDeployment and its webhook-driven HRA, as ARC's docs show them."""
        rd = {
            "apiVersion": lc.API_VERSION,
            "kind": lc.KIND_RUNNER_DEPLOYMENT,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "replicas": min_runners,
                "template": {"spec": {"organization": DEFAULT_ORG, "labels": labels}},
            },
        }
        hra = {
            "apiVersion": lc.API_VERSION,
            "kind": lc.KIND_HORIZONTAL_RUNNER_AUTOSCALER,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "scaleTargetRef": {"kind": "RunnerDeployment", "name": name},
                "minReplicas": min_runners,
                "maxReplicas": max_runners,
                # Finished jobs release their runner at once; the demo ends when every
                # runner beyond minRunners is gone.
                "scaleDownDelaySecondsAfterScaleOut": 0,
                "scaleUpTriggers": [{"githubEvent": {"workflowJob": {}}, "duration": RESERVATION}],
            },
        }
        await self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "runnerdeployments", rd
        )
        await self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "horizontalrunnerautoscalers", hra
        )

    async def wait_for_hra(self, name: str, timeout: float = 60.0) -> None:
        """Until the controller has reconciled the HRA once (its status is written)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_controller()
            hra: Any = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "horizontalrunnerautoscalers", name
            )
            if "desiredReplicas" in objects.status_of(hra):
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"HRA {name} not reconciled in {timeout} s")

    # -- observation (what Demo reads) ---------------------------------------------------
    def check_controller(self) -> None:
        for command, proc in self.procs.items():
            if proc.returncode is not None:
                raise AssertionError(
                    f"gharc {command} exited with code {proc.returncode}; logs in {self.log_dir}"
                )

    async def runner_phases(self, namespace: str) -> Counter[str]:
        listed: Any = await self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, "runners"
        )
        return phase_counts(listed.get("items", []))

    async def kube_calls(self) -> dict[str, int]:
        return await scrape_kube_calls(f"http://127.0.0.1:{self.metrics_port}/metrics")

    def runners_created(self) -> int:
        """Runner registrations at the fake GitHub: one per runner pod that started."""
        return self.github.calls("/_runner/register", method="POST", status=200)


class LegacyDemo(Demo):
    """The scale set demo's loop and report over a :class:`LegacyWorld`."""

    async def run(self) -> int:
        opts = self.opts
        from testworld.sim.workload import Workload

        arrivals = Workload.parse(opts.workload).arrivals()
        print(
            f"gharc demo (legacy mode): {len(arrivals)} jobs, maxReplicas {opts.max_runners}",
            flush=True,
        )
        async with (
            ControlPlane(crds=crds.load("legacy")) as cp,
            FakeGitHubServer() as gh,
        ):
            print(
                f"control plane {cp.server_url} (up in {cp.startup_seconds:.1f} s); "
                f"fake GitHub {gh.url}",
                flush=True,
            )
            async with LegacyWorld(cp.kubeconfig_path, gh, log_dir=opts.out_dir) as world:
                print(
                    f"controller log: {world.controller_log_path}; "
                    f"webhook server log: {world.webhook_log_path}",
                    flush=True,
                )
                await world.apply_deployment(
                    opts.scale_set_name,
                    labels=[opts.scale_set_name],
                    min_runners=opts.min_runners,
                    max_runners=opts.max_runners,
                )
                await world.wait_for_hra(opts.scale_set_name, timeout=120)
                print(
                    "RunnerDeployment + HorizontalRunnerAutoscaler ready; workflow_job "
                    f"webhooks go to 127.0.0.1:{world.webhook_port}",
                    flush=True,
                )
                self.t0 = time.monotonic()
                await self._play(world, arrivals)  # type: ignore[arg-type]
                self.report.kube_calls = await world.kube_calls()
                self._collect(world)  # type: ignore[arg-type]
                if world.hooks is not None:
                    self.report.extra["webhook_deliveries"] = len(world.hooks.deliveries)
                    self.report.extra["webhook_deliveries_failed"] = sum(
                        1 for d in world.hooks.deliveries if not d.ok
                    )
        return self.finish()


def run(opts: DemoOptions) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if opts.faults:
        raise ValueError("--faults is available in scale set mode only")
    return asyncio.run(LegacyDemo(opts).run())
