"""What the charts render, checked by meaning: lint, flags, RBAC, cleanup wiring, bad values.

The golden files pin the exact text; these tests say why it must look that way, so a
regenerated golden file cannot quietly drop leader election or a cleanup annotation.
"""

from __future__ import annotations

from typing import Any

import pytest
from cases import CASES, CONTROLLER_SA

from gharc.api.scaleset import constants as c
from testworld.helm import CONTROLLER_CHART, SCALE_SET_CHART, Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm

JSON = dict[str, Any]

VAULT = {
    "url": "https://gharc.vault.azure.net",
    "tenant_id": "tenant-1",
    "client_id": "client-1",
    "certificate_path": "/etc/vault/cert.pem",
}


def render(helm: Helm, case: str, **override: Any) -> list[JSON]:
    chart, namespace, values = CASES[case]
    result = helm.template(chart, namespace=namespace, values={**values, **override})
    assert result.ok, result.stderr
    return result.documents()


def one(docs: list[JSON], kind: str, name: str | None = None) -> JSON:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def manager(docs: list[JSON]) -> JSON:
    deploy = one(docs, "Deployment")
    containers = deploy["spec"]["template"]["spec"]["containers"]
    return next(x for x in containers if x["name"] == "manager")


def test_lint_controller_chart(helm: Helm) -> None:
    result = helm.run(["lint", "--strict", str(CONTROLLER_CHART)])
    assert result.ok, result.stdout + result.stderr


def test_lint_scale_set_chart(helm: Helm) -> None:
    ci_values = SCALE_SET_CHART / "ci" / "ci-values.yaml"
    result = helm.run(["lint", "--strict", str(SCALE_SET_CHART), "--values", str(ci_values)])
    assert result.ok, result.stdout + result.stderr


# ---- controller chart --------------------------------------------------------------------


def test_controller_args_are_accepted_by_the_controller(helm: Helm) -> None:
    """The rendered command line parses with gharc's own flag parser, to the values given."""
    from gharc.controllers.main import parse_args

    docs = render(helm, "controller-replicas-2")
    container = manager(docs)
    assert container["command"] == ["gharc", "controller"]
    args = parse_args(container["args"], {c.ENV_CONTROLLER_NAMESPACE: "arc-systems"})
    assert args.enable_leader_election
    assert args.leader_election_id == "arc-gha-rs-controller"
    assert args.auto_scaler_image_pull_secrets == ("regcred",)
    assert args.exclude_label_propagation_prefixes == ("argocd.argoproj.io/",)
    assert args.runner_max_concurrent_reconciles == 32
    assert args.metrics_addr == "0"  # off by default, as ARC's chart
    assert args.listener_metrics_addr == "0"
    assert args.listener_metrics_endpoint == "/metrics"
    assert args.log_level == "debug"


def test_default_args_are_arcs_with_gharcs_own_added(helm: Helm) -> None:
    """The default command line has the flags ARC's chart renders, two with gharc's own
    defaults, plus gharc's flags with the chart's values, so each setting is visible in
    the pod spec. ARC's chart tests compare the whole list, so they fail on purpose here
    (docs/migration-from-arc.md, differences that remain)."""
    args = manager(render(helm, "controller-default"))["args"]
    as_arc = {
        "--auto-scaling-runner-set-only",
        "--log-level=debug",
        "--log-format=text",
        "--metrics-addr=0",
        "--listener-metrics-addr=0",
    }
    # ARC: --runner-max-concurrent-reconciles=2 and an empty --listener-metrics-endpoint.
    other_default = {
        "--runner-max-concurrent-reconciles=32",
        "--listener-metrics-endpoint=/metrics",
    }
    assert as_arc | other_default <= set(args)
    assert {a.split("=", 1)[0] for a in set(args) - as_arc - other_default} == {
        "--listener-mode",
        "--k8s-client-rate-limiter-qps",
        "--k8s-client-rate-limiter-burst",
        "--k8s-client-max-in-flight-per-namespace",
        "--k8s-client-backlog-rest",
        "--health-probe-bind-address",
        "--runner-registration-sync-interval",
        "--runner-registration-grace",
        "--runner-hang-timeout",
        "--runner-startup-timeout",
        "--node-loss-timeout",
    }
    assert len(args) == len(set(args))


