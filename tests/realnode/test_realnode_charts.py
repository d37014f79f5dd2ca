"""Both charts installed by helm on a real node, run exactly as a user runs them.

The controller is the chart's Deployment running the image built from the project's
Dockerfile (non-root, read-only root, probes, in-cluster config through the `kubernetes`
Service); runner pods are real containers running the simulated runner, which talks to
the fake GitHub on the node's address. A workload of jobs must all be picked up and
completed by real runner pods, and uninstalling both releases (then deleting the
namespaces, which the real namespace controller and garbage collector finish) must leave
nothing behind, in the cluster or in GitHub.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from gharc.api.scaleset import constants as c
from testworld.helm import CONTROLLER_CHART, SCALE_SET_CHART, Helm
from testworld.realnode import NODE_IP, RealCluster
from testworld.realnode_image import GHARC_IMAGE, RUNNER_IMAGE
from testworld.wait import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

REPO = "octo-org/app"
JOBS = 6


@pytest.fixture
async def api(real_cluster: RealCluster) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=real_cluster.kubeconfig_path, client_configuration=cfg
    )
    async with client.ApiClient(cfg) as api:
        yield api


async def wait_for(what: str, check: Any, timeout: float, describe: Any = None) -> float:
    """Poll ``check`` (async, truthy when done) every 0.5 s; returns the seconds it took."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        await eventually(check, timeout=timeout, interval=0.5, message=what)
    except AssertionError as err:
        detail = await describe() if describe else ""
        pytest.fail(f"{err}\n{detail}")
    return loop.time() - began


async def describe_pods(api: client.ApiClient, *namespaces: str) -> str:
    core = client.CoreV1Api(api)
    lines = []
    for ns in namespaces:
        for pod in (await core.list_namespaced_pod(ns)).items:
            states = [
                f"{s.name}: ready={s.ready} restarts={s.restart_count} state={s.state}"
                for s in pod.status.container_statuses or []
            ]
            lines.append(f"{ns}/{pod.metadata.name} {pod.status.phase} {states}")
            try:
                logs = await core.read_namespaced_pod_log(
                    pod.metadata.name, ns, tail_lines=60, container=pod.spec.containers[0].name
                )
                lines.append("  " + "\n  ".join(str(logs).splitlines()))
            except client.ApiException as err:
                lines.append(f"  (no logs: {err.status})")
    return "\n".join(lines)


async def describe_leftovers(api: client.ApiClient, namespace: str) -> str:
    """What still exists in ``namespace``, with finalizers and deletion marks."""
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    lines = []
    for plural in ("autoscalingrunnersets", "ephemeralrunnersets", "ephemeralrunners"):
        got = await custom.list_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural)
        for o in got["items"]:
            meta = o["metadata"]
            lines.append(
                f"{plural}/{meta['name']} finalizers={meta.get('finalizers')} "
                f"deleting={meta.get('deletionTimestamp')} status={o.get('status')}"
            )
    listed = [
        ("secret", await core.list_namespaced_secret(namespace)),
        ("serviceaccount", await core.list_namespaced_service_account(namespace)),
        ("role", await rbac.list_namespaced_role(namespace)),
        ("rolebinding", await rbac.list_namespaced_role_binding(namespace)),
    ]
    for kind, objs in listed:
        for o in objs.items:
            meta = o.metadata
            lines.append(
                f"{kind}/{meta.name} finalizers={meta.finalizers} "
                f"deleting={meta.deletion_timestamp}"
            )
    return "\n".join(lines)


def image_name(ref: str) -> tuple[str, str]:
    repo, tag = ref.rsplit(":", 1)
    return repo, tag


