"""The gharc-legacy chart with ARC's actions-runner-controller values: what each value
renders to (Deployment arguments and env, RBAC, Services), which values are refused and
with what message, and that no value of ARC's chart goes unaccounted for.

ARC's own values.yaml is refused as it is (it names ARC's image, see
test_arc_values_files.py); without ``image.repository`` it renders, and that rendering is
checked here.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pytest
import yaml

from gharc.api import crds
from testworld.arcdata import ArcDataMissing, arc_data_dir
from testworld.helm import LEGACY_CHART, ROOT, Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm

JSON = dict[str, Any]
LEGACY_DOC = ROOT / "docs" / "legacy.md"
FULL = "arc-actions-runner-controller"


def _arc_values() -> JSON:
    try:
        path = arc_data_dir() / "charts" / "actions-runner-controller" / "values.yaml"
    except ArcDataMissing as err:
        pytest.skip(str(err))
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _without_arcs_image(values: JSON) -> JSON:
    out = copy.deepcopy(values)
    out["image"].pop("repository")
    return out


def _render(helm: Helm, values: JSON | None = None) -> list[JSON]:
    result = helm.template(LEGACY_CHART, namespace="arc-systems", values=values or {})
    assert result.ok, result.stderr
    return result.documents()


def _one(docs: list[JSON], kind: str, name: str | None = None) -> JSON:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}: {[d['kind'] for d in docs]}"
    return found[0]


def _container(deploy: JSON, name: str) -> JSON:
    return next(c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def _env(container: JSON) -> dict[str, JSON]:
    return {e["name"]: e for e in container.get("env") or []}


def _rules(role: JSON) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


#: What the legacy controller does, by resource (docs/legacy.md): the chart must grant it.
CONTROLLER_VERBS = [
    ("actions.summerwind.dev", kind, verb)
    for kind in (
        "runners",
        "runnerreplicasets",
        "runnerdeployments",
        "runnersets",
        "horizontalrunnerautoscalers",
    )
    for verb in ("create", "delete", "get", "list", "patch", "update", "watch")
] + [
    ("", "pods", "create"),
    ("", "pods", "delete"),
    ("", "pods", "patch"),
    ("", "pods", "watch"),
    ("apps", "statefulsets", "create"),
    ("apps", "statefulsets/status", "patch"),
    ("", "secrets", "create"),
    ("", "secrets", "get"),
    ("", "secrets", "patch"),
    ("", "events", "create"),
    ("", "persistentvolumeclaims", "create"),
]


def test_arcs_values_without_arcs_image_render_what_they_mean(helm: Helm) -> None:
    docs = _render(helm, _without_arcs_image(_arc_values()))
    deploy = _one(docs, "Deployment")
    assert deploy["metadata"]["name"] == FULL
    assert deploy["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "actions-runner-controller",
        "app.kubernetes.io/instance": "arc",
    }
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == FULL
    assert pod["securityContext"]["runAsNonRoot"] is True
    manager = _container(deploy, "manager")
    assert manager["image"].startswith("ghcr.io/gharc/gharc:")
    assert manager["command"] == ["gharc", "controller"]
    assert manager["securityContext"]["readOnlyRootFilesystem"] is True
    assert manager["args"] == [
        "--metrics-addr=127.0.0.1:8080",
        "--enable-leader-election",
        "--leader-election-id=actions-runner-controller",
        "--sync-period=1m",
        "--default-scale-down-delay=10m",
        "--docker-image=docker:dind",
        "--runner-image=summerwind/actions-runner:latest",
        "--log-format=text",
        "--health-probe-bind-address=:8081",
    ]
    assert manager["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = _env(manager)
    assert "--auto-scaling-runner-set-only" not in manager["args"]
    for key in ("github_token", "github_app_id", "github_app_installation_id"):
        ref = env[key.upper()]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "controller-manager", "key": key, "optional": True}
    proxy = _container(deploy, "kube-rbac-proxy")
    assert proxy["image"] == "quay.io/brancz/kube-rbac-proxy:v0.13.1"
    assert "--secure-listen-address=0.0.0.0:8443" in proxy["args"]
    service = _one(docs, "Service", f"{FULL}-metrics-service")
    assert service["spec"]["ports"][0]["port"] == 8443
    role = _one(docs, "ClusterRole", f"{FULL}-manager")
    assert set(CONTROLLER_VERBS) <= _rules(role)
    binding = _one(docs, "ClusterRoleBinding", f"{FULL}-manager")
    assert binding["subjects"][0]["name"] == FULL
    assert _one(docs, "Role", f"{FULL}-leader-election")
    kinds = sorted({d["kind"] for d in docs})
    assert "Ingress" not in kinds and "Secret" not in kinds  # ARC's defaults create neither
    assert len([d for d in docs if d["kind"] == "Deployment"]) == 1


def test_values_become_flags_env_and_objects(helm: Helm) -> None:
    docs = _render(
        helm,
        {
            "authSecret": {"create": True, "github_token": "ghp_x", "name": "gh"},
            "githubEnterpriseServerURL": "https://ghes.example.com",
            "githubURL": "https://ghes.example.com/api/v3/",
            "runnerGithubURL": "https://ghes.example.com/",
            "syncPeriod": "30s",
            "defaultScaleDownDelay": "5m",
            "leaderElectionId": "legacy-1",
            "logLevel": "info",
            "logFormat": "json",
            "dockerRegistryMirror": "https://mirror.example.com",
            "dockerGID": "121",
            "runner": {"statusUpdateHook": {"enabled": True}},
            "image": {
                "actionsRunnerRepositoryAndTag": "example/runner:2",
                "dindSidecarRepositoryAndTag": "docker:27-dind",
                "actionsRunnerImagePullSecrets": ["pull-a", "pull-b"],
                "tag": "1.2.3",
            },
            "metrics": {"port": 9090, "proxy": {"enabled": False}},
            "env": {"HTTPS_PROXY": "http://proxy:3128"},
            "healthProbeBindAddress": "",
            "replicaCount": 2,
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        },
    )
    deploy = _one(docs, "Deployment")
    manager = _container(deploy, "manager")
    assert manager["image"] == "ghcr.io/gharc/gharc:1.2.3"
    for flag in (
        "--metrics-addr=:9090",
        "--leader-election-id=legacy-1",
        "--sync-period=30s",
        "--default-scale-down-delay=5m",
        "--runner-image=example/runner:2",
        "--docker-image=docker:27-dind",
        "--runner-image-pull-secret=pull-a",
        "--runner-image-pull-secret=pull-b",
        "--docker-registry-mirror=https://mirror.example.com",
        "--docker-gid=121",
        "--runner-github-url=https://ghes.example.com/",
        "--runner-status-update-hook",
        "--log-level=info",
        "--log-format=json",
    ):
        assert flag in manager["args"], flag
    assert not any(a.startswith("--health-probe") for a in manager["args"])
    assert "livenessProbe" not in manager
    env = _env(manager)
    assert env["GITHUB_ENTERPRISE_URL"]["value"] == "https://ghes.example.com"
    assert env["GITHUB_URL"]["value"] == "https://ghes.example.com/api/v3/"
    assert env["HTTPS_PROXY"]["value"] == "http://proxy:3128"
    assert env["GITHUB_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "gh"
    assert [c["name"] for c in deploy["spec"]["template"]["spec"]["containers"]] == ["manager"]
    assert {"name": "metrics-port", "containerPort": 9090, "protocol": "TCP"} in manager["ports"]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert deploy["spec"]["replicas"] == 2
    secret = _one(docs, "Secret", "gh")
    assert set(secret["data"]) == {"github_token"}
    assert _one(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert not [d for d in docs if d["kind"] == "ClusterRole" and "proxy" in d["metadata"]["name"]]


def test_single_namespace_scope_uses_roles_in_the_watched_namespace(helm: Helm) -> None:
    docs = _render(
        helm,
        {
            "scope": {"singleNamespace": True, "watchNamespace": "runners"},
            "metrics": {"proxy": {"enabled": False}},
            "githubWebhookServer": {
                "enabled": True,
                "secret": {"enabled": True, "create": True, "github_webhook_secret_token": "s"},
            },
        },
    )
    manager = _container(_one(docs, "Deployment", FULL), "manager")
    assert "--watch-namespace=runners" in manager["args"]
    server = _one(docs, "Deployment", f"{FULL}-github-webhook-server")
    assert (
        "--watch-namespace=runners" in server["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    role = _one(docs, "Role", f"{FULL}-manager")
    assert role["metadata"]["namespace"] == "runners"
    assert set(CONTROLLER_VERBS) <= _rules(role)
    hook_role = _one(docs, "Role", f"{FULL}-github-webhook-server")
    assert ("actions.summerwind.dev", "horizontalrunnerautoscalers", "patch") in _rules(hook_role)
    # Default scope: the release namespace.
    docs = _render(helm, {"scope": {"singleNamespace": True}})
    manager = _container(_one(docs, "Deployment", FULL), "manager")
    assert "--watch-namespace=arc-systems" in manager["args"]


_SERVERS: JSON = {
    key: {
        "enabled": True,
        "secret": {"enabled": True, "create": True, "github_webhook_secret_token": "s"},
    }
    for key in ("githubWebhookServer", "actionsMetricsServer")
}


@pytest.mark.parametrize(
    ("override", "name"),
    [({}, "actions-runner-controller"), ({"nameOverride": "hooks"}, "hooks")],
    ids=["default", "server-name-override"],
)
def test_server_selectors_are_arcs(helm: Helm, override: JSON, name: str) -> None:
    """A Deployment's selector is immutable: `helm upgrade` of an ARC release keeps it only if
    it is ARC's (ARC's _github_webhook_server_helpers.tpl and _actions_metrics_server_helpers.tpl:
    name = the server's nameOverride or the chart name, instance = "<release>-<server>")."""
    values = {key: {**server, **override} for key, server in _SERVERS.items()}
    docs = _render(helm, {"authSecret": {"name": "controller-creds"}, **values})
    for suffix in ("github-webhook-server", "actions-metrics-server"):
        want = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": f"arc-{suffix}"}
        full = f"arc-{'hooks' if override else 'actions-runner-controller'}-{suffix}"
        deploy = _one(docs, "Deployment", full)
        assert deploy["spec"]["selector"]["matchLabels"] == want
        pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
        assert want.items() <= pod_labels.items()
        assert want.items() <= deploy["metadata"]["labels"].items()
        assert _one(docs, "Service", full)["spec"]["selector"] == want
    controller = _one(docs, "Deployment", FULL)["spec"]["selector"]["matchLabels"]
    assert controller["app.kubernetes.io/instance"] == "arc"


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({}, ["arc-actions-runner-controller-github-webhook-server"]),
        (
            {"nameOverride": "xx", "fullnameOverride": "yy"},
            ["arc-actions-runner-controller-github-webhook-server"],
        ),
        ({"githubWebhookServer": {"nameOverride": "hooks"}}, ["arc-hooks-github-webhook-server"]),
        ({"githubWebhookServer": {"fullnameOverride": "hooks"}}, ["hooks"]),
    ],
    ids=["default", "chart-overrides", "server-name-override", "server-fullname-override"],
)
def test_server_names_are_arcs(helm: Helm, values: JSON, names: list[str]) -> None:
    """ARC names a server "<release>-<server nameOverride or chart name>-github-webhook-server",
    whatever the chart's own nameOverride/fullnameOverride: another name would make `helm
    upgrade` from ARC replace the Deployment, its Service and its service account."""
    server = {**_SERVERS["githubWebhookServer"], **values.pop("githubWebhookServer", {})}
    docs = _render(helm, {"authSecret": {"name": "c"}, "githubWebhookServer": server, **values})
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"][1:] == names


