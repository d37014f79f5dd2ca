"""What the simulated containers run: GitHub Actions runners and the listener process.

All are chosen by what a real image would run. A container whose env carries
``ACTIONS_RUNNER_INPUT_JITCONFIG`` is a runner (the official image starts ``run.sh`` with it);
a legacy runner container (named ``runner``, with ``RUNNER_TOKEN`` in its env, as ARC's
legacy controllers build it for ``summerwind/actions-runner``) registers with that token;
a container named ``listener`` whose command is gharc's listener is started as a real
subprocess, so the listener under test is the same program users run in their pods.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client

from gharc.api.legacy import constants as lc
from gharc.api.scaleset import constants as c
from testworld.sim.kubelet import ContainerContext, ProgramFactory
from testworld.sim.processes import run_container_process

log = logging.getLogger(__name__)


class RunnerProgram:
    """An ephemeral runner: redeem the JIT config, take one job, run it, report, exit 0.

    It speaks the fake GitHub's runner-side API (``/_runner/...``). A runner that is told to
    stop while idle disconnects and exits 0, as the real runner does on SIGTERM. While it
    runs a job it renews it every ``renew_seconds`` (the real runner renews its job lock
    every minute), so the fake never counts a long job's runner as lost.

    A JIT config that was already used is refused with Conflict; the real runner then logs
    "Retrying until reconnected" and sits idle (ARC #4588), so by default
    (``conflict_retries=None``) this one retries every second until it is stopped.

    ``hang_after_jobs``: a fault, the next that many runners to finish a job do not exit
    afterwards (ARC #4603: a runner process hung after its job held its slot for hours);
    they sit until the pod is deleted. ``hung`` counts the runners that did,
    ``hung_pods`` names their pods.
    """

    def __init__(
        self,
        *,
        poll_seconds: float = 30.0,
        speedup: float = 1.0,
        conflict_retries: int | None = None,
        renew_seconds: float = 30.0,
        hang_after_jobs: int = 0,
    ) -> None:
        self.poll_seconds = poll_seconds
        self.speedup = speedup
        self.conflict_retries = conflict_retries
        self.renew_seconds = renew_seconds
        self.hang_after_jobs = hang_after_jobs
        self.hung = 0
        self.hung_pods: dict[str, float] = {}
        """Pods of the runners that hung: name to the time (epoch seconds) they hung."""

    async def run(self, ctx: ContainerContext) -> int:
        encoded = ctx.env.get(c.ENV_RUNNER_JIT_CONFIG, "")
        try:
            config = json.loads(base64.b64decode(encoded, validate=True))
            server = str(config["serverUrl"]).rstrip("/")
        except Exception:
            log.warning("runner %s: no usable JIT config", ctx.name)
            return 1
        async with aiohttp.ClientSession() as http:
            session = await self._connect(http, server, encoded, ctx)
            if session is None:
                return 1
            auth = {"Authorization": f"Bearer {session['token']}"}
            if not await self._take_job(http, server, auth, ctx):
                return 0
            if self.hang_after_jobs > 0:
                self.hang_after_jobs -= 1
                self.hung += 1
                self.hung_pods[ctx.name] = time.time()
                log.warning("runner %s: hanging after its job (fault)", ctx.name)
                await ctx.stop.wait()  # only the pod's deletion ends it
            return 0

    async def _run_job(
        self,
        http: aiohttp.ClientSession,
        server: str,
        auth: dict[str, str],
        job: dict[str, Any],
        ctx: ContainerContext,
    ) -> None:
        """Report the job started, "run" it for its duration, report its result."""
        rid = job["runnerRequestId"]
        async with http.post(f"{server}/_runner/jobs/{rid}/started", headers=auth):
            pass
        duration = float(job.get("durationSeconds") or 0) / self.speedup
        result = str(job.get("result") or "succeeded")
        deadline = asyncio.get_running_loop().time() + duration
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            try:
                await asyncio.wait_for(ctx.stop.wait(), timeout=min(left, self.renew_seconds))
                result = "canceled"
                break
            except TimeoutError:
                pass
            if left > self.renew_seconds:
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"{server}/_runner/jobs/{rid}", headers=auth):
                        pass  # renews the job: any runner call shows the runner alive
        async with http.post(
            f"{server}/_runner/jobs/{rid}/completed", headers=auth, json={"result": result}
        ):
            pass

    async def _connect(
        self, http: aiohttp.ClientSession, server: str, encoded: str, ctx: ContainerContext
    ) -> dict[str, Any] | None:
        """Redeem the JIT config; a session conflict (the config has
        been used, ARC #4588) is retried, as the real runner does: until reconnected, or
        ``conflict_retries`` times."""
        attempt = 0
        while self.conflict_retries is None or attempt <= self.conflict_retries:
            attempt += 1
            async with http.post(
                f"{server}/_runner/connect", json={"encodedJITConfig": encoded}
            ) as resp:
                if resp.status == 200:
                    session: dict[str, Any] = await resp.json()
                    return session
                if resp.status != 409:
                    log.warning("runner %s: connect failed with %d", ctx.name, resp.status)
                    return None
            try:
                await asyncio.wait_for(ctx.stop.wait(), timeout=1.0)
                return None
            except TimeoutError:
                continue
        log.warning("runner %s: session conflict did not clear", ctx.name)
        return None

    async def _take_job(
        self,
        http: aiohttp.ClientSession,
        server: str,
        auth: dict[str, str],
        ctx: ContainerContext,
    ) -> bool:
        """Wait for a job and run it; False when none comes (stopped, or the registration
        is gone), after disconnecting as a runner does when it exits. Both programs take
        their jobs this way: JIT runners one, registration-token runners until they stop."""
        job = await self._next_job(http, server, auth, ctx)
        if job is None:
            with contextlib.suppress(aiohttp.ClientError):
                await http.post(f"{server}/_runner/disconnect", headers=auth)
            return False
        await self._run_job(http, server, auth, job, ctx)
        return True

    async def _next_job(
        self,
        http: aiohttp.ClientSession,
        server: str,
        auth: dict[str, str],
        ctx: ContainerContext,
    ) -> dict[str, Any] | None:
        while not ctx.stop.is_set():
            poll = asyncio.create_task(
                http.get(
                    f"{server}/_runner/jobs/next",
                    params={"timeout": str(self.poll_seconds)},
                    headers=auth,
                )
            )
            stop = asyncio.create_task(ctx.stop.wait())
            done, _ = await asyncio.wait({poll, stop}, return_when=asyncio.FIRST_COMPLETED)
            if stop in done:
                poll.cancel()
                await asyncio.gather(poll, return_exceptions=True)
                return None
            stop.cancel()
            resp = poll.result()
            async with resp:
                if resp.status == 200:
                    job: dict[str, Any] = await resp.json()
                    return job
                if resp.status in (401, 404):
                    return None  # registration removed: the runner shuts down
        return None


class LegacyRunnerProgram(RunnerProgram):
    """A ``summerwind/actions-runner`` container as the fake GitHub sees it.

    It does what the image's entrypoint does with the env the legacy Runner controller put
    in the pod: ``config.sh --url $GITHUB_URL<scope> --token $RUNNER_TOKEN --name
    $RUNNER_NAME --labels $RUNNER_LABELS [--ephemeral] --replace`` (``POST
    /_runner/register``), then takes a job for its labels, runs it for the job's duration,
    reports it and, when ephemeral (ARC's default), exits 0. A non-ephemeral runner keeps
    taking jobs. Told to stop while idle, it disconnects and exits 0; when the controller
    removes its registration (scale down), the next poll answers 401 and it exits 0 too.
    A registration the fake refuses (bad or expired token) exits 1, as ``config.sh`` fails.
    """

    async def run(self, ctx: ContainerContext) -> int:
        env = ctx.env
        base = env.get("GITHUB_URL", "").rstrip("/")
        if env.get("RUNNER_REPO"):
            scope = env["RUNNER_REPO"]
        elif env.get("RUNNER_ORG"):
            scope = env["RUNNER_ORG"]
        elif env.get("RUNNER_ENTERPRISE"):
            scope = f"enterprises/{env['RUNNER_ENTERPRISE']}"
        else:
            log.warning("legacy runner %s: no RUNNER_REPO/ORG/ENTERPRISE", ctx.name)
            return 1
        ephemeral = env.get(lc.ENV_RUNNER_EPHEMERAL, "true").lower() != "false"
        body = {
            "url": f"{base}/{scope}",
            "token": env.get("RUNNER_TOKEN", ""),
            "name": env.get("RUNNER_NAME") or ctx.name,
            "labels": [x.strip() for x in env.get("RUNNER_LABELS", "").split(",") if x.strip()],
            "ephemeral": ephemeral,
        }
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/_runner/register", json=body) as resp:
                if resp.status != 200:
                    log.warning(
                        "legacy runner %s: registration failed with %d", ctx.name, resp.status
                    )
                    return 1
                session = await resp.json()
            auth = {"Authorization": f"Bearer {session['token']}"}
            while await self._take_job(http, base, auth, ctx):
                if ephemeral or ctx.stop.is_set():
                    return 0
            return 0


class ListenerProcessProgram:
    """Runs the pod's ``gharc listener`` as a subprocess with the pod's env and config.

    Secret volumes are written to a private folder and ``LISTENER_CONFIG_PATH`` is pointed
    at it. The process reaches the API server as the pod's service account (a token from
    the TokenRequest API), so the listener's narrow RBAC is exercised for real.

    The process lives exactly as long as the container: it is sent SIGTERM when the
    kubelet stops the container, and its whole process group is killed and reaped when the
    run ends for any other reason (a crash, eviction, OOM kill or node loss cancels the
    run), so a "crashed" listener never keeps serving next to its successor. It has its
    own process group and dies with the simulator (:mod:`testworld.sim.processes`).
    ``command`` replaces ``python -m gharc listener`` (tests run a stand-in process).
    """

    def __init__(
        self,
        api: client.ApiClient,
        *,
        extra_env: dict[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self._api = api
        self._extra_env = extra_env or {}
        self._command = command or [sys.executable, "-m", "gharc", "listener"]

    async def _service_account_kubeconfig(self, ctx: ContainerContext, folder: Path) -> Path:
        sa = ctx.pod["spec"].get("serviceAccountName") or "default"
        core = client.CoreV1Api(self._api)
        body: Any = {"spec": {"expirationSeconds": 3600}}
        token = await core.create_namespaced_service_account_token(sa, ctx.namespace, body)
        cfg = self._api.configuration
        cluster: dict[str, Any] = {"server": cfg.host}
        if cfg.ssl_ca_cert:
            cluster["certificate-authority"] = cfg.ssl_ca_cert
        else:
            cluster["insecure-skip-tls-verify"] = True
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": cluster}],
            "users": [{"name": sa, "user": {"token": token.status.token}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": sa}}],
            "current-context": "sim",
        }
        path = folder / "kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        return path

    async def run(self, ctx: ContainerContext) -> int:
        with tempfile.TemporaryDirectory(prefix=f"gharc-{ctx.name}-") as tmp:
            folder = Path(tmp)
            env = {**os.environ, **ctx.env, **self._extra_env}
            for path, data in ctx.files.items():
                local = folder / path.lstrip("/")
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(data)
            config_path = env.get(c.ENV_LISTENER_CONFIG_PATH, c.LISTENER_CONFIG_PATH)
            env[c.ENV_LISTENER_CONFIG_PATH] = str(folder / config_path.lstrip("/"))
            env["KUBECONFIG"] = str(await self._service_account_kubeconfig(ctx, folder))
            env.setdefault("HOSTNAME", ctx.name)
            return await run_container_process(
                self._command,
                env=env,
                stop=ctx.stop,
                output=logging.getLogger(f"testworld.sim.pod.{ctx.name}"),
            )


def is_runner(pod: dict[str, Any], container: dict[str, Any]) -> bool:
    return any(e.get("name") == c.ENV_RUNNER_JIT_CONFIG for e in container.get("env") or [])


def is_legacy_runner(pod: dict[str, Any], container: dict[str, Any]) -> bool:
    """The runner container of a legacy Runner pod (it registers with ``RUNNER_TOKEN``)."""
    return container.get("name") == lc.CONTAINER_RUNNER and any(
        e.get("name") == "RUNNER_TOKEN" for e in container.get("env") or []
    )


def legacy_programs(runner: LegacyRunnerProgram | None = None) -> list[ProgramFactory]:
    """Legacy runner pods run :class:`LegacyRunnerProgram` (sidecars sleep)."""
    program = runner or LegacyRunnerProgram()

    def runners(pod: dict[str, Any], container: dict[str, Any]) -> LegacyRunnerProgram | None:
        return program if is_legacy_runner(pod, container) else None

    return [runners]


def is_listener(pod: dict[str, Any], container: dict[str, Any]) -> bool:
    command = [*(container.get("command") or []), *(container.get("args") or [])]
    return container.get("name") == c.LISTENER_CONTAINER_NAME and "listener" in " ".join(command)


def default_programs(
    api: client.ApiClient,
    *,
    runner: RunnerProgram | None = None,
    listener_env: dict[str, str] | None = None,
) -> list[ProgramFactory]:
    """Runner pods run :class:`RunnerProgram`, listener pods the real listener process."""
    runner_program = runner or RunnerProgram()
    listener_program = ListenerProcessProgram(api, extra_env=listener_env)

    def runners(pod: dict[str, Any], container: dict[str, Any]) -> RunnerProgram | None:
        return runner_program if is_runner(pod, container) else None

    def listeners(pod: dict[str, Any], container: dict[str, Any]) -> ListenerProcessProgram | None:
        return listener_program if is_listener(pod, container) else None

    return [runners, listeners]