def test_controller_env_names_namespace_and_image(helm: Helm) -> None:
    env = {e["name"]: e for e in manager(render(helm, "controller-default"))["env"]}
    # ARC's two variables, then the user's env (ARC's tests index them from 2).
    assert list(env) == ["CONTROLLER_MANAGER_CONTAINER_IMAGE", "CONTROLLER_MANAGER_POD_NAMESPACE"]
    assert env["CONTROLLER_MANAGER_POD_NAMESPACE"]["valueFrom"]["fieldRef"] == {
        "fieldPath": "metadata.namespace"
    }
    container = manager(render(helm, "controller-default", image={"tag": "9.9.9"}))
    env = {e["name"]: e for e in container["env"]}
    assert env["CONTROLLER_MANAGER_CONTAINER_IMAGE"]["value"] == container["image"]
    assert container["image"] == "ghcr.io/gharc/gharc:9.9.9"


def test_single_replica_has_no_leader_election(helm: Helm) -> None:
    docs = render(helm, "controller-default")
    assert not any(a.startswith("--enable-leader-election") for a in manager(docs)["args"])
    assert not [d for d in docs if d["metadata"]["name"].endswith("-leader-election")]
    lease_role = one(
        render(helm, "controller-replicas-2"), "Role", "arc-gha-rs-controller-leader-election"
    )
    assert lease_role["rules"][0]["resources"] == ["leases"]


def test_shards_pass_the_flag_and_let_the_lease_role_list_and_delete(helm: Helm) -> None:
    from gharc.controllers.main import parse_args

    docs = render(helm, "controller-replicas-2", flags={"shards": 6})
    args = parse_args(manager(docs)["args"], {c.ENV_CONTROLLER_NAMESPACE: "arc-systems"})
    assert args.shards == 6 and args.leader_election_id == "arc-gha-rs-controller"
    role = one(docs, "Role", "arc-gha-rs-controller-leader-election")
    assert {"list", "delete"} <= set(role["rules"][0]["verbs"])
    # One replica with shards still gets the Lease Role (it scales out later).
    one(
        render(helm, "controller-default", flags={"shards": 2}),
        "Role",
        "arc-gha-rs-controller-leader-election",
    )
    unsharded = one(
        render(helm, "controller-replicas-2"), "Role", "arc-gha-rs-controller-leader-election"
    )
    assert unsharded["rules"][0]["verbs"] == ["create", "get", "update"]
    assert not any(
        a.startswith("--shards") for a in manager(render(helm, "controller-replicas-2"))["args"]
    )


def test_default_pod_is_non_root_and_read_only(helm: Helm) -> None:
    docs = render(helm, "controller-default")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = manager(docs)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert {"name": "tmp", "mountPath": "/tmp"} in manager(docs)["volumeMounts"]


def test_metrics_service_follows_metrics_addr(helm: Helm) -> None:
    off = render(helm, "controller-default")  # ARC's chart has metrics off by default
    assert not [d for d in off if d["kind"] == "Service"]
    assert "--metrics-addr=0" in manager(off)["args"]
    assert "--listener-metrics-addr=0" in manager(off)["args"]
    on = render(helm, "controller-default", metrics={"controllerManagerAddr": ":8080"})
    svc = one(on, "Service")
    assert svc["spec"]["ports"][0]["port"] == 8080
    # Health probes stay on: the kubelet reaches them on the pod IP, not on loopback.
    assert "--health-probe-bind-address=:8081" in manager(off)["args"]


def test_watch_single_namespace_has_no_cluster_rights(helm: Helm) -> None:
    docs = render(helm, "controller-watch-single-namespace")
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    watch = one(docs, "Role", "arc-gha-rs-controller-single-namespace-watch")
    assert watch["metadata"]["namespace"] == "arc-runners"
    deploy = one(docs, "Deployment")
    assert deploy["metadata"]["labels"]["actions.github.com/controller-watch-single-namespace"] == (
        "arc-runners"
    )
    assert "--watch-single-namespace=arc-runners" in manager(docs)["args"]
    cluster = render(helm, "controller-default")
    assert one(cluster, "ClusterRole")
    assert not [d for d in cluster if "single-namespace" in d["metadata"]["name"]]


