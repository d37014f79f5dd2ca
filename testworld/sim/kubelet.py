"""A kubelet for a cluster that has no nodes: it plays the node for pods of the test world.

The test control plane has no scheduler and no kubelet, so without this every pod stays
Pending forever, and (because unbound pods are deleted at once) graceful deletion never
happens. The simulator closes that gap the way the real components would:

- it registers one Node and binds every new pod to it (the scheduler's job), so deletion
  becomes graceful, exactly as on a real cluster;
- it reports status as a kubelet does: Pending with ``ContainerCreating``, then Running with
  ``startedAt`` and the Ready condition, then Terminated with an exit code, a reason and
  ``finishedAt``; phase Succeeded or Failed for ``restartPolicy: Never``;
- on deletion it stops the container (SIGTERM, then SIGKILL after the grace period) and
  removes the pod with ``gracePeriodSeconds=0`` like the kubelet's final delete;
- what a container "runs" is a :class:`Program` chosen per pod: a listener pod runs
  ``gharc listener`` as a local subprocess, a runner pod runs the simulated runner, anything
  else sleeps until it is stopped.

Faults (eviction, OOM kill, crash, slow image pull, node loss) are injected through the
public methods. The simulator talks to Kubernetes with kubernetes_asyncio directly: it is
part of the outside world and must not share code with the controllers it tests.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import aiohttp
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger(__name__)

NODE_NAME = "gharc-sim-node"

#: A failed pod status write (conflict, throttling, 5xx, a dropped connection) is retried
#: as a kubelet's status manager does, with a doubling wait between these bounds, until it
#: lands or the pod is gone; it never leaves the pod with a stale status.
STATUS_RETRY_FIRST = 0.1
STATUS_RETRY_MAX = 2.0


async def checked(resp: Any) -> None:
    """Raise what the API server refused. With ``_preload_content=False`` (no model is built
    from the answer) kubernetes_asyncio hands back the raw response whatever its status."""
    try:
        if not 200 <= resp.status <= 299:
            err = ApiException(status=resp.status, reason=resp.reason)
            err.body = await resp.text()
            raise err
    finally:
        resp.release()


def retryable(err: BaseException) -> bool:
    """Whether a failed API call is worth repeating unchanged."""
    if isinstance(err, ApiException):
        return err.status in (409, 429) or err.status >= 500
    return isinstance(err, aiohttp.ClientError | OSError | TimeoutError)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerContext:
    """What a program sees of its pod: resolved env, mounted files, a stop signal."""

    pod: dict[str, Any]
    container: dict[str, Any]
    env: dict[str, str]
    files: dict[str, bytes]
    """Mounted files by their absolute path inside the container (secret volumes)."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the kubelet wants the container to stop (SIGTERM)."""

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])


class Program(Protocol):
    """What runs inside a simulated container; returns the container's exit code."""

    async def run(self, ctx: ContainerContext) -> int: ...


ProgramFactory = Callable[[dict[str, Any], dict[str, Any]], Program | None]
"""Given (pod, container), return a program for it, or None to let the next factory try."""


class SleepProgram:
    """Runs until stopped, then exits 0 as a well-behaved process on SIGTERM would."""

    async def run(self, ctx: ContainerContext) -> int:
        await ctx.stop.wait()
        return 0


@dataclass
class _Fault:
    """How a container's life is cut short."""

    exit_code: int
    reason: str
    pod_reason: str | None = None
    pod_message: str | None = None


@dataclass
class _PodRun:
    uid: str
    namespace: str
    name: str
    task: asyncio.Task[None] | None = None
    ctx: ContainerContext | None = None
    program: asyncio.Task[int] | None = None
    """The container's program while it runs (its process, for a listener)."""
    fault: _Fault | None = None
    fault_event: asyncio.Event = field(default_factory=asyncio.Event)
    deleting: bool = False
    grace_seconds: float = 30.0
    bound: bool = False
    """The pod is known to be bound to this node (it came bound, or our binding went in)."""


