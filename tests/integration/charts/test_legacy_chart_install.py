"""Install the gharc-legacy chart, with ARC's own values file (minus ARC's image), into the
real test API server, then run gharc's legacy controller and webhook server as the chart's
service accounts.

The API server proves the rendered objects are valid; SubjectAccessReviews prove the roles
grant each verb the legacy controller uses; the processes running under the chart's tokens
prove nothing is missing: a rule left out fails here with a 403.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNERS
from gharc.kube.client import KubeClient
from gharc.kube.resources import PODS
from testworld import legacy, webhook
from testworld.arcdata import ArcDataMissing, arc_data_dir
from testworld.helm import LEGACY_CHART, Helm
from testworld.wait import eventually

sys.path.insert(0, str(Path(__file__).parent))
from test_chart_install import _service_account_kubeconfig

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

SECRET = "hook-s3cret"

#: (API group, resource, verb) the legacy controller uses (docs/legacy.md).
CONTROLLER_VERBS = (
    [
        ("actions.summerwind.dev", kind, verb)
        for kind in (
            "runners",
            "runnerreplicasets",
            "runnerdeployments",
            "runnersets",
            "horizontalrunnerautoscalers",
        )
        for verb in ("create", "delete", "get", "list", "patch", "update", "watch")
    ]
    + [("", "pods", verb) for verb in ("create", "delete", "get", "list", "patch", "watch")]
    + [
        ("apps", "statefulsets", "create"),
        ("apps", "statefulsets", "watch"),
        ("", "secrets", "create"),
        ("", "secrets", "get"),
        ("", "secrets", "patch"),
        ("", "events", "create"),
        ("", "persistentvolumeclaims", "create"),
        ("coordination.k8s.io", "leases", "update"),
    ]
)
WEBHOOK_VERBS = [
    ("actions.summerwind.dev", "horizontalrunnerautoscalers", "list"),
    ("actions.summerwind.dev", "horizontalrunnerautoscalers", "patch"),
    ("actions.summerwind.dev", "runnerdeployments", "watch"),
    ("actions.summerwind.dev", "runnersets", "watch"),
]


def _arc_values() -> dict[str, Any]:
    try:
        path = arc_data_dir() / "charts" / "actions-runner-controller" / "values.yaml"
    except ArcDataMissing as err:
        pytest.skip(str(err))
    values: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    values["image"].pop("repository")
    return values


async def _allowed(
    api: client.ApiClient,
    namespace: str,
    account: str,
    verbs: list[tuple[str, str, str]],
    *,
    account_namespace: str | None = None,
) -> list[tuple[str, str, str]]:
    """The (group, resource, verb) of ``verbs`` that service account ``account`` (of
    ``account_namespace``, default ``namespace``) may NOT do in ``namespace``."""
    home = account_namespace or namespace
    authz = client.AuthorizationV1Api(api)
    denied = []
    for group, resource, verb in verbs:
        review = await authz.create_subject_access_review(
            {
                "spec": {
                    "user": f"system:serviceaccount:{home}:{account}",
                    "groups": ["system:serviceaccounts", f"system:serviceaccounts:{home}"],
                    "resourceAttributes": {
                        "namespace": namespace,
                        "group": group,
                        "resource": resource,
                        "verb": verb,
                    },
                }
            }
        )
        if not review.status.allowed:
            denied.append((group, resource, verb))
    return denied


async def _run_until(
    start: Callable[[dict[str, Any]], Any],
    done: Callable[[dict[str, Any]], Any],
    *,
    timeout: float,
    message: str,
) -> None:
    """Run a process (``start(holder)``) until ``done()`` is true, then stop it."""
    holder: dict[str, Any] = {}
    task = asyncio.create_task(start(holder))

    async def probe() -> Any:
        if task.done():
            task.result()
            pytest.fail(f"{message}: the process stopped on its own")
        return await done(holder)

    try:
        await eventually(probe, timeout=timeout, message=message)
    finally:
        if "manager" in holder:
            holder["manager"].stop()
        try:
            await asyncio.wait_for(task, 30)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()


async def test_install_legacy_chart_with_arcs_values_and_run_as_its_accounts(
    helm: Helm,
    kubeconfig: str,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    from gharc.controllers.main import parse_args as controller_args
    from gharc.controllers.main import run_controller
    from gharc.webhook.main import WebhookArgs
    from gharc.webhook.main import parse_args as webhook_args
    from testworld.sim.github import DEFAULT_ORG, FakeGitHubServer

    release = f"leg-{uuid.uuid4().hex[:6]}"
    full = f"{release}-actions-runner-controller"
    hook = f"{full}-github-webhook-server"
    metrics = f"{full}-actions-metrics-server"
    kube = KubeClient(api_client)
    async with FakeGitHubServer(poll_timeout=1.0) as gh:
        # A repository of this test's own: the webhook server watches every namespace, and
        # HRAs of earlier tests linger (no namespace controller here to finish deleting them).
        repo = f"{DEFAULT_ORG}/{release}"
        gh.state.create_repo(repo)
        values = _arc_values()
        values["authSecret"].update(create=True, github_token=gh.token)
        values["githubURL"] = gh.url
        values["githubWebhookServer"].update(
            enabled=True,
            secret={"enabled": True, "create": True, "github_webhook_secret_token": SECRET},
        )
        values["actionsMetricsServer"].update(
            enabled=True,
            secret={"enabled": True, "create": True, "github_webhook_secret_token": SECRET},
        )
        try:
            installed = helm.install(
                release, LEGACY_CHART, namespace=namespace, kubeconfig=kubeconfig, values=values
            )
            assert installed.ok, installed.stderr

            # --- the objects ----------------------------------------------------------
            apps = client.AppsV1Api(api_client)
            deploys = {
                d.metadata.name: d
                for d in (await apps.list_namespaced_deployment(namespace)).items
                if d.metadata.name.startswith(release)
            }
            assert sorted(deploys) == sorted([full, hook, metrics])
            core = client.CoreV1Api(api_client)
            for name in (full, hook, metrics):
                await core.read_namespaced_service_account(name, namespace)
                await core.read_namespaced_service(
                    f"{full}-metrics-service" if name == full else name, namespace
                )
            for name in ("controller-manager", "github-webhook-server", "actions-metrics-server"):
                await core.read_namespaced_secret(name, namespace)
            ext = client.ApiextensionsV1Api(api_client)
            for plural in ("runners", "runnerdeployments", "horizontalrunnerautoscalers"):
                await ext.read_custom_resource_definition(f"{plural}.actions.summerwind.dev")

            # --- the RBAC, verb by verb -----------------------------------------------
            assert await _allowed(api_client, namespace, full, CONTROLLER_VERBS) == []
            assert await _allowed(api_client, namespace, hook, WEBHOOK_VERBS) == []
            assert await _allowed(api_client, namespace, metrics, WEBHOOK_VERBS) == (
                WEBHOOK_VERBS  # the metrics server reads nothing from Kubernetes
            )

            # --- the legacy controller, as the chart's service account ----------------
            manager = deploys[full].spec.template.spec.containers[0]
            assert manager.command == ["gharc", "controller"]
            parsed = controller_args(
                [
                    *manager.args,
                    "--metrics-addr=0",
                    "--health-probe-bind-address=",
                    f"--watch-namespace={namespace}",
                    "--kubeconfig="
                    + await _service_account_kubeconfig(api_client, namespace, full, tmp_path),
                ],
                {
                    "GITHUB_TOKEN": gh.token,
                    "GITHUB_URL": gh.url,
                    "CONTROLLER_MANAGER_POD_NAMESPACE": namespace,
                },
            )
            await kube.create(
                RUNNER_DEPLOYMENTS, legacy.runner_deployment(namespace, repository=repo, replicas=1)
            )

            async def runner_pod(_: dict[str, Any]) -> bool:
                runners = await kube.list(RUNNERS, namespace=namespace)
                pods = await kube.list(PODS, namespace=namespace)
                names = {p["metadata"]["name"] for p in pods}
                return bool(runners) and all(r["metadata"]["name"] in names for r in runners)

            await _run_until(
                lambda holder: run_controller(
                    parsed,
                    on_manager=lambda m: holder.update(manager=m),
                    handle_signals=False,
                    registry=CollectorRegistry(),
                ),
                runner_pod,
                timeout=90,
                message="a Runner and its pod, made by the controller under the chart's RBAC",
            )

            async def server_args(deployment: str, *flags: str) -> WebhookArgs:
                """The chart's arguments of ``deployment``'s server, run as its service
                account, with ``flags`` (ports) added."""
                server = deploys[deployment].spec.template.spec.containers[0]
                config = await _service_account_kubeconfig(
                    api_client, namespace, deployment, tmp_path
                )
                return webhook_args(
                    [*server.args, *flags, f"--kubeconfig={config}"],
                    {"GITHUB_WEBHOOK_SECRET_TOKEN": SECRET},
                )

            # --- the webhook server, as its service account ---------------------------
            await kube.create(
                HORIZONTAL_RUNNER_AUTOSCALERS, legacy.horizontal_runner_autoscaler(namespace, 3)
            )
            server = deploys[hook].spec.template.spec.containers[0]
            assert server.command == ["gharc", "webhook-server"]
            hook_args = await server_args(
                hook, "--webhook-addr=127.0.0.1:0", "--metrics-addr=0", "--batch-window=0.2"
            )
            answers: list[tuple[int, str]] = []

            async def delivered(holder: dict[str, Any]) -> bool:
                srv = holder.get("server")
                if srv is None or not srv.started.is_set():
                    return False
                answers.append(await _deliver(srv.port, repo))
                return True

            await _run_until(
                lambda holder: webhook.serve(hook_args, holder),
                delivered,
                timeout=60,
                message="a delivery answered by the webhook server under the chart's RBAC",
            )
            assert answers == [(200, "scaled hra by 1")]
            hra = await kube.get(HORIZONTAL_RUNNER_AUTOSCALERS, "hra", namespace=namespace)
            assert [r["name"] for r in hra["spec"]["capacityReservations"]] == ["job-1"]

            # --- the actions metrics server, with no Kubernetes permission at all --------
            metrics_args = await server_args(
                metrics, "--webhook-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0"
            )
            assert metrics_args.metrics_only
            scraped: list[str] = []

            async def counted(holder: dict[str, Any]) -> bool:
                srv, mgr = holder.get("server"), holder.get("manager")
                if srv is None or not srv.started.is_set() or not mgr.metrics_port:
                    return False
                assert await _deliver(srv.port, repo) == (200, "")
                url = f"http://127.0.0.1:{mgr.metrics_port}/metrics"
                async with aiohttp.ClientSession() as session, session.get(url) as resp:
                    scraped.append(await resp.text())
                return True

            await _run_until(
                lambda holder: webhook.serve(metrics_args, holder),
                counted,
                timeout=60,
                message="a delivery counted by the actions metrics server",
            )
            (line,) = [
                x
                for x in scraped[0].splitlines()
                if x.startswith("github_workflow_jobs_queued_total{")
            ]
            assert f'repository_full_name="{repo}"' in line and line.endswith(" 1.0")
        finally:
            helm.run(["uninstall", release, "--namespace", namespace, "--kubeconfig", kubeconfig])
            with contextlib.suppress(Exception):
                await kube.delete(RUNNER_DEPLOYMENTS, "rd", namespace=namespace, missing_ok=True)


async def _deliver(port: int, repo: str) -> tuple[int, str]:
    owner, name = repo.split("/")
    body = json.dumps(
        {
            "action": "queued",
            "workflow_job": {"id": 1, "run_id": 1, "labels": ["self-hosted", "linux"]},
            "repository": {
                "name": name,
                "full_name": repo,
                "owner": {"login": owner, "type": "Organization"},
            },
        }
    ).encode()
    headers = webhook.delivery_headers(SECRET, body, "d-1")
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"http://127.0.0.1:{port}/", data=body, headers=headers) as resp,
    ):
        return resp.status, await resp.text()


async def test_single_namespace_install_grants_the_watched_namespace_only(
    helm: Helm, kubeconfig: str, api_client: client.ApiClient, namespace: str
) -> None:
    """scope.singleNamespace: Roles in the watched namespace, nothing cluster-wide; the
    webhook server's Ingress and the PodDisruptionBudgets are accepted by the API server."""
    release = f"leg-{uuid.uuid4().hex[:6]}"
    full = f"{release}-actions-runner-controller"
    hook = f"{full}-github-webhook-server"
    watched = f"{namespace[:50]}-watched"
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": watched}})
    values = {
        "scope": {"singleNamespace": True, "watchNamespace": watched},
        "metrics": {"proxy": {"enabled": False}},
        "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1},
        "githubWebhookServer": {
            "enabled": True,
            "secret": {"enabled": True, "create": True, "github_webhook_secret_token": SECRET},
            "ingress": {
                "enabled": True,
                "hosts": [{"host": "hooks.example.com", "paths": [{"path": "/"}]}],
            },
            "podDisruptionBudget": {"enabled": True},
        },
    }
    try:
        installed = helm.install(
            release, LEGACY_CHART, namespace=namespace, kubeconfig=kubeconfig, values=values
        )
        assert installed.ok, installed.stderr
        net = client.NetworkingV1Api(api_client)
        await net.read_namespaced_ingress(hook, namespace)
        policy = client.PolicyV1Api(api_client)
        await policy.read_namespaced_pod_disruption_budget(full, namespace)
        rbac = client.RbacAuthorizationV1Api(api_client)
        await rbac.read_namespaced_role(f"{full}-manager", watched)
        await rbac.read_namespaced_role(hook, watched)
        clusterwide = [
            r.metadata.name
            for r in (await rbac.list_cluster_role()).items
            if r.metadata.name.startswith(release)
        ]
        assert clusterwide == []
        assert await _allowed(
            api_client, watched, full, CONTROLLER_VERBS, account_namespace=namespace
        ) == [
            ("coordination.k8s.io", "leases", "update")  # the Lease lives in the release namespace
        ]
        assert (
            await _allowed(api_client, watched, hook, WEBHOOK_VERBS, account_namespace=namespace)
            == []
        )
        elsewhere = await _allowed(
            api_client, "default", full, CONTROLLER_VERBS, account_namespace=namespace
        )
        assert len(elsewhere) == len(CONTROLLER_VERBS)
    finally:
        helm.run(["uninstall", release, "--namespace", namespace, "--kubeconfig", kubeconfig])
        with contextlib.suppress(client.ApiException):
            await core.delete_namespace(watched)
