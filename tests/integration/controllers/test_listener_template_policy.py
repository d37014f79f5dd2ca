"""A scale set's listenerTemplate cannot reach into the controller's namespace (issue 20).

The listener pod runs in the controller's namespace (here: the test namespace, as in
:mod:`_arsworld`). A forbidden template is refused by the ARS reconciler with a status
condition and one Warning event, and nothing at all is created for it; allowed overrides
land on the pod; the default pod passes the real API server's PodSecurity ``restricted``
admission.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _arsworld import SECRET_NAME, World, running_world

from gharc.api.resources import AUTOSCALING_LISTENERS, EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient
from gharc.kube.resources import NAMESPACES, PODS, SECRETS, SERVICE_ACCOUNTS
from testworld.wait import eventually

JSON = dict[str, Any]
VICTIM_SECRET = "victim-6b5d8f7c-listener-config"

#: Listener pods only exist in ``Pod`` listener mode (where the option exists at all).
POD_MODE: JSON = (
    {"listener_mode": "Pod"} if "listener_mode" in ScaleSetOptions.__dataclass_fields__ else {}
)

#: hostPID, a privileged container with the node's root filesystem, and another team's
#: listener config Secret (their GitHub credentials) mounted into the listener.
ATTACK: JSON = {
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
                "command": ["sleep", "infinity"],
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "host", "mountPath": "/host"}],
            },
        ],
        "volumes": [
            {"name": "host", "hostPath": {"path": "/"}},
            {"name": "victim", "secret": {"secretName": VICTIM_SECRET}},
        ],
    }
}


def _listener_container(**fields: Any) -> JSON:
    return {"spec": {"containers": [{"name": "listener", **fields}]}}


def _pod(**spec: Any) -> JSON:
    """A template with ``spec`` fields (the CRD, like a PodSpec, requires ``containers``)."""
    return {"spec": {"containers": [{"name": "listener"}], **spec}}


#: One forbidden field per scale set: (id, listenerTemplate, path named in the refusal).
FORBIDDEN: list[tuple[str, JSON, str]] = [
    ("hostPID", _pod(hostPID=True), "listenerTemplate.spec.hostPID"),
    ("hostNetwork", _pod(hostNetwork=True), "listenerTemplate.spec.hostNetwork"),
    (
        "extra-container",
        {"spec": {"containers": [{"name": "sidecar", "image": "busybox"}]}},
        "listenerTemplate.spec.containers[0]",
    ),
    (
        "hostPath-volume",
        _pod(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
        "listenerTemplate.spec.volumes",
    ),
    (
        "serviceAccountName",
        _pod(serviceAccountName="default"),
        "listenerTemplate.spec.serviceAccountName",
    ),
    (
        "imagePullSecrets",
        _pod(imagePullSecrets=[{"name": VICTIM_SECRET}]),
        "listenerTemplate.spec.imagePullSecrets[0].name",
    ),
    (
        "pod-runAsNonRoot-false",
        _pod(securityContext={"runAsNonRoot": False}),
        "listenerTemplate.spec.securityContext.runAsNonRoot",
    ),
    (
        "privileged",
        _listener_container(securityContext={"privileged": True}),
        "listenerTemplate.spec.containers[0].securityContext.privileged",
    ),
    (
        "env-secretKeyRef",
        _listener_container(
            env=[
                {
                    "name": "STOLEN",
                    "valueFrom": {"secretKeyRef": {"name": VICTIM_SECRET, "key": "config.json"}},
                }
            ]
        ),
        "listenerTemplate.spec.containers[0].env[0].valueFrom.secretKeyRef",
    ),
]

#: Allowed overrides, all of which must reach the pod.
ALLOWED: JSON = {
    "spec": {
        "nodeSelector": {"pool": "arc"},
        "tolerations": [{"key": "arc", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "listener",
                "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "50m"}},
                "env": [{"name": "EXTRA", "value": "1"}],
            }
        ],
    }
}


async def _victim_secret(kube: KubeClient, namespace: str) -> None:
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": VICTIM_SECRET, "namespace": namespace},
            "stringData": {"config.json": '{"github_token": "victim-pat"}'},
        },
    )


def _condition(ars: JSON) -> JSON | None:
    for item in (ars.get("status") or {}).get("conditions") or ():
        if item.get("type") == "ListenerTemplateAllowed":
            return dict(item)
    return None


def _refused(ars: JSON) -> bool:
    cond = _condition(ars)
    return cond is not None and cond["status"] == "False"


async def _assert_nothing_created(w: World, name: str) -> None:
    """No listener, pod, ERS, listener secret or service account, no GitHub scale set."""
    ns = w.namespace
    assert await w.kube.list(AUTOSCALING_LISTENERS, namespace=ns) == []
    assert await w.kube.list(PODS, namespace=ns) == []
    assert await w.kube.list(EPHEMERAL_RUNNER_SETS, namespace=ns) == []
    secrets = {s["metadata"]["name"] for s in await w.kube.list(SECRETS, namespace=ns)}
    assert secrets <= {SECRET_NAME, VICTIM_SECRET}, secrets
    accounts = {a["metadata"]["name"] for a in await w.kube.list(SERVICE_ACCOUNTS, namespace=ns)}
    assert accounts <= {"default"}, accounts
    assert w.gh.state.scale_sets == {}
    ars = await w.ars(name)
    assert c.ANNOTATION_RUNNER_SCALE_SET_ID not in (ars["metadata"].get("annotations") or {})


async def _label_restricted(kube: KubeClient, namespace: str) -> None:
    await kube.merge_patch(
        NAMESPACES,
        namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )


async def _label_restricted_via_config(kubeconfig: str, namespace: str) -> None:
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    try:
        await _label_restricted(kube, namespace)
    finally:
        await kube.close()


async def test_the_attack_is_refused_and_nothing_is_created(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace, **POD_MODE) as w:
        await _victim_secret(w.kube, namespace)
        await w.create_ars("attacker", listenerTemplate=ATTACK)
        ars = await w.wait_ars(_refused, name="attacker", message="ARS refused")
        cond = _condition(ars)
        assert cond is not None and cond["reason"] == "ListenerTemplateForbidden"
        for path in (
            "listenerTemplate.spec.hostPID",
            "listenerTemplate.spec.containers[1]",
            "listenerTemplate.spec.volumes",
        ):
            assert path in cond["message"], cond["message"]
        assert ars["status"]["phase"] == c.PHASE_FAILED
        assert "listenerTemplate.spec.hostPID" in ars["status"]["message"]

        await w.wait_event("ListenerTemplateForbidden")
        await asyncio.sleep(2.0)  # what a retrying reconciler would do, it has done by now
        events = await w.events("ListenerTemplateForbidden")
        assert len(events) == 1, events
        (event,) = events
        assert event["type"] == "Warning"
        assert event["involvedObject"]["name"] == "attacker"
        assert int(event.get("count") or 1) == 1
        assert "listenerTemplate.spec.hostPID" in event["message"]
        await _assert_nothing_created(w, "attacker")


@pytest.mark.parametrize(
    ("template", "path"), [f[1:] for f in FORBIDDEN], ids=[f[0] for f in FORBIDDEN]
)
async def test_each_forbidden_field_is_refused_with_nothing_created(
    kubeconfig: str, namespace: str, template: JSON, path: str
) -> None:
    async with running_world(kubeconfig, namespace, **POD_MODE) as w:
        await _victim_secret(w.kube, namespace)
        await w.create_ars("arc", listenerTemplate=template)
        ars = await w.wait_ars(_refused, message="ARS refused")
        cond = _condition(ars)
        assert cond is not None and path in cond["message"], cond
        event = await w.wait_event("ListenerTemplateForbidden")
        assert path in event["message"]
        await _assert_nothing_created(w, "arc")


async def test_allowed_overrides_land_on_a_restricted_pod(kubeconfig: str, namespace: str) -> None:
    async with running_world(
        kubeconfig,
        namespace,
        before_start=lambda: _label_restricted_via_config(kubeconfig, namespace),
        **POD_MODE,
    ) as w:
        ars = await w.create_ars("arc", listenerTemplate=ALLOWED)
        ars = await w.wait_ars(lambda a: _condition(a) is not None, message="ARS condition")
        assert _condition(ars)["status"] == "True"  # type: ignore[index]
        pod = await w.wait_listener_pod(ars)
        spec = pod["spec"]
        assert spec["nodeSelector"] == {"pool": "arc"}
        # (DefaultTolerationSeconds admission adds the not-ready/unreachable ones.)
        assert ALLOWED["spec"]["tolerations"][0] in spec["tolerations"]
        (container,) = spec["containers"]
        assert container["resources"]["limits"] == {"memory": "128Mi"}
        assert {"name": "EXTRA", "value": "1"} in container["env"]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert spec["securityContext"]["runAsNonRoot"] is True


async def test_default_listener_pod_is_admitted_under_restricted_pod_security(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(
        kubeconfig,
        namespace,
        before_start=lambda: _label_restricted_via_config(kubeconfig, namespace),
        **POD_MODE,
    ) as w:
        # The namespace really enforces the profile: a privileged pod is rejected.
        privileged = {
            "metadata": {"name": "privileged", "namespace": namespace},
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "securityContext": {"privileged": True}}
                ]
            },
        }
        with pytest.raises((kerrors.Forbidden, kerrors.Invalid)) as info:
            await w.kube.create(PODS, privileged)
        assert "restricted" in str(info.value)

        ars = await w.create_ars("arc")
        pod = await w.wait_listener_pod(ars)
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True


async def test_flag_restores_the_unrestricted_merge(kubeconfig: str, namespace: str) -> None:
    async with running_world(
        kubeconfig, namespace, allow_unrestricted_listener_template=True, **POD_MODE
    ) as w:
        await _victim_secret(w.kube, namespace)
        ars = await w.create_ars("arc", listenerTemplate=ATTACK)
        pod = await w.wait_listener_pod(ars)
        spec = pod["spec"]
        assert spec["hostPID"] is True
        assert [x["name"] for x in spec["containers"]] == ["listener", "pwn"]
        assert {"name": "host", "hostPath": {"path": "/", "type": ""}} in spec["volumes"]
        ars = await w.ars("arc")
        cond = _condition(ars)
        assert cond is not None and cond["reason"] == "Unrestricted"


async def test_in_process_listeners_keep_a_template_and_report_it_unused(
    kubeconfig: str, namespace: str
) -> None:
    """An ARC user's listenerTemplate (here even the attack) does not fail a scale set
    whose listener runs in the controller: there is no pod for it to shape. The scale set
    comes up, the template is kept as written, and the condition says it is not used."""

    def _reported_unused(ars: JSON) -> bool:
        cond = _condition(ars)
        return cond is not None and cond["reason"] == "NotUsed"

    async with running_world(kubeconfig, namespace, listener_mode="InProcess") as w:
        await w.create_ars("arc-user", listenerTemplate=ATTACK)
        ars = await w.wait_ars(_reported_unused, name="arc-user", message="template not used")
        cond = _condition(ars)
        assert cond is not None and cond["status"] == "True", cond
        assert "InProcess" in cond["message"]
        assert (ars.get("status") or {}).get("phase") != c.PHASE_FAILED, ars.get("status")
        assert ars["spec"]["listenerTemplate"] == ATTACK
        await eventually(
            lambda: w.kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace),
            timeout=20,
            message="the scale set's EphemeralRunnerSet",
        )
        assert await w.events("ListenerTemplateForbidden") == []
        assert await w.kube.list(PODS, namespace=namespace) == [], "no listener pod"