def test_webhook_server_values(helm: Helm) -> None:
    docs = _render(
        helm,
        {
            "authSecret": {"name": "controller-creds"},
            "githubWebhookServer": {
                "enabled": True,
                "replicaCount": 2,
                "useRunnerGroupsVisibility": True,
                "logFormat": "json",
                "queueLimit": 500,
                "secret": {"enabled": True, "create": True, "github_webhook_secret_token": "s"},
                "ingress": {
                    "enabled": True,
                    "ingressClassName": "nginx",
                    "hosts": [{"host": "hooks.example.com", "paths": [{"path": "/"}]}],
                },
                "service": {"type": "LoadBalancer"},
            },
        },
    )
    name = f"{FULL}-github-webhook-server"
    deploy = _one(docs, "Deployment", name)
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == name
    server = deploy["spec"]["template"]["spec"]["containers"][0]
    assert server["command"] == ["gharc", "webhook-server"]
    assert server["args"][:2] == ["--webhook-addr=:8000", "--metrics-addr=127.0.0.1:8080"]
    assert "--queue-limit=500" in server["args"] and "--log-format=json" in server["args"]
    assert server["securityContext"]["readOnlyRootFilesystem"] is True
    assert server["readinessProbe"]["httpGet"] == {"path": "/", "port": "http"}
    env = _env(server)
    ref = env["GITHUB_WEBHOOK_SECRET_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "github-webhook-server", "key": "github_webhook_secret_token"}
    # The webhook secret holds no GitHub credentials, so they come from authSecret.
    assert env["GITHUB_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "controller-creds"
    service = _one(docs, "Service", name)
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["ports"][0] == {
        "port": 80,
        "targetPort": "http",
        "protocol": "TCP",
        "name": "http",
    }
    ingress = _one(docs, "Ingress", name)
    assert ingress["spec"]["ingressClassName"] == "nginx"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": name, "port": {"number": 80}}
    role = _one(docs, "ClusterRole", name)
    assert ("actions.summerwind.dev", "runnerdeployments", "list") in _rules(role)
    assert ("actions.summerwind.dev", "horizontalrunnerautoscalers", "patch") in _rules(role)
    assert ("", "secrets", "get") not in _rules(role)
    proxy = _one(docs, "ClusterRoleBinding", f"{FULL}-proxy")
    assert {s["name"] for s in proxy["subjects"]} == {FULL, name}


def test_actions_metrics_server_runs_metrics_only(helm: Helm) -> None:
    docs = _render(
        helm,
        {
            "actionsMetricsServer": {
                "enabled": True,
                "maxSeries": 200,
                "secret": {"enabled": True, "create": True, "github_webhook_secret_token": "m"},
            },
            "actionsMetrics": {"port": 9443, "proxy": {"enabled": False}},
        },
    )
    name = f"{FULL}-actions-metrics-server"
    server = _one(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
    assert server["args"] == [
        "--webhook-addr=:8000",
        "--metrics-addr=:9443",
        "--workflow-job-metrics",
        "--metrics-only",
        "--workflow-job-metrics-max-series=200",
        "--log-format=text",
    ]
    service = _one(docs, "Service", name)
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "http": 80,
        "metrics-port": 9443,
    }
    # It reads nothing from Kubernetes: no role of its own.
    assert not [d for d in docs if d["kind"] in ("Role", "ClusterRole") and name in str(d)]
    assert _one(docs, "Secret", "actions-metrics-server")["data"]["github_webhook_secret_token"]


#: ARC value -> a message fragment, each explained in docs/legacy.md's "Chart values".
REFUSED: list[tuple[JSON, str]] = [
    (
        {"image": {"repository": "summerwind/actions-runner-controller"}},
        "is ARC's controller image",
    ),
    ({"authSecret": {"github_basicauth_username": "u"}}, "github_basicauth_username"),
    ({"githubUploadURL": "https://uploads.example.com"}, "githubUploadURL"),
    ({"createDummySecret": True}, "createDummySecret"),
    (
        {"rbac": {"allowGrantingKubernetesContainerModePermissions": True}},
        "allowGrantingKubernetesContainerModePermissions",
    ),
    ({"admissionWebHooks": {"caBundle": "Q0E="}}, "admissionWebHooks"),
    ({"authSecret": {"create": True}}, "authSecret.create is true but"),
    ({"authSecret": {"github_app_id": "1"}}, "github_app_id needs"),
    ({"serviceAccount": {"create": False}}, "serviceAccount.create is false"),
    ({"githubWebhookServer": {"enabled": True}}, "githubWebhookServer.secret.enabled is false"),
    (
        {"githubWebhookServer": {"enabled": True, "secret": {"enabled": True, "create": True}}},
        "github_webhook_secret_token is empty",
    ),
    ({"actionsMetricsServer": {"enabled": True}}, "actionsMetricsServer.secret.enabled is false"),
    ({"replicaCount": 2, "enableLeaderElection": False}, "needs enableLeaderElection: true"),
    # values.schema.json: no unknown top-level value, and ARC's integer log levels
    ({"githubAPICacheDuration": "1m"}, "additional properties 'githubAPICacheDuration'"),
    ({"logLevel": "-2"}, "at '/logLevel'"),
    (
        {"podDisruptionBudget": {"enabled": True, "minAvailable": 1, "maxUnavailable": 1}},
        "set only one of minAvailable and maxUnavailable",
    ),
]


@pytest.mark.parametrize(("values", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_values_gharc_cannot_honour_are_refused_with_what_to_do(
    helm: Helm, values: JSON, message: str
) -> None:
    result = helm.template(LEGACY_CHART, namespace="arc-systems", values=values)
    assert not result.ok, f"{values} rendered"
    assert message in result.stderr, result.stderr
    assert message in LEGACY_DOC.read_text(encoding="utf-8"), f"undocumented: {message!r}"


def test_an_env_secret_token_satisfies_the_webhook_server(helm: Helm) -> None:
    env = [
        {
            "name": "GITHUB_WEBHOOK_SECRET_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "prod-token", "key": "token"}},
        }
    ]
    docs = _render(helm, {"githubWebhookServer": {"enabled": True, "env": env}})
    deploy = _one(docs, "Deployment", f"{FULL}-github-webhook-server")
    server = deploy["spec"]["template"]["spec"]["containers"][0]
    assert _env(server)["GITHUB_WEBHOOK_SECRET_TOKEN"] == env[0]


#: ARC values that exist only as comments in ARC's values.yaml.
ARC_COMMENTED = [
    "leaderElectionId",
    "githubEnterpriseServerURL",
    "githubURL",
    "githubUploadURL",
    "runnerGithubURL",
    "healthProbeBindAddress",
    "hostNetwork",
    "dnsPolicy",
    "dockerGID",
    "logLevel",
    "env",
    "authSecret.github_app_id",
    "authSecret.github_app_installation_id",
    "authSecret.github_app_private_key",
    "authSecret.github_token",
    "githubWebhookServer.queueLimit",
    "githubWebhookServer.env",
    "podDisruptionBudget.minAvailable",
    "podDisruptionBudget.maxUnavailable",
]
#: Refused values (REFUSED) that gharc's values.yaml therefore does not list.
REFUSED_KEYS = {
    "githubUploadURL",
    "authSecret.github_basicauth_username",
    "authSecret.github_basicauth_password",
}
#: Honoured values without a default (only one of the two may be set).
HONOURED_UNSET = {"podDisruptionBudget.minAvailable", "podDisruptionBudget.maxUnavailable"}


def _paths(values: Any, prefix: str = "") -> set[str]:
    """Dotted paths of every leaf (a list or an empty map is a leaf)."""
    if isinstance(values, dict) and values:
        out: set[str] = set()
        for k, v in values.items():
            out |= _paths(v, f"{prefix}{k}.")
        return out
    return {prefix.rstrip(".")}


def _has(values: JSON, path: str) -> bool:
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_arc_value_is_a_gharc_value_or_refused() -> None:
    """Nothing ARC's chart takes is silently dropped: each value is listed in gharc's
    values.yaml (documented, honoured) or refused at render time."""
    ours = yaml.safe_load((LEGACY_CHART / "values.yaml").read_text(encoding="utf-8"))
    theirs = _paths(_arc_values()) | set(ARC_COMMENTED)
    templates = "".join(
        p.read_text(encoding="utf-8") for p in (LEGACY_CHART / "templates").iterdir()
    )
    for path in HONOURED_UNSET:
        assert path in templates, path
    missing = sorted(
        p
        for p in theirs - REFUSED_KEYS - HONOURED_UNSET
        if not _has(ours, p) and not _under_a_map(ours, p)
    )
    assert missing == []


def _under_a_map(values: JSON, path: str) -> bool:
    """``authSecret.github_token`` is taken by a map value whose keys are free."""
    parent = path.rsplit(".", 1)[0]
    return (
        parent != path
        and _has(values, parent)
        and path.startswith(
            ("authSecret.", "githubWebhookServer.secret.", "actionsMetricsServer.secret.")
        )
    )


def test_chart_crds_equal_gharc_crds_legacy_output() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "gharc", "crds", "--group", "legacy"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = sorted((LEGACY_CHART / "crds").glob("*.yaml"))
    assert [f.name for f in files] == crds.manifest_files(crds.GROUPS["legacy"])
    shipped = "".join(f.read_text(encoding="utf-8") for f in files)
    assert shipped == printed, "charts/gharc-legacy/crds is stale: run scripts/chart-crds"
