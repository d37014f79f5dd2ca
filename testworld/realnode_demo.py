"""``scripts/demo --real-node``: the demo on a real node, installed the way users install it.

Where the default demo runs the controller as a subprocess and pods in the kubelet
simulator, this one brings up a :class:`~testworld.realnode.RealCluster`, builds the
image from the project's Dockerfile, ``helm install``\\ s both charts, and plays the workload
against runner pods that are real containers. While it runs it prints the ``kubectl``
commands that show the cluster from another terminal; at the end both releases are
uninstalled and what is left (nothing, when all is well) is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from gharc.api import crds
from testworld.helm import CONTROLLER_CHART, SCALE_SET_CHART, Helm, find_helm
from testworld.realnode import NODE_IP, RealCluster
from testworld.realnode_image import GHARC_IMAGE, RUNNER_IMAGE, build_images
from testworld.sim.github import FakeGitHubServer
from testworld.sim.report import Report, Sample, job_times
from testworld.sim.workload import Workload
from testworld.wait import eventually

CONTROLLER_NS, RUNNER_NS = "arc-systems", "arc-runners"
RELEASE, SCALE_SET = "arc", "gharc-demo"
FULLNAME = f"{RELEASE}-gha-rs-controller"
DEFAULT_WORKLOAD = "burst=0:10,trickle=20/40,jobs=2-6,failures=0.05"


def kubectl_hints(kubeconfig: str) -> str:
    return "\n".join(
        [
            "From another terminal:",
            f"  export KUBECONFIG={kubeconfig}",
            "  kubectl get nodes -o wide",
            f"  kubectl -n {CONTROLLER_NS} get deploy,pods -o wide",
            f"  kubectl -n {CONTROLLER_NS} logs -f deploy/{FULLNAME}",
            f"  kubectl -n {RUNNER_NS} get autoscalingrunnersets,ephemeralrunners",
            f"  kubectl -n {RUNNER_NS} get pods -w",
            "  kubectl get events -A --sort-by=.lastTimestamp",
        ]
    )


def install(helm: Helm, kubeconfig: str, gh: FakeGitHubServer, args: argparse.Namespace) -> None:
    repo, tag = GHARC_IMAGE.rsplit(":", 1)
    steps: list[tuple[str, Path, str, dict[str, Any]]] = [
        (
            RELEASE,
            CONTROLLER_CHART,
            CONTROLLER_NS,
            {
                "image": {"repository": repo, "tag": tag, "pullPolicy": "Never"},
                "flags": {"listenerMode": args.listener_mode, "logLevel": "info"},
            },
        ),
        (
            SCALE_SET,
            SCALE_SET_CHART,
            RUNNER_NS,
            {
                "githubConfigUrl": gh.config_url(),
                "githubConfigSecret": {"github_token": gh.token},
                "maxRunners": args.max_runners,
                "controllerServiceAccount": {"name": FULLNAME, "namespace": CONTROLLER_NS},
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "runner", "image": RUNNER_IMAGE, "imagePullPolicy": "Never"}
                        ]
                    }
                },
            },
        ),
    ]
    for release, chart, ns, values in steps:
        out = helm.install(release, chart, namespace=ns, kubeconfig=kubeconfig, values=values)
        if not out.ok:
            raise SystemExit(f"helm install {release} failed:\n{out.stderr}")
        print(f"helm install {release} ({chart.name}) in {ns}", flush=True)


async def until(what: str, check: Any, timeout: float) -> float:
    """Seconds until ``check`` holds (the demo reports them); the demo ends on a timeout."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        await eventually(check, timeout=timeout, interval=0.5, message=what)
    except AssertionError as err:
        raise SystemExit(str(err)) from None
    return loop.time() - began


async def play(
    api: client.ApiClient, gh: FakeGitHubServer, args: argparse.Namespace, report: Report
) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)

    async def deploy_ready() -> bool:
        d = await apps.read_namespaced_deployment(FULLNAME, CONTROLLER_NS)
        return bool(d.status.available_replicas)

    took = await until("the controller Deployment Ready", deploy_ready, 180)
    print(f"controller Deployment Ready {took:.1f} s after helm install", flush=True)
    arrivals = Workload.parse(args.workload).arrivals()
    pending, runner_pods = list(arrivals), set()
    t0 = time.monotonic()
    deadline = t0 + (arrivals[-1].at if arrivals else 0) + args.timeout
    while time.monotonic() < deadline:
        t = time.monotonic() - t0
        while pending and pending[0].at <= t:
            a = pending.pop(0)
            gh.state.enqueue_job(
                f"octo-org/{a.repository}", [SCALE_SET], duration=a.duration, result=a.result
            )
        pods = (await core.list_namespaced_pod(RUNNER_NS)).items
        runner_pods |= {p.metadata.name for p in pods}
        phases: dict[str, int] = {}
        for p in pods:
            phases[p.status.phase.lower()] = phases.get(p.status.phase.lower(), 0) + 1
        jobs = gh.state.jobs.values()
        done = sum(1 for j in jobs if j.status == "completed")
        sample = Sample(
            t=round(t, 2),
            queued=sum(1 for j in jobs if j.status in ("queued", "acquired", "assigned")),
            running=sum(1 for j in jobs if j.status == "running"),
            runners=phases,
        )
        report.samples.append(sample)
        print(
            f"t={t:6.1f}s  queued {sample.queued:3d}  running {sample.running:3d}  "
            f"done {done:3d}/{len(arrivals)}  runner pods "
            + " ".join(f"{k}={v}" for k, v in sorted(phases.items())),
            flush=True,
        )
        if not pending and done == len(arrivals) and not pods:
            break
        await asyncio.sleep(1.0)
    report.jobs.update(job_times(gh.state.jobs))
    report.runners_created = len(runner_pods)


