"""The listener template policy: what a tenant's listenerTemplate may change (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset import conditions as cond
from gharc.controllers.scaleset import listenerpolicy as policy
from gharc.controllers.scaleset import listenerresources as lr
from gharc.controllers.scaleset.options import ScaleSetOptions

OPTIONS = ScaleSetOptions(controller_namespace="arc-systems", listener_image="gharc:1")
UNRESTRICTED = ScaleSetOptions(
    controller_namespace="arc-systems",
    listener_image="gharc:1",
    allow_unrestricted_listener_template=True,
)

#: The attack of issue 20: host PID, a privileged sidecar, the node's root filesystem and
#: the config Secret (GitHub credentials) of another team's listener, all in the
#: controller's namespace.
ATTACK: dict[str, Any] = {
    "spec": {
        "hostPID": True,
        "containers": [
            {
                "name": "listener",
                "volumeMounts": [{"name": "victim", "mountPath": "/victim"}],
            },
            {
                "name": "pwn",
                "image": "busybox",
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "host", "mountPath": "/host"}],
            },
        ],
        "volumes": [
            {"name": "host", "hostPath": {"path": "/"}},
            {"name": "victim", "secret": {"secretName": "victim-6b5d8f7c-listener-config"}},
        ],
    }
}

#: One forbidden field per case: (template, JSON path the violation must name).
FORBIDDEN: list[tuple[str, dict[str, Any], str]] = [
    ("hostPID", {"spec": {"hostPID": True}}, "listenerTemplate.spec.hostPID"),
    ("hostNetwork", {"spec": {"hostNetwork": True}}, "listenerTemplate.spec.hostNetwork"),
    ("hostIPC", {"spec": {"hostIPC": True}}, "listenerTemplate.spec.hostIPC"),
    (
        "extra-container",
        {"spec": {"containers": [{"name": "sidecar", "image": "busybox"}]}},
        "listenerTemplate.spec.containers[0]",
    ),
    (
        "init-container",
        {"spec": {"initContainers": [{"name": "init", "image": "busybox"}]}},
        "listenerTemplate.spec.initContainers",
    ),
    (
        "hostPath-volume",
        {"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}},
        "listenerTemplate.spec.volumes",
    ),
    (
        "secret-volume",
        {"spec": {"volumes": [{"name": "s", "secret": {"secretName": "x-listener-config"}}]}},
        "listenerTemplate.spec.volumes",
    ),
    (
        "serviceAccountName",
        {"spec": {"serviceAccountName": "gharc-controller"}},
        "listenerTemplate.spec.serviceAccountName",
    ),
    (
        "imagePullSecrets",
        {"spec": {"imagePullSecrets": [{"name": "other-registry"}]}},
        "listenerTemplate.spec.imagePullSecrets[0].name",
    ),
    (
        "pod-runAsNonRoot-false",
        {"spec": {"securityContext": {"runAsNonRoot": False}}},
        "listenerTemplate.spec.securityContext.runAsNonRoot",
    ),
    (
        "pod-runAsUser-root",
        {"spec": {"securityContext": {"runAsUser": 0}}},
        "listenerTemplate.spec.securityContext.runAsUser",
    ),
    (
        "pod-seccomp-unconfined",
        {"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}},
        "listenerTemplate.spec.securityContext.seccompProfile.type",
    ),
    (
        "pod-sysctls",
        {
            "spec": {
                "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}
            }
        },
        "listenerTemplate.spec.securityContext.sysctls",
    ),
    (
        "privileged",
        {"spec": {"containers": [{"name": "listener", "securityContext": {"privileged": True}}]}},
        "listenerTemplate.spec.containers[0].securityContext.privileged",
    ),
    (
        "allowPrivilegeEscalation",
        {
            "spec": {
                "containers": [
                    {"name": "listener", "securityContext": {"allowPrivilegeEscalation": True}}
                ]
            }
        },
        "listenerTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation",
    ),
    (
        "capabilities-add",
        {
            "spec": {
                "containers": [
                    {
                        "name": "listener",
                        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                    }
                ]
            }
        },
        "listenerTemplate.spec.containers[0].securityContext.capabilities.add",
    ),
    (
        "writable-root",
        {
            "spec": {
                "containers": [
                    {"name": "listener", "securityContext": {"readOnlyRootFilesystem": False}}
                ]
            }
        },
        "listenerTemplate.spec.containers[0].securityContext.readOnlyRootFilesystem",
    ),
    (
        "volumeMounts",
        {
            "spec": {
                "containers": [
                    {"name": "listener", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}
                ]
            }
        },
        "listenerTemplate.spec.containers[0].volumeMounts",
    ),
    (
        "image",
        {"spec": {"containers": [{"name": "listener", "image": "evil:1"}]}},
        "listenerTemplate.spec.containers[0].image",
    ),
    (
        "env-secretKeyRef",
        {
            "spec": {
                "containers": [
                    {
                        "name": "listener",
                        "env": [
                            {
                                "name": "T",
                                "valueFrom": {
                                    "secretKeyRef": {"name": "victim-listener-config", "key": "k"}
                                },
                            }
                        ],
                    }
                ]
            }
        },
        "listenerTemplate.spec.containers[0].env[0].valueFrom.secretKeyRef",
    ),
    (
        "env-configMapKeyRef",
        {
            "spec": {
                "containers": [
                    {
                        "name": "listener",
                        "env": [
                            {
                                "name": "T",
                                "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}},
                            }
                        ],
                    }
                ]
            }
        },
        "listenerTemplate.spec.containers[0].env[0].valueFrom.configMapKeyRef",
    ),
    (
        "envFrom",
        {"spec": {"containers": [{"name": "listener", "envFrom": [{"secretRef": {"name": "s"}}]}]}},
        "listenerTemplate.spec.containers[0].envFrom",
    ),
    (
        "apparmor-annotation",
        {
            "metadata": {
                "annotations": {
                    "container.apparmor.security.beta.kubernetes.io/listener": "unconfined"
                }
            }
        },
        "listenerTemplate.metadata.annotations[container.apparmor.security.beta.kubernetes.io/listener]",
    ),
    ("nodeName", {"spec": {"nodeName": "control-plane-1"}}, "listenerTemplate.spec.nodeName"),
]

#: Allowed overrides: scheduling, resources, env values, a stricter security context.
ALLOWED: dict[str, Any] = {
    "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
    "spec": {
        "nodeSelector": {"pool": "arc"},
        "tolerations": [{"key": "arc", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
        "priorityClassName": "arc-listeners",
        "securityContext": {"runAsUser": 2000, "fsGroup": 2000},
        "hostPID": False,  # a zero value changes nothing and is let through
        "containers": [
            {
                "name": "listener",
                "imagePullPolicy": "Always",
                "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "50m"}},
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                ],
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            }
        ],
    },
}


def listener(**spec: Any) -> dict[str, Any]:
    """The AutoscalingListener the ARS reconciler would build for an ARS with ``spec``."""
    ars = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_AUTOSCALING_RUNNER_SET,
        "metadata": {
            "name": "arc",
            "namespace": "team-a",
            "uid": "u-ars",
            "annotations": {c.ANNOTATION_RUNNER_SCALE_SET_ID: "42"},
        },
        "spec": {
            "githubConfigUrl": "https://github.com/octo-org",
            "githubConfigSecret": "gh",
            **spec,
        },
    }
    out = lr.desired_listener(ars, OPTIONS)
    out["metadata"]["uid"] = "u-listener"
    return out


def paths(violations: list[policy.Violation]) -> list[str]:
    return [v.path for v in violations]


def test_the_attack_is_refused_field_by_field() -> None:
    found = paths(policy.template_violations(ATTACK))
    assert found == [
        "listenerTemplate.spec.hostPID",
        "listenerTemplate.spec.containers[0].volumeMounts",
        "listenerTemplate.spec.containers[1]",
        "listenerTemplate.spec.volumes",
    ]
    message = policy.describe(policy.template_violations(ATTACK))
    assert "listenerTemplate.spec.hostPID: host namespaces are not allowed" in message


@pytest.mark.parametrize(
    ("template", "path"), [f[1:] for f in FORBIDDEN], ids=[f[0] for f in FORBIDDEN]
)
def test_each_forbidden_field_is_named(template: dict[str, Any], path: str) -> None:
    assert path in paths(policy.template_violations(template))


def test_allowed_overrides_pass() -> None:
    assert policy.template_violations(ALLOWED) == []
    assert policy.template_violations(None) == []
    assert policy.template_violations({}) == []


def test_stricter_security_context_passes() -> None:
    stricter = {
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "Localhost"}},
            "containers": [
                {
                    "name": "listener",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "privileged": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL", "NET_RAW"]},
                        "runAsGroup": 3000,
                    },
                }
            ],
        }
    }
    assert policy.template_violations(stricter) == []


def test_the_controllers_own_pull_secrets_are_allowed() -> None:
    template = {"spec": {"imagePullSecrets": [{"name": "ghcr"}, {"name": "other"}]}}
    found = policy.template_violations(template, allowed_pull_secrets=("ghcr",))
    assert paths(found) == ["listenerTemplate.spec.imagePullSecrets[1].name"]


def test_default_listener_pod_is_restricted() -> None:
    pod = lr.listener_pod(listener(), OPTIONS)
    spec = pod["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1001,
        "runAsGroup": 1001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = spec["containers"]
    ctx = container["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {}} in spec["volumes"]
    assert not any(spec.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))


def test_allowed_template_lands_on_the_pod_over_the_restricted_defaults() -> None:
    pod = lr.listener_pod(listener(listenerTemplate=ALLOWED), OPTIONS)
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"pool": "arc"}
    assert spec["tolerations"] == ALLOWED["spec"]["tolerations"]
    assert spec["affinity"] == ALLOWED["spec"]["affinity"]
    assert spec["priorityClassName"] == "arc-listeners"
    assert spec["terminationGracePeriodSeconds"] == 60  # not reset, unlike ARC's merge
    assert spec["securityContext"]["runAsUser"] == 2000
    assert spec["securityContext"]["runAsNonRoot"] is True  # laid over, not replaced
    assert "hostPID" not in spec
    (container,) = spec["containers"]
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"]["limits"] == {"memory": "128Mi"}
    assert [e["name"] for e in container["env"]] == ["LISTENER_CONFIG_PATH", "A", "NODE"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["metadata"]["labels"]["team"] == "a"


def test_pod_builder_refuses_a_forbidden_template() -> None:
    with pytest.raises(policy.ListenerTemplateForbidden) as info:
        lr.listener_pod(listener(listenerTemplate=ATTACK), OPTIONS)
    assert "spec.template.spec.hostPID" in str(info.value)
    assert lr.listener_template_violations(listener(listenerTemplate=ATTACK), UNRESTRICTED) == []


def test_unrestricted_flag_keeps_arcs_merge() -> None:
    pod = lr.listener_pod(listener(listenerTemplate=ATTACK), UNRESTRICTED)
    spec = pod["spec"]
    assert spec["hostPID"] is True
    assert [x["name"] for x in spec["containers"]] == ["listener", "pwn"]
    assert {"name": "host", "hostPath": {"path": "/"}} in spec["volumes"]
    # Not named by the template: gharc's restricted defaults stay.
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_condition_keeps_its_transition_time_until_status_flips() -> None:
    first = cond.set_condition(None, "X", cond.FALSE, "R", "m", now=lambda: "t1")
    assert first == [
        {"type": "X", "status": "False", "reason": "R", "message": "m", "lastTransitionTime": "t1"}
    ]
    assert cond.set_condition(first, "X", cond.FALSE, "R", "m", now=lambda: "t2") == first
    moved = cond.set_condition(first, "X", cond.FALSE, "R", "m2", now=lambda: "t2")
    assert moved[0]["lastTransitionTime"] == "t1" and moved[0]["message"] == "m2"
    flipped = cond.set_condition(first, "X", cond.TRUE, "OK", "", now=lambda: "t3")
    assert flipped[0]["lastTransitionTime"] == "t3"


def test_unrestricted_flag_is_off_by_default_and_reaches_the_options() -> None:
    from gharc.controllers.main import parse_args, scaleset_options

    env = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-systems"}
    default = scaleset_options(parse_args(["--auto-scaling-runner-set-only"], environ=env))
    assert default.allow_unrestricted_listener_template is False
    args = parse_args(
        ["--auto-scaling-runner-set-only", "--allow-unrestricted-listener-template"], environ=env
    )
    assert scaleset_options(args).allow_unrestricted_listener_template is True