class KubeletSimulator:
    """Plays scheduler + kubelet for pods in ``namespaces`` (all when empty).

    Usage::

        async with KubeletSimulator(api_client, programs=[...]) as kubelet:
            ...
            await kubelet.evict("ns", "pod-name")
    """

    def __init__(
        self,
        api: client.ApiClient,
        *,
        programs: Iterable[ProgramFactory] = (),
        namespaces: Iterable[str] = (),
        node_name: str = NODE_NAME,
        image_pull_seconds: float = 0.0,
        max_grace_seconds: float = 5.0,
    ) -> None:
        self._api = api
        self._core = client.CoreV1Api(api)
        self._programs = list(programs)
        self._namespaces = list(namespaces)
        self.node_name = node_name
        self._base_node_name = node_name
        self.lost_nodes: list[str] = []
        """Nodes :meth:`lose_node` took away, oldest first."""
        self.image_pull_seconds = image_pull_seconds
        self.max_grace_seconds = max_grace_seconds
        self._slow_pulls: list[float] = []
        self._runs: dict[str, _PodRun] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._pod_tasks: set[asyncio.Task[None]] = set()
        """Every pod's task, including pods already forgotten whose program is still
        being killed: ``stop`` waits for all of them."""
        self._stopping = False
        self.pods_started = 0

    async def __aenter__(self) -> KubeletSimulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        await self._register_node()
        targets: list[str | None] = [*self._namespaces] or [None]
        for ns in targets:
            self._tasks.append(asyncio.create_task(self._watch(ns), name=f"kubelet-watch-{ns}"))

    async def stop(self) -> None:
        """Stop every container as a node shutting down does, and wait until they are gone.

        Programs get SIGTERM (``ctx.stop``) and up to ``max_grace_seconds`` to exit; then
        the pod tasks are cancelled, which kills what is left (a listener's whole process
        group) and waits for it. No process of the simulator outlives this call.
        """
        self._stopping = True
        for t in self._tasks:
            t.cancel()
        programs = [r.program for r in self._runs.values() if r.program and not r.program.done()]
        for run in self._runs.values():
            if run.ctx is not None:
                run.ctx.stop.set()
        if programs:
            await asyncio.wait(programs, timeout=self.max_grace_seconds)
        pods = list(self._pod_tasks)
        for task in pods:
            task.cancel()
        await asyncio.gather(*self._tasks, *pods, return_exceptions=True)
        self._runs.clear()

    async def _register_node(self) -> None:
        node: Any = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": self.node_name},
            },
        }
        try:
            await self._core.create_node(node)
        except ApiException as err:
            if err.status != 409:
                raise
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "gharc kubelet simulator is posting ready status",
                        "lastHeartbeatTime": now_rfc3339(),
                        "lastTransitionTime": now_rfc3339(),
                    }
                ],
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            }
        }
        await self._core.patch_node_status(self.node_name, status)

    # -- watching ----------------------------------------------------------------------
    async def _watch(self, namespace: str | None) -> None:
        rv: str | None = None
        while not self._stopping:
            try:
                if rv is None:
                    if namespace:
                        listed = await self._core.list_namespaced_pod(namespace)
                    else:
                        listed = await self._core.list_pod_for_all_namespaces()
                    rv = listed.metadata.resource_version
                    for pod in listed.items:
                        await self._on_pod(self._api.sanitize_for_serialization(pod))
                w = watch.Watch(return_type="object")
                func = (
                    self._core.list_namespaced_pod
                    if namespace
                    else self._core.list_pod_for_all_namespaces
                )
                kwargs: dict[str, Any] = {"resource_version": rv, "timeout_seconds": 60}
                if namespace:
                    kwargs["namespace"] = namespace
                async with w.stream(func, allow_watch_bookmarks=True, **kwargs) as stream:
                    async for event in stream:
                        obj = event["object"]
                        if event["type"] == "ERROR":
                            rv = None  # 410 Gone: relist
                            break
                        rv = obj["metadata"]["resourceVersion"]
                        if event["type"] == "BOOKMARK":
                            continue
                        if event["type"] == "DELETED":
                            self._forget(obj["metadata"]["uid"])
                        else:
                            await self._on_pod(obj)
            except asyncio.CancelledError:
                raise
            except ApiException as err:
                if err.status == 410:
                    rv = None
                else:
                    log.warning("kubelet watch failed: %s; retrying", err.reason)
                    await asyncio.sleep(1)
            except Exception as err:  # connection reset and the like
                if self._stopping:
                    return
                log.warning("kubelet watch error: %r; retrying", err)
                await asyncio.sleep(1)

    def _forget(self, uid: str) -> None:
        run = self._runs.pop(uid, None)
        if run is not None and run.task is not None and not run.task.done():
            if run.ctx is not None:
                run.ctx.stop.set()
            run.task.cancel()

    async def _on_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        spec = pod.get("spec", {})
        node = spec.get("nodeName")
        if node and node != self.node_name:
            return  # another node's pod
        run = self._runs.get(uid)
        if run is None:
            phase = pod.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                if meta.get("deletionTimestamp"):
                    await self._final_delete(meta["namespace"], meta["name"], uid)
                return
            run = _PodRun(uid=uid, namespace=meta["namespace"], name=meta["name"])
            self._runs[uid] = run
            run.task = asyncio.create_task(self._run_pod(run, pod), name=f"pod-{meta['name']}")
            self._pod_tasks.add(run.task)
            run.task.add_done_callback(self._pod_tasks.discard)
            return
        if meta.get("deletionTimestamp") and not run.deleting:
            run.deleting = True
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            run.grace_seconds = min(grace, self.max_grace_seconds)
            if run.ctx is not None:
                run.ctx.stop.set()
            run.fault_event.set()
            if run.task is not None and run.task.done():
                # Nothing runs any more (its end was written, or refused): confirm at once,
                # as a kubelet with no container left to stop does.
                await self._final_delete(meta["namespace"], meta["name"], uid)

    # -- one pod's life ------------------------------------------------------------------
    async def _run_pod(self, run: _PodRun, pod: dict[str, Any]) -> None:
        try:
            await self._live(run, pod)
        except asyncio.CancelledError:
            raise
        except ApiException as err:
            if err.status not in (404, 409):
                log.warning("pod %s/%s: API error %s", run.namespace, run.name, err.reason)
        except Exception:
            log.exception("pod %s/%s: simulator error", run.namespace, run.name)

    async def _live(self, run: _PodRun, pod: dict[str, Any]) -> None:
        ns, name = run.namespace, run.name
        if not pod["spec"].get("nodeName"):
            await self._bind(ns, name)
        run.bound = True
        containers = pod["spec"].get("containers", [])
        # NB: a kubelet's status manager writes statuses apart from the pod worker that
        # starts containers (in order for each pod): Pending is on its way while the image is
        # pulled and the Secrets are read, and Running is written after it.
        pending = asyncio.ensure_future(
            self._patch_status(ns, name, self._pending_status(pod, containers))
        )
        try:
            prepared = await self._prepare(run, pod, containers)
        except asyncio.CancelledError:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
            raise
        except BaseException:
            await asyncio.gather(pending, return_exceptions=True)
            raise
        await pending
        if prepared is None:
            if run.deleting:
                await self._final_delete(ns, name, run.uid)
            return
        ctx, program = prepared
        run.ctx = ctx
        started = now_rfc3339()
        # NB: the container runs before the API server hears of it, as on a node (the
        # status manager reports Running after the runtime started it): the runner starts
        # beside the Running write, and the end is written only after it.
        running = asyncio.ensure_future(
            self._patch_status(ns, name, self._running_status(pod, containers, started))
        )
        self.pods_started += 1
        prog_task = run.program = asyncio.create_task(program.run(ctx))
        try:
            exit_code, reason = await self._until_exit(run, prog_task)
        except BaseException:
            running.cancel()
            raise
        finally:
            # NB: a fault, a deletion past its grace period, ``stop`` or a forgotten pod all
            # end here; the program is cancelled (a process is killed) and awaited, so the
            # container is really gone before its status says so.
            if not prog_task.done():
                prog_task.cancel()
                ctx.stop.set()
            await asyncio.gather(prog_task, return_exceptions=True)
        await running
        finished = now_rfc3339()
        restart = pod["spec"].get("restartPolicy", "Always")
        pod_phase = "Succeeded" if exit_code == 0 else "Failed"
        if restart != "Never" and not run.deleting and run.fault is None:
            log.info(
                "%s/%s exited %d; restartPolicy %s is not simulated", ns, name, exit_code, restart
            )
        status = self._terminated_status(
            pod, containers, started, finished, exit_code, reason, pod_phase, run.fault
        )
        await self._patch_status(ns, name, status)
        if run.deleting:
            await self._final_delete(ns, name, run.uid)

    async def _prepare(
        self, run: _PodRun, pod: dict[str, Any], containers: list[dict[str, Any]]
    ) -> tuple[ContainerContext, Program] | None:
        """Pull the image and read what the main container mounts and sees; ``None`` when
        the pod was deleted or hit by a fault meanwhile."""
        pull = self._slow_pulls.pop(0) if self._slow_pulls else self.image_pull_seconds
        if pull > 0 and not await self._wait_or_interrupted(run, pull):
            return None
        if run.deleting:
            return None
        main, program = self._main_container(pod, containers)
        ctx = ContainerContext(
            pod=pod,
            container=main,
            env=await self._resolve_env(pod, main),
            files=await self._resolve_files(pod, main),
        )
        return ctx, program

    async def _until_exit(self, run: _PodRun, prog_task: asyncio.Task[int]) -> tuple[int, str]:
        """The container's exit code and reason: its own, a fault's, or a deletion's."""
        fault_wait = asyncio.create_task(run.fault_event.wait())
        try:
            done, _ = await asyncio.wait(
                {prog_task, fault_wait}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            fault_wait.cancel()
        if prog_task in done:
            try:
                exit_code = prog_task.result()
            except Exception:
                log.exception("program of %s/%s crashed", run.namespace, run.name)
                exit_code = 1
            return exit_code, "Completed" if exit_code == 0 else "Error"
        if run.fault is not None:
            return run.fault.exit_code, run.fault.reason  # the caller kills the program
        # deletion: SIGTERM, wait out the grace period, then SIGKILL
        try:
            exit_code = await asyncio.wait_for(prog_task, timeout=max(run.grace_seconds, 0.01))
        except TimeoutError:
            return 137, "Error"
        except Exception:
            return 1, "Error"
        return exit_code, "Completed" if exit_code == 0 else "Error"

    async def _wait_or_interrupted(self, run: _PodRun, seconds: float) -> bool:
        try:
            await asyncio.wait_for(run.fault_event.wait(), timeout=seconds)
            return False
        except TimeoutError:
            return True

    def _main_container(
        self, pod: dict[str, Any], containers: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], Program]:
        """The container whose program decides the pod's fate (sidecars just sleep)."""
        for container in containers:
            for factory in self._programs:
                program = factory(pod, container)
                if program is not None:
                    return container, program
        return (containers[0] if containers else {"name": "main"}), SleepProgram()

    async def _bind(self, namespace: str, name: str) -> None:
        body: Any = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name},
        }
        try:
            await checked(
                await self._core.create_namespaced_pod_binding(
                    name, namespace, body, _preload_content=False
                )
            )
        except ApiException as err:
            if err.status != 409:  # already bound (an earlier event of the same pod)
                raise

    async def _final_delete(self, namespace: str, name: str, uid: str) -> None:
        try:
            await checked(
                await self._core.delete_namespaced_pod(
                    name,
                    namespace,
                    # With a body, the API server takes the options from it, not the query.
                    body=cast(Any, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}),
                    _preload_content=False,
                )
            )
        except ApiException as err:
            if err.status not in (404, 409):
                raise
        self._runs.pop(uid, None)

    async def _patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Write a pod's status, retrying what can succeed later (see ``retryable``); a
        404 (the pod is gone) or a refusal on the merits is raised."""
        delay = STATUS_RETRY_FIRST
        while True:
            try:
                await checked(
                    await self._core.patch_namespaced_pod_status(
                        name, namespace, {"status": status}, _preload_content=False
                    )
                )
                return
            except Exception as err:
                if self._stopping or not retryable(err):
                    raise
                log.info(
                    "pod %s/%s: status update failed (%r); retrying in %.1f s",
                    namespace,
                    name,
                    err,
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, STATUS_RETRY_MAX)

    # -- status documents ------------------------------------------------------------------
    @staticmethod
    def _conditions(ready: bool, ts: str) -> list[dict[str, Any]]:
        value = "True" if ready else "False"
        return [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts},
            {"type": "Initialized", "status": "True", "lastTransitionTime": ts},
            {"type": "ContainersReady", "status": value, "lastTransitionTime": ts},
            {"type": "Ready", "status": value, "lastTransitionTime": ts},
        ]

    def _pending_status(
        self, pod: dict[str, Any], containers: list[dict[str, Any]]
    ) -> dict[str, Any]:
        ts = now_rfc3339()
        return {
            "phase": "Pending",
            "hostIP": "127.0.0.1",
            "startTime": ts,
            "conditions": self._conditions(False, ts),
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in containers
            ],
        }

    def _running_status(
        self, pod: dict[str, Any], containers: list[dict[str, Any]], started: str
    ) -> dict[str, Any]:
        return {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "conditions": self._conditions(True, started),
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": f"sim://{c.get('image', '')}",
                    "containerID": f"sim://{uuid.uuid4().hex}",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": started}},
                }
                for c in containers
            ],
        }

    def _terminated_status(
        self,
        pod: dict[str, Any],
        containers: list[dict[str, Any]],
        started: str,
        finished: str,
        exit_code: int,
        reason: str,
        phase: str,
        fault: _Fault | None,
    ) -> dict[str, Any]:
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": self._conditions(False, finished),
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": f"sim://{c.get('image', '')}",
                    "containerID": f"sim://{uuid.uuid4().hex}",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": reason,
                            "startedAt": started,
                            "finishedAt": finished,
                        }
                    },
                }
                for c in containers
            ],
        }
        if fault is not None and fault.pod_reason:
            status["reason"] = fault.pod_reason
            status["message"] = fault.pod_message or ""
        return status

    # -- env and volumes ------------------------------------------------------------------
    async def _secret(self, namespace: str, name: str) -> dict[str, bytes]:
        secret = await self._core.read_namespaced_secret(name, namespace)
        return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}

    async def _resolve_env(self, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for item in container.get("env", []) or []:
            if "value" in item:
                env[item["name"]] = str(item["value"])
                continue
            source = item.get("valueFrom", {})
            if "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                try:
                    data = await self._secret(ns, ref["name"])
                except ApiException:
                    if ref.get("optional"):
                        continue
                    raise
                if ref["key"] in data:
                    env[item["name"]] = data[ref["key"]].decode()
            elif "fieldRef" in source:
                path = source["fieldRef"]["fieldPath"]
                if path == "metadata.name":
                    env[item["name"]] = pod["metadata"]["name"]
                elif path == "metadata.namespace":
                    env[item["name"]] = ns
        return env

    async def _resolve_files(
        self, pod: dict[str, Any], container: dict[str, Any]
    ) -> dict[str, bytes]:
        ns = pod["metadata"]["namespace"]
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", []) or []}
        files: dict[str, bytes] = {}
        for mount in container.get("volumeMounts", []) or []:
            volume = volumes.get(mount["name"], {})
            if "secret" not in volume:
                continue
            data = await self._secret(ns, volume["secret"]["secretName"])
            base = mount["mountPath"].rstrip("/")
            for key, value in data.items():
                files[f"{base}/{key}"] = value
        return files

    # -- faults ------------------------------------------------------------------------
    def _run_by_name(self, namespace: str, name: str) -> _PodRun:
        for run in self._runs.values():
            if run.namespace == namespace and run.name == name:
                return run
        raise KeyError(f"pod {namespace}/{name} is not running on {self.node_name}")

    def _inject(self, namespace: str, name: str, fault: _Fault) -> None:
        run = self._run_by_name(namespace, name)
        run.fault = fault
        run.fault_event.set()

    def evict(self, namespace: str, name: str, message: str = "") -> None:
        """Evict a pod as the kubelet does under node pressure: phase Failed, reason Evicted."""
        self._inject(
            namespace,
            name,
            _Fault(
                exit_code=137,
                reason="Error",
                pod_reason="Evicted",
                pod_message=message or "The node was low on resource: memory.",
            ),
        )

    def oom_kill(self, namespace: str, name: str) -> None:
        """The runner container is killed by the kernel's OOM killer (exit 137, OOMKilled)."""
        self._inject(namespace, name, _Fault(exit_code=137, reason="OOMKilled"))

    def crash(self, namespace: str, name: str, exit_code: int = 1) -> None:
        """The container exits with ``exit_code`` (reason Error)."""
        self._inject(namespace, name, _Fault(exit_code=exit_code, reason="Error"))

    def slow_image_pull(self, seconds: float, pods: int = 1) -> None:
        """The next ``pods`` pods wait ``seconds`` in ContainerCreating before they start."""
        self._slow_pulls.extend([seconds] * pods)

    def node_loss(self, namespace: str | None = None) -> list[str]:
        """Every running pod (in ``namespace``, or all) fails at once as its node goes away."""
        hit = []
        for run in list(self._runs.values()):
            if namespace and run.namespace != namespace:
                continue
            if run.task is None or run.task.done():
                continue
            run.fault = _Fault(
                exit_code=137,
                reason="Error",
                pod_reason="NodeLost",
                pod_message=(
                    f"Node {self.node_name} which was running pod {run.name} is unresponsive"
                ),
            )
            run.fault_event.set()
            hit.append(f"{run.namespace}/{run.name}")
        return hit

    async def lose_node(self) -> list[str]:
        """The node dies as a machine does, and the simulator carries on as a new node.

        Unlike :meth:`node_loss` (a kubelet that lives to report its pods failed), nothing
        is written for the lost node's pods: their containers die silently, their status
        stays as it was (Running), and a later deletion never completes (Terminating), as
        no kubelet is left to finish it. The Node's Ready condition turns Unknown, as the
        node lifecycle controller writes once heartbeats stop. Pods created from now on are
        bound to a fresh Ready node (``<name>-<n>``), the way a
        cluster's other nodes or its autoscaler take the load. Returns the lost pods.
        """
        lost = self.node_name
        hit = sorted(f"{r.namespace}/{r.name}" for r in self._runs.values())
        unbound = [(r.namespace, r.name) for r in self._runs.values() if not r.bound]
        for run in self._runs.values():
            if run.task is not None and not run.task.done():
                run.task.cancel()  # no SIGTERM, no status: the machine is just gone
        self._runs.clear()
        ts = now_rfc3339()
        await self._core.patch_node_status(
            lost,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "Unknown",
                            "reason": "NodeStatusUnknown",
                            "message": "Kubelet stopped posting node status.",
                            "lastHeartbeatTime": ts,
                            "lastTransitionTime": ts,
                        }
                    ]
                }
            },
        )
        self.lost_nodes.append(lost)
        self.node_name = f"{self._base_node_name}-{len(self.lost_nodes)}"
        await self._register_node()
        await self._reschedule(unbound)
        return hit

    async def _reschedule(self, pods: list[tuple[str, str]]) -> None:
        """Pods the lost node was about to take but never got bound to stay unscheduled,
        and a real scheduler places them on a live node: so does this one. A binding that
        went in before the node died leaves the pod the lost node's, Pending, for the node
        lifecycle (or gharc's node-loss check) to settle."""
        for namespace, name in pods:
            raw: Any = await self._core.read_namespaced_pod(name, namespace, _preload_content=False)
            try:
                if raw.status != 200:
                    continue  # gone meanwhile
                pod = json.loads(await raw.read())
            finally:
                raw.release()
            if not pod["spec"].get("nodeName"):
                await self._on_pod(pod)

    def running_pods(self) -> list[str]:
        return sorted(f"{r.namespace}/{r.name}" for r in self._runs.values())