def unfinished_jobs(gh: FakeGitHubServer) -> list[str]:
    """One line per job not completed, with where it stands at the fake GitHub: queued
    (never acquired), acquired or assigned to the scale set, or given to a runner (and
    whether that runner is still registered), so a job left waiting says why."""
    state = gh.state
    lines = []
    for job in state.jobs.values():
        if job.status == "completed":
            continue
        runner = ""
        if job.runner_id is not None:
            alive = "registered" if job.runner_id in state.runners else "no longer registered"
            runner = f" runner {job.runner_name} (id {job.runner_id}, {alive})"
        lines.append(
            f"job {job.request_id} {job.status}: scale set {job.scale_set_id}, offered to "
            f"{sorted(job.offered_to)}{runner}"
        )
    return lines


async def controller_logs(api: client.ApiClient) -> dict[str, str]:
    """The logs of every container in the controller namespace (the controller, and the
    listener pods in Pod mode), by ``<pod>.<container>``, as the default demo keeps its
    processes' logs."""
    core = client.CoreV1Api(api)
    logs = {}
    for pod in (await core.list_namespaced_pod(CONTROLLER_NS)).items:
        for ctr in pod.spec.containers:
            with contextlib.suppress(client.ApiException):
                logs[f"{pod.metadata.name}.{ctr.name}"] = await core.read_namespaced_pod_log(
                    pod.metadata.name, CONTROLLER_NS, container=ctr.name
                )
    return logs


def write_logs(out: Path, logs: dict[str, str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.log" for name in logs]
    for path, text in zip(paths, logs.values(), strict=True):
        path.write_text(text, encoding="utf-8")
    return paths


async def uninstall(api: client.ApiClient, helm: Helm, kubeconfig: str) -> None:
    """The scale set first, and the controller only once it has finalized the scale set
    (as ARC's docs ask): a controller uninstalled earlier leaves the finalizer for ever."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    async def scale_set_gone() -> bool:
        got = await custom.list_namespaced_custom_object(
            "actions.github.com", "v1alpha1", RUNNER_NS, "autoscalingrunnersets"
        )
        return not got["items"]

    for release, ns in ((SCALE_SET, RUNNER_NS), (RELEASE, CONTROLLER_NS)):
        out = helm.run(["uninstall", release, "-n", ns, "--kubeconfig", kubeconfig])
        print(f"helm uninstall {release}: {'ok' if out.ok else out.stderr.strip()}", flush=True)
        if release == SCALE_SET:
            took = await until("the scale set finalized", scale_set_gone, 120)
            print(f"scale set finalized {took:.1f} s later", flush=True)
    for ns in (RUNNER_NS, CONTROLLER_NS):
        await core.delete_namespace(ns)

    async def gone() -> bool:
        names = {n.metadata.name for n in (await core.list_namespace()).items}
        return not names & {RUNNER_NS, CONTROLLER_NS}

    took = await until("both namespaces deleted", gone, 180)
    print(f"both namespaces gone {took:.1f} s later: nothing left", flush=True)


async def run(rc: RealCluster, helm: Helm, args: argparse.Namespace) -> int:
    kubeconfig = rc.kubeconfig_path
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    report = Report()
    async with client.ApiClient(cfg) as api, FakeGitHubServer(host=NODE_IP) as gh:
        core = client.CoreV1Api(api)
        for ns in (CONTROLLER_NS, RUNNER_NS):
            await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        print(f"fake GitHub {gh.url}\n{kubectl_hints(kubeconfig)}", flush=True)
        await asyncio.to_thread(install, helm, kubeconfig, gh, args)
        await play(api, gh, args, report)
        for line in unfinished_jobs(gh):
            print(f"not completed: {line}", flush=True)
        for path in write_logs(args.out, await controller_logs(api)):
            print(f"log: {path}", flush=True)
        if args.keep:
            print("--keep: the cluster stays up until Ctrl-C", flush=True)
            await asyncio.Event().wait()
        await uninstall(api, helm, kubeconfig)
    paths = report.write(args.out)
    print()
    print(report.text())
    print(f"report: {paths['html']}")
    return 1 if report.never_picked_up else 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/demo --real-node", description=__doc__)
    parser.add_argument("--real-node", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD)
    parser.add_argument("--max-runners", type=int, default=10)
    parser.add_argument("--listener-mode", choices=["InProcess", "Pod"], default="InProcess")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=Path("demo-output-real-node"))
    parser.add_argument("--keep", action="store_true", help="keep the cluster after the run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    began = time.monotonic()
    try:
        helm = Helm(find_helm(), Path(tempfile.mkdtemp(prefix="gharc-demo-helm-")))
        images = build_images()
    except (RuntimeError, subprocess.CalledProcessError) as err:
        raise SystemExit(f"cannot prepare the real node: {err}") from err
    print(f"image built from the Dockerfile in {time.monotonic() - began:.0f} s", flush=True)
    code = 130
    with RealCluster(crds=list(crds.load("all")), images=images) as rc:
        print(f"real node Ready in {rc.startup_seconds:.1f} s", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            code = asyncio.run(run(rc, helm, args))
        print("tearing the node down", flush=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