@pytest.mark.parametrize("listener_mode", ["InProcess", "Pod"])
async def test_charts_run_jobs_on_real_pods(
    listener_mode: str,
    real_cluster: RealCluster,
    api: client.ApiClient,
    helm: Helm,
) -> None:
    from testworld.sim.github import FakeGitHubServer

    kubeconfig = real_cluster.kubeconfig_path
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    custom = client.CustomObjectsApi(api)
    suffix = uuid.uuid4().hex[:5]
    ctl_ns, runners_ns = f"gharc-system-{suffix}", f"runners-{suffix}"
    release, scale_set = f"ctl-{suffix}", f"rn-{suffix}"
    fullname = f"{release}-gha-rs-controller"
    for ns in (ctl_ns, runners_ns):
        await core.create_namespace({"metadata": {"name": ns}})
    repo, tag = image_name(GHARC_IMAGE)
    runner_pods: dict[str, str] = {}  # name -> containerID of a runner pod that ran

    async def pods_info() -> str:
        pods = await describe_pods(api, ctl_ns, runners_ns)
        return pods + "\n" + await describe_leftovers(api, runners_ns)

    async with FakeGitHubServer(host=NODE_IP, poll_timeout=5.0) as gh:
        # --- the controller chart: its Deployment must become Ready on the node -------------
        began = time.monotonic()
        installed = helm.install(
            release,
            CONTROLLER_CHART,
            namespace=ctl_ns,
            kubeconfig=kubeconfig,
            values={
                "image": {"repository": repo, "tag": tag, "pullPolicy": "Never"},
                "flags": {"listenerMode": listener_mode, "logLevel": "info"},
            },
        )
        assert installed.ok, installed.stderr

        async def deployment_ready() -> bool:
            d = await apps.read_namespaced_deployment(fullname, ctl_ns)
            return bool(d.status.ready_replicas == 1 and d.status.available_replicas == 1)

        await wait_for("the controller Deployment Ready", deployment_ready, 180, pods_info)
        deploy_ready_s = time.monotonic() - began
        (pod,) = (
            await core.list_namespaced_pod(
                ctl_ns, label_selector="app.kubernetes.io/part-of=gha-rs-controller"
            )
        ).items
        manager = pod.spec.containers[0]
        assert manager.readiness_probe and manager.liveness_probe
        assert manager.security_context.read_only_root_filesystem
        assert pod.spec.security_context.run_as_non_root
        status = pod.status.container_statuses[0]
        assert status.ready and status.container_id.startswith("containerd://")
        assert pod.spec.node_name == "gharc-node"

        # --- the scale set chart -------------------------------------------------------------
        installed = helm.install(
            scale_set,
            SCALE_SET_CHART,
            namespace=runners_ns,
            kubeconfig=kubeconfig,
            values={
                "githubConfigUrl": gh.config_url(),
                "githubConfigSecret": {"github_token": gh.token},
                "maxRunners": 3,
                "controllerServiceAccount": {"name": fullname, "namespace": ctl_ns},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "runner",
                                "image": RUNNER_IMAGE,
                                "imagePullPolicy": "Never",
                            }
                        ]
                    }
                },
            },
        )
        assert installed.ok, installed.stderr

        async def ars_running() -> bool:
            ars = await custom.get_namespaced_custom_object(
                c.GROUP, c.VERSION, runners_ns, c.PLURAL_AUTOSCALING_RUNNER_SETS, scale_set
            )
            return bool((ars.get("status") or {}).get("phase") == c.PHASE_RUNNING)

        await wait_for("the AutoscalingRunnerSet Running", ars_running, 120, pods_info)
        if listener_mode == "Pod":

            async def listener_pod_ready() -> bool:
                pods = (await core.list_namespaced_pod(ctl_ns)).items
                return any(
                    p.metadata.name != pod.metadata.name
                    and (p.status.container_statuses or [])
                    and p.status.container_statuses[0].ready
                    and p.status.container_statuses[0].container_id.startswith("containerd://")
                    for p in pods
                )

            await wait_for("a Ready listener pod", listener_pod_ready, 120, pods_info)

        # --- a workload: every job picked up and run by a real runner pod --------------------
        jobs = [gh.state.enqueue_job(REPO, [scale_set], duration=2.0) for _ in range(JOBS)]

        async def all_done() -> bool:
            for p in (await core.list_namespaced_pod(runners_ns)).items:
                for s in p.status.container_statuses or []:
                    if s.container_id and (s.state.running or s.state.terminated):
                        runner_pods[p.metadata.name] = s.container_id
            return all(j.status == "completed" for j in jobs)

        await wait_for(f"{JOBS} jobs completed", all_done, 300, pods_info)
        assert all(j.conclusion == "succeeded" for j in jobs), [j.conclusion for j in jobs]
        assert {j.runner_name for j in jobs} <= set(runner_pods) | {None}, runner_pods
        assert all(cid.startswith("containerd://") for cid in runner_pods.values())
        pickups = [j.start_time - j.queue_time for j in jobs if j.start_time is not None]
        print(
            f"\nreal node [{listener_mode}]: controller Ready {deploy_ready_s:.1f} s after "
            f"helm install; {JOBS} jobs on {len(runner_pods)} runner pods; pickup "
            f"median {statistics.median(pickups):.1f} s, max {max(pickups):.1f} s"
        )

        # --- uninstall leaves nothing --------------------------------------------------------
        out = helm.run(["uninstall", scale_set, "-n", runners_ns, "--kubeconfig", kubeconfig])
        assert out.ok, out.stderr

        async def scale_set_gone() -> bool:
            left = await custom.list_namespaced_custom_object(
                c.GROUP, c.VERSION, runners_ns, c.PLURAL_AUTOSCALING_RUNNER_SETS
            )
            pods = (await core.list_namespaced_pod(runners_ns)).items
            return not left["items"] and not pods

        await wait_for("the scale set and its pods gone", scale_set_gone, 120, pods_info)
        out = helm.run(["uninstall", release, "-n", ctl_ns, "--kubeconfig", kubeconfig])
        assert out.ok, out.stderr
        for ns in (ctl_ns, runners_ns):
            await core.delete_namespace(ns)

        async def namespaces_gone() -> bool:
            names = {n.metadata.name for n in (await core.list_namespace()).items}
            return not names & {ctl_ns, runners_ns}

        await wait_for("both namespaces deleted", namespaces_gone, 180, pods_info)
        assert not gh.state.scale_sets, "the scale set is still registered in GitHub"
        assert not [r for r in gh.state.runners.values() if r.scale_set_id is not None], (
            "runners are still registered in GitHub"
        )