def test_cluster_role_is_least_privilege(helm: Helm) -> None:
    """No wildcard, and core objects are only cached cluster-wide, never written."""
    rules = one(render(helm, "controller-default"), "ClusterRole")["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
        if rule["apiGroups"] == [""] and rule["resources"] != ["events"]:
            assert set(rule["verbs"]) <= {"list", "watch"}, rule
    assert not [r for r in rules if "secrets" in r["resources"]]


def test_rbac_keeps_arcs_rule_layout(helm: Helm) -> None:
    """One rule per CRD kind and subresource, as in ARC's roles, so ARC's chart tests and
    policy checks that count rules (16, 10, 14) still hold. gharc's extra rights go into
    rules ARC has the shape of: Nodes (node loss) join the pods and service accounts cache
    rule, and the events rule stands where ARC writes pods and service accounts as two."""
    cluster = one(render(helm, "controller-default"), "ClusterRole")["rules"]
    assert len(cluster) == 16
    caches = {"apiGroups": [""], "resources": ["pods", "serviceaccounts", "nodes"]}
    assert {**caches, "verbs": ["list", "watch"]} in cluster
    without_nodes = render(helm, "controller-default", flags={"nodeLossTimeout": 0})
    assert len(one(without_nodes, "ClusterRole")["rules"]) == 16
    docs = render(helm, "controller-watch-single-namespace")
    own_ns = one(docs, "Role", "arc-gha-rs-controller-single-namespace")["rules"]
    watched = one(docs, "Role", "arc-gha-rs-controller-single-namespace-watch")["rules"]
    assert (len(own_ns), len(watched)) == (10, 14)
    for kind in ("autoscalingrunnersets", "ephemeralrunnersets", "ephemeralrunners"):
        rule = {"apiGroups": ["actions.github.com"], "resources": [kind]}
        assert {**rule, "verbs": ["list", "watch"]} in own_ns, kind


def test_metrics_port_is_the_only_container_port(helm: Helm) -> None:
    """As ARC's chart: the container declares the metrics port only; the probes name the
    health port by number, so ARC's tests (one port when metrics are on) hold."""
    docs = render(
        helm,
        "controller-default",
        metrics={"controllerManagerAddr": ":8080", "listenerAddr": ":8081"},
    )
    container = manager(docs)
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"]["port"] == 8081
    assert container["readinessProbe"]["httpGet"]["port"] == 8081
    assert "ports" not in manager(render(helm, "controller-default"))


def test_discovery_labels_name_the_service_account(helm: Helm) -> None:
    docs = render(helm, "controller-default")
    labels = one(docs, "Deployment")["metadata"]["labels"]
    assert labels["app.kubernetes.io/part-of"] == "gha-rs-controller"
    sa = one(docs, "ServiceAccount")["metadata"]
    assert labels["actions.github.com/controller-service-account-name"] == sa["name"]
    assert labels["actions.github.com/controller-service-account-namespace"] == sa["namespace"]


# ---- scale set chart ---------------------------------------------------------------------

CLEANUP_KINDS = {
    c.ANNOTATION_CLEANUP_MANAGER_ROLE_NAME: "Role",
    c.ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING: "RoleBinding",
    c.ANNOTATION_CLEANUP_GITHUB_SECRET_NAME: "Secret",
    c.ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME: "ServiceAccount",
    c.ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME: "Role",
    c.ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME: "RoleBinding",
    c.ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME: "ServiceAccount",
}


@pytest.mark.parametrize("case", sorted(k for k in CASES if k.startswith("scale-set")))
def test_cleanup_annotations_name_protected_objects(helm: Helm, case: str) -> None:
    """Every cleanup-* annotation names a rendered object carrying cleanup-protection, and
    every protected object is named by one: otherwise uninstall hangs or leaks."""
    docs = render(helm, case)
    ars = one(docs, c.KIND_AUTOSCALING_RUNNER_SET)
    named = {
        (CLEANUP_KINDS[k], v)
        for k, v in ars["metadata"]["annotations"].items()
        if k in CLEANUP_KINDS
    }
    protected = {
        (d["kind"], d["metadata"]["name"])
        for d in docs
        if c.FINALIZER_CLEANUP_PROTECTION in (d["metadata"].get("finalizers") or [])
    }
    assert named == protected


def test_inline_pat_makes_secret_and_points_ars_at_it(helm: Helm) -> None:
    docs = render(helm, "scale-set-pat")
    secret = one(docs, "Secret")
    ars = one(docs, c.KIND_AUTOSCALING_RUNNER_SET)
    assert ars["spec"]["githubConfigSecret"] == secret["metadata"]["name"]
    assert set(secret["data"]) == {"github_token"}
    assert ars["spec"]["minRunners"] == 1 and ars["spec"]["maxRunners"] == 10
    assert ars["metadata"]["labels"][c.LABEL_COMPONENT] == c.COMPONENT_AUTOSCALING_RUNNER_SET


def test_named_secret_is_not_created(helm: Helm) -> None:
    docs = render(helm, "scale-set-proxy-tls")
    assert not [d for d in docs if d["kind"] == "Secret"]
    assert one(docs, c.KIND_AUTOSCALING_RUNNER_SET)["spec"]["githubConfigSecret"] == (
        "pre-defined-secret"
    )


def test_manager_role_binds_the_controller(helm: Helm) -> None:
    binding = one(render(helm, "scale-set-pat"), "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", **CONTROLLER_SA}]
    tls_rules = one(render(helm, "scale-set-proxy-tls"), "Role")["rules"]
    assert any("configmaps" in r["resources"] for r in tls_rules)


