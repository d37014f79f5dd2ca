"""Failures met on behalf of a scale set show on the AutoscalingRunnerSet, not only in logs.

Each case ends in condition ``ScaleSetReady`` False with a reason, ``status.message`` and
one Warning event, and is cleared by the fix. Configuration the service would refuse (a
proxy URL, a scale set name) is refused by the reconciler, not by CRD validation: ARC's
CRD accepts them, and a stricter one would strand objects stored under ARC's.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from _arsworld import SECRET_NAME, World, running_world
from _proxy import forward_proxy
from kubernetes_asyncio import client

from gharc.api.resources import AUTOSCALING_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset import conditions as cond
from gharc.kube.client import KubeClient
from gharc.kube.resources import SECRETS

pytestmark = [pytest.mark.cluster]

BAD_PEM = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ready(ars: dict[str, Any]) -> dict[str, Any] | None:
    found = cond.find((ars.get("status") or {}).get("conditions"), cond.SCALE_SET_READY)
    return dict(found) if found else None


def not_ready(reason: str) -> Any:
    return lambda a: (
        (ready(a) or {}).get("status") == cond.FALSE and ((ready(a) or {}).get("reason") == reason)
    )


def is_ready(a: dict[str, Any]) -> bool:
    return (ready(a) or {}).get("status") == cond.TRUE


async def assert_reported(w: World, reason: str, *, name: str = "arc") -> dict[str, Any]:
    ars = await w.wait_ars(not_ready(reason), name=name, timeout=40, message=reason)
    assert ars["status"]["message"].startswith(reason), ars["status"]
    await w.wait_event(reason)
    await asyncio.sleep(2.0)  # retries happen meanwhile; none may add an event
    events = await w.events(reason)
    assert len(events) == 1 and events[0]["type"] == "Warning", events
    assert (events[0].get("count") or 1) == 1, events[0]
    return ars


async def assert_cleared(w: World, name: str = "arc") -> None:
    ars = await w.wait_ars(is_ready, name=name, timeout=40, message="ScaleSetReady True")
    assert not ars["status"].get("message"), ars["status"]


async def test_malformed_app_key_is_a_condition_then_clears(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await w.kube.create(
            SECRETS,
            {
                "metadata": {"name": "app-secret", "namespace": namespace},
                "stringData": {
                    "github_app_id": "1",
                    "github_app_installation_id": "2",
                    "github_app_private_key": BAD_PEM,
                },
            },
        )
        await w.create_ars("arc", githubConfigSecret="app-secret")
        ars = await assert_reported(w, "InvalidGitHubConfigSecret")
        assert ars["status"]["phase"] == c.PHASE_FAILED
        assert "bm90IGEga2V5" not in ars["status"]["message"]
        assert w.gh.state.scale_sets == {}
        await w.kube.merge_patch(
            AUTOSCALING_RUNNER_SETS,
            "arc",
            {"spec": {"githubConfigSecret": SECRET_NAME}},
            namespace=namespace,
        )
        await assert_cleared(w)


async def test_unreachable_github_is_a_condition_with_one_event_then_clears(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await w.create_ars("arc", githubConfigUrl=f"http://127.0.0.1:{closed_port()}/myorg")
        ars = await assert_reported(w, "GitHubUnreachable")
        assert "127.0.0.1" in ars["status"]["message"]
        await w.kube.merge_patch(
            AUTOSCALING_RUNNER_SETS,
            "arc",
            {"spec": {"githubConfigUrl": w.gh.config_url()}},
            namespace=namespace,
        )
        await assert_cleared(w)
        assert len(w.gh.state.scale_sets) == 1


async def test_rejected_token_during_creation_is_a_condition(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace, with_secret=False) as w:
        await w.kube.create(
            SECRETS,
            {
                "metadata": {"name": SECRET_NAME, "namespace": namespace},
                "stringData": {"github_token": "revoked"},
            },
        )
        await w.create_ars("arc")
        ars = await assert_reported(w, "GitHubUnauthorized")
        assert "revoked" not in ars["status"]["message"]
        assert w.gh.state.scale_sets == {}


@pytest.mark.parametrize(
    ("spec", "reason", "fragment"),
    [
        ({"proxy": {"http": {"url": "ftp://proxy:3128"}}}, "InvalidProxy", "spec.proxy.http.url"),
        ({"proxy": {"https": {"url": "http://proxy:99999"}}}, "InvalidProxy", "proxy.https"),
        ({"runnerScaleSetName": "linux,x64"}, "InvalidScaleSetName", "comma"),
        ({"runnerScaleSetName": " padded"}, "InvalidScaleSetName", "white space"),
    ],
    ids=["proxy-scheme", "proxy-port", "name-comma", "name-space"],
)
async def test_what_github_or_a_proxy_refuses_is_failed_before_any_call(
    kubeconfig: str, namespace: str, spec: dict[str, Any], reason: str, fragment: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await w.create_ars("arc", **spec)
        ars = await assert_reported(w, reason)
        assert ars["status"]["phase"] == c.PHASE_FAILED
        assert fragment in ars["status"]["message"], ars["status"]["message"]
        assert w.gh.state.scale_sets == {}
        assert await w.ers() is None


async def test_closed_proxy_port_fails_creation_and_is_reported(
    kubeconfig: str, namespace: str
) -> None:
    """Before: the controller ignored spec.proxy and created the scale set directly."""
    async with running_world(kubeconfig, namespace) as w:
        proxy = {"http": {"url": f"http://127.0.0.1:{closed_port()}"}}
        await w.create_ars("arc", proxy=proxy)
        ars = await assert_reported(w, "GitHubUnreachable")
        assert w.gh.state.scale_sets == {}, ars["status"]


async def test_controller_calls_go_through_the_scale_set_proxy(
    kubeconfig: str, namespace: str
) -> None:
    async with (
        forward_proxy(credentials=("alice", "s3cret:@")) as fwd,
        running_world(kubeconfig, namespace) as w,
    ):
        await w.kube.create(
            SECRETS,
            {
                "metadata": {"name": "proxy-auth", "namespace": namespace},
                "stringData": {"username": "alice", "password": "s3cret:@"},
            },
        )
        proxy = {"http": {"url": fwd.url, "credentialSecretRef": "proxy-auth"}}
        await w.create_ars("arc", proxy=proxy)
        await assert_cleared(w)
        assert len(w.gh.state.scale_sets) == 1
        assert any("runnerscalesets" in r for r in fwd.requests), fwd.requests
        assert fwd.refused == 0


# --- the manager Role is missing ----------------------------------------------------------

_NO_SECRETS_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["actions.github.com"], "resources": ["*"], "verbs": ["*"]},
    {
        "apiGroups": [""],
        "resources": ["pods", "pods/status", "serviceaccounts", "configmaps", "events"],
        "verbs": ["*"],
    },
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": ["get", "list", "watch"],
    },
]


async def _grant(kube: KubeClient, namespace: str, name: str, rules: list[dict[str, Any]]) -> None:
    from gharc.kube.resources import ROLE_BINDINGS, ROLES

    await kube.create(ROLES, {"metadata": {"name": name, "namespace": namespace}, "rules": rules})
    await kube.create(
        ROLE_BINDINGS,
        {
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "gharc", "namespace": namespace}],
        },
    )


async def _sa_kubeconfig(api: client.ApiClient, namespace: str, folder: Path) -> str:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "gharc"}})
    token = await core.create_namespaced_service_account_token(
        "gharc", namespace, {"spec": {"expirationSeconds": 3600}}
    )
    cfg = api.configuration
    cluster: dict[str, Any] = {"server": cfg.host}
    if cfg.ssl_ca_cert:
        cluster["certificate-authority"] = cfg.ssl_ca_cert
    else:
        cluster["insecure-skip-tls-verify"] = True
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "gharc", "user": {"token": token.status.token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "gharc"}}],
        "current-context": "test",
    }
    path = folder / "gharc.kubeconfig"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


async def test_missing_manager_role_is_a_condition_then_clears(
    kubeconfig: str, namespace: str, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """The controller may not read the scale set's Secret: 403, shown on the ARS."""
    admin = await KubeClient.from_config(kubeconfig=kubeconfig)
    try:
        await _grant(admin, namespace, "gharc-no-secrets", _NO_SECRETS_RULES)
        restricted = await _sa_kubeconfig(api_client, namespace, tmp_path)

        async def create_secret() -> None:
            await admin.create(
                SECRETS,
                {
                    "metadata": {"name": SECRET_NAME, "namespace": namespace},
                    "stringData": {"github_token": w_token[0]},
                },
            )

        w_token: list[str] = []
        async with running_world(restricted, namespace, with_secret=False) as w:
            w_token.append(w.gh.token)
            await create_secret()
            await w.create_ars("arc")
            ars = await assert_reported(w, "KubernetesForbidden")
            assert "secrets" in ars["status"]["message"], ars["status"]["message"]
            await _grant(
                admin,
                namespace,
                "gharc-secrets",
                [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}],
            )
            await assert_cleared(w)
    finally:
        await admin.close()
