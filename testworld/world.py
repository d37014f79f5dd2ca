"""The whole system on one machine, for end-to-end tests and the demo.

``World`` wires what a user's cluster would have around a control plane: the controller
(``gharc controller`` as a subprocess, as its Deployment starts it), the kubelet simulator
(listener pods run the real ``gharc listener``; runner pods run the simulated runner), a
GitHub credential Secret, and helpers to apply scale sets and read what happened.

    async with FakeGitHubServer() as gh, World(kubeconfig, gh) as world:
        await world.apply_scale_set("arc", name="demo", max_runners=10)
        await world.wait_for_listener("demo")
        gh.enqueue_job("octo-org/octo-repo", ["demo"], duration=1)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import aiohttp
from kubernetes_asyncio import client, config

from gharc.kube import objects
from testworld.controlplane import free_port
from testworld.sim.github import FakeGitHubServer
from testworld.sim.kubelet import KubeletSimulator
from testworld.sim.processes import child_options
from testworld.sim.programs import RunnerProgram, default_programs

GROUP, VERSION = "actions.github.com", "v1alpha1"
CONTROLLER_NAMESPACE = "gharc-system"
SECRET_NAME = "github-pat"


def runner_set_manifest(
    namespace: str,
    name: str,
    config_url: str,
    *,
    min_runners: int = 0,
    max_runners: int = 10,
    secret: str = SECRET_NAME,
    labels: list[str] | None = None,
    spec_extra: dict[str, Any] | None = None,
    listener_metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An AutoscalingRunnerSet like ARC's gha-runner-scale-set chart renders (``spec_extra``
    is merged into its spec)."""
    spec: dict[str, Any] = {
        "githubConfigUrl": config_url,
        "githubConfigSecret": secret,
        "minRunners": min_runners,
        "maxRunners": max_runners,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "runner",
                        "image": "ghcr.io/actions/actions-runner:latest",
                        "command": ["/home/runner/run.sh"],
                    }
                ],
            }
        },
    }
    if labels:
        spec["runnerScaleSetLabels"] = labels
    spec.update(spec_extra or {})
    if listener_metrics is not None:
        spec["listenerMetrics"] = listener_metrics
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/component": "autoscaling-runner-set",
                "app.kubernetes.io/part-of": "gha-runner-scale-set",
                "app.kubernetes.io/version": "dev",
            },
        },
        "spec": spec,
    }


def phase_counts(runners: Any) -> Counter[str]:
    """Runners (EphemeralRunners or legacy Runners) by lower-case phase, with those being
    deleted counted as ``deleting`` and those with no phase yet as ``pending``: the demo
    and the e2e tests report both modes the same way."""
    phases: Counter[str] = Counter()
    for runner in runners:
        if objects.is_deleting(runner):
            phases["deleting"] += 1
        else:
            phases[(runner.get("status", {}).get("phase") or "pending").lower()] += 1
    return phases


async def scrape_samples(url: str, metric: str) -> list[tuple[dict[str, str], int]]:
    """The labelled samples of ``metric`` on a Prometheus text endpoint, as (labels, value).

    The demo, the e2e tests and the benchmarks read the controller's own counters this way,
    from outside, as a user's Prometheus would. An unreachable endpoint reads as no samples:
    a report must not fail because the process it describes has gone.
    """
    try:
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url) as resp:
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError):
        return []
    return parse_samples(text, metric)


def parse_samples(text: str, metric: str) -> list[tuple[dict[str, str], int]]:
    """The labelled samples of ``metric`` in Prometheus exposition ``text``."""
    pattern = re.compile(rf"^{re.escape(metric)}\{{(?P<labels>[^}}]*)\}}\s+(?P<value>[0-9.e+]+)$")
    return [
        (dict(re.findall(r'(\w+)="([^"]*)"', m["labels"])), int(float(m["value"])))
        for m in map(pattern.match, text.splitlines())
        if m
    ]


async def scrape_kube_calls(url: str) -> dict[str, int]:
    """``gharc_kube_api_requests_total`` from a metrics endpoint, by "verb resource"."""
    out: Counter[str] = Counter()
    for labels, value in await scrape_samples(url, "gharc_kube_api_requests_total"):
        out[f"{labels.get('verb', '?')} {labels.get('resource', '?')}"] += value
    return dict(out)