def _runner(ars: JSON) -> JSON:
    spec = ars["spec"]["template"]["spec"]
    return next(x for x in spec["containers"] if x["name"] == "runner")


def test_dind_mode_adds_sidecar_and_docker_host(helm: Helm) -> None:
    ars = one(render(helm, "scale-set-dind"), c.KIND_AUTOSCALING_RUNNER_SET)
    spec = ars["spec"]["template"]["spec"]
    dind = next(x for x in spec["initContainers"] if x["name"] == "dind")
    assert dind["restartPolicy"] == "Always" and dind["securityContext"]["privileged"] is True
    env = {e["name"]: e.get("value") for e in _runner(ars)["env"]}
    assert env["DOCKER_HOST"] == "unix:///var/run/docker.sock"
    # ARC's order: an upgrade from ARC does not reorder the pod template's volumes.
    assert [v["name"] for v in spec["volumes"]] == ["dind-sock", "dind-externals", "work"]
    template = {
        "spec": {
            "containers": [{"name": "runner", "image": "r"}],
            "volumes": [
                {"name": "foo", "emptyDir": {}},
                {"name": "work", "hostPath": {"path": "/d"}},
            ],
        }
    }
    ars = one(render(helm, "scale-set-dind", template=template), c.KIND_AUTOSCALING_RUNNER_SET)
    volumes = ars["spec"]["template"]["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["dind-sock", "dind-externals", "work", "foo"]
    assert volumes[2]["hostPath"] == {"path": "/d"}  # the user's work volume is kept
    old = helm.template(SCALE_SET_CHART, values=CASES["scale-set-dind"][2], kube_version="1.28.0")
    spec = one(old.documents(), c.KIND_AUTOSCALING_RUNNER_SET)["spec"]["template"]["spec"]
    assert [x["name"] for x in spec["containers"]] == ["runner", "dind"]


def test_kubernetes_mode_wires_hooks_and_service_account(helm: Helm) -> None:
    docs = render(helm, "scale-set-kubernetes")
    ars = one(docs, c.KIND_AUTOSCALING_RUNNER_SET)
    env = {e["name"]: e for e in _runner(ars)["env"]}
    assert env["ACTIONS_RUNNER_CONTAINER_HOOKS"]["value"] == "/home/runner/k8s/index.js"
    assert env["ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"]["value"] == "true"
    spec = ars["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "arc-gha-rs-kube-mode"
    assert spec["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] == (
        "standard"
    )
    role = one(docs, "Role", "arc-gha-rs-kube-mode")
    assert any(r["resources"] == ["jobs"] for r in role["rules"])
    novolume = render(helm, "scale-set-kubernetes", containerMode={"type": "kubernetes-novolume"})
    ars = one(novolume, c.KIND_AUTOSCALING_RUNNER_SET)
    env = {e["name"]: e for e in _runner(ars)["env"]}
    assert env["ACTIONS_RUNNER_CONTAINER_HOOKS"]["value"] == "/home/runner/k8s-novolume/index.js"
    assert env["ACTIONS_RUNNER_IMAGE"]["value"] == _runner(ars)["image"]
    role = one(novolume, "Role", "arc-gha-rs-kube-mode")
    assert not any(r["resources"] == ["jobs"] for r in role["rules"])
    # No work volume: empty lists, as ARC renders them, rather than absent keys.
    assert ars["spec"]["template"]["spec"]["volumes"] == []
    assert _runner(ars)["volumeMounts"] == []


def test_user_env_and_reserved_labels_win(helm: Helm) -> None:
    template = {
        "spec": {
            "containers": [
                {
                    "name": "runner",
                    "image": "my/runner:1",
                    "env": [{"name": "DOCKER_HOST", "value": "tcp://docker:2375"}],
                }
            ]
        }
    }
    docs = render(
        helm,
        "scale-set-dind",
        template=template,
        labels={"team": "ci", c.LABEL_SCALE_SET_NAME: "hijack"},
        annotations={c.ANNOTATION_CLEANUP_MANAGER_ROLE_NAME: "hijack"},
    )
    ars = one(docs, c.KIND_AUTOSCALING_RUNNER_SET)
    env = [e for e in _runner(ars)["env"] if e["name"] == "DOCKER_HOST"]
    assert env == [{"name": "DOCKER_HOST", "value": "tcp://docker:2375"}]
    assert ars["metadata"]["labels"]["team"] == "ci"
    assert ars["metadata"]["labels"][c.LABEL_SCALE_SET_NAME] == "arc"
    assert ars["metadata"]["annotations"][c.ANNOTATION_CLEANUP_MANAGER_ROLE_NAME] == (
        "arc-gha-rs-manager"
    )


LONG = "a" * 46


@pytest.mark.parametrize(
    ("override", "release", "message"),
    [
        ({"githubConfigUrl": ""}, "arc", "githubConfigUrl is required"),
        ({"githubConfigUrl": "octo-org"}, "arc", "is not a GitHub organization, repository"),
        (
            {"minRunners": 5, "maxRunners": 2},
            "arc",
            "minRunners (5) must not be greater than maxRunners (2)",
        ),
        ({"maxRunners": "lots"}, "arc", "maxRunners"),
        # Negative counts fail with ARC's message (they are not "no limit").
        ({"maxRunners": -1}, "arc", "maxRunners has to be greater or equal to 0"),
        ({"minRunners": -1}, "arc", "minRunners has to be greater or equal to 0"),
        # Refused although ARC renders them (docs/migration-from-arc.md, values gharc refuses).
        ({"githubConfigUrl": "https://github.com"}, "arc", "is not a GitHub organization"),
        (
            {"githubServerTLS": {"certificateFrom": {"configMapKeyRef": {"name": "ca"}}}},
            "arc",
            "needs both name and key",
        ),
        (
            {"template": {"spec": {"containers": [{"name": "runner"}]}}},
            "arc",
            "template.spec.containers[name=runner].image is required",
        ),
        ({}, LONG, "at most 45 are allowed"),
        ({"runnerScaleSetName": LONG}, "arc", "maxLength"),
        (
            {"githubConfigSecret": {"github_token": "ghp_x", "github_app_id": "1"}},
            "arc",
            "has both github_token and GitHub App keys",
        ),
        (
            {"githubConfigSecret": {"github_token": ""}},
            "arc",
            "githubConfigSecret needs credentials",
        ),
        ({"githubConfigSecret": ""}, "arc", "githubConfigSecret must name a Secret"),
        (
            {"githubConfigSecret": {"github_app_id": "1", "github_app_installation_id": "2"}},
            "arc",
            "needs all of githubConfigSecret.github_app_id",
        ),
        ({"containerMode": {"type": "docker"}}, "arc", "/containerMode/type"),
        (
            {"containerMode": {"type": "kubernetes"}},
            "arc",
            "kubernetesModeWorkVolumeClaim is required",
        ),
        (
            {"template": {"spec": {"containers": [{"name": "x", "image": "y"}]}}},
            "arc",
            'named "runner"',
        ),
        (
            {"keyVault": {"type": "hashicorp"}, "githubConfigSecret": "gh"},
            "arc",
            'keyVault.type "hashicorp" is not supported',
        ),
        (
            {"keyVault": {"type": "azure_key_vault"}, "githubConfigSecret": "gh"},
            "arc",
            "keyVault.azure_key_vault.url is required",
        ),
        (
            {"keyVault": {"type": "azure_key_vault", "azure_key_vault": dict(VAULT)}},
            "arc",
            "githubConfigSecret is the name of the Key Vault secret",
        ),
        (
            {"controllerServiceAccount": {"name": "x", "namespace": ""}},
            "arc",
            "set both controllerServiceAccount",
        ),
        (
            {"controllerServiceAccount": {"name": "", "namespace": ""}},
            "arc",
            "no gharc (or ARC) controller Deployment found",
        ),
        (
            {"proxy": {"http": {"url": "", "credentialSecretRef": "p"}}},
            "arc",
            "proxy.http.credentialSecretRef is set",
        ),
    ],
)
def test_bad_scale_set_values_fail_readably(
    helm: Helm, override: dict[str, Any], release: str, message: str
) -> None:
    _, namespace, values = CASES["scale-set-pat"]
    result = helm.template(
        SCALE_SET_CHART, release=release, namespace=namespace, values={**values, **override}
    )
    assert not result.ok, f"rendered although {override} is invalid"
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"serviceAccount": {"create": False, "name": ""}},
            "serviceAccount.name must be set if serviceAccount.create is false",
        ),
        ({"serviceAccount": {"name": "default"}}, "serviceAccount.name cannot be set to 'default'"),
        # Refused although ARC renders them (docs/migration-from-arc.md, values gharc refuses).
        ({"flags": {"watchSingleNamespace": True}}, "/flags/watchSingleNamespace"),
        ({"env": [{"Name": "X", "Value": "y"}]}, "/env/0"),
        ({"flags": {"logLevel": "verbose"}}, "/flags/logLevel"),
        ({"flags": {"runnerMaxConcurrentReconciles": 0}}, "/flags/runnerMaxConcurrentReconciles"),
        ({"metrics": {"controllerManagerAddr": "localhost"}}, "must end with a numeric port"),
        ({"replicaCount": 0}, "/replicaCount"),
    ],
)
def test_bad_controller_values_fail_readably(
    helm: Helm, override: dict[str, Any], message: str
) -> None:
    result = helm.template(CONTROLLER_CHART, values=override)
    assert not result.ok, f"rendered although {override} is invalid"
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    "azure",
    [
        {"azure_key_vault": VAULT},  # as ARC's values.yaml documents it
        {
            "azureKeyVault": {
                "url": VAULT["url"],
                "tenantId": "tenant-1",
                "clientId": "client-1",
                "certificatePath": "/etc/vault/cert.pem",
            }
        },  # as ARC's template reads
    ],
)
def test_key_vault_values_render_the_sets_vault_config(helm: Helm, azure: dict[str, Any]) -> None:
    proxy = {"https": {"url": "http://proxy:3128"}, "noProxy": ["example.com"]}
    with_proxy = {k: {**v, "proxy": proxy} for k, v in azure.items()}
    docs = render(
        helm,
        "scale-set-pat",
        keyVault={"type": "azure_key_vault", **with_proxy},
        githubConfigSecret="gh-credentials",
    )
    spec = one(docs, "AutoscalingRunnerSet")["spec"]
    assert spec["githubConfigSecret"] == "gh-credentials"
    assert spec["vaultConfig"] == {
        "type": "azure_key_vault",
        "azureKeyVault": {
            "url": VAULT["url"],
            "tenantId": "tenant-1",
            "clientId": "client-1",
            "certificatePath": "/etc/vault/cert.pem",
        },
        "proxy": proxy,
    }
    assert not [d for d in docs if d["kind"] == "Secret"], "no credentials Secret with a vault"