class World:
    """Controller + kubelet simulator + credentials around an existing control plane."""

    def __init__(
        self,
        kubeconfig: str,
        github: FakeGitHubServer,
        *,
        log_dir: Path | None = None,
        runner: RunnerProgram | None = None,
        controller_args: list[str] | None = None,
        controller_env: dict[str, str] | None = None,
        controller_namespace: str = CONTROLLER_NAMESPACE,
        single_namespace: bool = False,
        kubelet_namespaces: list[str] | None = None,
    ) -> None:
        """``single_namespace`` runs the controller with ``--watch-single-namespace`` on its
        own namespace and the kubelet on that namespace only: such a World shares the
        control plane with other Worlds running at the same time without either touching
        the other's objects (the e2e tests overlap a long observation with other tests so).
        ``kubelet_namespaces`` restricts the kubelet otherwise (default: every namespace).
        """
        self.kubeconfig = kubeconfig
        self.github = github
        self.log_dir = log_dir
        self.runner_program = runner or RunnerProgram(poll_seconds=20)
        self.controller_args = controller_args or []
        self.controller_env = controller_env or {}
        self.metrics_port = free_port()
        self.api: client.ApiClient | None = None
        self.kubelet: KubeletSimulator | None = None
        self.controller: asyncio.subprocess.Process | None = None
        self.controller_log_path: Path | None = None
        self._controller_log: IO[bytes] | None = None
        self._namespaces: set[str] = set()
        self.controller_namespace = controller_namespace
        self.single_namespace = single_namespace
        if single_namespace:
            kubelet_namespaces = [controller_namespace]
        self.kubelet_namespaces = list(kubelet_namespaces or [])

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> World:
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        self.api = client.ApiClient(cfg)
        # NB: the harness reads no proxy or netrc settings, and with trust_env aiohttp asks a
        # worker thread for both on every request: two thread hops per simulated kubelet
        # call, which under a burst put the harness's loop behind what it measures.
        self.api.rest_client.pool_manager._trust_env = False
        await self.ensure_namespace(self.controller_namespace)
        for ns in self.kubelet_namespaces:
            await self.ensure_namespace(ns)
        await self.start_controller()
        programs = default_programs(self.api, runner=self.runner_program)
        self.kubelet = KubeletSimulator(
            self.api, programs=programs, namespaces=self.kubelet_namespaces
        )
        await self.kubelet.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_controller()
        if self.kubelet is not None:
            await self.kubelet.stop()
        if self.api is not None:
            await self.api.close()

    def controller_command(self, metrics_port: int | None = None) -> list[str]:
        """The ``gharc controller`` command line; another replica of the same controller
        (leader election) runs it with its own ``metrics_port``."""
        port = self.metrics_port if metrics_port is None else metrics_port
        return [
            sys.executable,
            "-m",
            "gharc",
            "controller",
            "--auto-scaling-runner-set-only",
            f"--kubeconfig={self.kubeconfig}",
            f"--metrics-addr=127.0.0.1:{port}",
            "--listener-metrics-addr=0",
            "--log-level=info",
            *(
                [f"--watch-single-namespace={self.controller_namespace}"]
                if self.single_namespace
                else []
            ),
            *self.controller_args,
        ]

    def controller_environ(self) -> dict[str, str]:
        """The controller's environment, as its Deployment sets it."""
        return {
            **os.environ,
            "CONTROLLER_MANAGER_POD_NAMESPACE": self.controller_namespace,
            "CONTROLLER_MANAGER_CONTAINER_IMAGE": "ghcr.io/gharc/gharc:dev",
            **self.controller_env,
        }

    async def start_controller(self) -> None:
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self.controller_log_path = self.log_dir / "controller.log"
            self._controller_log = self.controller_log_path.open("ab")
        self.controller = await asyncio.create_subprocess_exec(
            *self.controller_command(),
            env=self.controller_environ(),
            stdout=self._controller_log or asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.STDOUT,
            **child_options(),  # dies with the test process, never left reconciling
        )

    async def stop_controller(self) -> int | None:
        """SIGTERM the controller and wait for it (a restart is stop + start)."""
        proc = self.controller
        if proc is None:
            return None
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._controller_log is not None:
            self._controller_log.close()
            self._controller_log = None
        self.controller = None
        return proc.returncode

    # -- set-up helpers ------------------------------------------------------------------
    @property
    def core(self) -> client.CoreV1Api:
        assert self.api is not None
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        assert self.api is not None
        return client.CustomObjectsApi(self.api)

    async def ensure_namespace(self, name: str) -> None:
        body: Any = {"metadata": {"name": name}}
        try:
            await self.core.create_namespace(body)
        except client.ApiException as err:
            if err.status != 409:
                raise
        self._namespaces.add(name)

    async def create_github_secret(
        self, namespace: str, name: str = SECRET_NAME, *, token: str | None = None
    ) -> None:
        """The credentials Secret; ``token`` other than the fake's default PAT lets a test
        revoke one scale set's credentials without touching the others'."""
        body: Any = {
            "metadata": {"name": name},
            "stringData": {"github_token": token or self.github.token},
        }
        try:
            await self.core.create_namespaced_secret(namespace, body)
        except client.ApiException as err:
            if err.status != 409:
                raise

    async def apply_scale_set(
        self,
        namespace: str,
        name: str,
        *,
        config_url: str | None = None,
        token: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Namespace + credentials Secret + AutoscalingRunnerSet, as a Helm install would."""
        await self.ensure_namespace(namespace)
        await self.create_github_secret(namespace, kwargs.get("secret", SECRET_NAME), token=token)
        manifest = runner_set_manifest(
            namespace, name, config_url or self.github.config_url(), **kwargs
        )
        created: dict[str, Any] = await self.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "autoscalingrunnersets", manifest
        )
        return created

    async def delete_scale_set(self, namespace: str, name: str) -> None:
        await self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, "autoscalingrunnersets", name
        )

    # -- observation -------------------------------------------------------------------
    def session_count(self) -> int:
        return len(self.github.state.sessions)

    async def wait_for_listener(self, scale_set: str, timeout: float = 60.0) -> None:
        """Until the fake GitHub has an open message session for ``scale_set``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_controller()
            for ss in self.github.state.scale_sets.values():
                if ss.name == scale_set and self.github.state.active_session(ss) is not None:
                    return
            await asyncio.sleep(0.1)
        raise AssertionError(f"no listener session for scale set {scale_set} in {timeout} s")

    def check_controller(self) -> None:
        proc = self.controller
        if proc is not None and proc.returncode is not None:
            raise AssertionError(
                f"the controller exited with code {proc.returncode}; "
                f"log: {self.controller_log_path}"
            )

    async def ephemeral_runners(self, namespace: str) -> list[dict[str, Any]]:
        listed: Any = await self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, "ephemeralrunners"
        )
        return list(listed.get("items", []))

    async def runner_phases(self, namespace: str) -> Counter[str]:
        return phase_counts(await self.ephemeral_runners(namespace))

    async def kube_calls(self) -> dict[str, int]:
        return await scrape_kube_calls(f"http://127.0.0.1:{self.metrics_port}/metrics")

    async def apiserver_metrics(self) -> str:
        """The API server's own ``/metrics`` text, read as the admin."""
        assert self.api is not None
        raw = await self.api.call_api("/metrics", "GET", _preload_content=False)
        response = raw[0] if isinstance(raw, tuple) else raw
        return str(await response.text())

    def runners_created(self) -> int:
        """JIT configs handed out by GitHub: one per runner the controller created."""
        return self.github.calls("*generatejitconfig*", method="POST", status=200)

    def registrations_by_runner(self) -> dict[str, list[float]]:
        """When each runner name was registered (JIT config handed out), oldest first: more
        than one time means a registration was replaced (its answer lost, e.g. with the
        process that asked for it), which is one runner, not two."""
        times: dict[str, list[float]] = {}
        for name, _, at in self.github.state.jit_issued:
            times.setdefault(name, []).append(at)
        return times

    @property
    def controller_pid(self) -> int | None:
        """The controller process id, for CPU and memory readings under /proc."""
        proc = self.controller
        return proc.pid if proc is not None and proc.returncode is None else None

    async def pods(self, namespace: str) -> list[dict[str, Any]]:
        listed = await self.core.list_namespaced_pod(namespace)
        assert self.api is not None
        return [self.api.sanitize_for_serialization(p) for p in listed.items]

    async def secrets(self, namespace: str) -> list[dict[str, Any]]:
        listed = await self.core.list_namespaced_secret(namespace)
        assert self.api is not None
        return [self.api.sanitize_for_serialization(s) for s in listed.items]

    async def custom_objects(self, namespace: str, plural: str) -> list[dict[str, Any]]:
        listed: Any = await self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, plural
        )
        return list(listed.get("items", []))

    async def purge(self, namespaces: list[str]) -> None:
        """Leave nothing of gharc in ``namespaces``: finalizers stripped, objects and pods
        deleted at once. For test teardown on a control plane without garbage collection or
        a namespace controller, so that the next test's controller finds an empty world.
        Call it after :meth:`stop_controller`, or the controller re-creates what goes."""
        plurals = (
            "autoscalingrunnersets",
            "ephemeralrunnersets",
            "ephemeralrunners",
            "autoscalinglisteners",
        )
        for ns in namespaces:
            for plural in plurals:
                try:
                    items = await self.custom_objects(ns, plural)
                except client.ApiException:
                    continue
                for obj in items:
                    name = obj["metadata"]["name"]
                    with contextlib.suppress(client.ApiException):
                        if obj["metadata"].get("finalizers"):
                            await self.custom.patch_namespaced_custom_object(
                                GROUP, VERSION, ns, plural, name, {"metadata": {"finalizers": None}}
                            )
                    with contextlib.suppress(client.ApiException):
                        await self.custom.delete_namespaced_custom_object(
                            GROUP, VERSION, ns, plural, name
                        )
            for pod in await self.pods(ns):
                name = pod["metadata"]["name"]
                with contextlib.suppress(client.ApiException):
                    if pod["metadata"].get("finalizers"):
                        await self.core.patch_namespaced_pod(
                            name, ns, {"metadata": {"finalizers": None}}
                        )
                with contextlib.suppress(client.ApiException):
                    await self.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
